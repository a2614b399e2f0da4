"""Every ``python -m pipelines <dataset>`` and ``python -m model.<command>`` keeps one command-line
contract (``schemas/cli.py``): ``--help`` exits 0 with ``usage: python -m <module>``, help for
every flag and an example whose flags parse; an unknown flag is one stderr line naming the
closest real flag (exit 2) -- also when a required flag is missing; a renamed flag names its
new spelling; no TensorFlow banner and no traceback anywhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent import futures

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A dataset's job is the generic ``python -m pipelines <dataset>`` (its parser's module:
# ``pipelines <dataset>``).
PIPELINES = ["pipelines hotpotqa", "pipelines triviaqa", "pipelines narrativeqa",
             "pipelines books", "pipelines wikipedia", "pipelines.inspector"]
MODEL = ["model.train", "model.finetune", "model.pretrain", "model.predict", "model.evaluate",
         "model.roberta", "model.export"]
COMMANDS = PIPELINES + MODEL


def _env():
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # what a user has: nothing set
  env.pop("READTWICE_TF_BANNERS", None)
  return env


def _run(command, *args):
  """``python -m <command> ARGS`` (``command``: a module, or ``pipelines <dataset>``)."""
  return subprocess.run([sys.executable, "-m", *command.split(), *args], cwd=ROOT, env=_env(),
                        text=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def helps():
  with futures.ThreadPoolExecutor(2) as pool:
    return dict(zip(COMMANDS, pool.map(lambda m: _run(m, "--help"), COMMANDS)))


@pytest.mark.slow
@pytest.mark.parametrize("module", COMMANDS)
def test_help_exits_0_with_usage_example_and_no_banner(helps, module):
  proc = helps[module]
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr == ""  # no TF / absl banners, no warnings
  assert proc.stdout.startswith(f"usage: python -m {module} ")
  assert "\nexample:\n  python -m " + module in proc.stdout


@pytest.mark.slow
def test_every_flag_in_the_docs_commands_is_in_the_commands_help(helps):
  """The flags of every command in the README's and docs/' bash blocks, checked against that
  command's real ``--help`` (the ``helps`` above, and its own for a documented command that is
  not among them); pipelines also take Beam's pipeline options."""
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  from tests.test_docs import documented_commands  # pylint: disable=g-import-not-at-top
  beam = set(flags._flag_names(flags._beam_parser()))  # pylint: disable=protected-access
  problems = []
  for module, uses in sorted(documented_commands().items()):
    proc = helps[module] if module in helps else _run(module, "--help")
    assert proc.returncode == 0, f"{module} --help: {proc.stderr[-2000:]}"
    known = set(re.findall(r"--[a-z0-9_]+", proc.stdout))
    known |= {f"--no{f[2:]}" for f in known}
    if module.startswith("pipelines"):
      known |= beam
    for page, cmd in uses:
      problems += [f"{page}: {module} {flag}" for flag in re.findall(r"(?<![\w-])--[a-z0-9_]+",
                                                                       cmd)
                   if flag not in known]
  assert not problems, problems


# The example of every command, parsed by the command's own main(): Parser.parse(_args) is
# wrapped to stop right after a successful parse (pipelines: Beam's options checked too).
# Shared by the scripts below: every Parser a command builds is recorded; parser_of(name)
# imports the command's module and returns its main (for ``pipelines <dataset>``: the generic
# job's, with the dataset's name first) and the parser it builds.
_CAPTURE = r"""
import contextlib, importlib, io, json, re, sys
from schemas import cli

parsers = []
original_init = cli.Parser.__init__

def init(self, *a, **k):
  original_init(self, *a, **k)
  parsers.append(self)

cli.Parser.__init__ = init

def parser_of(name):
  words = name.split()
  if len(words) == 1:
    main = importlib.import_module(name).main
  else:  # python -m pipelines <dataset>
    generic = importlib.import_module(words[0] + ".__main__").main
    main = lambda argv: generic(words[1:] + list(argv))
  del parsers[:]
  with contextlib.redirect_stderr(io.StringIO()):
    try:
      main(["--nonexistent_flag_for_the_test"])
    except SystemExit:
      pass
  return main, [p for p in parsers if p.module == name][-1]
"""

