"""Output directories as jobs share them: one job per dir (a claim), temporary files out of
every output glob, runs that write nothing, directories given as files and the reverse, the
manifest's batch sizes, and the inspector reading a dir's manifest.

Each case was a tracker item: two jobs on one dir deleted each other's spill files (a 168-line
traceback) and left a 22 MB ``records-...tfrecord.tmp-...`` next to ``COMPLETED``; a Parquet
file given to the HotpotQA job "succeeded" writing nothing; ``--input DIR`` was a 147-line
IsADirectoryError; ``--batch_size 100`` was recorded as 64.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from pipelines import runner
from pipelines.beam import claim as claim_lib
from pipelines.beam import writer
from tests import files_under
from tests.pipelines.helpers import hotpot_record, write_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAS = [["Paris", ["Paris is the capital of France.", " It hosts the Louvre."]],
         ["Lyon", ["Lyon is a city in France.", " Paris is north of it."]]]
SMALL = ["--seq_length", "48", "--overlap", "8", "--max_segments_per_document", "6",
         "--segments_per_pack", "8", "--max_question_tokens", "12"]
PROG = "python -m pipelines hotpotqa"

pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


@pytest.fixture
def small_input(tmp_path):
  return write_json(tmp_path / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(4)])


def _env():
  return dict(os.environ, PYTHONPATH=REPO)


def _job(*args, module="pipelines hotpotqa", timeout=300):
  """``python -m <module> ARGS`` (``module``: a module, or ``pipelines <dataset>``)."""
  return subprocess.run([sys.executable, "-m", *module.split(), *map(str, args)], cwd=REPO,
                        env=_env(), capture_output=True, text=True, timeout=timeout)


def _sigint_default():
  """In the child: Ctrl-C as in a terminal.  A test run started in the background by a script
  (``cmd &``) has SIGINT ignored, which its children inherit, and Python then never raises
  KeyboardInterrupt: the Ctrl-C test would see the job finish instead."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args, module="pipelines hotpotqa"):
  return subprocess.Popen([sys.executable, "-m", *module.split(), *map(str, args)], cwd=REPO,
                          env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_sigint_default)


def _error_line(stderr, prog=PROG):
  """The one ``<prog>: error:`` line of ``stderr`` (no traceback)."""
  assert "Traceback" not in stderr, stderr
  lines = [l for l in stderr.splitlines() if l.startswith(f"{prog}: error: ")]
  assert len(lines) == 1, stderr
  return lines[0]


def _assert_no_leftovers(out):
  """No claim, no temporary file anywhere under ``out``."""
  left = [f for f in files_under(out) if ".tmp" in f or f.endswith(claim_lib.CLAIM_FILE)
          or "_spill" in f]
  assert not left, left


def _assert_complete(out):
  names = files_under(out)
  assert "COMPLETED" in names and "manifest.json" in names, names
  assert "records-00000-of-00001.tfrecord" in names, names
  _assert_no_leftovers(out)


# --- 1. one job per output dir --------------------------------------------------------------


@pytest.mark.slow
def test_a_live_claim_refuses_a_second_job_even_with_overwrite(small_input, tmp_path):
  out = str(tmp_path / "out")
  held = claim_lib.claim(out, "hotpotqa")  # this process: alive, on this host
  try:
    before = files_under(out)
    for extra in ([], ["--overwrite"]):
      proc = _job("--input", small_input, "--output_dir", out, *SMALL, *extra)
      assert proc.returncode == 1, proc.stderr
      line = _error_line(proc.stderr)
      assert f"{out} is in use by another job: hotpotqa (pid {os.getpid()} on " \
             f"{socket.gethostname()}, since {held.info['since']})" in line
      assert proc.stdout == ""
      assert files_under(out) == before == [claim_lib.CLAIM_FILE]  # nothing else written
  finally:
    held.release()
  assert not os.path.exists(os.path.join(out, claim_lib.CLAIM_FILE))


