"""Offline checks of the trainer deployment (deploy/trainer/, docs/tpu.md "Training on Cloud TPU
and Vertex AI"): every Vertex AI spec is a CustomJob the drivers accept, the fine-tuning sweep is
the paper's, every placeholder is documented, and the scripts are valid bash.

A spec's ``args`` must parse with its driver's own ``build_parser()`` (and pass
``model.flags.check_flags``) using only exact flag names: argparse would take
an unambiguous prefix such as ``--learning_r``, a job should not.  While ``model.pretrain`` or
``model.finetune`` is missing or lacks ``build_parser`` those checks skip, saying so.  Nothing
here talks to Google Cloud.
"""

import argparse
import contextlib
import glob
import importlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
from typing import Dict, List, Optional, Tuple

import pytest
import yaml
from tests import REPO_ROOT

REPO = str(REPO_ROOT)
DEPLOY = os.path.join(REPO, "deploy", "trainer")
SPEC_DIR = os.path.join(DEPLOY, "vertex")
SPECS = sorted(glob.glob(os.path.join(SPEC_DIR, "*.yaml")))
SCRIPTS = ("install.sh", "submit_vertex.sh", "tpu_vm.sh")
DOC = os.path.join("docs", "tpu.md")  # the page the deployment is documented in
SECTION = "# Training on Cloud TPU and Vertex AI"

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Dummy values for every placeholder the specs and scripts use.
DUMMY = {"PROJECT": "test-project", "REGION": "us-central1", "ZONE": "europe-west4-a",
         "TPU_NAME": "test-tpu", "BUCKET": "test-bucket",
         "IMAGE": "us-central1-docker.pkg.dev/test-project/readtwice/trainer"}
# Placeholders the scripts read from the environment (the specs' own are found in them).
SCRIPT_PLACEHOLDERS = {"PROJECT", "REGION", "ZONE", "TPU_NAME", "BUCKET", "IMAGE"}

DRIVERS = ("model.pretrain", "model.finetune")
TASKS = {"hotpotqa", "triviaqa", "narrativeqa"}
SWEEP = {5e-6, 1e-5, 3e-5}  # the paper's fine-tuning learning rates
EXPECTED_SPECS = ({"pretrain_tpu_v3.yaml", "pretrain_tpu_v5e.yaml"}
                  | {f"finetune_{t}_lr{r}.yaml" for t in TASKS for r in ("5e-6", "1e-5", "3e-5")})

# Machine configurations Vertex AI documents for custom training (configure-compute): TPU v2/v3
# VMs as machineType cloud-tpu + TPU_V2/TPU_V3 with 8 cores (32+ for pods), v5e as
# ct5lp-hightpu-{1,4,8}t with a topology; GPUs as (machine type, accelerator, count).
TPU_V5E_TOPOLOGIES = {"ct5lp-hightpu-1t": {"1x1"}, "ct5lp-hightpu-4t": {"2x2"},
                      "ct5lp-hightpu-8t": {"2x4"}}
GPU_MACHINES = ({(f"a2-highgpu-{n}g", "NVIDIA_TESLA_A100", n) for n in (1, 2, 4, 8)}
                | {(f"a2-ultragpu-{n}g", "NVIDIA_A100_80GB", n) for n in (1, 2, 4, 8)})


def fill(text: str, values: Dict[str, str] = DUMMY) -> str:
  """``text`` with every ``${NAME}`` replaced from ``values``; an unknown name is an error."""
  def one(m):
    if m.group(1) not in values:
      raise KeyError(f"placeholder ${{{m.group(1)}}} has no value (document it and add it to "
                     "DUMMY)")
    return values[m.group(1)]
  return PLACEHOLDER.sub(one, text)


def read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def load_spec(path: str) -> Dict:
  return yaml.safe_load(fill(read(path)))


def pool(spec: Dict) -> Dict:
  """The one worker pool of a spec (Vertex AI: a TPU VM job has exactly one, so do ours)."""
  pools = spec["workerPoolSpecs"]
  assert isinstance(pools, list) and len(pools) == 1, pools
  assert pools[0]["replicaCount"] == 1
  return pools[0]


def container(spec: Dict) -> Tuple[str, List[str]]:
  """``(module, args)`` of the spec's ``python -m module args...`` container command."""
  c = pool(spec)["containerSpec"]
  command = c["command"]
  assert command[:2] == ["python", "-m"] and len(command) == 3, command
  args = c["args"]
  assert all(isinstance(a, str) for a in args), args
  return command[2], args


