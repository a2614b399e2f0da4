"""Offline checks of the Dataflow deployment (deploy/dataflow/, docs/dataflow.md "Running the
pipelines on Dataflow"); nothing here talks to Google Cloud or builds an image.

* Each Flex Template (``deploy/dataflow/templates/<job>.json``) has exactly the flags its
  pipeline defines (read from the job's ``--help`` and its real parser), typed, required and
  defaulted as the flags are, and the committed files are what ``make_templates.py`` generates.
* Each pipeline's job graph builds for the DataflowRunner without submitting: the real
  ``python -m pipelines <job>`` path and the Flex Template launcher's path, with Beam's
  ``dry_run`` test option (the runner translates the graph and stops before staging or
  submitting), on tiny local inputs.  The rendered Dataflow job environment carries the custom
  container, machine type, autoscaling and resource hints.
* The Dockerfile is Beam's Python 3.11 SDK image at the pinned Beam version and installs the
  ``pipeline`` extra at the requirements.txt pins, without TensorFlow; its launcher stage takes
  its job from the registry (``pipelines.JOBS``) and runs it through the one entry point
  ``launch.py``; the Cloud Build config, worker requirements file and the commands of
  docs/dataflow.md agree with the templates.

Negative cases show that each check fails on what it is meant to catch.
"""

import argparse
import ast
import contextlib
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
JOBS = ("hotpotqa", "wikipedia", "books", "triviaqa", "narrativeqa")
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


def template(job: str) -> Dict:
  return json.loads(read(make_templates.template_path(job)))


pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py


# --- the jobs ---------------------------------------------------------------------------------

def test_every_deployed_dataset_is_deployed():
  """Every deployed dataset of the registry (``pipelines.JOBS``) has a template (and a Cloud
  Build step, below); all of them run through the one entry point ``launch.py`` and the generic
  ``python -m pipelines <dataset>``: no per-dataset launcher script or pipelines module."""
  assert tuple(pipelines.JOBS) == JOBS  # what the launcher, templates and image check use
  assert sorted(os.listdir(make_templates.TEMPLATES)) == sorted(f"{j}.json" for j in JOBS)
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


def test_committed_templates_are_the_generated_ones(tmp_path, monkeypatch, capsys):
  for job in JOBS:
    assert read(make_templates.template_path(job)) == make_templates.render(job), (
        f"{job}.json is out of date: run python deploy/dataflow/make_templates.py")
  # --check notices a stale file and leaves it alone; writing repairs it.
  for job in JOBS:
    (tmp_path / f"{job}.json").write_text(make_templates.render(job), encoding="utf-8")
  stale = template("books")
  stale["parameters"].pop()
  (tmp_path / "books.json").write_text(json.dumps(stale), encoding="utf-8")
  monkeypatch.setattr(make_templates, "TEMPLATES", str(tmp_path))
  assert make_templates.main(["--check"]) == 1
  assert "books.json" in capsys.readouterr().err
  assert json.loads((tmp_path / "books.json").read_text()) == stale
  assert make_templates.main([]) == 0
  assert make_templates.main(["--check"]) == 0


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

