"""Rate-limited progress lines for long-running DoFns.

Local runs (FnApiRunner, in-process) print them on stderr through the ``pipelines`` logger; on
Dataflow they land in the worker logs.  A line is emitted at most every ``every_s`` seconds per
:class:`Progress` instance, so calling :meth:`Progress.update` per element costs one clock read.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

LOGGER = logging.getLogger("pipelines")


class Progress:
  """Counts work and logs ``<label>: <message>`` at INFO at most every ``every_s`` seconds.

  ``update(n, message_fn)`` adds ``n`` to the count; ``message_fn(count, elapsed_s)`` builds
  the line only when one is due (so formatting costs nothing between lines).
  """

  def __init__(self, label: str, every_s: float = 10.0,
               clock: Callable[[], float] = time.monotonic,
               logger: Optional[logging.Logger] = None):
    self.label = label
    self.every_s = every_s
    self.count = 0
    self._clock = clock
    self._start = clock()
    self._last = self._start
    self._logger = logger or LOGGER

  def update(self, n: int = 1,
             message_fn: Optional[Callable[[int, float], str]] = None) -> bool:
    """Adds ``n``; logs a line if one is due.  Returns whether a line was logged."""
    self.count += n
    now = self._clock()
    if now - self._last < self.every_s:
      return False
    self._last = now
    self._log(now, message_fn)
    return True

  def done(self, message_fn: Optional[Callable[[int, float], str]] = None) -> None:
    """Logs a final line unconditionally."""
    self._log(self._clock(), message_fn)

  def _log(self, now: float, message_fn) -> None:
    elapsed = now - self._start
    if message_fn is None:
      rate = self.count / elapsed if elapsed > 0 else 0.0
      msg = f"{self.count:,} done ({rate:,.0f}/s)"
    else:
      msg = message_fn(self.count, elapsed)
    self._logger.info("%s: %s", self.label, msg)
