"""Offline checks of the Dataflow deployment (deploy/dataflow/, docs/dataflow.md "Running the
pipelines on Dataflow"); nothing here talks to Google Cloud or builds an image.

* Each Flex Template's metadata (``make_templates.py --out_dir DIR`` writes ``DIR/<job>.json``
  at build time for every job of ``pipelines.JOBS``; nothing is committed) has exactly the flags
  its pipeline defines (read from the job's ``--help`` and its real parser), typed, required and
  defaulted as the flags are.
* Each pipeline's job graph builds for the DataflowRunner without submitting: the real
  ``python -m pipelines <job>`` path and the Flex Template launcher's path, with Beam's
  ``dry_run`` test option (the runner translates the graph and stops before staging or
  submitting), on tiny local inputs.  The rendered Dataflow job environment carries the custom
  container, machine type, autoscaling and resource hints.
* The Dockerfile is Beam's Python 3.11 SDK image at the pinned Beam version and installs the
  ``pipeline`` extra at the requirements.txt pins, without TensorFlow; its launcher stage takes
  its job from the registry (``pipelines.JOBS``) and runs it through the one entry point
  ``launch.py``; the worker requirements file is the ``pipeline`` extra at the pins.
* The deployment names no dataset: Cloud Build (cloudbuild.yaml) runs ``build_images.sh``, which
  builds one launcher per job the built worker image's registry lists, and
  ``register_templates.sh``, which registers one template per job ``make_templates.py`` wrote;
  the scripts run here with a fake ``docker`` and ``gcloud`` (as Cloud Build would run the
  steps), and the commands of docs/dataflow.md call them and parse.

Negative cases show that each check fails on what it is meant to catch.
"""

import argparse
import ast
import contextlib
import functools
import glob
import importlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from typing import Dict, List, Sequence, Tuple

import pytest
import yaml

import pipelines
from tests import REPO_ROOT

REPO = str(REPO_ROOT)
DEPLOY = os.path.join(REPO, "deploy", "dataflow")
JOBS = tuple(pipelines.JOBS)  # the deployed datasets: the registry is the only list
DOC = os.path.join("docs", "dataflow.md")  # the page the deployment is documented in
SECTION = "# Running the pipelines on Dataflow"
IMAGE = "us-central1-docker.pkg.dev/fake-project/readtwice/dataflow"
DATAFLOW = ["--runner=DataflowRunner", "--project=fake-project", "--region=us-central1",
            "--temp_location=gs://fake-bucket/tmp", "--staging_location=gs://fake-bucket/staging",
            "--worker_machine_type=n2-standard-4", "--max_num_workers=8",
            "--autoscaling_algorithm=THROUGHPUT_BASED", "--resource_hints=min_ram=8GB"]
PLACEHOLDERS = {"PROJECT": "fake-project", "REGION": "us-central1", "BUCKET": "fake-bucket",
                "IMAGE": IMAGE, "TAG": "0123abc"}


