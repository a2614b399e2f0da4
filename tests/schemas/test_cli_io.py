"""The command line's two safety rules (``schemas/cli.py``): a flag that takes one value
given twice is refused, and an output that is, contains or is inside an input (symlinks
resolved, globs expanded) is refused, both in one line before any work.  Every command's
parser is checked against the same rules in tests/test_cli_contract.py."""

from __future__ import annotations

import os

import pytest

from schemas import cli


def _parser() -> cli.Parser:
  p = cli.Parser("tool", "A tool.", "python -m tool --input a --output_dir o")
  p.add_argument("--input", required=True, io=cli.READS_GLOB,
                 help="paths or globs, comma-separated")
  p.add_argument("--records_dir", action="append", default=None, io=cli.READS,
                 help="records dir (repeatable)")
  p.add_argument("--model_dir", default=None, io=cli.READS, help="model dir")
  p.add_argument("--output_dir", required=True, io=cli.WRITES, help="where to write")
  p.add_argument("--steps", type=int, default=1, help="steps")
  cli.bool_flag(p, "overwrite", False, "replace")
  return p


def _refusal(capsys, argv):
  with pytest.raises(SystemExit) as e:
    _parser().parse(argv)
  return e.value.code, capsys.readouterr().err.splitlines()


def test_a_single_valued_flag_given_twice_is_a_usage_error(capsys):
  assert _refusal(capsys, ["--input", "a", "--output_dir", "o", "--steps", "1", "--steps=2"]) == (
      2, ["python -m tool: error: --steps given more than once; it takes one value (the last "
          "would silently win)"])
  assert _refusal(capsys, ["--input", "a", "--input", "b", "--output_dir", "o"])[1] == [
      "python -m tool: error: --input given more than once; it takes one value (the last would "
      "silently win); give several as one comma-separated value"]


def test_flags_that_take_several_values_accept_them_all(tmp_path):
  args, _ = _parser().parse(["--input", "a,b", "--output_dir", str(tmp_path / "o"),
                             "--records_dir", "r1", "--records_dir", "r2", "--overwrite",
                             "--overwrite"])
  assert args.records_dir == ["r1", "r2"] and args.input == "a,b" and args.overwrite


@pytest.mark.parametrize("output, relation", [
    ("{d}/in", "is --input {d}/in"),
    ("{d}/in/sub", "is inside --input {d}/in"),
    ("{d}", "contains --input {d}/in"),
])
def test_an_output_over_an_input_is_refused(tmp_path, capsys, output, relation):
  d = str(tmp_path)
  code, err = _refusal(capsys, ["--input", f"{d}/in", "--output_dir", output.format(d=d)])
  assert code == 1
  assert err == [f"python -m tool: error: --output_dir {output.format(d=d)} "
                 f"{relation.format(d=d)}, which this command reads; write the output "
                 "somewhere apart from the inputs"]


def test_symlinks_are_resolved_and_globs_expanded(tmp_path, capsys):
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "x.json").write_text("[]")
  (tmp_path / "model").mkdir()
  os.symlink(tmp_path / "model", tmp_path / "link")
  code, err = _refusal(capsys, ["--input", str(tmp_path / "elsewhere"), "--model_dir",
                                str(tmp_path / "link"), "--output_dir",
                                str(tmp_path / "model")])
  assert code == 1 and f"--output_dir {tmp_path}/model is --model_dir {tmp_path}/link (both " \
      f"{os.path.realpath(tmp_path / 'model')})" in err[0]
  code, err = _refusal(capsys, ["--input", f"{tmp_path}/nothing,{tmp_path}/data/*.json",
                                "--output_dir", str(tmp_path / "data")])
  assert code == 1 and f"contains --input {tmp_path}/data/x.json" in err[0]
  code, err = _refusal(capsys, ["--input", "a", "--records_dir", "r1", "--records_dir",
                                str(tmp_path / "r2"), "--output_dir", str(tmp_path / "r2/o")])
  assert code == 1 and f"is inside --records_dir {tmp_path}/r2" in err[0]


def test_outputs_apart_from_inputs_pass(tmp_path):
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "x.json").write_text("[]")
  # Beside the inputs, a sibling with a common prefix, a glob matching nothing there.
  for out in (tmp_path / "out", tmp_path / "data2", tmp_path / "data" / "out"):
    _parser().parse(["--input", f"{tmp_path}/data/x.json", "--output_dir", str(out)])
  _parser().parse(["--input", f"{tmp_path}/data/*.csv", "--output_dir", str(tmp_path / "data")])


def test_remote_paths_are_normalised():
  assert cli.overlap([("--output_dir", "gs://b/runs/../data/out")],
                     [("--input", "gs://b/data")]) == (
      "--output_dir gs://b/runs/../data/out is inside --input gs://b/data, which this command "
      "reads; write the output somewhere apart from the inputs")
  assert cli.overlap([("--output_dir", "gs://b/data2")], [("--input", "gs://b/data")]) is None
  assert cli.overlap([("--output_dir", "gs://b/data")], [("--input", "/b/data")]) is None


def test_io_must_be_a_known_role():
  with pytest.raises(ValueError, match="io='read'"):
    _parser().add_argument("--x", io="read", help="x")