def tiny_inputs(job: str, base: str) -> List[str]:
  """A tiny input for ``job`` under ``base`` (graph construction only lists and stats files)
  and the job flags that name it."""
  os.makedirs(base, exist_ok=True)

  def write(rel: str, text, mode: str = "w") -> str:
    path = os.path.join(base, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
      f.write(text)
    return path

  if job == "hotpotqa":
    record = {"_id": "q1", "question": "Which city hosts the Louvre?", "answer": "Paris",
              "context": [["Paris", ["Paris hosts the Louvre."]]],
              "supporting_facts": [["Paris", 0]], "type": "bridge", "level": "easy"}
    return ["--input", write("hotpot.json", json.dumps([record]))]
  if job == "wikipedia":
    import bz2  # pylint: disable=g-import-not-at-top
    xml = (b"<mediawiki><page><title>Paris</title><ns>0</ns><id>1</id><revision><id>2</id>"
           b"<text>'''Paris''' is in [[France]].</text></revision></page></mediawiki>")
    return ["--input", write("tiny-pages-articles.xml.bz2", bz2.compress(xml), "wb")]
  if job == "books":
    return ["--input", write("books/one.txt", "Call me Ishmael. Some years ago.\n"),
            "--ner", "spacy"]
  if job == "triviaqa":
    write("evidence/wikipedia/Paris.txt", "Paris hosts the Louvre.")
    question = {"Question": "Which city hosts the Louvre?", "QuestionId": "tq1",
                "Answer": {"Value": "Paris", "Aliases": ["Paris"]},
                "EntityPages": [{"Filename": "Paris.txt", "Title": "Paris"}]}
    qa = write("qa/wikipedia-dev.json", json.dumps({"Data": [question], "Domain": "Wikipedia"}))
    return ["--input", qa, "--evidence_dir", os.path.join(base, "evidence")]
  if job == "narrativeqa":
    story = "0" * 40
    qaps = write("qaps.csv", "document_id,set,question,answer1,answer2,question_tokenized,"
                 f"answer1_tokenized,answer2_tokenized\n{story},test,Who?,Him,He,Who ?,Him,He\n")
    write("documents.csv", "document_id,set,kind,story_url,story_file_size,wiki_url,"
          f"wiki_title,story_word_count,story_start,story_end\n{story},test,gutenberg,u,1,w,T,"
          "3,Once,end\n")
    write(f"tmp/{story}.content", "Once upon a time . The end")
    return ["--input", qaps, "--split", "test"]
  raise ValueError(job)


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


def test_cloud_build_builds_the_worker_and_every_launcher():
  config = yaml.safe_load(read(os.path.join(DEPLOY, "cloudbuild.yaml")))
  dockerfile = read(os.path.join(DEPLOY, "Dockerfile"))
  stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", dockerfile, re.M))
  args_of = {s["id"]: s["args"] for s in config["steps"]}
  assert set(args_of) == {"worker"} | {f"launcher-{j}" for j in JOBS}
  tags = []
  for step_id, args in args_of.items():
    assert args[:3] == ["build", "-f", "deploy/dataflow/Dockerfile"] and args[-1] == "."
    target = args[args.index("--target") + 1]
    assert target in stages
    build_args = dict(a.split("=", 1) for a in args[1:] if "=" in a)
    tags.append(args[args.index("-t") + 1])
    if step_id == "worker":
      assert target == "worker" and tags[-1] == "${_IMAGE}:${_TAG}"
    else:
      job = step_id.split("-", 1)[1]
      assert target == "launcher" and build_args["JOB"] == job
      assert build_args["SDK_CONTAINER_IMAGE"] == "${_IMAGE}:${_TAG}"
      assert tags[-1] == f"${{_IMAGE}}:${{_TAG}}-{job}"
  assert sorted(config["images"]) == sorted(tags)
  used = set(re.findall(r"\$\{(_[A-Z_]+)\}", read(os.path.join(DEPLOY, "cloudbuild.yaml"))))
  assert used <= set(config["substitutions"])


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


def test_readme_builds_the_images_and_every_template():
  section = readme_section()
  cmds = commands(section)
  builds = [c for c in cmds if c.startswith("gcloud builds submit")]
  assert builds and "--config deploy/dataflow/cloudbuild.yaml" in builds[0]
  assert "_IMAGE=${IMAGE}" in builds[0] and "_TAG=${TAG}" in builds[0]
  loop = re.search(r"for job in ([a-z ]+); do", section)
  assert loop and loop.group(1).split() == list(JOBS)
  template_build = [c for c in cmds if "gcloud dataflow flex-template build" in c]
  assert len(template_build) == 1
  argv = shlex.split(template_build[0])
  assert argv[argv.index("build") + 1] == "gs://${BUCKET}/templates/${job}.json"
  assert options_of(argv, "--image") == ["${IMAGE}:${TAG}-${job}"]
  assert options_of(argv, "--sdk-language") == ["PYTHON"]
  assert options_of(argv, "--metadata-file") == ["deploy/dataflow/templates/${job}.json"]


def run_parameters(cmd: str) -> Dict[str, str]:
  params = {}
  for value in options_of(shlex.split(fill(cmd)), "--parameters"):
    for item in value.split(","):
      key, _, val = item.partition("=")
      params[key] = val
  return params


@pytest.mark.parametrize("job", JOBS)
def test_readme_runs_every_template_with_valid_parameters(job):
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  section = readme_section()
  runs = [c for c in commands(section) if c.startswith("gcloud dataflow flex-template run")
          and f"gs://${{BUCKET}}/templates/{job}.json" in c]
  assert len(runs) == 1, f"no single flex-template run of {job}"
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
