"""Progress lines of the long model commands: time-based, also while nothing else is printed.

A :class:`Progress` prints one plain-text line (never JSON: the commands' JSON lines and their
final summary line stay what scripts parse) on stdout:

* training: ``progress: step 12/40 (30%), loss 3.2145, 1.52 steps/s, ETA 18 s``;
* prediction: ``progress: predicting 3/10 packs (30%), 0.80 packs/s, ETA 9 s``;
* with the current phase when one is running: ``..., compiling the first step (25 s so far)``,
  ``..., evaluating on the dev set (12 s so far)``.

A line is printed at once when a phase starts (``building the model``, ``compiling the first
step``, ...) and then at least every ``interval`` seconds (10 by default, so a line comes at
least every 15 s even on a loaded machine) from a background thread, so a step, a first graph
trace or a dev evaluation that takes minutes still shows signs of life.  On a terminal (where
the trainer draws a Keras progress bar) the thread prints only when nothing was shown for
``interval`` seconds.  ``READTWICE_PROGRESS_SECONDS`` sets the interval (tests use a small one).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

INTERVAL_ENV = "READTWICE_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 10.0


def default_interval() -> float:
  """``READTWICE_PROGRESS_SECONDS`` when set to a number > 0, else :data:`DEFAULT_INTERVAL`."""
  try:
    value = float(os.environ.get(INTERVAL_ENV, ""))
  except ValueError:
    return DEFAULT_INTERVAL
  return value if value > 0 else DEFAULT_INTERVAL


def duration(seconds: float) -> str:
  """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
  seconds = max(0, int(round(seconds)))
  if seconds < 60:
    return f"{seconds} s"
  if seconds < 3600:
    return f"{seconds // 60} min {seconds % 60:02d} s"
  return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
  """Progress of ``total`` units (``unit``: ``"steps"`` or ``"packs"``); see the module
  docstring.

  Args:
    total: the units the command will do (None: unknown).
    unit: ``"steps"`` (training lines: ``step d/t``) or another plural noun (``what d/t unit``).
    what: the word before the count for non-step units (``"predicting"``).
    interval: seconds between lines (default :func:`default_interval`).
    clock: a monotonic clock (tests pass a fake one).
    write: writes one line (default: ``sys.stdout`` as it is at the time of writing).
    terminal: print from the thread only after ``interval`` seconds without any output
      (default: whether stdout is a terminal).
    start: the units already done (a resumed run).
  """

  def __init__(self, total: Optional[int], unit: str = "steps", what: str = "",
               interval: Optional[float] = None, clock: Callable[[], float] = time.monotonic,
               write: Optional[Callable[[str], None]] = None, terminal: Optional[bool] = None,
               start: int = 0):
    self.total = total
    self.unit = unit
    self.what = what
    self.interval = interval if interval is not None else default_interval()
    self.clock = clock
    self._write = write
    self.terminal = sys.stdout.isatty() if terminal is None else terminal
    self.lock = threading.RLock()
    self.done = start
    self.loss: Optional[float] = None
    self.phase: Optional[str] = None
    self._phase_since = clock()
    self._rate_from: Optional[tuple] = None  # (time, done) when the first unit finished
    self._rate: Optional[float] = None
    self._last_line = clock()
    self._thread: Optional[threading.Thread] = None
    self._stop = threading.Event()

  # -- state -------------------------------------------------------------------------------

  def set_phase(self, phase: Optional[str], announce: bool = True) -> None:
    """Starts a phase (None: plain progress); prints a line at once when ``announce``."""
    with self.lock:
      self.phase = phase
      self._phase_since = self.clock()
      if phase and announce:
        self._emit()

  def update(self, done: int, loss: Optional[float] = None) -> None:
    """``done`` units are done (the phase ends); prints a line if one is due."""
    with self.lock:
      now = self.clock()
      if self._rate_from is None:  # the first units include the graph trace: not a rate
        self._rate_from = (now, done)
      elif done > self._rate_from[1] and now > self._rate_from[0]:
        self._rate = (done - self._rate_from[1]) / (now - self._rate_from[0])
      self.done = done
      if loss is not None:
        self.loss = loss
      self.phase = None
      self._phase_since = now
      if now - self._last_line >= self.interval:
        self._emit()

  def output_shown(self) -> None:
    """Something else was printed (a log line, a progress bar update)."""
    with self.lock:
      if self.terminal:
        self._last_line = self.clock()

  # -- lines -------------------------------------------------------------------------------

  def line(self) -> str:
    """The current progress line."""
    now = self.clock()
    total = f"/{self.total}" if self.total else ""
    pct = (f" ({100.0 * self.done / self.total:.0f}%)" if self.total else "")
    if self.unit == "steps":
      parts = [f"step {self.done}{total}{pct}"]
      if self.loss is not None:
        parts.append(f"loss {self.loss:.4f}")
    else:
      parts = [f"{self.what + ' ' if self.what else ''}{self.done}{total} {self.unit}{pct}"]
    if self._rate:
      parts.append(f"{self._rate:.3g} {self.unit}/s")
      if self.total and self.total > self.done:
        parts.append(f"ETA {duration((self.total - self.done) / self._rate)}")
    if self.phase:
      parts.append(f"{self.phase} ({duration(now - self._phase_since)} so far)")
    return "progress: " + ", ".join(parts)

  def _emit(self) -> None:
    text = self.line()
    self._last_line = self.clock()
    if self._write is not None:
      self._write(text)
      return
    out = sys.stdout
    try:
      out.write(text + "\n")
      out.flush()
    except (OSError, ValueError):  # a closed pipe or stream: progress is not worth an error
      pass

  def tick(self) -> None:
    """Prints a line if ``interval`` seconds passed since the last one (the thread's body)."""
    with self.lock:
      if self.clock() - self._last_line >= self.interval:
        self._emit()

  # -- thread ------------------------------------------------------------------------------

  def __enter__(self) -> "Progress":
    self._stop.clear()
    self._thread = threading.Thread(target=self._run, name="readtwice-progress", daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def close(self) -> None:
    """Stops the thread (no line after this returns)."""
    self._stop.set()
    if self._thread is not None and self._thread is not threading.current_thread():
      self._thread.join()
    self._thread = None

  def _run(self) -> None:
    wait = min(1.0, self.interval / 4)
    while not self._stop.wait(wait):
      self.tick()
