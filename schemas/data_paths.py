"""The one policy for paths that come from data rather than from a flag.

A dataset may name files inside its own data: a ``jsonl_qa`` line's ``context_file``, a
NarrativeQA ``document_id`` (``<stories_dir>/<document_id>.content``), a TriviaQA question's
evidence ``Filename``, a records dir's ``manifest.json`` shard list.  Such a name is untrusted:
it is read only when it stays inside the folder the data may name files under (its *root*: the
JSONL file's folder, the stories dir, the evidence dir, the records dir), or inside an extra
root the user named on the command line (``--allow_read_root DIR``, repeatable).

:meth:`DataPathPolicy.resolve` / :meth:`DataPathPolicy.read` refuse, with a
:class:`DataPathError` that carries a dead-letter reason and a one-line message:

* ``absolute_path``: an absolute name or a URL (``/etc/passwd``, ``gs://other/x``) that is not
  inside an allowed root;
* ``path_outside_root``: a relative name that leaves the root (``../x``), directly or through
  a symlink (local paths are resolved with ``os.path.realpath``, symlinks included; the roots
  are resolved too, so a root that is itself a symlink is fine);
* ``invalid_path``: an empty name, a NUL byte, a name longer than :data:`MAX_NAME_CHARS`;
* ``not_a_regular_file``: a FIFO, a device (``/dev/zero``), a socket or a directory; checked
  with ``stat`` before opening, then the file is opened with ``O_NONBLOCK | O_NOFOLLOW`` (a FIFO
  swapped in never blocks the open) and checked again with ``fstat`` (same file, still
  regular);
* ``file_too_large``: a file larger than the byte cap (``--max_input_file_bytes``), from its
  size before any byte is read; reading also stops at cap + 1 bytes, so that a file that grows,
  or decompresses to more than the cap, cannot exhaust memory.

A missing file is not a refusal: :class:`FileNotFoundError` is raised, and each reader reports
it as before (``missing_context_file``, ``missing_story_file``, ``missing_evidence``).

Non-local paths (``gs://...``) cannot be resolved: the name is normalised
(``posixpath.normpath``; no leading ``/``, no ``..`` left) and joined to the root, and the size
comes from the file system's metadata (the caller's :class:`RemoteFiles`).  Pure Python: no
Beam, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import posixpath
import stat
from typing import BinaryIO, Callable, Optional, Protocol, Tuple

# The largest real inputs named by data: NarrativeQA's documents_full.csv lists stories of at
# most 2,026,606 bytes (``story_file_size``, 1,572 stories); TriviaQA's evidence files are single
# Wikipedia articles or web pages.  The default, 64 MiB, is 32x the largest story (the issue asked
# for at least 4x) and leaves room for a long book as a jsonl_qa context_file.  A longer text
# would be cut to --max_segments_per_document segments anyway.
DEFAULT_MAX_FILE_BYTES = 64 << 20
MAX_NAME_CHARS = 4096

ABSOLUTE_PATH = "absolute_path"
PATH_OUTSIDE_ROOT = "path_outside_root"
INVALID_PATH = "invalid_path"
NOT_A_REGULAR_FILE = "not_a_regular_file"
FILE_TOO_LARGE = "file_too_large"
REASONS = (ABSOLUTE_PATH, PATH_OUTSIDE_ROOT, INVALID_PATH, NOT_A_REGULAR_FILE, FILE_TOO_LARGE)

_HOW_TO_OPT_IN = "pass --allow_read_root DIR to allow a folder outside the data"


class DataPathError(ValueError):
  """A path named by data that is refused; ``reason`` is the dead-letter reason (one of
  :data:`REASONS`), ``str()`` one line naming the name, the path and what to do."""

  def __init__(self, reason: str, message: str):
    super().__init__(message)
    self.reason = reason
    self.detail = message


class RemoteFiles(Protocol):
  """How non-local paths (URLs) are sized and opened."""

  def size(self, path: str) -> int:
    """The stored size of ``path`` in bytes; FileNotFoundError when it does not exist."""

  def open(self, path: str) -> BinaryIO:
    """``path`` opened for binary reading (as stored)."""


# wrap(file, path) -> the stream to read (e.g. decompressed by ``path``'s extension).
Wrap = Callable[[BinaryIO, str], BinaryIO]


def joined(root: str, name: str) -> str:
  """``name`` under ``root`` as written (normalised, symlinks not resolved): for messages."""
  if is_url(name) or name.startswith("/"):
    return name
  if is_url(root):
    return root.rstrip("/") + "/" + posixpath.normpath(name)
  return os.path.normpath(os.path.join(root, name))


def is_url(path: str) -> bool:
  return "://" in path


def _url_parts(url: str) -> Tuple[str, str]:
  scheme, rest = url.split("://", 1)
  return scheme, rest


def _normalise_url(url: str) -> Optional[str]:
  """``scheme://bucket/a/b`` with ``.`` and ``..`` folded; None if ``..`` leaves the bucket."""
  scheme, rest = _url_parts(url)
  norm = posixpath.normpath("/" + rest.lstrip("/"))  # a leading "/" keeps ".." from escaping
  if rest.lstrip("/").split("/", 1)[0] != norm.lstrip("/").split("/", 1)[0]:
    return None  # left the bucket (or its first folder)
  return f"{scheme}://{norm.lstrip('/')}"


