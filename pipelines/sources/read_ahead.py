"""Run an iterator ahead of its consumer in a thread of its own (pure Python, no Beam).

A reader whose time goes mostly to work that releases the GIL (bz2 decompression, file reads)
can then run beside the consumer's Python work (cleaning, tokenising) on another core:
:class:`ReadAhead` wraps the iterator, keeps at most ``depth`` items waiting, and hands them
over in order.  Whatever the iterator raises is raised in the consumer at the same point of
the sequence (after the items before it).  A consumer that stops early (``close()``, an
exception, a ``with`` block left) stops the thread, which then stops pulling items, and waits for
it, so nothing the iterator uses (an open file) is touched after the wrapper is closed.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar("T")

_END = object()  # the iterator is exhausted
_POLL_SECONDS = 0.1  # how often a blocked producer looks whether the consumer has left


class _Raised:
  """What the iterator raised, carried through the queue to the consumer."""

  __slots__ = ("error",)

  def __init__(self, error: BaseException):
    self.error = error


class ReadAhead(Iterator[T]):
  """Iterates over ``source`` in a thread ``depth`` items ahead of the caller (see module
  docstring).  Use as an iterator, ideally in a ``with`` block or with ``close()`` at the end."""

  def __init__(self, source: Iterator[T], depth: int = 64, name: str = "read-ahead"):
    if depth < 1:
      raise ValueError(f"depth must be >= 1, got {depth}")
    self._source = source
    self._queue: "queue.Queue[object]" = queue.Queue(maxsize=depth)
    self._stop = threading.Event()
    self._done = False
    self._thread = threading.Thread(target=self._run, name=name, daemon=True)
    self._thread.start()

  def _put(self, item: object) -> bool:
    """Queues ``item``; False when the consumer left first."""
    while not self._stop.is_set():
      try:
        self._queue.put(item, timeout=_POLL_SECONDS)
        return True
      except queue.Full:
        continue
    return False

  def _run(self) -> None:
    try:
      for item in self._source:
        if not self._put(item):
          return
    except BaseException as e:  # pylint: disable=broad-except  # re-raised in the consumer
      self._put(_Raised(e))
      return
    finally:
      close = getattr(self._source, "close", None)
      if close is not None and self._stop.is_set():
        close()  # a generator left early runs its cleanup in this thread
    self._put(_END)

  def __iter__(self) -> "ReadAhead[T]":
    return self

  def __next__(self) -> T:
    if self._done:
      raise StopIteration
    item = self._queue.get()
    if item is _END:
      self.close()
      raise StopIteration
    if isinstance(item, _Raised):
      self.close()
      raise item.error
    return item  # type: ignore[return-value]

  def close(self) -> None:
    """Stops the thread (if still running) and waits for it."""
    self._done = True
    self._stop.set()
    self._thread.join()

  def __enter__(self) -> "ReadAhead[T]":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