def flag_values(args: List[str]) -> Dict[str, List[Optional[str]]]:
  """``--name=value`` / ``--name value`` / ``--switch`` tokens -> {name: [values]}."""
  out: Dict[str, List[Optional[str]]] = {}
  i = 0
  while i < len(args):
    name, eq, value = args[i].partition("=")
    assert name.startswith("--"), f"not a flag: {args[i]!r}"
    if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
      value, i = args[i + 1], i + 1
    out.setdefault(name[2:], []).append(value if (eq or value) else None)
    i += 1
  return out


def one(flags: Dict[str, List[Optional[str]]], name: str) -> Optional[str]:
  assert len(flags.get(name, [])) == 1, f"--{name} given {len(flags.get(name, []))} times"
  return flags[name][0]


def flag_errors(parser: argparse.ArgumentParser, args: List[str],
                checks=None) -> List[str]:
  """What is wrong with ``args`` for ``parser``: flags that are not exactly one of its options,
  and the error argparse (then ``checks(parser, namespace)``) reports; [] when none."""
  known = {s for action in parser._actions for s in action.option_strings}
  errors = [f"not an exact flag of {parser.prog}: {a.partition('=')[0]}"
            for a in args if a.startswith("-") and a.partition("=")[0] not in known]
  stderr = io.StringIO()
  try:
    with contextlib.redirect_stderr(stderr):
      namespace = parser.parse_args(args)
      if checks is not None:
        checks(parser, namespace)
  except SystemExit as e:
    if e.code:
      errors.append((stderr.getvalue().strip().splitlines() or [f"exit {e.code}"])[-1])
  return errors


def driver(module: str) -> Tuple[argparse.ArgumentParser, Optional[object]]:
  """``(build_parser(), model.flags.check_flags)``; skips while the driver is absent."""
  if importlib.util.find_spec(module) is None:
    pytest.skip(f"{module} does not exist yet: its spec is written against the CLI contract")
  mod = importlib.import_module(module)
  if not callable(getattr(mod, "build_parser", None)):
    pytest.skip(f"{module} has no build_parser() yet: cannot check the spec's args against it")
  from model import flags  # pylint: disable=g-import-not-at-top
  return mod.build_parser(), flags.check_flags


def readme_section() -> str:
  """SECTION of DOC, up to the next heading of its level (its subsections included)."""
  text = read(os.path.join(REPO, DOC))
  assert f"\n{SECTION}\n" in f"\n{text}", f"{DOC} lacks the section {SECTION!r}"
  rest = text[text.index(SECTION) + len(SECTION):]
  end = re.search(r"^# ", rest, flags=re.M)
  return rest[:end.start()] if end else rest


def dockerfile_stages() -> set:
  return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", read(os.path.join(DEPLOY, "Dockerfile")),
                        flags=re.M | re.I))


def spec_ids():
  return [os.path.basename(p) for p in SPECS]


def test_the_specs_are_the_pretraining_runs_and_the_sweep():
  assert {os.path.basename(p) for p in SPECS} == EXPECTED_SPECS


@pytest.mark.parametrize("path", SPECS, ids=spec_ids())
def test_spec_is_a_documented_machine_running_a_driver(path):
  spec = load_spec(path)
  assert set(spec) == {"workerPoolSpecs"}, "unexpected top-level CustomJobSpec fields"
  p = pool(spec)
  machine = p["machineSpec"]
  module, args = container(spec)
  assert module in DRIVERS
  flags = flag_values(args)
  image, _, tag = p["containerSpec"]["imageUri"].rpartition(":")
  assert image == DUMMY["IMAGE"] and tag in dockerfile_stages(), p["containerSpec"]["imageUri"]
  if tag == "tpu":
    if machine["machineType"] == "cloud-tpu":
      assert set(machine) == {"machineType", "acceleratorType", "acceleratorCount"}
      assert machine["acceleratorType"] in ("TPU_V2", "TPU_V3")
      count = machine["acceleratorCount"]
      assert count == 8 or (count >= 32 and count % 32 == 0), count
    else:
      assert set(machine) == {"machineType", "tpuTopology"}
      assert machine["tpuTopology"] in TPU_V5E_TOPOLOGIES[machine["machineType"]]
    assert one(flags, "strategy") == "tpu" and one(flags, "tpu") == "local"
  else:
    assert tag == "gpu"
    assert (machine["machineType"], machine["acceleratorType"],
            machine["acceleratorCount"]) in GPU_MACHINES, machine
    assert one(flags, "strategy") == "mirrored" and "tpu" not in flags
  model_dir = one(flags, "model_dir")
  assert model_dir.startswith(f"gs://{DUMMY['BUCKET']}/readtwice/"), model_dir
  for name in ("records_dir", "dev_records_dir", "gold", "init_checkpoint",
               "init_roberta"):
    for value in flags.get(name, []):
      assert value.startswith("gs://"), f"--{name}={value}: jobs read from Cloud Storage"