@pytest.mark.slow
def test_a_stale_claim_is_taken_over_with_one_warning(small_input, tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  (out / claim_lib.CLAIM_FILE).write_text(json.dumps({
      "job": "hotpotqa", "pid": gone.pid, "host": socket.gethostname(),
      "since": "2026-01-01T00:00:00+00:00", "local": True, "token": "old"}))
  proc = _job("--input", small_input, "--output_dir", out, *SMALL)
  assert proc.returncode == 0, proc.stderr
  stale = [l for l in proc.stderr.splitlines() if "the stale claim" in l]
  assert len(stale) == 1 and "WARNING" in stale[0] and f"pid {gone.pid}" in stale[0], \
      proc.stderr
  _assert_complete(str(out))


@pytest.mark.slow
def test_two_jobs_started_at_once_on_one_dir(small_input, tmp_path):
  out = str(tmp_path / "out")
  jobs = [_start("--input", small_input, "--output_dir", out, *SMALL) for _ in range(2)]
  results = [(p.wait(timeout=300), *p.communicate()) for p in jobs]
  codes = sorted(r[0] for r in results)
  assert codes == [0, 1], results
  loser = next(r for r in results if r[0] == 1)
  line = _error_line(loser[2])
  # Refused by the claim (both running) or, if the first was already done, by its output.
  assert "is in use by another job: hotpotqa (pid" in line or "already holds" in line, line
  _assert_complete(out)
  proc = _job("--records_dir", out, module="pipelines.inspector")
  assert proc.returncode == 0 and "=== pack" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_ctrl_c_releases_the_claim_and_deletes_temporaryfiles_under(tmp_path):
  src = write_json(tmp_path / "big.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS * 20)
      for i in range(400)])
  out = tmp_path / "out"
  job = _start("--input", src, "--output_dir", out, *SMALL)
  deadline = time.time() + 120
  while not (out / ".tmp").exists() and job.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  assert job.poll() is None, job.communicate()
  time.sleep(0.5)  # well inside the pipeline
  job.send_signal(signal.SIGINT)
  _, stderr = job.communicate(timeout=120)
  assert job.returncode == 130, stderr
  assert "interrupted" in _error_line(stderr)
  assert not os.path.exists(out / "COMPLETED")
  _assert_no_leftovers(str(out))


# --- 2. temporary files -----------------------------------------------------------------------


@pytest.mark.slow
def test_temporary_files_are_never_records_and_are_gone_after_a_failure(small_input, tmp_path,
                                                                        monkeypatch):
  out = str(tmp_path / "out")
  renamed = []
  rename = writer.FileSystems.rename

  def failing_rename(sources, destinations):
    renamed.extend(sources)
    if os.path.basename(destinations[0]).startswith("records-"):
      raise OSError("disk full")
    return rename(sources, destinations)

  monkeypatch.setattr(writer.FileSystems, "rename", failing_rename)
  with pytest.raises(Exception, match="disk full"):
    runner.dataset_main("hotpotqa", ["--input", small_input, "--output_dir", out] + SMALL)
  assert renamed
  for path in renamed:  # the job's own temporary files are all under .tmp/
    if path.endswith(writer.OWNER_FILE):  # the dir's mark, written atomically beside it
      continue
    assert os.path.dirname(path) == os.path.join(out, ".tmp"), path
    assert not os.path.basename(path).startswith("records-")
  _assert_no_leftovers(out)
  assert not [f for f in files_under(out) if f.startswith("records-")]


