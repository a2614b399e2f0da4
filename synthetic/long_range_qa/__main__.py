"""``python -m synthetic.long_range_qa``: generates the long-range QA data and runs the real jobs
on it (:func:`synthetic.long_range_qa.build.main`)."""

from __future__ import annotations

import sys

from synthetic.long_range_qa.build import main

sys.exit(main())
