"""User errors: bad flags, inputs or outputs, reported as one line instead of a traceback.

A ``UserError`` raised on the launcher is caught by the job's ``main``.  One raised inside the
pipeline (on a worker) reaches the launcher wrapped by the runner; its message carries
:data:`MARKER` so that :func:`user_error_message` can still find the one line to show.
"""

from __future__ import annotations

import re
from typing import Optional

MARKER = "[readtwice user error] "
_BEAM_SUFFIX = re.compile(r"( \[while running '[^']*'\])+$")  # Beam appends the step name


class UserError(Exception):
  """The user's flags, inputs or outputs are unusable; ``str()`` starts with MARKER."""

  def __init__(self, message: str):
    # A runner may re-create the exception from its text (Beam appends "[while running ...]"):
    # keep one marker, and the message without it.
    message = message[len(MARKER):] if message.startswith(MARKER) else message
    message = _BEAM_SUFFIX.sub("", message)
    super().__init__(MARKER + message)
    self.message = message


def user_error_message(exc: BaseException) -> Optional[str]:
  """The one-line message of a UserError in ``exc``, its causes, or its text (for errors that
  a runner re-raised as another type); None if there is none."""
  seen = set()
  e: Optional[BaseException] = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, UserError):
      return e.message
    text = str(e)
    i = text.find(MARKER)
    if i >= 0:
      rest = text[i + len(MARKER):]
      return _BEAM_SUFFIX.sub("", rest.splitlines()[0].rstrip(" '\"\\")) if rest else ""
    e = e.__cause__ or e.__context__
  return None