def test_write_atomically_names_and_cleans_its_temporary_file(tmp_path):
  path = str(tmp_path / "records-00000-of-00001.tfrecord")

  def chunks():
    yield b"abc"
    raise RuntimeError("encoder failed")

  with pytest.raises(RuntimeError, match="encoder failed"):
    writer.write_atomically(path, chunks())
  assert os.listdir(tmp_path) == []
  seen = []
  create = writer.FileSystems.create

  def spy(p, *a, **k):
    seen.append(p)
    return create(p, *a, **k)

  writer.FileSystems.create = spy
  try:
    writer.write_atomically(path, [b"x"])
  finally:
    writer.FileSystems.create = create
  assert os.path.basename(seen[0]).startswith(writer.TMP_PREFIX)
  assert os.listdir(tmp_path) == ["records-00000-of-00001.tfrecord"]
  # A .gz name (the temporary one ends like the final one) gets exactly the bytes given.
  gz = str(tmp_path / "sub" / "documents-00000-of-00001.jsonl.gz")
  writer.write_atomically(gz, [b"plain"], tmp_dir=str(tmp_path / ".tmp"))
  assert open(gz, "rb").read() == b"plain"


# --- 4. runs that write nothing ---------------------------------------------------------------


@pytest.mark.slow
def test_a_parquet_file_without_the_hub_columns_fails_naming_the_reason(tmp_path):
  # A Parquet file is read as the Hub's layout; one without its columns is one dead letter.
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  src = str(tmp_path / "train.parquet")
  pq.write_table(pa.table({"question": ["q"] * 50, "answer": ["a"] * 50}), src)
  out = str(tmp_path / "out")
  proc = _job("--input", src, "--output_dir", out, *SMALL)
  assert proc.returncode == 1, proc.stderr
  line = _error_line(proc.stderr)
  assert re.search(r"error: no document was written: 1 input record rejected "
                   r"\(missing_columns 1\); see " + re.escape(f"{out}/dead_letter/;"), line), line
  assert "--allow_empty" in line and proc.stdout == ""
  names = files_under(out)
  assert "COMPLETED" not in names
  assert "manifest.json" in names and "dead_letter/dead_letter-00000-of-00001.jsonl" in names
  _assert_no_leftovers(out)
  m = json.load(open(os.path.join(out, "manifest.json")))
  assert m["counts"] == {"input": 1, "written": 0, "skipped": 0, "rejected": 1}
  # --allow_empty: the rare run where nothing is the right answer.
  proc = _job("--input", src, "--output_dir", out, *SMALL, "--overwrite", "--allow_empty",
              "--max_error_fraction", "1")
  assert proc.returncode == 0, proc.stderr
  assert os.path.exists(os.path.join(out, "COMPLETED"))
  assert json.loads(proc.stdout.splitlines()[-1])["counts"]["written"] == 0


def test_empty_run_message_ranks_reasons():
  from pipelines.beam.manifest import empty_run_message  # pylint: disable=g-import-not-at-top
  msg = empty_run_message({"input": 7, "written": 0, "skipped": 1, "rejected": 6},
                          {"parse/missing_answer": 1, "read/invalid_json": 4,
                           "annotate/api_unavailable": 1}, {"dedup/duplicate_id": 1}, "o")
  assert msg.startswith("no document was written: 6 input records rejected (invalid_json 4, "
                        "api_unavailable 1, missing_answer 1); 1 input record skipped "
                        "(duplicate_id 1); see o/dead_letter/")
  assert empty_run_message({"input": 0, "written": 0, "skipped": 0, "rejected": 0}, {}, {},
                           "o").startswith("no document was written: the input holds no records;")


# --- 6. directories and files in the wrong place ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("slash", ["", "/"])
def test_a_directory_as_input_is_one_line_suggesting_a_glob(small_input, tmp_path, slash):
  src = tmp_path / "data"
  src.mkdir()
  for name in ("a.json", "b.json", "c.json", "notes.txt"):
    (src / name).write_text("[]")
  out = tmp_path / "out"
  proc = _job("--input", f"{src}{slash}", "--output_dir", out, *SMALL)
  assert proc.returncode == 1, proc.stderr
  assert _error_line(proc.stderr) == (
      f"{PROG}: error: --input {src}{slash} is a directory; give files or a glob such as "
      f"{src}/*.json (it holds 3 .json files)")
  assert not out.exists()


