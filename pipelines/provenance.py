"""Which code produced an output: the git revision recorded in every manifest.

From a git checkout the revision is read with ``git rev-parse HEAD`` (``+dirty`` appended when
tracked files differ from it).  An installed package (``pip install .``, a wheel, or the sdist
that Dataflow workers build from ``--setup_file``) has no ``.git``: ``setup.py`` then stamps the
revision it was built from into ``pipelines/REVISION``, which is read instead.
"""

from __future__ import annotations

import os
import subprocess
from typing import Optional

REVISION_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "REVISION")


def git_checkout_revision(directory: str) -> Optional[str]:
  """HEAD of the git checkout holding ``directory`` (``<sha>+dirty`` if tracked files were
  modified), or None when ``directory`` is not in a checkout or git is unavailable."""
  try:
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                         text=True, cwd=directory, timeout=10)
    if top.returncode != 0:
      return None
    # Only a checkout of this project counts (not, say, a virtualenv inside another repo).
    if not os.path.exists(os.path.join(top.stdout.strip(), "pipelines", "provenance.py")):
      return None
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=directory, timeout=10)
    sha = head.stdout.strip()
    if head.returncode != 0 or not sha:
      return None
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], capture_output=True,
                           cwd=directory, timeout=30)
    return sha + ("+dirty" if dirty.returncode == 1 else "")
  except (OSError, subprocess.SubprocessError):
    return None


def stamped_revision() -> Optional[str]:
  """The revision ``setup.py`` stamped into the installed package, if any."""
  try:
    with open(REVISION_FILE, encoding="utf-8") as f:
      return f.read().strip() or None
  except OSError:
    return None


def git_revision() -> str:
  """The code's revision: the checkout's HEAD, else the stamp of the install, else 'unknown'."""
  return (git_checkout_revision(os.path.dirname(REVISION_FILE)) or stamped_revision()
          or "unknown")
