"""The path policy for files named by data (schemas.data_paths): what is refused, with which
reason, without blocking or reading what must not be read."""

from __future__ import annotations

import io
import os
import threading

import pytest

from schemas import data_paths
from schemas.data_paths import DataPathError, DataPathPolicy

POLICY = DataPathPolicy()


@pytest.fixture()
def tree(tmp_path):
  """data/ (the root) with a file and a subfolder; outside/ beside it with a secret."""
  data, outside = tmp_path / "data", tmp_path / "outside"
  (data / "books").mkdir(parents=True)
  outside.mkdir()
  (data / "books" / "mill.txt").write_text("The mill.")
  (outside / "secret.txt").write_text("SECRET")
  return data, outside


def refused(reason, fn, *args, **kwargs):
  with pytest.raises(DataPathError) as e:
    fn(*args, **kwargs)
  assert e.value.reason == reason, str(e.value)
  assert "\n" not in str(e.value)
  return str(e.value)


def test_a_name_inside_the_root_is_read(tree):
  data, _ = tree
  path, text = POLICY.read(str(data), "books/mill.txt")
  assert (path, text) == (str(data / "books" / "mill.txt"), b"The mill.")
  assert POLICY.read(str(data), "books/../books/./mill.txt")[1] == b"The mill."  # stays inside
  assert POLICY.size(str(data), "books/mill.txt") == (path, 9)


def test_escapes_and_absolute_names_are_refused(tree):
  data, outside = tree
  message = refused("path_outside_root", POLICY.read, str(data), "../outside/secret.txt",
                    what="context_file")
  assert "context_file '../outside/secret.txt'" in message and str(data) in message
  assert "--allow_read_root" in message
  refused("path_outside_root", POLICY.read, str(data), "books/../../outside/secret.txt")
  refused("absolute_path", POLICY.read, str(data), str(outside / "secret.txt"))
  refused("absolute_path", POLICY.read, str(data), "/etc/passwd")
  refused("absolute_path", POLICY.read, str(data), "gs://bucket/x.txt")
  refused("invalid_path", POLICY.read, str(data), "a\x00b")
  refused("invalid_path", POLICY.read, str(data), "")
  refused("invalid_path", POLICY.read, str(data), "a/" * 3000)
  # An absolute name that is inside the root is the same file as its relative name.
  assert POLICY.read(str(data), str(data / "books" / "mill.txt"))[1] == b"The mill."


def test_symlinks_are_resolved(tree):
  data, outside = tree
  (data / "out.txt").symlink_to(outside / "secret.txt")
  (data / "outdir").symlink_to(outside, target_is_directory=True)
  (data / "in.txt").symlink_to(data / "books" / "mill.txt")
  assert "through a symlink" in refused("path_outside_root", POLICY.read, str(data), "out.txt")
  refused("path_outside_root", POLICY.read, str(data), "outdir/secret.txt")
  assert POLICY.read(str(data), "in.txt")[1] == b"The mill."  # a symlink inside is fine
  # A root that is itself a symlink is resolved too.
  link_root = data.parent / "data_link"
  link_root.symlink_to(data, target_is_directory=True)
  assert POLICY.read(str(link_root), "books/mill.txt")[1] == b"The mill."
  refused("path_outside_root", POLICY.read, str(link_root), "out.txt")


def test_an_opted_in_root_is_readable(tree):
  data, outside = tree
  policy = DataPathPolicy(allow_read_roots=(str(outside),))
  assert policy.read(str(data), "../outside/secret.txt")[1] == b"SECRET"
  assert policy.read(str(data), str(outside / "secret.txt"))[1] == b"SECRET"
  (data / "out.txt").symlink_to(outside / "secret.txt")
  assert policy.read(str(data), "out.txt")[1] == b"SECRET"
  refused("absolute_path", policy.read, str(data), "/etc/passwd")  # only that root
  # A sibling whose name starts like the root is not inside it.
  (data.parent / "outside2").mkdir()
  (data.parent / "outside2" / "x.txt").write_text("x")
  refused("path_outside_root", policy.read, str(data), "../outside2/x.txt")


def test_a_fifo_is_refused_without_blocking(tree):
  data, _ = tree
  os.mkfifo(data / "pipe")
  result = {}

  def attempt():
    try:
      POLICY.read(str(data), "pipe")
    except DataPathError as e:
      result["reason"] = e.reason

  t = threading.Thread(target=attempt, daemon=True)
  t.start()
  t.join(timeout=5)
  assert not t.is_alive(), "reading a FIFO named by data blocked"
  assert result == {"reason": "not_a_regular_file"}