@pytest.mark.slow
def test_an_output_dir_that_is_a_file_is_one_line(small_input, tmp_path):
  target = tmp_path / "out"
  target.write_text("not a directory")
  proc = _job("--input", small_input, "--output_dir", target, *SMALL)
  assert proc.returncode == 1, proc.stderr
  assert _error_line(proc.stderr) == (
      f"{PROG}: error: --output_dir {target} is a file, not a directory; choose a directory "
      f"(it is created if missing)")
  assert target.read_text() == "not a directory"
  assert sorted(os.listdir(tmp_path)) == ["in.json", "out"]


# --- 7. the manifest's batch sizes -------------------------------------------------------------


@pytest.mark.slow
def test_the_manifest_records_the_job_and_annotation_batch_sizes(small_input, tmp_path,
                                                                capsys):
  out = str(tmp_path / "out")
  assert runner.dataset_main("hotpotqa", ["--input", small_input, "--output_dir", out,
                                          "--batch_size", "100"] + SMALL) == 0
  config = json.load(open(os.path.join(out, "manifest.json")))["config"]
  assert config["batch_size"] == 100 and config["annotate_batch_size"] == 64
  out2 = str(tmp_path / "out2")
  assert runner.dataset_main("hotpotqa", ["--input", small_input, "--output_dir", out2, "--ner",
                                          "spacy", "--annotate_batch_size", "7"] + SMALL) == 0
  config = json.load(open(os.path.join(out2, "manifest.json")))["config"]
  assert config["batch_size"] == 256 and config["annotate_batch_size"] == 7
  capsys.readouterr()


# --- 3. the inspector ---------------------------------------------------------------------------

INSPECT = "python -m pipelines.inspector"


@pytest.fixture(scope="module")
def job_output(tmp_path_factory):
  base = tmp_path_factory.mktemp("inspect")
  src = write_json(base / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(3)])
  out = str(base / "out")
  proc = _job("--input", src, "--output_dir", out, *SMALL)
  assert proc.returncode == 0, proc.stderr
  return out


@pytest.mark.slow
def test_inspector_reads_the_manifests_shards_not_a_glob(job_output, tmp_path):
  import shutil  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "copy")
  shutil.copytree(job_output, out)
  # A leftover that a records-* glob would read (and fail on): not in the manifest.
  with open(os.path.join(out, "records-00000-of-00001.tfrecord.tmp-0f3c"), "wb") as f:
    f.write(b"\x00garbage" * 10)
  proc = _job("--records_dir", out, "--max_records", "1", module="pipelines.inspector")
  assert proc.returncode == 0, proc.stderr
  assert "=== pack" in proc.stdout and proc.stderr == ""
  assert f"# files: {out}/records-00000-of-00001.tfrecord\n" in proc.stdout


@pytest.mark.slow
def test_inspector_warns_about_a_dir_without_completed_or_manifest(job_output, tmp_path):
  import shutil  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "copy")
  shutil.copytree(job_output, out)
  os.remove(os.path.join(out, "COMPLETED"))
  proc = _job("--records_dir", out, module="pipelines.inspector")
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr.splitlines() == [
      f"{INSPECT}: warning: {out} has no COMPLETED: the job that wrote it failed or is still "
      "running; its records may be incomplete"]
  os.remove(os.path.join(out, "manifest.json"))
  proc = _job("--records_dir", out, module="pipelines.inspector")
  assert proc.returncode == 0, proc.stderr
  [line] = proc.stderr.splitlines()
  assert line.startswith(f"{INSPECT}: warning: {out} has no manifest.json"), line
  assert "=== pack" in proc.stdout


