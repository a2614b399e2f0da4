"""Faults in a pipeline job (issue 40, item 4): SIGTERM / SIGINT at each phase of a local run
(in memory and with worker processes) and a full disk (ENOSPC) while writing spill files,
shards, side files, the manifest or the claim.

Each must be one ``<prog>: error:`` line (no traceback; <= 2 stderr lines at ``--log_level
WARNING``), exit 143 / 130 / 1, leave no claim, no ``.tmp``, no COMPLETED, no manifest and no
half-written output (the run's own outputs are deleted), no worker process behind, and an
identical rerun must succeed without ``--overwrite``.

Phases are hit with the test-only hook ``READTWICE_FAULT_AT=<phase>:<action>[:group]``
(:mod:`schemas.fault_hook`); one test signals from outside instead (polling for the job's
``.tmp/``), and the full-disk test uses a real tmpfs (``unshare -rm``; skipped where it cannot
be mounted).
"""

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from pipelines import runner
from pipelines.beam import claim as claim_lib
from pipelines.beam import spill, writer
from schemas import fault_hook as faults
from pipelines.errors import UserError, is_disk_full
from tests import files_under, tagged_processes
from tests.pipelines.helpers import hotpot_record, write_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAS = [["Paris", ["Paris is the capital of France.", " It hosts the Louvre."]],
         ["Lyon", ["Lyon is a city in France.", " Paris is north of it."]]]
SMALL = ["--seq_length", "48", "--overlap", "8", "--max_segments_per_document", "6",
         "--segments_per_pack", "8", "--max_question_tokens", "12", "--log_level", "WARNING"]
MULTI = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
PROG = "python -m pipelines hotpotqa"
STOP_LINE = ("the job stopped, deleted its temporary files and partial output (nothing is "
             "COMPLETED); rerun the same command to start over")

pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  """A tiny input (4 questions) and a larger one (400 questions of 40 paragraphs, ~3 s)."""
  d = tmp_path_factory.mktemp("inputs")
  small = write_json(d / "small.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(4)])
  medium = write_json(d / "medium.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS * 20)
      for i in range(40)])
  big = write_json(d / "big.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS * 20)
      for i in range(400)])
  return {"small": small, "medium": medium, "big": big}


def _assert_nothing_left(out):
  """No claim, temporary file, manifest, COMPLETED or output file: the job created ``out``
  and removed it again (an interrupted run leaves no trace)."""
  assert not os.path.exists(out), files_under(out)


def _one_error_line(stderr, prog=PROG):
  assert "Traceback" not in stderr, stderr
  lines = stderr.splitlines()
  assert len(lines) <= 2, stderr
  errors = [l for l in lines if l.startswith(f"{prog}: error: ")]
  assert len(errors) == 1, stderr
  return errors[0]


