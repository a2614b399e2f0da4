"""``ReadAhead``: the items in order, the iterator's error at its point in the sequence, the
iterator running in another thread ahead of the consumer, and an early stop that ends the thread
and the iterator's cleanup before ``close()`` returns."""

from __future__ import annotations

import threading
import time

import pytest

from pipelines.sources.read_ahead import ReadAhead


def test_items_in_order_for_any_depth():
  for depth in (1, 3, 64):
    with ReadAhead(iter(range(1000)), depth) as ahead:
      assert list(ahead) == list(range(1000))
    assert list(ahead) == []  # exhausted stays exhausted


def test_empty_source():
  with ReadAhead(iter(())) as ahead:
    assert list(ahead) == []


def test_error_raised_after_the_items_before_it():
  def source():
    yield 1
    yield 2
    raise ValueError("damaged at 3")

  got = []
  with ReadAhead(source(), depth=8) as ahead:
    with pytest.raises(ValueError, match="damaged at 3"):
      for item in ahead:
        got.append(item)
  assert got == [1, 2]


def test_runs_in_another_thread_ahead_of_the_consumer():
  produced_in = set()
  produced = []

  def source():
    for i in range(10):
      produced_in.add(threading.get_ident())
      produced.append(i)
      yield i

  with ReadAhead(source(), depth=4) as ahead:
    assert next(ahead) == 0
    deadline = time.monotonic() + 5
    # Without being asked, the thread fills the queue: 4 waiting + 1 blocked in put.
    while len(produced) < 5 and time.monotonic() < deadline:
      time.sleep(0.01)
    assert len(produced) >= 5
    time.sleep(0.05)
    assert len(produced) <= 6  # ... and no further than depth allows
    assert list(ahead) == list(range(1, 10))
  assert produced_in and threading.get_ident() not in produced_in


def test_early_close_stops_the_thread_and_runs_the_cleanup():
  events = []

  def source():
    try:
      for i in range(10**9):
        yield i
    finally:
      events.append(("cleanup", threading.get_ident()))

  ahead = ReadAhead(source(), depth=2)
  assert [next(ahead) for _ in range(3)] == [0, 1, 2]
  ahead.close()
  assert [e for e, _ in events] == ["cleanup"]  # done before close() returned
  assert not ahead._thread.is_alive()
  with pytest.raises(StopIteration):
    next(ahead)


def test_consumer_error_in_a_with_block_stops_the_thread():
  ahead = ReadAhead(iter(range(10**6)), depth=2)
  with pytest.raises(KeyError):
    with ahead:
      next(ahead)
      raise KeyError("consumer failed")
  assert not ahead._thread.is_alive()


def test_bad_depth():
  with pytest.raises(ValueError, match="depth"):
    ReadAhead(iter(()), depth=0)