def _load(name: str):
  """A module of deploy/dataflow/ (not a package: the image runs them as scripts)."""
  if name in sys.modules and getattr(sys.modules[name], "__file__", "").startswith(DEPLOY):
    return sys.modules[name]
  spec = importlib.util.spec_from_file_location(name, os.path.join(DEPLOY, f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # dataclasses look their module up
  spec.loader.exec_module(module)
  return module


make_templates = _load("make_templates")
flex_launcher = _load("flex_launcher")
launch = _load("launch")  # imports flex_launcher: the module loaded above
check_image = _load("check_image")


def read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


@functools.lru_cache(maxsize=None)
def _rendered(job: str) -> str:
  return make_templates.render(job)


def template(job: str) -> Dict:
  """The Flex Template metadata of ``job``, as the build generates it (a fresh copy)."""
  return json.loads(_rendered(job))


pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


# --- the jobs ---------------------------------------------------------------------------------

def test_every_deployed_dataset_is_deployed():
  """The deployed datasets are the registry's (``pipelines.JOBS``), which the build reads (the
  templates are generated then, none is committed); all of them run through the one entry point
  ``launch.py`` and the generic ``python -m pipelines <dataset>``: no per-dataset launcher
  script or pipelines module."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  assert JOBS and set(JOBS) <= set(datasets.DATASETS)
  assert "jsonl_qa" in datasets.DATASETS and "jsonl_qa" not in JOBS  # registered, not deployed
  assert not os.path.exists(os.path.join(DEPLOY, "templates"))
  assert sorted(n for n in os.listdir(DEPLOY) if n.startswith("launch")) == ["launch.py"]
  assert not [n for n in os.listdir(os.path.join(REPO, "pipelines")) if n[:-3] in JOBS]


@pytest.mark.parametrize("job", JOBS)
def test_launch_script_runs_the_job_its_image_names(job, monkeypatch):
  calls = []
  monkeypatch.setattr(flex_launcher, "main", lambda j, argv=None: calls.append((j, argv)) or 0)
  monkeypatch.setenv(launch.JOB_ENV, job)
  assert launch.main(["--input=x"]) == 0
  assert calls == [(job, ["--input=x"])]


def _launch(job, *argv) -> subprocess.CompletedProcess:
  """``python deploy/dataflow/launch.py ARGV`` with ``$READTWICE_JOB`` set to ``job`` (None:
  unset), as the launcher image runs it."""
  env = dict(os.environ, PYTHONPATH=REPO)
  env.pop(launch.JOB_ENV, None)
  env.pop("FLEX_TEMPLATE_PYTHON_PY_FILE", None)
  if job is not None:
    env[launch.JOB_ENV] = job
  return subprocess.run([sys.executable, os.path.join(DEPLOY, "launch.py"), *argv], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("job, line", [
    (None, "launch.py: error: $READTWICE_JOB names no job (the launcher image sets it from "
           "--build-arg JOB=<name>)"),
    ("", "launch.py: error: $READTWICE_JOB names no job (the launcher image sets it from "
         "--build-arg JOB=<name>)"),
    ("hotpotq", "launch.py: error: $READTWICE_JOB: unknown job 'hotpotq'; one of "
                + ", ".join(JOBS)),
    ("jsonl_qa", "launch.py: error: $READTWICE_JOB: unknown job 'jsonl_qa'; one of "
                 + ", ".join(JOBS)),  # registered, but not deployed
])
def test_launch_script_refuses_a_missing_or_unknown_job_with_one_line(job, line):
  proc = _launch(job, "--input=x", "--output_dir=y")
  assert proc.returncode == 2, proc.stderr
  assert proc.stdout == "" and proc.stderr.splitlines() == [line]


def test_launch_script_reaches_the_jobs_command_line():
  """``READTWICE_JOB=hotpotqa``: the job's own parser answers (a typo is its one-line usage
  error, exit 2, before any work)."""
  proc = _launch("hotpotqa", "--input=x", "--output_dir=y", "--seq_lenght=9")
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.splitlines() == [
      "python -m pipelines hotpotqa: error: unknown flag --seq_lenght (did you mean "
      "--seq_length?); see --help"]
  with pytest.raises(ValueError, match="unknown job 'jsonl_qa'"):
    flex_launcher.main("jsonl_qa", [])


# --- templates --------------------------------------------------------------------------------

def help_flags(job: str) -> List[str]:
  """The flags ``python -m pipelines <job> --help`` shows in its usage line (in order)."""
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  out = io.StringIO()
  with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
    runner.dataset_main(job, ["--help"])
  assert exit_info.value.code == 0
  usage = out.getvalue().split("\n\n")[0]
  assert usage.startswith("usage:")
  names = re.findall(r"--([a-z0-9_]+)", usage)
  return [n for n in dict.fromkeys(names) if n != "help"]


def template_problems(job: str, meta: Dict) -> List[str]:
  """How ``meta`` (a template's metadata) disagrees with the flags of ``python -m pipelines
  <job>``."""
  parser = make_templates.job_parser(job)
  by_option = {s: a for a in parser._actions for s in a.option_strings}  # pylint: disable=protected-access
  params = meta.get("parameters", [])
  names = [p.get("name") for p in params]
  flags = help_flags(job)
  problems = []
  if sorted(names) != sorted(flags):
    problems.append(f"parameters {sorted(set(names) - set(flags))} are not flags, flags "
                    f"{sorted(set(flags) - set(names))} are not parameters")
  if len(set(names)) != len(names):
    problems.append("a parameter is listed twice")
  required = make_templates.REQUIRED.get(job, frozenset())
  for p in params:
    action = by_option.get(f"--{p.get('name')}")
    if action is None:
      continue
    if p.get("isOptional") != (not (action.required or p["name"] in required)):
      problems.append(f"{p['name']}: isOptional {p.get('isOptional')} but the flag is "
                      f"{'required' if action.required else 'optional'}")
    if make_templates.is_bool(action) != (p.get("paramType") == "BOOLEAN"):
      problems.append(f"{p['name']}: paramType {p.get('paramType')} for a "
                      f"{'boolean' if make_templates.is_bool(action) else 'valued'} flag")
    if action.choices is not None and ([o["value"] for o in p.get("enumOptions", [])]
                                       != [str(c) for c in action.choices]):
      problems.append(f"{p['name']}: enumOptions differ from the choices {action.choices}")
    if action.default is not None and not action.required:
      want = make_templates._value(action.default)  # pylint: disable=protected-access
      if p.get("defaultValue") != want:
        problems.append(f"{p['name']}: defaultValue {p.get('defaultValue')!r}, flag default "
                        f"{want!r}")
  hidden = [s for a in parser._actions if a.help == argparse.SUPPRESS  # pylint: disable=protected-access
            for s in a.option_strings]
  bools = {p["name"] for p in params if p.get("paramType") == "BOOLEAN"}
  for s in hidden:
    if not (s.startswith("--no") and s[4:] in bools):
      problems.append(f"hidden flag {s} is not the --no form of a boolean parameter")
  return problems


@pytest.mark.parametrize("job", JOBS)
def test_template_parameters_are_exactly_the_job_flags(job):
  assert template_problems(job, template(job)) == []


def test_template_check_catches_an_extra_a_missing_or_a_mistyped_parameter():
  meta = template("hotpotqa")
  extra = dict(meta, parameters=meta["parameters"] + [
      dict(meta["parameters"][3], name="seq_lenght")])
  assert any("seq_lenght" in p for p in template_problems("hotpotqa", extra))
  missing = dict(meta, parameters=[p for p in meta["parameters"] if p["name"] != "overlap"])
  assert any("overlap" in p for p in template_problems("hotpotqa", missing))
  flipped = json.loads(json.dumps(meta))
  flipped["parameters"][0]["isOptional"] = True  # --input is required
  flipped["parameters"][2]["paramType"] = "TEXT"  # --overwrite is a boolean
  found = template_problems("hotpotqa", flipped)
  assert any(p.startswith("input: isOptional") for p in found)
  assert any(p.startswith("overwrite: paramType") for p in found)


def test_make_templates_writes_every_job_and_the_job_list(tmp_path, capsys):
  out = tmp_path / "templates"
  assert make_templates.main(["--out_dir", str(out)]) == 0
  assert sorted(os.listdir(out)) == sorted([f"{j}.json" for j in JOBS] + ["jobs.txt"])
  assert (out / "jobs.txt").read_text(encoding="utf-8").splitlines() == list(JOBS)
  for job in JOBS:
    assert (out / f"{job}.json").read_text(encoding="utf-8") == _rendered(job)
  assert capsys.readouterr().out.strip() == (f"wrote {len(JOBS)} templates to {out}: "
                                             + " ".join(JOBS))


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: --out_dir"),
    (["--check"], "--check is gone: the templates are generated at build time"),
    (["--out_dir", "x", "--outdir", "y"], "unrecognized arguments: --outdir y"),
])
def test_make_templates_refuses_bad_flags(argv, message, tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    make_templates.main(argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.splitlines()
  assert err[0].startswith("usage: ") and len(err) == 2
  assert err[1].startswith("make_templates.py: error: " + message), err
  assert os.listdir(tmp_path) == []  # nothing written


PARAM_TYPES = {"TEXT", "BOOLEAN", "ENUM"}


@pytest.mark.parametrize("job", JOBS)
def test_template_metadata_is_well_formed(job):
  meta = template(job)
  assert meta["name"] == f"readtwice-{job}" and meta["description"]
  for p in meta["parameters"]:
    assert re.fullmatch(r"[a-z][a-z0-9_]*", p["name"])
    assert p["label"] and p["helpText"] and isinstance(p["isOptional"], bool)
    assert p["paramType"] in PARAM_TYPES
    regexes = [re.compile(r) for r in p.get("regexes", [])]
    if "defaultValue" in p:
      assert all(r.search(p["defaultValue"]) for r in regexes), p
    if p["paramType"] == "ENUM":
      assert p["enumOptions"] and all(r.search(o["value"]) for o in p["enumOptions"]
                                      for r in regexes)
    if p["name"] in make_templates.PATH_FLAGS:
      assert regexes and regexes[0].search("gs://bucket/dir/file-*.json")
      assert not regexes[0].search("/home/me/file.json")
  required = [p["name"] for p in meta["parameters"] if not p["isOptional"]]
  assert required[:2] == ["input", "output_dir"]


def test_job_flags_do_not_hide_beam_options():
  """A job flag named like a Beam option takes the option's value; only --dry_run does (the
  Cloud NL cost plan; Beam's is a test option of its runners)."""
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  beam = {f[2:] for f in flags._flag_names(flags._beam_parser())}  # pylint: disable=protected-access
  for job in JOBS:
    assert {p["name"] for p in template(job)["parameters"]} & beam <= {"dry_run"}


# --- the job graph for the DataflowRunner ------------------------------------------------------

# One job's graph also holds the annotation stage (spaCy's default model: no download).
EXTRA_FLAGS = {"books": ["--ner", "spacy"]}


def tiny_inputs(job: str, base: str) -> List[str]:
  """A tiny input for ``job`` under ``base`` (its spec's fake input: graph construction only
  lists and stats files) and the job flags that name it."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  return datasets.get(job).fake_input(base, 0.0001).argv + EXTRA_FLAGS.get(job, [])


class _Built(Exception):
  """Stops the job after its pipeline ran (translated) on the dry-run DataflowRunner."""


@contextlib.contextmanager
def dataflow_dry_run(stop: bool):
  """``pipelines.runner.make_pipeline`` builds the job's pipeline with its Beam options plus
  ``dry_run`` (DataflowRunner translates the graph and returns before staging and submitting);
  yields the list that receives each ``(pipeline, result)``; ``stop``: raise _Built after the
  run, before the job would wait for the (non-existent) job."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top

  runs = []

  def make_pipeline(beam_args):
    p = beam.Pipeline(options=PipelineOptions(list(beam_args or []), dry_run=True))
    real_run = p.run

    def run(*args, **kwargs):
      result = real_run(*args, **kwargs)
      runs.append((p, result))
      if stop:
        raise _Built()
      return result

    p.run = run
    return p

  real = runner.make_pipeline
  runner.make_pipeline = make_pipeline
  try:
    yield runs
  finally:
    runner.make_pipeline = real


def dataflow_environment(result) -> Dict:
  """The Dataflow job environment (worker pools, options) the runner would submit, rendered
  offline from the translated job (no staging: the pipeline URL is a placeholder)."""
  from apache_beam.runners.dataflow.internal import apiclient  # pylint: disable=g-import-not-at-top
  job = result.job
  env = apiclient.Environment(packages=[], options=job.options, environment_version="8",
                              proto_pipeline_staged_url="gs://fake-bucket/staging/pipeline.pb",
                              proto_pipeline=job.proto_pipeline)
  job.proto.environment = env.proto
  return json.loads(job.json())["environment"]


def graph_summary(result) -> Tuple[List[str], Dict[str, bytes], str]:
  """(transform names, resource hints, container image) of a translated job."""
  from apache_beam.portability.api import beam_runner_api_pb2  # pylint: disable=g-import-not-at-top
  components = result.job.proto_pipeline.components
  names = sorted(t.unique_name for t in components.transforms.values())
  envs = list(components.environments.values())
  assert len(envs) == 1 and envs[0].urn == "beam:env:docker:v1"
  image = beam_runner_api_pb2.DockerPayload.FromString(envs[0].payload).container_image
  return names, dict(envs[0].resource_hints), image


@pytest.mark.slow
@pytest.mark.parametrize("job", JOBS)
def test_job_graph_builds_for_dataflow_without_submitting(job, tmp_path, monkeypatch, capsys):
  from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner  # pylint: disable=g-import-not-at-top
  from pipelines import runner  # pylint: disable=g-import-not-at-top
  flags = tiny_inputs(job, str(tmp_path / "in"))
  # The job's own command line, as `python -m pipelines <job> ... --runner DataflowRunner`.
  with dataflow_dry_run(stop=True) as runs, pytest.raises(_Built):
    runner.dataset_main(job, flags + ["--output_dir", str(tmp_path / "out")] + DATAFLOW
                        + [f"--sdk_container_image={IMAGE}:worker"])
  (p, result), = runs
  assert isinstance(p.runner, DataflowRunner) and result.job is not None
  names, hints, image = graph_summary(result)
  assert image == f"{IMAGE}:worker"
  assert hints == {"beam:resources:min_ram_bytes:v1": b"8000000000"}
  assert "ToRecords" in names and len(names) > 40
  env = dataflow_environment(result)
  pool, = env["workerPools"]
  assert pool["machineType"] == "n2-standard-4"
  assert pool["autoscalingSettings"]["maxNumWorkers"] == 8
  assert [c["containerImage"] for c in pool["sdkHarnessContainerImages"]] == [f"{IMAGE}:worker"]
  assert "use_runner_v2" in env["experiments"]
  assert not os.path.exists(tmp_path / "out") or not os.listdir(tmp_path / "out")

  # The Flex Template launch of the same job: parameters as --name=value (booleans as
  # true/false), the worker image from the launcher image's environment, and no wait.
  monkeypatch.setenv(flex_launcher.SDK_IMAGE_ENV, f"{IMAGE}:flex")
  monkeypatch.setenv("FLEX_TEMPLATE_PYTHON_PY_FILE", "/template/launch.py")  # adds --nowait
  flex = [f"{a}={b}" for a, b in zip(flags[::2], flags[1::2])]
  flex += [f"--output_dir={tmp_path / 'flex_out'}", "--overwrite=false", "--deduplicate=true",
           "--template_location=gs://fake-bucket/staging/job_object"] + DATAFLOW
  capsys.readouterr()
  with dataflow_dry_run(stop=False) as runs:
    assert flex_launcher.main(job, flex) == 0
  (_, flex_result), = runs
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert summary["submitted"] is True and summary["job"] == job
  flex_names, flex_hints, flex_image = graph_summary(flex_result)
  assert flex_image == f"{IMAGE}:flex" and flex_hints == hints
  assert flex_names == names  # the launcher builds exactly the job's graph


def test_launcher_turns_template_booleans_into_flags(capsys):
  parser = make_templates.job_parser("hotpotqa")
  tr = flex_launcher.translate_bools
  assert tr(parser, ["--overwrite=true", "--deduplicate=false", "--seq_length=128"]) == [
      "--overwrite", "--nodeduplicate", "--seq_length=128"]
  assert tr(parser, ["--nodeduplicate=false", "--overwrite", "False", "--input=x"]) == [
      "--deduplicate", "--nooverwrite", "--input=x"]
  assert tr(parser, ["--overwrite", "--input", "true"]) == ["--overwrite", "--input", "true"]
  with pytest.raises(SystemExit) as exit_info:
    tr(parser, ["--overwrite=maybe"])
  assert exit_info.value.code == 2
  assert "--overwrite takes true or false" in capsys.readouterr().err


def test_launcher_refuses_bad_parameters_with_one_line(tmp_path, capsys):
  flags = tiny_inputs("hotpotqa", str(tmp_path / "in"))
  with pytest.raises(SystemExit) as exit_info:
    flex_launcher.main("hotpotqa", flags + [f"--output_dir={tmp_path}/o", "--overwrite=maybe"])
  assert exit_info.value.code == 2
  with pytest.raises(SystemExit) as exit_info:
    flex_launcher.main("hotpotqa", flags + [f"--output_dir={tmp_path}/o", "--seq_lenght=9"])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].endswith("unknown flag --seq_lenght (did you mean --seq_length?); see --help")


def test_launcher_default_image_and_runner(monkeypatch):
  monkeypatch.delenv(flex_launcher.SDK_IMAGE_ENV, raising=False)
  monkeypatch.delenv("FLEX_TEMPLATE_PYTHON_PY_FILE", raising=False)
  assert flex_launcher.with_defaults(["--x=1"]) == ["--x=1"]
  monkeypatch.setenv(flex_launcher.SDK_IMAGE_ENV, "img:1")
  assert flex_launcher.with_defaults([]) == ["--sdk_container_image=img:1"]
  assert flex_launcher.with_defaults(["--sdk_container_image=other"]) == [
      "--sdk_container_image=other"]
  monkeypatch.setenv("FLEX_TEMPLATE_PYTHON_PY_FILE", "/template/launch.py")
  assert flex_launcher.with_defaults(["--sdk_container_image", "o"]) == [
      "--sdk_container_image", "o", "--runner=DataflowRunner", "--nowait"]
  assert flex_launcher.with_defaults(["--runner=DirectRunner", "--sdk_container_image=o",
                                      "--wait"]) == [
      "--runner=DirectRunner", "--sdk_container_image=o", "--wait"]


@pytest.mark.slow
def test_launcher_runs_a_local_job_to_completion(tmp_path, capsys, monkeypatch):
  """Without a remote runner the launcher is the job's own command line: it runs, waits and
  prints the manifest summary."""
  monkeypatch.delenv(flex_launcher.SDK_IMAGE_ENV, raising=False)
  monkeypatch.delenv("FLEX_TEMPLATE_PYTHON_PY_FILE", raising=False)
  book = tmp_path / "book.txt"
  book.write_text("Call me Ishmael. Some years ago, never mind how long precisely.\n\n"
                  "Having little or no money in my purse, I thought I would sail about.\n",
                  encoding="utf-8")
  out = tmp_path / "out"
  assert flex_launcher.main("books", [f"--input={book}", f"--output_dir={out}",
                                      "--overwrite=false", "--seq_length=64",
                                      "--overlap=8", "--max_question_tokens=8"]) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert summary["counts"]["written"] == 1 and (out / "COMPLETED").exists()


def test_dataflow_passes_only_options_beam_defines():
  """The options Dataflow's launcher and docs/dataflow.md give a job must be Beam options, or the
  job's strict command line refuses them."""
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  options = ["--runner=DataflowRunner", "--project=p", "--region=r", "--job_name=j",
             "--temp_location=gs://b/t", "--staging_location=gs://b/s",
             "--template_location=gs://b/t/job_object", "--sdk_container_image=i",
             "--worker_machine_type=n2-standard-4", "--machine_type=n2-standard-4",
             "--num_workers=2", "--max_num_workers=9", "--autoscaling_algorithm=NONE",
             "--resource_hints=min_ram=16GB", "--service_account_email=a@b.c",
             "--network=n", "--subnetwork=s", "--no_use_public_ips", "--labels=a=b",
             "--experiments=x", "--dataflow_service_options=y", "--worker_region=r",
             "--worker_zone=z", "--flexrs_goal=COST_OPTIMIZED", "--dataflow_kms_key=k",
             "--no_save_main_session"]
  parser = make_templates.job_parser("books")
  assert flags.split_beam_args(parser, options) == options


# --- Dockerfile, Cloud Build, requirements -----------------------------------------------------

def pinned(name: str) -> str:
  return check_image.pinned(name)


def dockerfile_problems(text: str) -> List[str]:
  """What keeps ``text`` from being the worker image the jobs need."""
  import apache_beam  # pylint: disable=g-import-not-at-top
  problems = []
  stages = dict((m.group(2), m.group(1))
                for m in re.finditer(r"^FROM\s+(\S+)\s+AS\s+(\S+)", text, re.M))
  beam = pinned("apache-beam")
  py = f"{sys.version_info[0]}.{sys.version_info[1]}"
  if beam != apache_beam.version.__version__:
    problems.append(f"requirements.txt pins Beam {beam}, {apache_beam.version.__version__} "
                    f"is installed")
  if stages.get("worker") != f"apache/beam_python{py}_sdk:{beam}":
    problems.append(f"worker stage is FROM {stages.get('worker')}, not Beam's Python {py} SDK "
                    f"image at {beam}")
  if stages.get("launcher") != "worker":
    problems.append("the launcher stage is not FROM the worker stage")
  runs = " ".join(re.findall(r"^RUN\s+((?:.*\\\n)*.*)$", text, re.M))
  if not re.search(r"pip install [^&]*-c \S*constraints\S* \"\.\[pipeline\]\"", runs):
    problems.append("the `pipeline` extra is not installed with requirements.txt as "
                    "constraints")
  if "requirements.txt > " not in runs:
    problems.append("the constraints are not made from requirements.txt")
  if re.search(r"tensorflow|\[(trainer|dev)\]", runs, re.I):
    problems.append("an install step names TensorFlow or the trainer/dev extras")
  if "check_image.py" not in runs:
    problems.append("the image is not checked (deploy/dataflow/check_image.py)")
  if not re.search(r"^FROM \$\{LAUNCHER_BASE\} AS flex_template_launcher", text, re.M) \
      or f"python{py.replace('.', '')}-template-launcher-base" not in text:
    problems.append(f"no Flex Template launcher binary from the python{py} launcher base")
  if "COPY --from=flex_template_launcher /opt/google/dataflow/python_template_launcher" \
      not in text:
    problems.append("the launcher binary is not copied in")
  launcher = text.split(" AS launcher", 1)[-1]
  if "FLEX_TEMPLATE_PYTHON_PY_FILE=/template/launch.py" not in launcher:
    problems.append("the launcher stage does not name the entry point every job shares")
  if not re.search(r"^ENV READTWICE_JOB=\$\{JOB\}", launcher, re.M):
    problems.append("the launcher stage does not set READTWICE_JOB from --build-arg JOB")
  if "from pipelines import JOBS" not in job_check(text):
    problems.append("the launcher stage does not check JOB against the registry")
  listed = [j for j in pipelines.JOBS if j in launcher]
  if listed:
    problems.append(f"the launcher stage names jobs itself ({', '.join(listed)}): the registry "
                    f"is the list")
  if 'ENTRYPOINT ["/opt/apache/beam/boot"]' not in text:
    problems.append("the entrypoint is not Beam's worker boot")
  return problems


def job_check(text: str) -> str:
  """The shell command of the launcher stage's RUN step that checks ``JOB`` (Docker's line
  continuations joined), or "" if there is none."""
  launcher = text.split(" AS launcher", 1)[-1]
  runs = [r.replace("\\\n", "") for r in re.findall(r"^RUN\s+((?:.*\\\n)*.*)$", launcher, re.M)]
  return next((r for r in runs if "JOB" in r), "")


def test_dockerfile_is_the_pinned_beam_sdk_image_with_the_pipeline_extra():
  text = read(os.path.join(DEPLOY, "Dockerfile"))
  assert dockerfile_problems(text) == []
  base = re.search(r"^FROM\s+(\S+)\s+AS worker", text, re.M).group(1)
  assert f"`{base}`" in readme_section()
  # Each mistake is caught.
  beam = pinned("apache-beam")
  assert dockerfile_problems(text.replace(f"sdk:{beam}", "sdk:2.60.0"))
  assert dockerfile_problems(text.replace("beam_python3.11_sdk", "beam_python3.12_sdk"))
  assert dockerfile_problems(text.replace('".[pipeline]"', '".[dev]"'))
  assert dockerfile_problems(text.replace("pip check\n", "pip check && pip install "
                                          "tensorflow-cpu\n", 1))
  assert dockerfile_problems(text.replace("/template/launch.py", "/template/launch_${JOB}.py"))
  assert dockerfile_problems(text.replace("ENV READTWICE_JOB=${JOB}", "ENV READTWICE_JOB=books"))
  assert dockerfile_problems(text.replace("from pipelines import JOBS;", "JOBS = ('books',);"))


def _refusal(job: str) -> str:
  return (f"--build-arg JOB=<name> is required, <name> one of {'|'.join(JOBS)} (the deployed "
          f"datasets of pipelines/datasets); got {job!r}")


def _run_job_check(check: str, job: str) -> subprocess.CompletedProcess:
  """The JOB check as Docker runs it (``/bin/sh -c`` with the build arg in the environment)."""
  env = dict(os.environ, JOB=job, PYTHONPATH=REPO,
             PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
  return subprocess.run(["/bin/sh", "-c", check], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300)


def test_dockerfile_accepts_exactly_the_registrys_jobs(capsys):
  """The launcher stage's JOB check reads ``pipelines.JOBS``: every deployed dataset passes and
  anything else (empty, a typo, a dataset that is not deployed) fails naming the jobs.  Its
  Python program runs here (in this process: one process per job would cost ~1.5 s each); the
  shell form is run as Docker runs it by the next test."""
  check = job_check(read(os.path.join(DEPLOY, "Dockerfile")))
  words = shlex.split(check)
  assert words[:2] == ["python", "-c"] and words[3:] == ["${JOB}"], words
  program = compile(words[2], "<Dockerfile JOB check>", "exec")
  for job in [*JOBS, "", "hotpotq", "jsonl_qa"]:
    with pytest.raises(SystemExit) as stop, mock_argv(["-c", job]):
      exec(program, {"__name__": "__main__"})  # pylint: disable=exec-used
    if job in pipelines.JOBS:
      assert stop.value.code == 0, job
    else:  # sys.exit(text): Python prints the text on stderr and exits 1
      assert stop.value.code == _refusal(job), job


@pytest.mark.slow
@pytest.mark.parametrize("job", ["books", "hotpotq"])
def test_dockerfile_job_check_runs_as_docker_runs_it(job):
  proc = _run_job_check(job_check(read(os.path.join(DEPLOY, "Dockerfile"))), job)
  if job in pipelines.JOBS:
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
  else:
    assert proc.returncode == 1 and proc.stderr.splitlines() == [_refusal(job)]


@contextlib.contextmanager
def mock_argv(argv):
  saved = sys.argv
  sys.argv = list(argv)
  try:
    yield
  finally:
    sys.argv = saved


@pytest.mark.slow  # 2.4-3.1 s: walks the build context as Docker would (over 2 s)
def test_dockerfile_copies_only_what_exists_and_the_context_keeps(monkeypatch):
  text = read(os.path.join(DEPLOY, "Dockerfile"))
  ignore = read(os.path.join(DEPLOY, "Dockerfile.dockerignore")).splitlines()
  kept = [line[1:] for line in ignore if line.startswith("!")]
  for m in re.finditer(r"^COPY\s+(?!--from)((?:.*\\\n)*.*)$", text, re.M):
    sources = m.group(1).replace("\\\n", " ").split()[:-1]
    for source in sources:
      assert glob.glob(os.path.join(REPO, source)), source
      assert any(source.rstrip("/") == k.rstrip("/") or re.fullmatch(
          k.replace(".", r"\.").replace("*", ".*"), source) for k in kept), source
  # The image's check script works here too (TensorFlow is in this development environment).
  monkeypatch.setenv("MPLBACKEND", "Agg")
  assert check_image.problems(allow_tensorflow=True) == []
  if importlib.util.find_spec("tensorflow") is not None:  # what the image build would refuse
    assert "tensorflow is installed: the pipeline image must be TF-free" in check_image.problems()


# --- Cloud Build and the build scripts: derived from the registry -------------------------------

CLOUDBUILD = os.path.join(DEPLOY, "cloudbuild.yaml")
BUILD_IMAGES = os.path.join(DEPLOY, "build_images.sh")
REGISTER_TEMPLATES = os.path.join(DEPLOY, "register_templates.sh")
DOCKER_BUILDER = "gcr.io/cloud-builders/docker"
CLOUD_SDK = "gcr.io/google.com/cloudsdktool/cloud-sdk"
SUBSTITUTIONS = {"_IMAGE": IMAGE, "_TAG": "0123abc", "_BUCKET": "fake-bucket",
                 "_REVISION": "f" * 40, "_SPACY_MODEL_PACKAGE": "", "_SPACY_MODEL": ""}


def _dataset_names() -> List[str]:
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  return list(datasets.DATASETS)


def _step_text(step: Dict) -> str:
  return " ".join([step.get("name", ""), step.get("entrypoint", "")] + list(step.get("env", []))
                  + list(step.get("args", [])))


def cloudbuild_problems(text: str) -> List[str]:
  """What keeps ``text`` (a cloudbuild.yaml) from building every job the registry deploys
  without naming one: the worker and launchers through build_images.sh, the metadata through
  make_templates.py in the worker image, the templates through register_templates.sh."""
  problems = []
  config = yaml.safe_load(text)
  steps = config.get("steps", [])
  named = [n for n in _dataset_names() if n in text]
  if named:
    problems.append(f"names datasets ({', '.join(named)}): the registry is the list")
  by_id = {s.get("id"): s for s in steps}
  if [s.get("id") for s in steps] != ["images", "metadata", "templates"]:
    problems.append(f"steps {[s.get('id') for s in steps]}, not images, metadata, templates")
  images = by_id.get("images", {})
  if (images.get("name"), images.get("entrypoint")) != (DOCKER_BUILDER, "bash") or \
      images.get("args") != ["deploy/dataflow/build_images.sh", "${_IMAGE}", "${_TAG}",
                             "--push"]:
    problems.append("the images step does not run build_images.sh ${_IMAGE} ${_TAG} --push in "
                    "the docker builder")
  env = dict(e.split("=", 1) for e in images.get("env", []))
  if env != {"REVISION": "${_REVISION}", "SPACY_MODEL_PACKAGE": "${_SPACY_MODEL_PACKAGE}",
             "SPACY_MODEL": "${_SPACY_MODEL}"}:
    problems.append(f"the images step passes the build arguments {env}")
  meta = by_id.get("metadata", {})
  if (meta.get("name"), meta.get("entrypoint")) != ("${_IMAGE}:${_TAG}", "python") or \
      meta.get("args", [])[:2] != ["deploy/dataflow/make_templates.py", "--out_dir"]:
    problems.append("the metadata step does not run make_templates.py --out_dir in the worker "
                    "image")
  templates = by_id.get("templates", {})
  script = " ".join(templates.get("args", []))
  out_dir = (meta.get("args") or [""])[-1]
  if (templates.get("name"), templates.get("entrypoint")) != (CLOUD_SDK, "bash") or \
      f"deploy/dataflow/register_templates.sh {out_dir} " not in script:
    problems.append("the templates step does not run register_templates.sh on the metadata "
                    "step's folder in the Cloud SDK image")
  if config.get("images") != ["${_IMAGE}:${_TAG}"]:
    problems.append(f"images: {config.get('images')} (the script pushes the launchers)")
  steps_text = " ".join(_step_text(s) for s in steps) + " " + " ".join(config.get("images", []))
  used = set(re.findall(r"\$\{(_[A-Z_]+)\}", steps_text))
  declared = set(config.get("substitutions", {}))
  if used != declared:  # Cloud Build refuses an unknown one, and one given but unused
    problems.append(f"substitutions used {sorted(used)}, declared {sorted(declared)}")
  bare = re.sub(r"\$\$|\$\{_[A-Z_]+\}", "", steps_text)
  if "$" in bare:
    problems.append("a shell $ that is not $$: Cloud Build would take it for a substitution")
  return problems


def test_cloud_build_builds_from_the_registry_and_names_no_dataset():
  text = read(CLOUDBUILD)
  assert cloudbuild_problems(text) == []
  # Each mistake is caught: a hand-listed launcher step, a hand-listed image, a lost --push, a
  # shell variable Cloud Build would substitute, an undeclared substitution.
  job = JOBS[0]
  step = (f"- id: launcher-{job}\n  name: {DOCKER_BUILDER}\n  args: [build, --target, launcher,"
          f" --build-arg, JOB={job}, -t, '${{_IMAGE}}:${{_TAG}}-{job}', .]\nimages:")
  assert cloudbuild_problems(text.replace("images:\n- '", step + "\n- '"))
  assert cloudbuild_problems(text + f"- '${{_IMAGE}}:${{_TAG}}-{job}'\n")
  assert cloudbuild_problems(text.replace("'${_TAG}', '--push'", "'${_TAG}'"))
  assert cloudbuild_problems(text.replace('"$$BUCKET"', '"$BUCKET"'))
  assert cloudbuild_problems(text.replace("  _TAG: latest\n", ""))
  assert cloudbuild_problems(text.replace("--out_dir', 'build/dataflow-templates'",
                                          "--out_dir', 'build/other'"))


def test_dockerfile_and_scripts_name_no_dataset():
  for path in (BUILD_IMAGES, REGISTER_TEMPLATES, os.path.join(DEPLOY, "Dockerfile")):
    text = read(path)
    assert not [n for n in _dataset_names() if n in text], path


def _fake_tools(tmp_path, root: str = REPO) -> Tuple[Dict[str, str], str]:
  """``docker`` and ``gcloud`` stubs first on PATH, logging each call's argv (a JSON list a
  line, the tool first) to the returned log; ``docker run ... -c PROGRAM`` runs PROGRAM with
  the checkout ``root`` importable (the registry as the image holds it), or prints $FAKE_JOBS
  if set; a call with an argument equal to $FAKE_FAIL fails."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir(exist_ok=True)
  log = str(tmp_path / "calls.jsonl")
  stub = f"""#!{sys.executable}
import json, os, subprocess, sys
tool, argv = os.path.basename(sys.argv[0]), sys.argv[1:]
with open({log!r}, "a", encoding="utf-8") as f:
  f.write(json.dumps([tool] + argv) + "\\n")
if os.environ.get("FAKE_FAIL") in argv:
  sys.exit(f"fake {{tool}}: failing")
if tool == "docker" and argv[:1] == ["run"]:
  if "FAKE_JOBS" in os.environ:
    print(os.environ["FAKE_JOBS"])
    sys.exit(0)
  program = argv[argv.index("-c") + 1]
  env = dict(os.environ, PYTHONPATH={root!r})
  sys.exit(subprocess.run([sys.executable, "-c", program], env=env).returncode)
"""
  for tool in ("docker", "gcloud"):
    (bin_dir / tool).write_text(stub, encoding="utf-8")
    (bin_dir / tool).chmod(0o755)
  env = {k: v for k, v in os.environ.items()
         if k not in ("FAKE_JOBS", "FAKE_FAIL", "REVISION", "SPACY_MODEL_PACKAGE",
                      "SPACY_MODEL", "PYTHONPATH")}
  env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
  return env, log


def _calls(log: str) -> List[List[str]]:
  if not os.path.exists(log):
    return []
  return [json.loads(line) for line in read(log).splitlines()]


def _bash(argv: Sequence[str], env: Dict[str, str], cwd: str = REPO,
          extra_env: Dict[str, str] = None) -> subprocess.CompletedProcess:
  return subprocess.run(["bash", *argv], cwd=cwd, env=dict(env, **(extra_env or {})),
                        capture_output=True, text=True, timeout=300)


def built_images(calls: List[List[str]]) -> Dict[str, Dict]:
  """``docker build`` calls by tag: target and build arguments (the rest checked to be the
  Dockerfile and the repository as the context)."""
  builds = {}
  for call in calls:
    if call[:2] != ["docker", "build"]:
      continue
    argv = call[2:]
    assert argv[:2] == ["-f", "deploy/dataflow/Dockerfile"] and argv[-1] == ".", argv
    args = dict(a.split("=", 1) for a in options_of(argv, "--build-arg"))
    tag, = options_of(argv, "-t")
    target, = options_of(argv, "--target")
    builds[tag] = {"target": target, "args": args}
  return builds


def test_dataflow_scripts_are_valid_bash():
  for path in (BUILD_IMAGES, REGISTER_TEMPLATES):
    proc = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert read(path).startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in read(path)
    assert os.access(path, os.X_OK), f"{path} is not executable"


@pytest.mark.parametrize("push", [True, False])
def test_build_images_builds_one_launcher_per_job_of_the_image(push, tmp_path):
  env, log = _fake_tools(tmp_path)
  worker = f"{IMAGE}:0123abc"
  proc = _bash([BUILD_IMAGES, IMAGE, "0123abc"] + (["--push"] if push else []), env,
               cwd=str(tmp_path), extra_env={"REVISION": "f" * 40,
                                             "SPACY_MODEL": "en_core_web_sm"})
  assert proc.returncode == 0, proc.stderr
  calls = _calls(log)
  run, = [c for c in calls if c[:2] == ["docker", "run"]]
  assert run[1:6] == ["run", "--rm", "--entrypoint", "python", worker] and run[6] == "-c"
  builds = built_images(calls)
  assert list(builds) == [worker] + [f"{worker}-{j}" for j in JOBS]
  common = {"REVISION": "f" * 40, "SPACY_MODEL_PACKAGE": "", "SPACY_MODEL": "en_core_web_sm"}
  assert builds[worker] == {"target": "worker", "args": common}
  for job in JOBS:
    assert builds[f"{worker}-{job}"] == {
        "target": "launcher", "args": dict(common, JOB=job, SDK_CONTAINER_IMAGE=worker)}
  # The worker is built before the image is asked for its jobs, the launchers after.
  kinds = [c[1] for c in calls]
  assert kinds[:2] == ["build", "run"] and kinds[2:2 + len(JOBS)] == ["build"] * len(JOBS)
  pushes = [c[2] for c in calls if c[:2] == ["docker", "push"]]
  assert pushes == ([worker] + [f"{worker}-{j}" for j in JOBS] if push else [])
  assert proc.stderr.splitlines()[-1].endswith("<job> in: " + " ".join(JOBS))


def test_build_images_follows_the_image_not_a_list(tmp_path):
  """The launchers are the jobs the built worker image lists: a registry with other jobs builds
  those; one listing none, or not a name, fails before any launcher."""
  env, log = _fake_tools(tmp_path)
  proc = _bash([BUILD_IMAGES, IMAGE, "t1", "--push"], env, extra_env={"FAKE_JOBS": "alpha beta_2"})
  assert proc.returncode == 0, proc.stderr
  assert list(built_images(_calls(log))) == [f"{IMAGE}:t1", f"{IMAGE}:t1-alpha",
                                             f"{IMAGE}:t1-beta_2"]
  for listed, message in [("", "deploys no job"), ("books;rm", "lists the job 'books;rm'")]:
    os.remove(log)
    proc = _bash([BUILD_IMAGES, IMAGE, "t1", "--push"], env, extra_env={"FAKE_JOBS": listed})
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1].startswith(
        "build_images.sh: error: the worker image") and message in proc.stderr, proc.stderr
    assert [c[1] for c in _calls(log)] == ["build", "run"]  # no launcher, no push


def test_build_images_stops_at_a_failed_build(tmp_path):
  env, log = _fake_tools(tmp_path)
  proc = _bash([BUILD_IMAGES, IMAGE, "t1", "--push"], env,
               extra_env={"FAKE_FAIL": f"JOB={JOBS[0]}"})
  assert proc.returncode != 0
  calls = _calls(log)
  assert calls[-1][-1] == "." and f"JOB={JOBS[0]}" in calls[-1]  # nothing after the failure
  assert not [c for c in calls if c[1] == "push"]


@pytest.mark.parametrize("argv, message", [
    ([], "expected IMAGE and TAG, got 0 argument(s)"),
    ([IMAGE], "expected IMAGE and TAG, got 1 argument(s)"),
    ([IMAGE, "t1", "extra"], "expected IMAGE and TAG, got 3 argument(s)"),
    ([IMAGE, "t1", "--pussh"], "unknown flag --pussh"),
    (["", "t1"], "IMAGE is empty"),
    ([f"{IMAGE}:t1", "t2"], f"IMAGE '{IMAGE}:t1' is not an image path without a tag"),
    ([IMAGE, "bad tag"], "TAG 'bad tag' is not a Docker tag"),
])
def test_build_images_refuses_bad_usage_with_one_line(argv, message, tmp_path):
  env, log = _fake_tools(tmp_path)
  proc = _bash([BUILD_IMAGES, *argv], env)
  assert proc.returncode == 2 and proc.stdout == ""
  assert proc.stderr.splitlines() == [
      f"build_images.sh: error: {message}; usage: deploy/dataflow/build_images.sh IMAGE TAG "
      f"[--push]"], proc.stderr
  assert _calls(log) == []


def _template_dir(tmp_path, jobs: Sequence[str] = JOBS) -> str:
  out = tmp_path / "templates"
  out.mkdir()
  for job in jobs:
    (out / f"{job}.json").write_text(_rendered(job) if job in JOBS else "{}", encoding="utf-8")
  (out / "jobs.txt").write_text("".join(f"{j}\n" for j in jobs), encoding="utf-8")
  return str(out)


def registered(calls: List[List[str]]) -> Dict[str, Tuple[str, str, List[str]]]:
  """``gcloud dataflow flex-template build`` calls: template path -> (image, metadata file,
  other flags)."""
  out = {}
  for call in calls:
    assert call[:4] == ["gcloud", "dataflow", "flex-template", "build"], call
    argv = call[4:]
    assert options_of(argv, "--sdk-language") == ["PYTHON"]
    image, = options_of(argv, "--image")
    meta, = options_of(argv, "--metadata-file")
    rest = [a for a in argv[1:] if a not in ("--image", image, "--metadata-file", meta,
                                             "--sdk-language", "PYTHON")]
    out[argv[0]] = (image, meta, rest)
  return out


def test_register_templates_registers_every_job_of_the_list(tmp_path):
  env, log = _fake_tools(tmp_path)
  out = _template_dir(tmp_path)
  proc = _bash([REGISTER_TEMPLATES, out + "/", "fake-bucket", IMAGE, "t1", "--project",
                "fake-project"], env)
  assert proc.returncode == 0, proc.stderr
  assert registered(_calls(log)) == {
      f"gs://fake-bucket/templates/{j}.json": (f"{IMAGE}:t1-{j}", f"{out}/{j}.json",
                                               ["--project", "fake-project"]) for j in JOBS}
  # Whatever jobs.txt lists (the registry make_templates.py read), in its order.
  os.remove(log)
  (tmp_path / "other").mkdir()
  other = _template_dir(tmp_path / "other", ["alpha"])
  assert _bash([REGISTER_TEMPLATES, other, "fake-bucket", IMAGE, "t1"], env).returncode == 0
  assert registered(_calls(log)) == {
      "gs://fake-bucket/templates/alpha.json": (f"{IMAGE}:t1-alpha", f"{other}/alpha.json", [])}


@pytest.mark.parametrize("case, message", [
    ("few", "expected DIR, BUCKET, IMAGE and TAG, got 3 argument(s)"),
    ("gs", "BUCKET 'gs://fake-bucket' is not a bucket name (no gs://, no folder)"),
    ("tagged", f"IMAGE '{IMAGE}:t0' is not an image path without a tag"),
    ("no_list", "{dir}/jobs.txt is missing (make_templates.py --out_dir {dir} writes it)"),
    ("no_file", "{dir}/" + JOBS[-1] + ".json is missing ({dir}/jobs.txt names " + JOBS[-1] + ")"),
    ("empty", "{dir}/jobs.txt names no job"),
])
def test_register_templates_refuses_bad_usage_with_one_line(case, message, tmp_path):
  env, log = _fake_tools(tmp_path)
  out = _template_dir(tmp_path)
  argv = [out, "fake-bucket", IMAGE, "t1"]
  if case == "few":
    argv = argv[:3]
  elif case == "gs":
    argv[1] = "gs://fake-bucket"
  elif case == "tagged":
    argv[2] = f"{IMAGE}:t0"
  elif case == "no_list":
    os.remove(os.path.join(out, "jobs.txt"))
  elif case == "no_file":
    os.remove(os.path.join(out, f"{JOBS[-1]}.json"))
  elif case == "empty":
    with open(os.path.join(out, "jobs.txt"), "w", encoding="utf-8") as f:
      f.write("\n")
  proc = _bash([REGISTER_TEMPLATES, *argv], env)
  assert proc.returncode == 2 and proc.stdout == ""
  assert proc.stderr.splitlines() == [
      "register_templates.sh: error: " + message.format(dir=out) + "; usage: "
      "deploy/dataflow/register_templates.sh DIR BUCKET IMAGE TAG [GCLOUD_FLAG...]"]
  assert _calls(log) == []  # every file is checked before the first template


def substitute(value, subs: Dict[str, str]):
  """``value`` (a step, a list, a string) with Cloud Build's substitutions made: ``${_X}`` and
  ``$_X`` replaced, ``$$`` turned into ``$``."""
  if isinstance(value, dict):
    return {k: substitute(v, subs) for k, v in value.items()}
  if isinstance(value, list):
    return [substitute(v, subs) for v in value]
  def one(m):
    if m.group(0) == "$$":
      return "$"
    return subs[m.group(1) or m.group(2)]
  return re.sub(r"\$\$|\$\{(_[A-Z_]+)\}|\$(_[A-Z_]+)", one, value)


@pytest.mark.parametrize("bucket", ["fake-bucket", ""])
def test_cloud_build_steps_run_as_cloud_build_runs_them(bucket, tmp_path, monkeypatch, capsys):
  """The three steps, run in order in a workspace (the checkout) with the substitutions made:
  the launchers and templates are exactly the registry's jobs; no _BUCKET: images only."""
  config = yaml.safe_load(read(CLOUDBUILD))
  subs = dict(config["substitutions"], **dict(SUBSTITUTIONS, _BUCKET=bucket))
  env, log = _fake_tools(tmp_path)
  workspace = tmp_path / "workspace"
  workspace.mkdir()
  (workspace / "deploy").symlink_to(os.path.join(REPO, "deploy"))
  monkeypatch.chdir(workspace)
  worker = f"{IMAGE}:0123abc"
  for step in substitute(config["steps"], subs):
    step_env = dict(env, **dict(e.split("=", 1) for e in step.get("env", [])))
    if step["entrypoint"] == "bash":
      proc = _bash(step["args"], step_env, cwd=str(workspace))
      assert proc.returncode == 0, (step["id"], proc.stderr)
    else:  # the worker image runs make_templates.py from the workspace
      assert (step["name"], step["entrypoint"]) == (worker, "python")
      script, *argv = step["args"]
      assert os.path.samefile(script, os.path.join(DEPLOY, "make_templates.py"))
      assert make_templates.main(argv) == 0
  calls = _calls(log)
  builds = built_images([c for c in calls if c[0] == "docker"])
  assert builds[worker]["args"]["REVISION"] == "f" * 40
  assert list(builds) == [worker] + [f"{worker}-{j}" for j in JOBS]
  assert [c[2] for c in calls if c[:2] == ["docker", "push"]] == list(builds)
  templates = registered([c for c in calls if c[0] == "gcloud"])
  if bucket:
    assert templates == {f"gs://{bucket}/templates/{j}.json": (
        f"{worker}-{j}", f"build/dataflow-templates/{j}.json", []) for j in JOBS}
  else:
    assert templates == {}
  assert config["images"] == ["${_IMAGE}:${_TAG}"]  # Cloud Build pushes (again) the worker

def test_worker_requirements_are_the_pipeline_extra_at_the_pins():
  tree = ast.parse(read(os.path.join(REPO, "setup.py")))
  lists = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
           for t in n.targets if isinstance(t, ast.Name) and t.id in ("BASE", "PIPELINE")}
  names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower()
           for r in lists["BASE"] + lists["PIPELINE"]} - {"apache-beam"}
  lines = [line.strip() for line in read(os.path.join(DEPLOY, "requirements.txt")).splitlines()
           if line.strip() and not line.startswith("#")]
  assert sorted(lines) == sorted(f"{n}=={pinned(n)}" for n in names)
  assert not os.path.exists(os.path.join(REPO, "deploy", "dataflow-requirements.txt"))