def _sigint_default():
  """In the child: Ctrl-C as in a terminal (a test run started in the background inherits
  SIGINT ignored, and Python then never raises KeyboardInterrupt)."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env(**extra):
  env = dict(os.environ, PYTHONPATH=REPO)
  env.pop(faults.ENV, None)
  env.pop("READTWICE_FAULT_PID", None)
  env.update(extra)
  return env


def _job(args, fault=None, tag=None, timeout=120):
  extra = {}
  if fault:
    extra[faults.ENV] = fault
  if tag:
    extra["READTWICE_TEST_TAG"] = tag
  return subprocess.run([sys.executable, "-m", "pipelines", "hotpotqa", *map(str, args)],
                        cwd=REPO, env=_env(**extra), capture_output=True, text=True,
                        timeout=timeout, preexec_fn=_sigint_default, start_new_session=True)


def _assert_no_orphans(tag):
  deadline = time.time() + 10
  while tagged_processes("READTWICE_TEST_TAG", tag) and time.time() < deadline:
    time.sleep(0.2)
  assert not tagged_processes("READTWICE_TEST_TAG", tag), "worker processes outlived the job"


# --- fast: the pieces ---------------------------------------------------------------------------


def test_disk_full_is_found_in_chains_io_errors_and_text():
  from apache_beam.io.filesystem import BeamIOError
  full = OSError(errno.ENOSPC, "No space left on device")
  assert is_disk_full(full) and is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
  wrapped = RuntimeError("while writing")
  wrapped.__cause__ = full
  assert is_disk_full(wrapped)
  assert is_disk_full(BeamIOError("rename failed", {("a", "b"): full}))
  assert is_disk_full(RuntimeError(
      "OSError: [Errno 28] No space left on device [while running 'Write']"))
  assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
  assert not is_disk_full(ValueError("bad"))


def test_stop_signal_is_found_in_what_a_runner_reraises():
  assert runner._stop_signal(RuntimeError(
      "pipelines.runner._Terminated [while running 'ToRecords/WriteShard']")) == signal.SIGTERM
  assert runner._stop_signal(RuntimeError("KeyboardInterrupt [while running 'Read']")) \
      == signal.SIGINT
  assert runner._stop_signal(runner._Terminated()) == signal.SIGTERM
  assert runner._stop_signal(ValueError("x")) is None


def test_the_fault_hook_is_inert_without_its_variable(monkeypatch, tmp_path):
  monkeypatch.delenv(faults.ENV, raising=False)
  faults.fault_point("shards", "x")  # nothing happens
  monkeypatch.setenv(faults.ENV, "manifest:ENOSPC")
  faults.fault_point("shards", "x")  # another phase: nothing
  with pytest.raises(OSError) as e:
    faults.fault_point("manifest", "m.json")
  assert e.value.errno == errno.ENOSPC and e.value.filename == "m.json"


@pytest.mark.parametrize("name, phase", [("records-00000-of-00002.tfrecord", "shards"),
                                         ("manifest.json", "manifest")])
def test_write_atomically_on_a_full_disk_is_one_line_and_no_temporary_file(
    name, phase, monkeypatch, tmp_path):
  monkeypatch.setenv(faults.ENV, f"{phase}:ENOSPC")
  path = str(tmp_path / name)
  with pytest.raises(UserError) as e:
    writer.write_atomically(path, [b"abc", b"def"], tmp_dir=str(tmp_path / ".tmp"))
  assert e.value.message == f"no space left on device writing {path}; free space and rerun"
  assert files_under(tmp_path) in ([], [".tmp"])


def test_spill_and_claim_files_on_a_full_disk(monkeypatch, tmp_path):
  class FullFile:
    def write(self, data):
      raise OSError(errno.ENOSPC, "No space left on device")

    def close(self):
      pass

  monkeypatch.setattr(spill.FileSystems, "create", lambda path: FullFile())
  w = spill.SpillWriter(str(tmp_path), buffer_bytes=4)
  with pytest.raises(UserError, match=r"no space left on device writing .*/bundle-.*\.bin; "):
    w.write(b"12345")

  def full_write(fd, data):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(claim_lib.os, "write", full_write)
  out = str(tmp_path / "out")
  with pytest.raises(UserError, match="no space left on device writing .*/out/.claim.json"):
    claim_lib.claim(out, "hotpotqa")
  assert os.listdir(out) == []  # no empty claim file to block every later run


def test_leftovers_of_an_unfinished_run_are_named_as_such(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "records-00000-of-00001.tfrecord").write_bytes(b"")
  with pytest.raises(FileExistsError, match="an earlier run that did not complete"):
    writer.prepare_output_dir(str(out), overwrite=False)
  (out / "COMPLETED").write_bytes(b"")
  with pytest.raises(FileExistsError, match="already holds the output of a run "):
    writer.prepare_output_dir(str(out), overwrite=False)


def test_a_failed_run_deletes_its_own_outputs_only_when_asked(tmp_path):
  out = tmp_path / "out"
  (out / "documents").mkdir(parents=True)
  (out / ".tmp").mkdir()
  (out / ".tmp" / "x-records-00000-of-00001.tfrecord").write_bytes(b"t")
  (out / "records-00000-of-00001.tfrecord").write_bytes(b"r")
  (out / "documents" / "documents-00000-of-00001.jsonl").write_bytes(b"d")
  (out / "stats.json").write_bytes(b"{}")
  (out / "notes.txt").write_bytes(b"the user's")
  writer.clean_up_failed_run(str(out), existed=True)  # a plain failure: outputs stay
  assert files_under(out) == ["documents", "documents/documents-00000-of-00001.jsonl", "notes.txt",
                         "records-00000-of-00001.tfrecord", "stats.json"]
  writer.clean_up_failed_run(str(out), existed=True, own_outputs=("stats.json",))
  assert files_under(out) == ["documents", "notes.txt"]  # a file the job never writes stays


# --- in process: each phase, in memory -------------------------------------------------------


def _main(argv, capsys):
  capsys.readouterr()
  rc = runner.dataset_main("hotpotqa", list(argv))
  return rc, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("fault, code, rerun", [
    ("start:SIGTERM", 143, False), ("read:SIGINT", 130, False),
    ("shards:SIGTERM", 143, False), ("side:SIGINT", 130, False),
    ("manifest:SIGTERM", 143, False), ("completed:SIGINT", 130, True),
    ("shards:ENOSPC", 1, True), ("side:ENOSPC", 1, False), ("manifest:ENOSPC", 1, True)])
def test_a_fault_at_each_phase_in_process(fault, code, rerun, inputs, tmp_path, monkeypatch,
                                          capsys):
  out = str(tmp_path / "out")
  monkeypatch.setenv(faults.ENV, fault)
  monkeypatch.setenv("READTWICE_FAULT_PID", str(os.getpid()))
  monkeypatch.setattr(faults, "_fired", False)
  previous = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
  rc, err = _main(["--input", inputs["small"], "--output_dir", out] + SMALL, capsys)
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == previous
  assert rc == code, err
  line = _one_error_line(err, "python -m pipelines hotpotqa")
  phase = fault.partition(":")[0]
  if code == 1:
    kind = {"shards": "records-00000-of-00001.tfrecord",
            "side": "documents/documents-00000-of-00001.jsonl", "manifest": "manifest.json"}
    assert line.endswith(f"error: no space left on device writing {out}/{kind[phase]}; "
                         f"free space and rerun"), line
  else:
    word = "interrupted (SIGINT)" if code == 130 else "terminated (SIGTERM)"
    assert line.endswith(f"error: {word}; {STOP_LINE}"), line
  _assert_nothing_left(out)
  if rerun:
    monkeypatch.delenv(faults.ENV)
    rc, err = _main(["--input", inputs["small"], "--output_dir", out] + SMALL, capsys)
    assert rc == 0 and err == "", err
    assert "COMPLETED" in files_under(out) and "manifest.json" in files_under(out)


# --- subprocesses: the exit status, worker processes, signals from outside --------------------


@pytest.mark.slow
@pytest.mark.parametrize("fault, extra, code, rerun", [
    ("shards:SIGTERM", [], 143, True),  # the case: 177-267 stderr lines, exit 1
    ("read:SIGINT:group", MULTI, 130, False),  # Ctrl-C in a terminal: workers get it too
    ("shards:SIGTERM:group", MULTI, 143, False),
    ("manifest:SIGINT:group", MULTI, 130, False)])
def test_a_signal_to_the_job_process(fault, extra, code, rerun, inputs, tmp_path):
  out = str(tmp_path / "out")
  tag = uuid.uuid4().hex
  args = ["--input", inputs["small"], "--output_dir", out] + SMALL + extra
  proc = _job(args, fault=fault, tag=tag)
  assert proc.returncode == code, proc.stderr
  word = "interrupted (SIGINT)" if code == 130 else "terminated (SIGTERM)"
  assert _one_error_line(proc.stderr).endswith(f"error: {word}; {STOP_LINE}")
  assert proc.stdout == ""
  _assert_no_orphans(tag)  # the hook keeps a worker in its phase for 30 s: stopped, not left
  _assert_nothing_left(out)
  if rerun:  # the same command, no --overwrite
    proc = _job(args)
    assert proc.returncode == 0, proc.stderr
    assert "COMPLETED" in files_under(out)


@pytest.mark.slow
def test_sigterm_from_outside_to_the_process_group_while_shards_are_written(inputs, tmp_path):
  """No hook: the job (with workers) is signalled as a scheduler would, as soon as its
  ``.tmp/`` exists (spill files, then shards being written)."""
  out = tmp_path / "out"
  tag = uuid.uuid4().hex
  job = subprocess.Popen(
      [sys.executable, "-m", "pipelines", "hotpotqa", "--input", inputs["big"],
       "--output_dir", str(out)] + SMALL + MULTI,
      cwd=REPO, env=_env(READTWICE_TEST_TAG=tag), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, start_new_session=True)
  deadline = time.time() + 60
  while not (out / ".tmp").exists() and job.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  assert job.poll() is None, job.communicate()
  time.sleep(0.3)
  os.killpg(job.pid, signal.SIGTERM)
  _, stderr = job.communicate(timeout=60)
  assert job.returncode == 143, stderr
  assert "terminated (SIGTERM)" in _one_error_line(stderr)
  _assert_no_orphans(tag)
  _assert_nothing_left(str(out))


@pytest.mark.slow
def test_ctrl_c_while_the_job_starts(inputs, tmp_path):
  """Before the job's own handlers (imports, flags): one line, 130, nothing written."""
  out = tmp_path / "out"
  job = subprocess.Popen(
      [sys.executable, "-m", "pipelines", "hotpotqa", "--input", inputs["small"],
       "--output_dir", str(out)] + SMALL, cwd=REPO, env=_env(), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
  time.sleep(0.5)
  job.send_signal(signal.SIGINT)
  _, stderr = job.communicate(timeout=60)
  assert job.returncode == 130, stderr
  assert "interrupted (SIGINT)" in _one_error_line(stderr)
  _assert_nothing_left(str(out))


# --- a real full disk ---------------------------------------------------------------------------

_TMPFS_SCRIPT = textwrap.dedent("""\
    set -u
    mount -t tmpfs -o size=512k tmpfs "$D" || exit 99
    run() {{ {python} -m pipelines hotpotqa --input "$1" --output_dir "$D/out" {flags} \\
        >"$R/$2.out" 2>"$R/$2.err"; echo $? >"$R/$2.rc"; (cd "$D" && find . | sort) >"$R/$2.ls"; }}
    run {small} claim_ok && rm -rf "$D/out"
    mkdir -p "$D/out"; head -c 600000 /dev/zero >"$D/filler" 2>/dev/null
    run {small} claim          # not even the claim fits
    rm -rf "$D/filler" "$D/out"
    run {medium} spill         # 512k: the spill files (.tmp/) overflow
    mount -o remount,size=1m "$D"
    run {medium} records       # 1m: the record shard overflows
    mount -o remount,size=64m "$D"
    run {medium} rerun         # with space: the same command completes
    """)


@pytest.mark.slow
def test_a_real_full_disk(inputs, tmp_path):
  if shutil.which("unshare") is None:
    pytest.skip("no unshare(1) here: cannot mount a tmpfs for a real full disk")
  mnt, results = tmp_path / "mnt", tmp_path / "results"
  mnt.mkdir()
  results.mkdir()
  script = _TMPFS_SCRIPT.format(python=sys.executable, flags=" ".join(SMALL),
                                small=inputs["small"], medium=inputs["medium"])
  proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=REPO, capture_output=True,
                        text=True, timeout=300, env=_env(D=str(mnt), R=str(results)))
  if proc.returncode == 99 or proc.returncode and "unshare" in proc.stderr:
    pytest.skip(f"cannot mount a tmpfs here (unshare -rm; mount -t tmpfs): {proc.stderr}")
  assert proc.returncode == 0, proc.stderr

  def result(name):
    read = lambda ext: (results / f"{name}.{ext}").read_text()  # noqa: E731
    return int(read("rc")), read("err"), read("ls").split()

  rc, err, _ = result("claim_ok")
  assert rc == 0, err  # the small job fits in 512k: the failures below are the disk's
  for name, where in [("claim", "out/.claim.json"), ("spill", "out/.tmp/spill/bundle-"),
                      ("records", "out/records-00000-of-00001.tfrecord")]:
    rc, err, listing = result(name)
    assert rc == 1, (name, err)
    line = _one_error_line(err)
    assert f"error: no space left on device writing {mnt}/{where}" in line, line
    assert line.endswith("; free space and rerun"), line
    assert listing == (["."] if name != "claim" else [".", "./filler", "./out"]), (name, listing)
  rc, err, listing = result("rerun")
  assert rc == 0, err
  assert "./out/COMPLETED" in listing and "./out/.claim.json" not in listing


@pytest.mark.parametrize("finished, line", [
    (False, f"prog: error: terminated (SIGTERM); {STOP_LINE}\n"),
    (True, "prog: error: terminated (SIGTERM) after the job had completed; its output is in "
           "place (COMPLETED)\n")])
def test_the_stop_line_says_whether_the_output_was_completed(finished, line, capsys):
  def body():
    runner._finished = finished  # as run_job sets it once the pipeline has finished
    raise runner._Terminated()

  assert runner.run_main("prog", body) == 143
  assert capsys.readouterr().err == line
