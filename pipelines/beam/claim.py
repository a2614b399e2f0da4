"""One job per output directory: a claim (``<output_dir>/.claim.json``) made atomically before
any work and released at the end.

The claim file holds ``job``, ``pid``, ``host``, ``since`` (UTC ISO time), ``local`` (whether
the job runs in the claiming process) and a random ``token``.  A second job on the same
directory is refused with one line naming the first, whatever ``--overwrite`` says.

* Local directories: ``os.open(O_CREAT | O_EXCL)``, atomic on a local file system (and on
  NFSv3+).
* ``gs://``: a create-if-absent upload (``if_generation_match=0``) through the storage client
  of Beam's GCS file system; released with ``if_generation_match=<our generation>``.
* Other file systems: "exists, then create", which is not atomic (documented limit).

A claim whose process is gone (same host, pid no longer alive, local run) is stale: it is taken
over with one warning line.  A claim made for a remote runner (Dataflow) is never taken over
automatically: the launcher's pid says nothing about the remote job; the refusal says which
file to delete once that job is over.  With ``--nowait`` the job's last step releases the
claim when the job succeeds (:func:`release_token`); a failed ``--nowait`` job leaves it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import socket
import uuid
from typing import Any, Dict, Optional

from pipelines.errors import UserError, disk_full_message, is_disk_full

LOGGER = logging.getLogger("pipelines")
CLAIM_FILE = ".claim.json"


def claim_path(output_dir: str) -> str:
  if "://" in output_dir:
    return output_dir.rstrip("/") + "/" + CLAIM_FILE
  return os.path.join(output_dir, CLAIM_FILE)


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def pid_alive(pid: int) -> bool:
  """Whether a process ``pid`` exists on this host."""
  if not isinstance(pid, int) or pid <= 0:
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  except OSError:
    return False
  return True


def describe(info: Dict[str, Any]) -> str:
  return (f"{info.get('job', '?')} (pid {info.get('pid', '?')} on {info.get('host', '?')}, "
          f"since {info.get('since', '?')})")


class _Store:
  """Create-if-absent, read and delete of one small file."""

  def create(self, path: str, data: bytes) -> bool:
    """Creates ``path`` holding ``data`` unless it exists; whether it did."""
    raise NotImplementedError

  def read(self, path: str) -> Optional[bytes]:
    raise NotImplementedError

  def delete(self, path: str, expected: Optional[bytes] = None) -> bool:
    """Deletes ``path`` (only while it holds ``expected``, when given); whether it did."""
    raise NotImplementedError


class _LocalStore(_Store):

  def create(self, path: str, data: bytes) -> bool:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      return False
    try:
      try:
        os.write(fd, data)
        os.fsync(fd)
      finally:
        os.close(fd)
    except BaseException as e:  # a claim file without its content would block every rerun
      os.unlink(path)
      if isinstance(e, OSError) and is_disk_full(e):
        raise UserError(disk_full_message(path)) from e
      raise
    return True

  def read(self, path: str) -> Optional[bytes]:
    try:
      with open(path, "rb") as f:
        return f.read()
    except FileNotFoundError:
      return None

  def delete(self, path: str, expected: Optional[bytes] = None) -> bool:
    if expected is None:
      try:
        os.unlink(path)
        return True
      except FileNotFoundError:
        return False
    # Move it aside atomically, then check it is the one we meant; put back anything else.
    aside = f"{path}.{uuid.uuid4().hex}"
    try:
      os.rename(path, aside)
    except FileNotFoundError:
      return False
    with open(aside, "rb") as f:
      found = f.read()
    if found == expected:
      os.unlink(aside)
      return True
    try:
      os.link(aside, path)  # fails if a new claim appeared meanwhile: that one stands
    except OSError:
      pass
    os.unlink(aside)
    return False


class _GcsStore(_Store):
  """Through ``google.cloud.storage`` (Beam's GCS client): generation preconditions."""

  def __init__(self):
    from apache_beam.io.gcp import gcsio  # pylint: disable=g-import-not-at-top
    self._client = gcsio.GcsIO().client

  def _blob(self, path: str):
    bucket, _, name = path[len("gs://"):].partition("/")
    return self._client.bucket(bucket).blob(name)

  def create(self, path: str, data: bytes) -> bool:
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    try:
      self._blob(path).upload_from_string(data, content_type="application/json",
                                          if_generation_match=0)
    except exceptions.PreconditionFailed:
      return False
    return True

  def read(self, path: str) -> Optional[bytes]:
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    blob = self._blob(path)
    try:
      return blob.download_as_bytes()
    except exceptions.NotFound:
      return None

  def delete(self, path: str, expected: Optional[bytes] = None) -> bool:
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    bucket, _, name = path[len("gs://"):].partition("/")
    blob = self._client.bucket(bucket).get_blob(name)
    if blob is None:
      return False
    if expected is not None and blob.download_as_bytes(
        if_generation_match=blob.generation) != expected:
      return False
    try:
      blob.delete(if_generation_match=blob.generation)
    except (exceptions.PreconditionFailed, exceptions.NotFound):
      return False
    return True


class _FileSystemsStore(_Store):
  """Any other Beam file system: exists-then-create, not atomic."""

  def create(self, path: str, data: bytes) -> bool:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    if FileSystems.exists(path):
      return False
    with FileSystems.create(path) as f:
      f.write(data)
    return True

  def read(self, path: str) -> Optional[bytes]:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    if not FileSystems.exists(path):
      return None
    with FileSystems.open(path, compression_type="uncompressed") as f:
      return f.read()

  def delete(self, path: str, expected: Optional[bytes] = None) -> bool:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    if expected is not None and self.read(path) != expected:
      return False
    try:
      FileSystems.delete([path])
    except Exception:  # pylint: disable=broad-except
      return False
    return True


def _store(output_dir: str) -> _Store:
  if "://" not in output_dir:
    return _LocalStore()
  if output_dir.startswith("gs://"):
    return _GcsStore()
  return _FileSystemsStore()


@dataclasses.dataclass
class Claim:
  """A held claim on ``output_dir``; :meth:`release` ends it (idempotent)."""
  output_dir: str
  path: str
  info: Dict[str, Any]
  data: bytes
  _store: _Store
  released: bool = False

  @property
  def token(self) -> str:
    return self.info["token"]

  def release(self) -> None:
    if self.released:
      return
    self.released = True
    try:
      if not self._store.delete(self.path, self.data):
        LOGGER.warning("the claim %s was no longer this job's; left as it is", self.path)
    except Exception:  # pylint: disable=broad-except  # never hide the job's own outcome
      LOGGER.warning("could not release the claim %s", self.path, exc_info=True)


def _parse(data: Optional[bytes]) -> Optional[Dict[str, Any]]:
  if data is None:
    return None
  try:
    info = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return {}
  return info if isinstance(info, dict) else {}


def _is_stale(info: Dict[str, Any]) -> bool:
  return (bool(info.get("local")) and info.get("host") == socket.gethostname()
          and isinstance(info.get("pid"), int) and not pid_alive(info["pid"]))


def claim(output_dir: str, job: str, local: bool = True, attempts: int = 3) -> Claim:
  """Claims ``output_dir`` for ``job`` (creating the directory locally); raises a UserError
  naming the holder when another job holds it.  A stale claim is taken over (one warning)."""
  store = _store(output_dir)
  path = claim_path(output_dir)
  info = {"job": job, "pid": os.getpid(), "host": socket.gethostname(), "since": _now(),
          "local": bool(local), "token": uuid.uuid4().hex}
  data = (json.dumps(info, sort_keys=True) + "\n").encode("utf-8")
  for _ in range(attempts):
    if store.create(path, data):
      return Claim(output_dir, path, info, data, store)
    held_data = store.read(path)
    held = _parse(held_data)
    if held is None:  # released meanwhile: try again
      continue
    if held and _is_stale(held):
      if store.delete(path, held_data):
        LOGGER.warning("taking over the stale claim on %s of %s: that process is gone",
                       output_dir, describe(held))
      continue  # create again (another job may have been quicker)
    who = describe(held) if held else f"an unreadable claim ({path})"
    raise UserError(
        f"{output_dir} is in use by another job: {who}; wait for it to finish or choose "
        f"another --output_dir (if that job is no longer running, delete {path})")
  raise UserError(f"could not claim {output_dir}: its claim file {path} keeps changing; "
                  f"is another job starting there?")


def release_token(output_dir: str, token: str) -> bool:
  """Deletes the claim on ``output_dir`` if it is the one with ``token`` (a job's last step
  with ``--nowait``); whether it did."""
  store = _store(output_dir)
  path = claim_path(output_dir)
  data = store.read(path)
  held = _parse(data)
  if not held or held.get("token") != token:
    return False
  return store.delete(path, data)