# --- docs/dataflow.md ---------------------------------------------------------------------------

def readme_section() -> str:
  """SECTION of DOC, up to the next heading of its level or above (its subsections included)."""
  level = len(SECTION) - len(SECTION.lstrip("#"))
  lines, out, inside, fence = read(os.path.join(REPO, DOC)).splitlines(), [], False, False
  for line in lines:
    if line.startswith("```"):
      fence = not fence
    heading = None if fence else re.match(r"(#{1,6}) ", line)
    if heading and len(heading.group(1)) <= level:
      if inside:
        break
      inside = line.strip() == SECTION
    if inside:
      out.append(line)
  assert out, f"{DOC} has no section {SECTION!r}"
  return "\n".join(out)


def commands(section: str) -> List[str]:
  """The shell commands of the section's code blocks (continuation lines joined)."""
  found = []
  for block in re.findall(r"```(?:bash|sh)\n(.*?)```", section, re.S):
    for cmd in re.sub(r"\\\n\s*", " ", block).splitlines():
      cmd = cmd.strip()
      if cmd and not cmd.startswith("#"):
        found.append(cmd)
  return found


def fill(text: str) -> str:
  def one(m):
    return PLACEHOLDERS.get(m.group(1), m.group(0))
  return re.sub(r"\$\{([A-Z_]+)\}", one, text)