def _url_inside(url: str, root: str) -> bool:
  root_norm = _normalise_url(root)
  if root_norm is None or _url_parts(root_norm)[0] != _url_parts(url)[0]:
    return False
  root_norm = root_norm.rstrip("/")
  return url == root_norm or url.startswith(root_norm + "/")


def _local_inside(real: str, real_root: str) -> bool:
  if real == real_root:
    return True
  prefix = real_root if real_root.endswith(os.sep) else real_root + os.sep
  return real.startswith(prefix)


@dataclasses.dataclass(frozen=True)
class DataPathPolicy:
  """Which files data may name: under its root or ``allow_read_roots``, regular, at most
  ``max_file_bytes`` bytes."""
  allow_read_roots: Tuple[str, ...] = ()
  max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

  def __post_init__(self):
    m = self.max_file_bytes
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
      raise ValueError(f"--max_input_file_bytes must be an integer >= 1, got {m!r}")
    if isinstance(self.allow_read_roots, str):
      raise ValueError("allow_read_roots must be a sequence of folders, not one string")
    object.__setattr__(self, "allow_read_roots", tuple(self.allow_read_roots))
    for r in self.allow_read_roots:
      if not isinstance(r, str) or not r or "\x00" in r:
        raise ValueError(f"--allow_read_root must name a folder, got {r!r}")

  # ---------------------------------------------------------------------------- resolving

  def _inside_extra_root(self, path: str) -> bool:
    """Whether ``path`` (resolved local path, or normalised URL) is inside an opted-in root."""
    for r in self.allow_read_roots:
      if is_url(r):
        if is_url(path) and _url_inside(path, r):
          return True
      elif not is_url(path) and _local_inside(path, os.path.realpath(r)):
        return True
    return False

  def resolve(self, root: str, name: str, what: str = "path") -> str:
    """The path to read for ``name`` (from the data) under ``root``; raises
    :class:`DataPathError` unless it stays inside ``root`` or an opted-in root.  ``what``
    names the data field in messages (e.g. ``context_file``)."""
    if not isinstance(name, str) or not name.strip():
      raise DataPathError(INVALID_PATH, f"{what} {name!r} is not a file name")
    shown = name if len(name) <= 200 else name[:200] + "..."
    if "\x00" in name or len(name) > MAX_NAME_CHARS:
      raise DataPathError(INVALID_PATH, f"{what} {shown!r} is not a usable file name (a NUL "
                                        f"byte, or over {MAX_NAME_CHARS} characters)")
    absolute = is_url(name) or name.startswith("/") or os.path.isabs(name)
    if absolute:
      if is_url(name):
        path = _normalise_url(name)
        if path is None:
          raise DataPathError(ABSOLUTE_PATH, f"{what} {shown!r} leaves its bucket; "
                                             f"{_HOW_TO_OPT_IN}")
        inside_root = is_url(root) and _url_inside(path, root)
      else:
        path = os.path.realpath(name)
        inside_root = not is_url(root) and _local_inside(path, os.path.realpath(root))
      if inside_root or self._inside_extra_root(path):
        return path
      raise DataPathError(ABSOLUTE_PATH, f"{what} {shown!r} is an absolute path outside "
                                         f"{root}; names in the data are relative to it, or "
                                         f"{_HOW_TO_OPT_IN}")
    if is_url(root):
      path = _normalise_url(root.rstrip("/") + "/" + name)
      if path is not None and (_url_inside(path, root) or self._inside_extra_root(path)):
        return path
      raise DataPathError(PATH_OUTSIDE_ROOT, f"{what} {shown!r} leads outside {root} "
                                             f"(data may only name files under it; "
                                             f"{_HOW_TO_OPT_IN})")
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, name))
    if _local_inside(path, real_root) or self._inside_extra_root(path):
      return path
    via = (f" through a symlink (to {path})" if _local_inside(
        os.path.normpath(os.path.join(real_root, name)), real_root) else "")
    raise DataPathError(PATH_OUTSIDE_ROOT, f"{what} {shown!r} leads outside {root}{via}; data "
                                           f"may only name files under it; {_HOW_TO_OPT_IN}")

  # ---------------------------------------------------------------------------- checking

  def _too_large(self, what: str, name: str, path: str, size: int) -> DataPathError:
    return DataPathError(FILE_TOO_LARGE, f"{what} {name!r}: {path} has {size:,} bytes, more "
                                         f"than --max_input_file_bytes {self.max_file_bytes:,}")

  def _not_regular(self, what: str, name: str, path: str, mode: int) -> DataPathError:
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return DataPathError(NOT_A_REGULAR_FILE, f"{what} {name!r}: {path} is {kind}, not a "
                                             f"regular file")

  def size(self, root: str, name: str, remote: Optional[RemoteFiles] = None,
           what: str = "path") -> Tuple[str, int]:
    """``(path, size)`` of the file ``name`` names, checked as :meth:`read` checks it, without
    reading it; FileNotFoundError when it does not exist."""
    path = self.resolve(root, name, what)
    if is_url(path):
      if remote is None:
        raise ValueError(f"{path} is not local: a RemoteFiles is needed to size it")
      size = remote.size(path)
    else:
      st = _stat(path)
      if not stat.S_ISREG(st.st_mode):
        raise self._not_regular(what, name, path, st.st_mode)
      size = st.st_size
    if size > self.max_file_bytes:
      raise self._too_large(what, name, path, size)
    return path, size

  def read(self, root: str, name: str, remote: Optional[RemoteFiles] = None,
           wrap: Optional[Wrap] = None, what: str = "path") -> Tuple[str, bytes]:
    """``(path, bytes)`` of the file ``name`` names under ``root``, at most
    ``max_file_bytes`` of them (``wrap`` may decompress; the cap holds for what it yields).

    Raises:
      DataPathError: The name or the file is refused (see the module docstring).
      FileNotFoundError: There is no such file.
      OSError: Another read error (e.g. no permission).
    """
    path, _ = self.size(root, name, remote, what)
    if is_url(path):
      f = remote.open(path)
    else:
      f = self._open_local(path, name, what)
    with f:
      stream = wrap(f, path) if wrap is not None else f
      try:
        data = stream.read(self.max_file_bytes + 1)
      finally:
        if stream is not f:
          stream.close()
    if len(data) > self.max_file_bytes:
      raise DataPathError(FILE_TOO_LARGE, f"{what} {name!r}: {path} holds more than "
                                          f"--max_input_file_bytes {self.max_file_bytes:,} "
                                          f"bytes (it grew, or decompresses to more)")
    return path, data

  def _open_local(self, path: str, name: str, what: str) -> BinaryIO:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
      fd = os.open(path, flags)
    except OSError as e:
      if e.errno == errno.ELOOP:  # became a symlink since it was resolved
        raise DataPathError(PATH_OUTSIDE_ROOT, f"{what} {name!r}: {path} was replaced by a "
                                               f"symlink while it was read") from e
      raise
    try:
      st = os.fstat(fd)
      if not stat.S_ISREG(st.st_mode):
        raise self._not_regular(what, name, path, st.st_mode)
      if st.st_size > self.max_file_bytes:
        raise self._too_large(what, name, path, st.st_size)
      return os.fdopen(fd, "rb")
    except BaseException:
      os.close(fd)
      raise


def _stat(path: str) -> os.stat_result:
  """``os.stat``; a path through a file (ENOTDIR) is a missing file."""
  try:
    return os.stat(path)
  except NotADirectoryError as e:
    raise FileNotFoundError(errno.ENOENT, f"no such file: {path}") from e
