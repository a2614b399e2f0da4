"""The job runner as a user meets it (:mod:`pipelines.runner`): one-line errors for unusable
inputs and outputs, progress on stderr, the JSON summary last.

Each case was a defect on the old absl-based CLI: user errors were 18-120-line tracebacks and
nothing was logged until the end.
"""

import json
import logging
import os
import subprocess
import sys

import pytest

from pipelines import runner
from pipelines.errors import MARKER, UserError, user_error_message
from tests.pipelines.helpers import PARAS, hotpot_record, one_error_line, run_main, write_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


@pytest.mark.slow
def test_missing_input_and_existing_output_are_one_line_exit_1(small_input, tmp_path, capsys):
  code, stdout, err = run_main(["--input", str(tmp_path / "nope-*.json"),
                                "--output_dir", str(tmp_path / "o"), "--log_level", "WARNING"],
                               capsys)
  assert code == 1 and stdout == ""
  assert one_error_line(err).endswith("--input '%s' matches no file" % (tmp_path / "nope-*.json"))

  out = tmp_path / "out"
  assert run_main(["--input", small_input, "--output_dir", str(out), "--log_level", "WARNING"],
                  capsys)[0] == 0
  code, stdout, err = run_main(["--input", small_input, "--output_dir", str(out),
                                "--log_level", "WARNING"], capsys)
  assert code == 1 and stdout == ""
  assert "already holds the output of a run" in one_error_line(err)
  assert "--overwrite" in err


def test_unreadable_vocabulary_is_one_line(small_input, tmp_path, capsys):
  code, _, err = run_main(["--input", small_input, "--output_dir", str(tmp_path / "o"),
                           "--vocab_file", str(tmp_path / "v.json"),
                           "--merges_file", str(tmp_path / "m.txt"), "--log_level", "WARNING"],
                          capsys)
  assert code == 1
  assert "cannot load the tokenizer (--vocab_file=" in one_error_line(err)


def test_duplicates_with_nodeduplicate_fail_in_one_line_and_write_nothing(tmp_path, capsys):
  path = write_json(tmp_path / "in.json", [
      hotpot_record("a", "Q?", "Paris", PARAS), hotpot_record("a", "Q?", "Paris", PARAS)])
  out = tmp_path / "out"
  code, stdout, err = run_main(["--input", path, "--output_dir", str(out), "--nodeduplicate",
                                "--log_level", "WARNING"], capsys)
  assert code == 1 and stdout == ""
  # The worker's exception is not logged again with its traceback: one line.
  assert "Traceback" not in err
  assert one_error_line(err) == (f"python -m pipelines hotpotqa: error: 1 document ids occur more than once "
                  f"(e.g. 'a' in {path}#0, {path}#1); with --nodeduplicate ids must be unique: "
                  "drop the flag to keep the first occurrence of each id")
  assert list(out.rglob("*")) == []


def test_user_error_survives_the_runner_rewrapping_it():
  # Beam re-raises a worker's exception as type(e)(text + " [while running ...]").
  e = UserError("bad input")
  rewrapped = UserError(str(e) + " [while running 'X']")
  assert str(rewrapped).count(MARKER) == 1
  assert user_error_message(RuntimeError(f"Pipeline failed: {MARKER}bad input\nmore")) == \
      "bad input"
  assert user_error_message(ValueError("a bug")) is None


@pytest.mark.slow
def test_a_local_run_logs_inputs_progress_outputs_and_ends_with_the_json_summary(
    small_input, tmp_path):
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines", "hotpotqa", "--input", small_input,
       "--output_dir", str(out), "--seq_length", "64", "--overlap", "8",
       "--max_question_tokens", "16", "--segments_per_pack", "8",
       "--max_segments_per_document", "8"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  err = proc.stderr
  assert f"INFO reading 1 file(s), 0.0 MB: {small_input} (0.0 MB)" in err
  assert f"INFO writing records, documents/, dead_letter/, skipped/ and manifest.json to {out}" \
      in err
  assert f"INFO read: {small_input}: 3 records, 0 dead letters" in err
  assert f"INFO wrote {out}/records-00000-of-00001.tfrecord: 1 records" in err
  assert f"INFO done: 3 input, 3 written, 0 skipped, 0 rejected -> {out}" in err
  last = proc.stdout.strip().splitlines()[-1]
  summary = json.loads(last)
  assert summary["counts"] == {"input": 3, "written": 3, "skipped": 0, "rejected": 0}
  assert summary["output_dir"] == str(out)
  m = json.load(open(out / "manifest.json"))
  assert m["inputs"] == [{"path": small_input, "bytes": os.path.getsize(small_input)}]
  assert m["distributions"]["segments_per_document"]["count"] == 3


