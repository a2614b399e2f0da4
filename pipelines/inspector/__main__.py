"""``python -m pipelines.inspector``: see :mod:`pipelines.inspector.cli`."""

from __future__ import annotations

import sys

from pipelines.inspector.cli import main

if __name__ == "__main__":
  sys.exit(main())