def options_of(argv: Sequence[str], flag: str) -> List[str]:
  """Every value of ``flag`` in ``argv`` (``--flag v`` or ``--flag=v``)."""
  values = []
  for i, a in enumerate(argv):
    if a == flag and i + 1 < len(argv):
      values.append(argv[i + 1])
    elif a.startswith(flag + "="):
      values.append(a[len(flag) + 1:])
  return values


def test_readme_explains_every_placeholder():
  section = readme_section()
  for name in PLACEHOLDERS:
    assert f"`${{{name}}}`" in section, f"${{{name}}} is not explained"
  used = set(re.findall(r"\$\{([A-Za-z_]+)\}", section)) - {"job"}
  assert used <= set(PLACEHOLDERS), used - set(PLACEHOLDERS)


def _script_call(cmds: List[str], script: str) -> List[str]:
  """The argv (placeholders left, leading VAR=value assignments dropped) of the one command
  that runs ``script``."""
  found = [shlex.split(c) for c in cmds if script in c]
  assert len(found) == 1, f"no single command runs {script}"
  argv = found[0]
  while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):
    argv = argv[1:]
  return argv


def test_readme_builds_the_images_and_every_template():
  """The page builds and registers through Cloud Build or the scripts its steps run, and names
  no job outside the example runs: no list to keep up."""
  section = readme_section()
  cmds = commands(section)
  builds = [c for c in cmds if c.startswith("gcloud builds submit")]
  assert len(builds) == 1 and "--config deploy/dataflow/cloudbuild.yaml" in builds[0]
  argv = shlex.split(builds[0])
  subs, = options_of(argv, "--substitutions")
  passed = dict(item.split("=", 1) for item in subs.split(","))
  config_text = read(CLOUDBUILD)
  declared = set(yaml.safe_load(config_text)["substitutions"])
  required = set(re.findall(r"^  (_[A-Z_]+): ''\s+# required", config_text, re.M))
  assert required == {"_IMAGE"}
  assert required <= set(passed) <= declared, (sorted(passed), sorted(declared))
  assert passed["_IMAGE"] == "${IMAGE}" and passed["_TAG"] == "${TAG}"
  assert passed["_BUCKET"] == "${BUCKET}"  # the page registers the templates
  # The local way: the scripts, on the same images, folder and bucket.
  build = _script_call(cmds, "deploy/dataflow/build_images.sh")
  assert build == ["deploy/dataflow/build_images.sh", "${IMAGE}", "${TAG}", "--push"]
  meta = _script_call(cmds, "deploy/dataflow/make_templates.py")
  assert meta[:2] == ["python", "deploy/dataflow/make_templates.py"]
  out_dir, = options_of(meta, "--out_dir")
  register = _script_call(cmds, "deploy/dataflow/register_templates.sh")
  assert register[:5] == ["deploy/dataflow/register_templates.sh", out_dir, "${BUCKET}",
                          "${IMAGE}", "${TAG}"]
  assert options_of(register, "--project") == ["${PROJECT}"]
  # No job is named but in the example runs and the direct command.
  for cmd in cmds:
    if not cmd.startswith(("gcloud dataflow flex-template run", "python -m pipelines ")):
      assert not [n for n in _dataset_names() if re.search(rf"\b{n}\b", cmd)], cmd
  assert not re.search(r"\bfor \w+ in\b", section), "a hand-written loop over jobs"


