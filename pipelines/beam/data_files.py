"""Reading files named by data (a ``context_file``, a story id, an evidence ``Filename``) on the
workers, through :class:`schemas.data_paths.DataPathPolicy` (``--allow_read_root``,
``--max_input_file_bytes``): local paths with ``os`` (resolved, checked, opened without
blocking), ``gs://`` ones through Beam's ``FileSystems`` (size from the metadata)."""

from __future__ import annotations

from typing import BinaryIO, Tuple

from apache_beam.io.filesystem import CompressedFile, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from schemas.data_paths import DataPathPolicy


class BeamRemoteFiles:
  """:class:`schemas.data_paths.RemoteFiles` through Beam's ``FileSystems``."""

  def size(self, path: str) -> int:
    try:
      return FileSystems.get_filesystem(path).metadata(path).size_in_bytes
    except Exception:  # pylint: disable=broad-except
      if not FileSystems.exists(path):
        raise FileNotFoundError(f"{path} does not exist") from None
      raise

  def open(self, path: str) -> BinaryIO:
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


REMOTE = BeamRemoteFiles()


def decompress_by_extension(f: BinaryIO, path: str) -> BinaryIO:
  """``f`` decompressed as ``FileSystems.open(path)`` would (``.gz``, ``.bz2``, ...)."""
  kind = CompressionTypes.detect_compression_type(path)
  return f if kind == CompressionTypes.UNCOMPRESSED else CompressedFile(f, kind)


def read_data_file(policy: DataPathPolicy, root: str, name: str, what: str,
                   decompress: bool = False) -> Tuple[str, bytes]:
  """``(path, bytes)`` of the file ``name`` (from the data) names under ``root``; raises
  ``DataPathError`` (refused), ``FileNotFoundError`` (missing) or another error."""
  return policy.read(root, name, REMOTE, decompress_by_extension if decompress else None, what)
