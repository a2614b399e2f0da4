"""The job command line as a user meets it: strict flags, one-line errors, progress, summary.

Each case was a defect on the old absl-based CLI: a typo'd flag was ignored (the job ran with
the default), user errors were 18-120-line tracebacks, bad numbers failed inside the pipeline
(or silently wrote ``records-00000-of--0001``), and nothing was logged until the end.
"""

import json
import logging
import os
import subprocess
import sys

import pytest

from pipelines import cli, hotpotqa
from pipelines.errors import MARKER, UserError, user_error_message
from tests.pipelines.helpers import hotpot_record, write_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAS = [["Paris", ["Paris is the capital of France.", " It hosts the Louvre."]]]


@pytest.fixture
def small_input(tmp_path):
  return write_json(tmp_path / "in.json", [
      hotpot_record(f"q{i}", "Which city hosts the Louvre?", "Paris", PARAS) for i in range(3)])


pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


def run_main(argv, capsys):
  """(exit status, stdout, stderr) of ``hotpotqa.main(argv)``."""
  try:
    code = hotpotqa.main(argv)
  except SystemExit as e:
    code = e.code
  out, err = capsys.readouterr()
  return code, out, err


def one_error_line(err):
  lines = [l for l in err.splitlines() if l.strip()]
  assert len(lines) == 1, err
  assert lines[0].startswith("python -m pipelines.hotpotqa: error: "), err
  assert "Traceback" not in err
  return lines[0]


@pytest.mark.parametrize("flag, closest", [
    ("--seq_lenght", "--seq_length"),   # a domain flag
    ("--runer", "--runner"),            # a Beam flag
    ("--seq_len", "--seq_length"),      # abbreviations are not accepted either
    ("--nodedup", "--nodeduplicate"),
])
def test_unknown_flag_fails_before_any_work_naming_the_closest(flag, closest, small_input,
                                                                tmp_path, capsys):
  out = tmp_path / "out"
  code, stdout, err = run_main(["--input", small_input, "--output_dir", str(out), flag, "64"],
                               capsys)
  assert code == 2
  line = one_error_line(err)
  assert f"unknown flag {flag} " in line and f"did you mean {closest}?" in line
  assert stdout == "" and not out.exists()


def test_beam_options_pass_through(small_input, tmp_path, capsys):
  parser = cli.new_parser("p", "d", "e")
  args, beam_args = cli.parse(parser, [
      "--input", small_input, "--output_dir", str(tmp_path), "--direct_num_workers=2",
      "--direct_running_mode", "in_memory", "--runner", "DirectRunner", "--seq_length", "64"])
  assert args.seq_length == 64
  assert beam_args == ["--direct_num_workers=2", "--direct_running_mode", "in_memory",
                       "--runner", "DirectRunner"]


@pytest.mark.parametrize("extra, message", [
    (["--overlap", "-5"], "--overlap must be >= 0, got -5"),
    (["--num_shards", "-1"], "--num_shards must be an integer >= 0"),
    (["--segments_per_shard", "0"], "--segments_per_shard must be an integer >= 1, got 0"),
    (["--segments_per_pack", "0"], "--segments_per_pack must be an integer >= 1"),
    (["--batch_size", "0"], "--batch_size must be an integer >= 1"),
    (["--max_segments_per_document", "0"], "--max_segments_per_document must be >= 1"),
    (["--seq_length", "128", "--overlap", "100"], "must exceed --overlap=100"),
    (["--seq_length", "64k"], "argument --seq_length: invalid int value: '64k'"),
    (["--max_segments_per_document", "200"], "exceeds --segments_per_pack=128"),
    (["surplus"], "unexpected argument 'surplus'"),
    (["--deduplicate", "--nodeduplicate"], "not allowed with argument --deduplicate"),
])
def test_bad_values_are_usage_errors_before_any_work(extra, message, small_input, tmp_path,
                                                     capsys):
  out = tmp_path / "out"
  code, stdout, err = run_main(["--input", small_input, "--output_dir", str(out)] + extra,
                               capsys)
  assert code == 2
  assert message in one_error_line(err)
  assert stdout == "" and not out.exists()


def test_missing_required_flag(small_input, capsys):
  code, _, err = run_main(["--input", small_input], capsys)
  assert code == 2
  assert "the following arguments are required: --output_dir" in one_error_line(err)


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
  assert one_error_line(err) == (f"python -m pipelines.hotpotqa: error: 1 document ids occur more than once "
                  f"(e.g. 'a' in {path}#0, {path}#1); with --nodeduplicate ids must be unique: "
                  "drop the flag to keep the first occurrence of each id")
  assert list(out.rglob("*")) == []


def test_help_exits_0_with_a_real_example(capsys):
  code, stdout, _ = run_main(["--help"], capsys)
  assert code == 0
  assert "example:\n  python -m pipelines.hotpotqa \\" in stdout
  assert "--input hotpot_dev_distractor_v1.json --output_dir /tmp/hotpot_records" in stdout
  # The example's flags are real: the parser accepts them.
  example = hotpotqa.EXAMPLE.split("(on Dataflow")[0].replace("\\\n", " ").split()[3:]
  args, beam_args = cli.parse(cli.new_parser("p", "d", "e"), example)
  assert args.seq_length == 512 and "--direct_num_workers" in beam_args


def test_user_error_survives_the_runner_rewrapping_it():
  # Beam re-raises a worker's exception as type(e)(text + " [while running ...]").
  e = UserError("bad input")
  rewrapped = UserError(str(e) + " [while running 'X']")
  assert str(rewrapped).count(MARKER) == 1
  assert user_error_message(RuntimeError(f"Pipeline failed: {MARKER}bad input\nmore")) == \
      "bad input"
  assert user_error_message(ValueError("a bug")) is None


def test_a_local_run_logs_inputs_progress_outputs_and_ends_with_the_json_summary(
    small_input, tmp_path):
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.hotpotqa", "--input", small_input,
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


def test_a_typo_in_a_real_process_exits_2_with_one_line(small_input, tmp_path):
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.hotpotqa", "--input", small_input,
       "--output_dir", str(tmp_path / "out"), "--seq_lenght", "64"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2
  assert proc.stderr == ("python -m pipelines.hotpotqa: error: unknown flag --seq_lenght "
                         "(did you mean --seq_length?); see --help\n")
  assert proc.stdout == ""


def test_logging_shows_our_lines_and_the_dataflow_job_url_only(capsys):
  cli.setup_logging("INFO")
  logging.getLogger("apache_beam.runners.dataflow.internal.apiclient").info(
      "Submitted job: %s", "2026-11-23_1")
  logging.getLogger("apache_beam.runners.portability.fn_api_runner").info("bundle noise")
  logging.getLogger("pipelines").info("read: x")
  logging.getLogger("apache_beam.runners.common").error(MARKER + "hidden: printed by main")
  err = capsys.readouterr().err
  assert "INFO Submitted job: 2026-11-23_1" in err and "INFO read: x" in err
  assert "bundle noise" not in err and "hidden" not in err
  cli.setup_logging("WARNING")
  logging.getLogger("pipelines").info("quiet")
  assert "quiet" not in capsys.readouterr().err