@pytest.mark.parametrize("path", SPECS, ids=spec_ids())
def test_spec_command_module_exists(path):
  module, _ = container(load_spec(path))
  if importlib.util.find_spec(module) is None:
    if module in DRIVERS:
      pytest.skip(f"{module} does not exist yet")
    pytest.fail(f"{os.path.basename(path)} runs python -m {module}, which does not exist")


@pytest.mark.parametrize("path", SPECS, ids=spec_ids())
def test_spec_args_parse_with_the_drivers_parser(path):
  module, args = container(load_spec(path))
  parser, checks = driver(module)
  assert flag_errors(parser, args, checks) == []
  namespace = parser.parse_args(args)
  assert namespace.model_dir == one(flag_values(args), "model_dir")


def sweep_problems(runs: List[Dict[str, List[Optional[str]]]]) -> List[str]:
  """What keeps the fine-tuning runs (their flags) from being the paper's sweep: for each task,
  learning rates exactly SWEEP, 6 epochs, 10% warm-up, early stopping on a dev set, runs that
  differ only in the learning rate, and a --model_dir of their own."""
  problems = []
  by_task: Dict[str, Dict[float, Dict]] = {}
  for flags in runs:
    rate = float(one(flags, "learning_rate"))
    task = by_task.setdefault(one(flags, "task"), {})
    if rate in task:
      problems.append(f"{one(flags, 'task')}: learning rate {rate} twice")
    task[rate] = flags
  if set(by_task) != TASKS:
    problems.append(f"tasks {sorted(by_task)}, expected {sorted(TASKS)}")
  for task, by_rate in sorted(by_task.items()):
    if set(by_rate) != SWEEP:
      problems.append(f"{task}: learning rates {sorted(by_rate)}, expected {sorted(SWEEP)}")
    for rate, flags in by_rate.items():
      if (float(one(flags, "epochs")) != 6 or float(one(flags, "warmup_fraction")) != 0.1
          or int(one(flags, "patience")) < 1 or not flags.get("dev_records_dir")
          or not flags.get("gold")):
        problems.append(f"{task} at {rate}: not 6 epochs, 10% warm-up, early stopping on dev")
    rest = [{k: v for k, v in f.items() if k not in ("learning_rate", "model_dir")}
            for f in by_rate.values()]
    if any(r != rest[0] for r in rest):
      problems.append(f"{task}: the runs differ in more than the learning rate")
  model_dirs = [one(f, "model_dir") for f in runs]
  if len(set(model_dirs)) != len(model_dirs):
    problems.append("two runs share a --model_dir")
  return problems


def finetune_runs() -> List[Dict[str, List[Optional[str]]]]:
  runs = []
  for path in SPECS:
    module, args = container(load_spec(path))
    if module == "model.finetune":
      runs.append(flag_values(args))
  return runs


def test_the_sweep_is_the_papers_for_every_task():
  runs = finetune_runs()
  assert len(runs) == len(TASKS) * len(SWEEP)
  assert sweep_problems(runs) == []


def test_every_placeholder_is_documented_in_the_readme_section():
  section = readme_section()
  used = set(SCRIPT_PLACEHOLDERS)
  for path in SPECS:
    used |= set(PLACEHOLDER.findall(read(path)))
  assert used <= set(DUMMY), sorted(used - set(DUMMY))
  missing = sorted(name for name in used if "${" + name + "}" not in section)
  assert not missing, f"{DOC} lacks {missing}"
  for script in SCRIPTS + ("Dockerfile",):
    assert f"deploy/trainer/{script}" in section or script in section, script


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_valid_bash(script):
  proc = subprocess.run(["bash", "-n", os.path.join(DEPLOY, script)], capture_output=True,
                        text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr


def test_tpu_vm_pretraining_is_the_vertex_pretraining_run():
  proc = subprocess.run(["bash", os.path.join(DEPLOY, "tpu_vm.sh"), "pretrain-args"],
                        capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, BUCKET=DUMMY["BUCKET"]))
  assert proc.returncode == 0, proc.stderr
  args = proc.stdout.split()
  assert "--strategy=tpu" in args and "--tpu=local" in args
  module, spec_args = container(load_spec(os.path.join(SPEC_DIR, "pretrain_tpu_v3.yaml")))
  assert args == spec_args
  parser, checks = driver(module)
  assert flag_errors(parser, args, checks) == []