def _template_runs() -> List[str]:
  return [c for c in commands(readme_section())
          if c.startswith("gcloud dataflow flex-template run")]


def _run_job(cmd: str) -> str:
  m = re.search(r"gs://\$\{BUCKET\}/templates/([^/\s\"]+)\.json", cmd)
  return m.group(1) if m else ""


def test_readme_has_template_run_examples():
  runs = _template_runs()
  assert runs and all(_run_job(c) for c in runs)
  assert len({_run_job(c) for c in runs}) == len(runs), "two examples of one job"


def run_parameters(cmd: str) -> Dict[str, str]:
  params = {}
  for value in options_of(shlex.split(fill(cmd)), "--parameters"):
    for item in value.split(","):
      key, _, val = item.partition("=")
      params[key] = val
  return params


@pytest.mark.parametrize("cmd", _template_runs(), ids=_run_job)
def test_readme_template_runs_are_valid_for_their_job(cmd):
  """Each example run names a deployed job (``pipelines.JOBS``) and passes it parameters its
  template accepts, which its command line parses."""
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  job = _run_job(cmd)
  assert job in JOBS, f"the example runs {job!r}, not a job of pipelines.JOBS"
  runs = [cmd]
  argv = shlex.split(fill(runs[0]))
  for flag in ("--template-file-gcs-location", "--project", "--region", "--temp-location",
               "--staging-location", "--worker-machine-type", "--max-workers"):
    assert options_of(argv, flag), f"{job}: {flag} missing"
  params = run_parameters(runs[0])
  meta = {p["name"]: p for p in template(job)["parameters"]}
  parser = make_templates.job_parser(job)
  beam = {f[2:] for f in flags._flag_names(flags._beam_parser())}  # pylint: disable=protected-access
  assert {n for n, p in meta.items() if not p["isOptional"]} <= set(params)
  job_args, beam_args = [], []
  for key, value in params.items():
    assert key in meta or key in beam, f"{job}: --parameters {key} is neither a flag nor a " \
                                       f"Beam option"
    for regex in meta.get(key, {}).get("regexes", []):
      assert re.search(regex, value), f"{job}: {key}={value} does not match {regex}"
    (job_args if key in meta else beam_args).append(f"--{key}={value}")
  # What the launcher would pass the job parses (booleans as the launcher turns them).
  args, rest = flags.parse(parser, flex_launcher.translate_bools(parser, job_args) + beam_args)
  flags.records_config(parser, args)
  assert rest == beam_args