def test_logging_shows_our_lines_and_the_dataflow_job_url_only(capsys):
  runner.setup_logging("INFO")
  logging.getLogger("apache_beam.runners.dataflow.internal.apiclient").info(
      "Submitted job: %s", "2026-11-23_1")
  logging.getLogger("apache_beam.runners.portability.fn_api_runner").info("bundle noise")
  logging.getLogger("pipelines").info("read: x")
  logging.getLogger("apache_beam.runners.common").error(MARKER + "hidden: printed by main")
  err = capsys.readouterr().err
  assert "INFO Submitted job: 2026-11-23_1" in err and "INFO read: x" in err
  assert "bundle noise" not in err and "hidden" not in err
  runner.setup_logging("WARNING")
  logging.getLogger("pipelines").info("quiet")
  assert "quiet" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_local_run_collects_young_garbage_less_often_and_restores_the_thresholds(
    small_input, tmp_path, capsys, monkeypatch):
  """The job runs with the young threshold raised (seen from inside the pipeline's run) and
  the process' thresholds are back afterwards, also when the run fails; a caller's higher
  threshold is kept."""
  import gc  # pylint: disable=g-import-not-at-top
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  seen = []
  real_run = beam.Pipeline.run

  def run(p, *args, **kwargs):
    seen.append(gc.get_threshold())
    return real_run(p, *args, **kwargs)

  monkeypatch.setattr(beam.Pipeline, "run", run)
  before = gc.get_threshold()
  try:
    gc.set_threshold(700, 10, 10)
    assert run_main(["--input", small_input, "--output_dir", str(tmp_path / "o"),
                     "--log_level", "WARNING"], capsys)[0] == 0
    assert seen == [(runner.GC_YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), runner.fewer_gc_passes():
      assert gc.get_threshold() == (runner.GC_YOUNG_THRESHOLD, 10, 10)
      raise RuntimeError("a failed run")
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(10 * runner.GC_YOUNG_THRESHOLD, 5, 5)
    with runner.fewer_gc_passes():
      assert gc.get_threshold() == (10 * runner.GC_YOUNG_THRESHOLD, 5, 5)
  finally:
    gc.set_threshold(*before)


@pytest.mark.parametrize("beam_args, workers", [
    ([], 1), (["--direct_num_workers=4"], 1),  # in-memory: one thread runs every bundle
    (["--direct_running_mode=multi_threading", "--direct_num_workers=3"], 3),
    (["--direct_running_mode=multi_processing", "--direct_num_workers=1"], 1),
    (["--direct_running_mode=multi_processing", "--direct_num_workers=0"], os.cpu_count()),
])
def test_local_workers(beam_args, workers):
  assert runner.local_workers(beam_args) == workers


@pytest.mark.slow
def test_a_run_on_one_worker_reads_a_json_file_whole_and_several_workers_in_ranges(
    tmp_path, capsys):
  """The same file, big enough for ~1 KB ranges: read whole (no ``splits``) in the default
  in-memory mode, in ranges on two worker threads; the records are the same."""
  path = write_json(tmp_path / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(40)])
  assert os.path.getsize(path) > 6000
  outputs = {}
  for name, beam_args in (("one", []), ("two", ["--direct_running_mode=multi_threading",
                                                "--direct_num_workers=2"])):
    out = tmp_path / name
    assert run_main(["--input", path, "--output_dir", str(out), "--log_level", "WARNING",
                     "--json_split_mb", str(1000 / 2 ** 20), *beam_args], capsys)[0] == 0
    with open(out / "manifest.json", encoding="utf-8") as f:
      manifest = json.load(f)
    outputs[name] = (manifest["stages"]["read"].get("splits"),
                     sorted((p.name, p.read_bytes()) for p in out.glob("records-*")))
  assert outputs["one"][0] is None and outputs["two"][0] > 2
  assert outputs["one"][1] == outputs["two"][1] and outputs["one"][1]


def test_a_spacy_model_that_is_not_installed_is_one_line_before_any_work(tmp_path, capsys):
  (tmp_path / "a.txt").write_text("A book about Paris.\n" * 20)
  out = tmp_path / "out"
  code = runner.dataset_main("books", ["--input", str(tmp_path / "a.txt"), "--output_dir", str(out),
                                       "--ner", "spacy", "--spacy_model",
                                       "en_core_web_not_installed", "--log_level", "WARNING"])
  assert code == 1
  assert capsys.readouterr().err.splitlines() == [
      "python -m pipelines books: error: --spacy_model 'en_core_web_not_installed' is not "
      "installed: spaCy models are installed as Python packages (e.g. pip install "
      "en-core-web-sm), never downloaded at run time; use blank:<lang> for a blank pipeline"]
  assert not out.exists()