@pytest.mark.parametrize("args, code, message", [
    (["--records", "X"], 2, "--records was renamed --records_dir; see --help"),
    (["--record", "X"], 2, "unknown flag --record (did you mean --records_dir?); see --help"),
    (["--records_dir", "NOWHERE"], 1, "--records_dir NOWHERE does not exist"),
    (["--records_dir", "OUT/records-*"], 1,
     "--records_dir takes a job's output directory (where manifest.json lists the shards), "
     "not a glob: try --records_dir OUT"),
    (["--records_dir", "OUT/manifest.json"], 1,
     "--records_dir OUT/manifest.json is a file; give the job's output directory (the one "
     "holding manifest.json)"),
])
@pytest.mark.slow
def test_inspector_errors_are_one_line(job_output, tmp_path, args, code, message):
  args = [a.replace("OUT", job_output).replace("NOWHERE", str(tmp_path / "nowhere"))
          for a in args]
  proc = _job(*args, module="pipelines.inspector", timeout=120)
  assert proc.returncode == code, proc.stderr
  expected = message.replace("OUT", job_output).replace("NOWHERE", str(tmp_path / "nowhere"))
  assert proc.stderr == f"{INSPECT}: error: {expected}\n"
  assert proc.stdout == ""


def test_inspector_help_example_parses():
  from pipelines.inspector import cli  # pylint: disable=g-import-not-at-top
  parser = cli.new_parser()
  args = parser.parse_args(parser.example_argv())
  assert args.records_dir == "/tmp/hotpot_records" and args.max_records == 2
  assert parser.prog == INSPECT and not parser.allow_abbrev


# --- the claim's stores ---------------------------------------------------------------------------


def test_release_token_releases_only_its_own_claim(tmp_path):
  out = str(tmp_path / "out")
  held = claim_lib.claim(out, "books", local=False)  # as submitted with --nowait
  assert not claim_lib.release_token(out, "someone-else")
  assert os.path.exists(held.path)
  assert claim_lib.release_token(out, held.token)  # the job's last step
  assert not os.path.exists(held.path)
  held.release()  # already gone: one warning, no error