_PARSE_EXAMPLES = _CAPTURE + r"""
class Parsed(Exception):
  pass

original_parse, original_parse_args = cli.Parser.parse, cli.Parser.parse_args

def parse(self, argv=None):
  args, rest = original_parse(self, argv)
  if self.module.startswith("pipelines "):  # a dataset's job
    from pipelines import flags as pflags
    pflags.split_beam_args(self, rest)
  raise Parsed(vars(args))

def parse_args(self, args=None, namespace=None):
  raise Parsed(vars(original_parse_args(self, args, namespace)))

cli.Parser.parse, cli.Parser.parse_args = parse, parse_args
out = {}
for name in sys.argv[1:]:
  main, parser = parser_of(name)  # a bad flag: refused before the wrappers raise Parsed
  argv = parser.example_argv()
  try:
    main(argv)
    out[name] = {"error": "main() returned without parsing"}
  except Parsed as e:
    out[name] = {"argv": argv, "flags": {k: v for k, v in e.args[0].items()
                                          if isinstance(v, (str, int, float, list, type(None)))}}
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("group", [PIPELINES, MODEL], ids=["pipelines", "model"])
def test_help_example_parses(group):
  proc = subprocess.run([sys.executable, "-c", _PARSE_EXAMPLES, *group], cwd=ROOT, env=_env(),
                        text=True, capture_output=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  parsed = json.loads(proc.stdout.strip().splitlines()[-1])
  for module in group:
    assert "argv" in parsed[module], (module, parsed[module])
    assert len(parsed[module]["argv"]) >= 2, module


@pytest.mark.slow
@pytest.mark.parametrize("module", [m for m in PIPELINES if m != "pipelines.inspector"])
def test_every_job_has_estimate(helps, module):
  """``--estimate`` (what a run would cost, nothing run or written) is a flag of every job."""
  usage = helps[module].stdout
  for flag in ("--estimate", "--price_vcpu_hour", "--price_memory_gb_hour",
               "--price_disk_gb_hour"):
    assert flag in usage, (module, flag)


def _typo(flag: str) -> str:
  """``--learning_rate`` -> ``--learnnig_rate``: two letters swapped, not an abbreviation."""
  name = flag[2:]
  i = len(name) // 2
  return "--" + name[:i - 1] + name[i] + name[i - 1] + name[i + 1:]


TYPOS = {  # module -> a flag it has, misspelt by _typo
    "pipelines hotpotqa": "--output_dir", "pipelines triviaqa": "--evidence_dir",
    "pipelines narrativeqa": "--seq_length", "pipelines books": "--segments_per_pack",
    "pipelines wikipedia": "--max_segments_per_document", "pipelines.inspector": "--records_dir",
    "model.train": "--learning_rate", "model.finetune": "--learning_rate",
    "model.pretrain": "--mention_mask_rate", "model.predict": "--records_dir",
    "model.evaluate": "--predictions", "model.roberta": "--model_dir",
    "model.export": "--max_answer_tokens",
}


@pytest.mark.slow
@pytest.mark.parametrize("module", COMMANDS)
def test_unknown_flag_is_one_line_with_the_closest_flag(module):
  flag = TYPOS[module]
  typo = _typo(flag)
  assert typo != flag
  # No other flag given: the typo is reported, not the missing required flags.
  proc = _run(module, typo, "1")
  assert proc.returncode == 2, proc.stderr
  assert proc.stdout == ""
  assert proc.stderr.splitlines() == [
      f"python -m {module}: error: unknown flag {typo} (did you mean {flag}?); see --help"]


@pytest.mark.parametrize("module, old, new", [
    ("model.finetune", "--train_dir", "--records_dir"),
    ("model.finetune", "--dev_gold", "--gold"),
    ("model.train", "--warmup_steps", "--warmup_fraction"),
    ("model.pretrain", "--no_shuffle", "--noshuffle"),
    ("model.pretrain", "--eval_records_dir", "--dev_records_dir"),
    ("model.evaluate", "--no_meteor", "--nometeor"),
    ("pipelines.inspector", "--records", "--records_dir"),
])
@pytest.mark.slow
def test_renamed_flag_names_the_new_one(module, old, new):
  proc = _run(module, old, "x")
  assert proc.returncode == 2
  assert proc.stderr.splitlines() == [
      f"python -m {module}: error: {old} was renamed {new}; see --help"]


def test_abbreviations_are_refused():
  proc = _run("model.evaluate", "--task", "hotpotqa", "--pred", "p.json", "--gold", "g.json")
  assert proc.returncode == 2
  assert proc.stderr.splitlines() == [
      "python -m model.evaluate: error: unknown flag --pred (did you mean --predictions?); "
      "see --help"]


# Each command's parser, captured as main() builds it: for every flag, whether it takes one
# value and what it does with a path (schemas.cli READS / READS_GLOB / WRITES); then the
# example with its first single-valued flag given twice, and with its first output made one of
# its inputs (both must be refused by the parser: exit 2 / exit 1, one line).
_IO = _CAPTURE + r"""
def attempt(parser, argv):
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    try:
      parser.parse(argv)
      return [0, err.getvalue()]
    except SystemExit as e:
      return [e.code, err.getvalue()]