def test_tpu_vm_script_names_the_tpu_vm_commands():
  text = read(os.path.join(DEPLOY, "tpu_vm.sh"))
  for command in ("gcloud compute tpus tpu-vm create", "gcloud compute tpus tpu-vm scp",
                  "gcloud compute tpus tpu-vm ssh", "gcloud compute tpus tpu-vm delete",
                  "--accelerator-type=", "--version=", "install.sh tpu"):
    assert command in text, command


def test_submit_fills_exactly_the_placeholders(tmp_path):
  if shutil.which("envsubst") is None:
    pytest.skip("envsubst (gettext-base) is not installed")
  script = os.path.join(DEPLOY, "submit_vertex.sh")
  env = dict(os.environ, **DUMMY)
  proc = subprocess.run(["bash", script, "--dry_run"] + SPECS, capture_output=True, text=True,
                        timeout=60, env=env)
  assert proc.returncode == 0, proc.stderr
  docs = re.split(r"^# --- (\S+)\n", proc.stdout, flags=re.M)[1:]
  filled = dict(zip(docs[0::2], docs[1::2]))
  assert sorted(filled) == sorted(os.path.basename(p) for p in SPECS)
  for path in SPECS:
    assert filled[os.path.basename(path)] == fill(read(path))
  # An unset placeholder stops the batch before anything is submitted.
  env.pop("BUCKET")
  proc = subprocess.run(["bash", script, "--dry_run"] + SPECS, capture_output=True, text=True,
                        timeout=60, env=env)
  assert proc.returncode != 0 and "needs BUCKET" in proc.stderr and not proc.stdout


def test_the_checks_catch_bad_specs():
  """The checks above can fail: an unknown flag, a prefix argparse would accept, a bad value,
  an undocumented placeholder and a wrong sweep are all caught."""
  p = argparse.ArgumentParser(prog="fake")
  p.add_argument("--learning_rate", type=float)
  p.add_argument("--steps", type=int)
  assert flag_errors(p, ["--learning_rate=1e-5", "--steps", "3"]) == []
  assert flag_errors(p, ["--no_such_flag=1"])
  assert flag_errors(p, ["--learning_r=1e-5"])  # argparse alone accepts the prefix
  assert flag_errors(p, ["--steps=three"])
  with pytest.raises(KeyError):
    fill("imageUri: ${UNDOCUMENTED}:gpu")
  runs = finetune_runs()
  assert sweep_problems(runs[1:])  # a rate missing
  changed = dict(runs[0], learning_rate=["1e-4"])
  assert sweep_problems([changed] + runs[1:])  # a rate outside the sweep
  changed = dict(runs[0], epochs=["3"])
  assert sweep_problems([changed] + runs[1:])
  changed = dict(runs[0], model_dir=runs[1]["model_dir"])
  assert sweep_problems([changed] + runs[1:])


def test_an_unknown_flag_in_a_real_spec_fails_the_drivers_parser():
  module, args = container(load_spec(os.path.join(SPEC_DIR, "finetune_hotpotqa_lr3e-5.yaml")))
  parser, checks = driver(module)
  assert flag_errors(parser, args + ["--no_such_flag=1"], checks)
  assert flag_errors(parser, args + ["--learning_r=1e-5"], checks)
  assert flag_errors(parser, [a for a in args if not a.startswith("--task=")], checks)
  if checks is not None:  # --tpu without --strategy tpu
    assert flag_errors(parser, args + ["--tpu=local"], checks)


def test_install_script_finds_the_pinned_tensorflow():
  pins = read(os.path.join(REPO, "requirements.txt"))
  assert re.search(r"^tensorflow-cpu==[0-9.]+", pins, flags=re.M), "install.sh gpu needs it"
  text = read(os.path.join(DEPLOY, "install.sh"))
  assert 'tensorflow[and-cuda]==$tf_version' in text and "tensorflow-tpu==" in text