def test_a_remote_runs_claim_is_never_taken_over(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  (out / claim_lib.CLAIM_FILE).write_text(json.dumps({
      "job": "books", "pid": gone.pid, "host": socket.gethostname(), "since": "s",
      "local": False, "token": "t"}))
  with pytest.raises(claim_lib.UserError, match=r"in use by another job: books .*delete "
                                                + re.escape(str(out / claim_lib.CLAIM_FILE))):
    claim_lib.claim(str(out), "books")


class _FakeBlob:
  """``google.cloud.storage.Blob`` as the claim uses it: generations and preconditions."""

  def __init__(self, objects, name):
    self._objects, self.name = objects, name

  @property
  def generation(self):
    return self._objects[self.name][1]

  def upload_from_string(self, data, content_type=None, if_generation_match=None):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    current = self._objects.get(self.name, (None, 0))[1]
    if if_generation_match is not None and current != if_generation_match:
      raise exceptions.PreconditionFailed("exists")
    self._objects[self.name] = (data, current + 1)

  def download_as_bytes(self, if_generation_match=None):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    if self.name not in self._objects:
      raise exceptions.NotFound("no")
    return self._objects[self.name][0]

  def delete(self, if_generation_match=None):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    if self._objects.get(self.name, (None, None))[1] != if_generation_match:
      raise exceptions.PreconditionFailed("changed")
    del self._objects[self.name]


class _FakeBucket:

  def __init__(self, objects):
    self._objects = objects

  def blob(self, name):
    return _FakeBlob(self._objects, name)

  def get_blob(self, name):
    return _FakeBlob(self._objects, name) if name in self._objects else None


class _FakeClient:

  def __init__(self):
    self.objects = {}

  def bucket(self, name):
    assert name == "b"
    return _FakeBucket(self.objects)


def test_gcs_claims_are_create_if_absent(monkeypatch):
  client = _FakeClient()

  def store_init(self):
    self._client = client

  monkeypatch.setattr(claim_lib._GcsStore, "__init__", store_init)  # pylint: disable=protected-access
  held = claim_lib.claim("gs://b/out", "wikipedia", local=False)
  assert list(client.objects) == ["out/.claim.json"]
  with pytest.raises(claim_lib.UserError, match=r"gs://b/out is in use by another job: "
                                                r"wikipedia \(pid \d+ on "):
    claim_lib.claim("gs://b/out", "wikipedia")
  held.release()
  assert client.objects == {}
  again = claim_lib.claim("gs://b/out/", "wikipedia")
  assert claim_lib.release_token("gs://b/out", again.token) and client.objects == {}


def test_overwrite_deletes_only_in_a_dir_a_job_wrote(tmp_path):
  """--overwrite never deletes files that merely match a job's output names in someone else's
  directory; a job's dir (its mark, or a records manifest written before the mark existed)
  is replaced, and keeps files that are not a job's."""
  stranger = tmp_path / "stranger"
  stranger.mkdir()
  (stranger / "manifest.json").write_text('{"name": "a web app"}')
  (stranger / "records-1-of-2").write_text("mine")
  with pytest.raises(FileExistsError, match="no job of this project wrote it"):
    writer.prepare_output_dir(str(stranger), overwrite=True, job="hotpotqa")
  assert sorted(os.listdir(stranger)) == ["manifest.json", "records-1-of-2"]
  old = tmp_path / "old_run"
  old.mkdir()
  (old / "manifest.json").write_text(json.dumps({"schema_version": "1.0", "job": "books"}))
  (old / "notes.txt").write_text("kept")
  assert writer.prepare_output_dir(str(old), overwrite=True, job="hotpotqa")
  assert sorted(os.listdir(old)) == [writer.OWNER_FILE, "notes.txt"]
  assert json.loads((old / writer.OWNER_FILE).read_text())["job"] == "hotpotqa"
  (old / "COMPLETED").write_text("")  # now marked: replaced again without a manifest
  writer.prepare_output_dir(str(old), overwrite=True, job="hotpotqa")
  assert sorted(os.listdir(old)) == [writer.OWNER_FILE, "notes.txt"]
  (old / "COMPLETED").write_text("")
  os.symlink(old, tmp_path / "link")  # the same dir through a link: never deleted through it
  with pytest.raises(FileExistsError, match="never deletes through a symlink"):
    writer.prepare_output_dir(str(tmp_path / "link"), overwrite=True, job="hotpotqa")
  (old / "COMPLETED").unlink()
  writer.remove_if_empty(str(old), existed=False)  # the mark alone does not keep a dir
  assert old.exists()
  os.remove(old / "notes.txt")
  writer.remove_if_empty(str(old), existed=False)
  assert not old.exists()


def _failed_run(out, job="hotpotqa"):
  """What a failed run of ``job`` leaves (its mark, dead letters and a manifest, no
  COMPLETED), plus a file that is not a job's."""
  (out / "dead_letter").mkdir(parents=True)
  (out / "dead_letter" / "dead_letter-00000-of-00001.jsonl").write_text("{}\n")
  (out / "manifest.json").write_text(json.dumps({"schema_version": "1.0", "job": job}))
  (out / writer.OWNER_FILE).write_text(json.dumps({"job": job, "written_by": "readtwice"}))
  (out / "notes.txt").write_text("kept")


def test_a_rerun_replaces_its_own_incomplete_output_with_one_warning(tmp_path, caplog):
  """Issue 41: the identical rerun of a failed run needs no --overwrite; a COMPLETED output,
  another job's incomplete output and files no job wrote are still refused."""
  out = tmp_path / "failed"
  _failed_run(out)
  with caplog.at_level("WARNING"):
    assert writer.prepare_output_dir(str(out), overwrite=False, job="hotpotqa")
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert len(warnings) == 1 and "\n" not in warnings[0], warnings
  assert "did not complete" in warnings[0] and "deleted its 2 file(s)" in warnings[0]
  assert "dead_letter/dead_letter-00000-of-00001.jsonl, manifest.json" in warnings[0]
  assert sorted(os.listdir(out)) == [writer.OWNER_FILE, "dead_letter", "notes.txt"]
  assert os.listdir(out / "dead_letter") == []
  other = tmp_path / "other_job"
  _failed_run(other, job="books")
  with pytest.raises(FileExistsError, match="the output of a books run that did not complete "
                                            r"\(no COMPLETED\), not of this hotpotqa job"):
    writer.prepare_output_dir(str(other), overwrite=False, job="hotpotqa")
  done = tmp_path / "completed"
  _failed_run(done)
  (done / "COMPLETED").write_text("")
  with pytest.raises(FileExistsError, match="already holds the output of a run "):
    writer.prepare_output_dir(str(done), overwrite=False, job="hotpotqa")
  unmarked = tmp_path / "unmarked"
  _failed_run(unmarked)
  (unmarked / writer.OWNER_FILE).unlink()
  with pytest.raises(FileExistsError, match="an earlier run that did not complete"):
    writer.prepare_output_dir(str(unmarked), overwrite=False, job="hotpotqa")
  os.symlink(out, tmp_path / "link")
  (out / "manifest.json").write_text("{}")
  with pytest.raises(FileExistsError, match="never deletes through a symlink"):
    writer.prepare_output_dir(str(tmp_path / "link"), overwrite=False, job="hotpotqa")
  for d in (other, done, unmarked, out):  # nothing deleted by a refusal
    assert (d / "manifest.json").exists(), d


@pytest.mark.slow
def test_the_identical_rerun_of_a_failed_run_succeeds(tmp_path):
  """End to end: a run that fails on --max_error_fraction, then the same command with the bad
  record fixed, no --overwrite."""
  good = [hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS)
          for i in range(2)]
  path = write_json(tmp_path / "in.json", good + [{"_id": "bad"}, 7])
  out = tmp_path / "out"
  first = _job("--input", path, "--output_dir", out, *SMALL)
  assert first.returncode == 1 and not (out / "COMPLETED").exists()
  assert os.listdir(out / "dead_letter")
  write_json(tmp_path / "in.json", good)
  second = _job("--input", path, "--output_dir", out, *SMALL)
  assert second.returncode == 0, second.stderr
  assert (out / "COMPLETED").exists()
  lines = [l for l in second.stderr.splitlines() if "did not complete" in l]
  assert len(lines) == 1 and "WARNING" in lines[0], second.stderr
  assert json.loads(second.stdout.strip().splitlines()[-1])["counts"]["rejected"] == 0


def test_the_error_budget_line_names_the_top_reasons():
  from pipelines.beam.manifest import check_error_fraction  # pylint: disable=g-import-not-at-top
  from pipelines.errors import UserError  # pylint: disable=g-import-not-at-top
  counts = {"input": 7, "written": 3, "skipped": 0, "rejected": 4}
  by_reason = {"read/invalid_json": 1, "parse/bad_field": 2, "parse/missing_context_file": 1}
  check_error_fraction(counts, 0.6, "o", by_reason)  # 57% <= 60%: no error
  with pytest.raises(UserError) as e:
    check_error_fraction(counts, 0.1, "o", dict(by_reason, **{"labels/missing_answer": 0}))
  line = str(e.value)
  assert "\n" not in line
  assert ("4 of 7 input records were rejected (bad_field 2, invalid_json 1, "
          "missing_context_file 1, 1 more reason): 57.14%, more than "
          "--max_error_fraction=0.1; the job is not COMPLETED; see o/dead_letter/") in line
  assert line.endswith("accept the share with --max_error_fraction 1 (the rerun replaces "
                       "this output)")