def test_devices_and_directories_are_refused(tree):
  data, _ = tree
  policy = DataPathPolicy(allow_read_roots=("/dev",))
  assert "a device" in refused("not_a_regular_file", policy.read, str(data), "/dev/zero")
  assert "a directory" in refused("not_a_regular_file", POLICY.read, str(data), "books")
  refused("not_a_regular_file", POLICY.size, str(data), "books")


def test_a_sparse_file_over_the_cap_is_refused_unread(tree, monkeypatch):
  data, _ = tree
  big = data / "sparse.bin"
  with open(big, "wb") as f:
    f.truncate(3 << 30)  # 3 GB, no blocks
  opened = []
  real_open = os.open
  monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
  message = refused("file_too_large", POLICY.read, str(data), "sparse.bin")
  assert f"{3 << 30:,} bytes" in message and "--max_input_file_bytes" in message
  assert opened == []  # refused from its size, never opened
  small = DataPathPolicy(max_file_bytes=5)
  refused("file_too_large", small.read, str(data), "books/mill.txt")
  assert DataPathPolicy(max_file_bytes=9).read(str(data), "books/mill.txt")[1] == b"The mill."


def test_reading_stops_at_the_cap_for_what_a_wrapper_yields(tree):
  data, _ = tree

  class Endless(io.RawIOBase):  # like /dev/zero behind a decompressor

    def readable(self):
      return True

    def readinto(self, b):
      b[:] = b"\0" * len(b)
      return len(b)

  policy = DataPathPolicy(max_file_bytes=1000)
  message = refused("file_too_large", policy.read, str(data), "books/mill.txt",
                    wrap=lambda f, path: io.BufferedReader(Endless()))
  assert "decompresses" in message


def test_missing_files_are_not_refusals(tree):
  data, _ = tree
  with pytest.raises(FileNotFoundError):
    POLICY.read(str(data), "books/absent.txt")
  with pytest.raises(FileNotFoundError):
    POLICY.read(str(data), "books/mill.txt/x")  # through a file


class FakeBucket:
  """RemoteFiles over a dict of URLs."""

  def __init__(self, files):
    self.files = files
    self.opened = []

  def size(self, path):
    if path not in self.files:
      raise FileNotFoundError(path)
    return len(self.files[path])

  def open(self, path):
    self.opened.append(path)
    return io.BytesIO(self.files[path])


def test_remote_names_are_normalised_and_kept_under_the_root():
  bucket = FakeBucket({"gs://b/qa/books/m.txt": b"mill", "gs://b/other/s.txt": b"secret",
                       "gs://b/qa/big.txt": b"x" * 100})
  assert POLICY.resolve("gs://b/qa", "books/./x/../m.txt") == "gs://b/qa/books/m.txt"
  assert POLICY.read("gs://b/qa", "books/m.txt", bucket) == ("gs://b/qa/books/m.txt", b"mill")
  refused("path_outside_root", POLICY.read, "gs://b/qa", "../other/s.txt", bucket)
  refused("path_outside_root", POLICY.read, "gs://b/qa", "books/../../other/s.txt", bucket)
  refused("absolute_path", POLICY.read, "gs://b/qa", "/other/s.txt", bucket)
  refused("absolute_path", POLICY.read, "gs://b/qa", "gs://b/other/s.txt", bucket)
  refused("absolute_path", POLICY.read, "gs://b/qa", "gs://b/qa/../other/s.txt", bucket)
  refused("absolute_path", POLICY.read, "gs://b/qa", "gs://c/../b/qa/books/m.txt", bucket)
  assert POLICY.read("gs://b/qa", "gs://b/qa/books/m.txt", bucket)[1] == b"mill"
  opted = DataPathPolicy(allow_read_roots=("gs://b/other/",))
  assert opted.read("gs://b/qa", "../other/s.txt", bucket)[1] == b"secret"
  assert opted.read("gs://b/qa", "gs://b/other/s.txt", bucket)[1] == b"secret"
  bucket.opened.clear()
  refused("file_too_large", DataPathPolicy(max_file_bytes=10).read, "gs://b/qa", "big.txt",
          bucket)
  assert bucket.opened == []  # sized from the metadata, not read
  with pytest.raises(FileNotFoundError):
    POLICY.read("gs://b/qa", "absent.txt", bucket)


def test_bad_settings_are_refused():
  with pytest.raises(ValueError, match="--max_input_file_bytes"):
    DataPathPolicy(max_file_bytes=0)
  with pytest.raises(ValueError, match="--allow_read_root"):
    DataPathPolicy(allow_read_roots=("",))
  assert data_paths.DEFAULT_MAX_FILE_BYTES >= 4 * 9_500_000
