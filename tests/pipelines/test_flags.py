"""The job command line's flags as a user meets them (:mod:`pipelines.flags`): strict flags,
Beam options passed through, usage errors in one line before any work.

Each case was a defect on the old absl-based CLI: a typo'd flag was ignored (the job ran with
the default) and bad numbers failed inside the pipeline (or silently wrote
``records-00000-of--0001``).
"""

import os
import subprocess
import sys

import pytest

from pipelines import datasets, flags
from tests.pipelines.helpers import one_error_line, run_main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


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
  parser = flags.new_parser("p", "d", "e")
  args, beam_args = flags.parse(parser, [
      "--input", small_input, "--output_dir", str(tmp_path / "out"), "--direct_num_workers=2",
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
    (["--json_split_mb", "-1"], "--json_split_mb must be a number of MiB >= 0, got -1.0"),
    (["--json_split_mb", "nan"], "--json_split_mb must be a number of MiB >= 0, got nan"),
    (["--json_split_mb", "4M"], "argument --json_split_mb: invalid float value: '4M'"),
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


def test_help_exits_0_with_a_real_example(capsys):
  code, stdout, _ = run_main(["--help"], capsys)
  assert code == 0
  assert "example:\n  python -m pipelines hotpotqa \\" in stdout
  assert "--input hotpot_dev_distractor_v1.json --output_dir /tmp/hotpot_records" in stdout
  # The example's flags are real: the parser accepts them.
  example = datasets.get("hotpotqa").example.split("(on Dataflow")[0]
  example = example.replace("\\\n", " ").split()[4:]
  args, beam_args = flags.parse(flags.new_parser("p", "d", "e"), example)
  assert args.seq_length == 512 and "--direct_num_workers" in beam_args


@pytest.mark.slow
def test_a_typo_in_a_real_process_exits_2_with_one_line(small_input, tmp_path):
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines", "hotpotqa", "--input", small_input,
       "--output_dir", str(tmp_path / "out"), "--seq_lenght", "64"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2
  assert proc.stderr == ("python -m pipelines hotpotqa: error: unknown flag --seq_lenght "
                         "(did you mean --seq_length?); see --help\n")
  assert proc.stdout == ""