def test_readme_direct_dataflow_command_parses():
  from apache_beam.options.pipeline_options import (  # pylint: disable=g-import-not-at-top
      GoogleCloudOptions, PipelineOptions, WorkerOptions)
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  direct = [c for c in commands(readme_section()) if c.startswith("python -m pipelines ")
            and "DataflowRunner" in c]
  assert direct
  for cmd in direct:
    argv = shlex.split(fill(cmd))
    job = argv[3]
    assert job in JOBS, cmd
    parser = make_templates.job_parser(job)
    args, beam_args = flags.parse(parser, argv[4:])
    flags.records_config(parser, args)
    options = PipelineOptions(beam_args)
    assert options.view_as(WorkerOptions).sdk_container_image == f"{IMAGE}:0123abc"
    gcp = options.view_as(GoogleCloudOptions)
    assert gcp.project == "fake-project" and gcp.region == "us-central1"
    assert gcp.temp_location.startswith("gs://fake-bucket/")


def test_readme_names_the_moved_requirements_file():
  docs = "".join(read(p) for p in [os.path.join(REPO, "README.md")] +
                 glob.glob(os.path.join(REPO, "docs", "*.md")))
  assert "deploy/dataflow-requirements.txt" not in docs
  assert "deploy/dataflow/requirements.txt" in read(os.path.join(REPO, DOC))