out = {}
for name in sys.argv[1:]:
  _, parser = parser_of(name)
  argv = parser.example_argv()
  flags = {a.option_strings[0]: {"io": getattr(a, "io", None), "single": cli._single_valued(a)}
           for a in parser._actions if a.option_strings and a.option_strings[0].startswith("--")}
  pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1)
           if argv[i] in flags and not argv[i + 1].startswith("--")]
  single = [(f, v) for f, v in pairs if flags[f]["single"]]
  repeated = attempt(parser, argv + [single[0][0], single[0][1] + "x"]) if single else None
  ins = [(f, v) for f, v in pairs if flags[f]["io"] in (cli.READS, cli.READS_GLOB)]
  outs = [f for f, d in flags.items() if d["io"] == cli.WRITES]
  crossed = None
  if ins and outs:  # the first input made a literal path, and the first output set to it
    in_flag, value = ins[0]
    literal = re.sub(r"[*?\[\]]", "x", value.split(",")[0])
    crossed_argv = list(argv)
    crossed_argv[argv.index(in_flag) + 1] = literal
    if outs[0] in argv:
      crossed_argv[argv.index(outs[0]) + 1] = literal
    else:
      crossed_argv += [outs[0], literal]
    crossed = attempt(parser, crossed_argv)
    ins = [(in_flag, literal)]
  out[name] = {"flags": flags, "repeated": repeated, "single": single[:1], "crossed": crossed,
               "in": ins[:1], "out": outs[:1]}
print(json.dumps(out))
"""

# Flags that name a path but are neither an input nor an output of the command.
_NOT_IO = {"--nl_cache_dir": "a cache shared by runs, read and written",
           "--dry_run_file": "a file name inside --output_dir",
           "--allow_read_root": "a folder data may name files under, not read as such"}
_PATHLIKE = ("_dir", "_file", "_root", "--input", "--output", "--gold", "--predictions",
             "--html", "--checkpoint", "--init_checkpoint", "--init_roberta", "--model_config",
             "--index", "--documents", "--summaries")


@pytest.fixture(scope="module")
def io_contract():
  proc = subprocess.run([sys.executable, "-c", _IO, *COMMANDS], cwd=ROOT, env=_env(),
                        text=True, capture_output=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("module", COMMANDS)
def test_every_path_flag_says_whether_it_is_read_or_written(io_contract, module):
  flags = io_contract[module]["flags"]
  undeclared = [f for f, d in flags.items()
                if f.endswith(_PATHLIKE) and d["io"] is None and f not in _NOT_IO]
  assert not undeclared, (module, undeclared)
  assert any(d["io"] == "writes" for d in flags.values()) or module == "pipelines.inspector"


@pytest.mark.slow
@pytest.mark.parametrize("module", COMMANDS)
def test_a_repeated_flag_and_an_output_over_an_input_are_refused(io_contract, module):
  got = io_contract[module]
  flag = got["single"][0][0]
  code, err = got["repeated"]
  assert code == 2
  assert err.splitlines() == [f"python -m {module}: error: {flag} given more than once; it "
                              "takes one value (the last would silently win)"
                              + ("; give several as one comma-separated value"
                                 if flag == "--input" else "")]
  out_flag, (in_flag, source) = got["out"][0], got["in"][0]
  code, err = got["crossed"]
  assert code == 1
  assert err.splitlines() == [f"python -m {module}: error: {out_flag} {source} is {in_flag} "
                              f"{source}, which this command reads; write the output somewhere "
                              "apart from the inputs"], err
