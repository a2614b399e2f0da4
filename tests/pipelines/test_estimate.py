"""``--estimate`` on every job (:mod:`pipelines.estimate`, :func:`pipelines.runner.estimate_job`):
exit 0 on a small input of each dataset, nothing written (no output dir, no claim, no temporary
file), a JSON last line whose figures follow from the measured table and the prices by hand;
the run's own one-line errors; an output dir holding a run is fine."""

import bz2
import collections
import dataclasses
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq
import pytest

from pipelines import estimate, runner
from pipelines.datasets.books import fake_input as books_fake
from pipelines.datasets.hotpotqa import fake_input as hotpotqa_fake
from pipelines.datasets.narrativeqa import fake_input as narrativeqa_fake
from pipelines.datasets.triviaqa import fake_input as triviaqa_fake
from pipelines.datasets.wikipedia import fake_input as wikipedia_fake
from tests import REPO_ROOT

pytestmark = pytest.mark.usefixtures("restore_logging")  # tests/conftest.py

SAMPLE_JSONL = REPO_ROOT / "pipelines" / "datasets" / "jsonl_qa" / "sample"


def tree(root) -> dict:
  """Every file and folder under ``root`` with its size and mtime."""
  out = {}
  for d, dirs, files in os.walk(root):
    for name in dirs + files:
      p = os.path.join(d, name)
      st = os.stat(p)
      out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
  return out


NQA_QUESTIONS = 5  # per generated story


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
  """A temporary-files folder of the test's own (Beam's pipeline temp dir lands there)."""
  d = tmp_path / "tmpdir"
  d.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(d))
  return d


def make_input(name: str, root) -> list:
  """A small generated input of ``name`` under ``root``: the job's arguments."""
  root = str(root)
  if name == "hotpotqa":
    path, _ = hotpotqa_fake.write_questions(root, 4)
    return ["--input", path]
  if name == "wikipedia":
    return ["--input", wikipedia_fake.write_multistream(root, 6, 120)]
  if name == "books":
    books_fake.write_books(root, 2, 0.02)
    return ["--input", os.path.join(root, "*.txt")]
  if name == "triviaqa":
    triviaqa_fake.write_triviaqa(root, 3, 2, 0.05)
    return ["--input", os.path.join(root, "qa", "*-dev.json"),
            "--evidence_dir", os.path.join(root, "evidence")]
  if name == "narrativeqa":
    narrativeqa_fake.write_narrativeqa(root, 2, 0.01, NQA_QUESTIONS)
    return ["--input", os.path.join(root, "qaps.csv"), "--split", "test"]
  assert name == "jsonl_qa"
  shutil.copytree(SAMPLE_JSONL, root)
  return ["--input", os.path.join(root, "examples.jsonl")]


def run(name: str, argv, capsys):
  """(exit status, stdout lines, stderr) of ``python -m pipelines <name> ARGV``, in-process."""
  try:
    code = runner.dataset_main(name, list(argv) + ["--log_level", "WARNING"])
  except SystemExit as e:
    code = e.code
  out, err = capsys.readouterr()
  return code, out.splitlines(), err


def check_figures(e: dict, name: str) -> None:
  """The JSON's figures, recomputed by hand from the table and Dataflow's default worker."""
  cost = estimate.measured_costs()[name]
  assert e["cost_model"] == json.loads(json.dumps(dataclasses.asdict(cost)))
  mb = e["work"]["bytes"] / 1e6
  assert e["work"]["mb"] == pytest.approx(mb)
  assert e["decompression_cpu_hours"] == 0  # plain inputs; Wikipedia's bz2 is in its slope
  assert e["cpu_hours"] == pytest.approx((cost.fixed_cpu_s + cost.cpu_s_per_mb * mb) / 3600)
  d = e["dataflow"]
  assert (d["machine_type"], d["vcpus_per_worker"], d["memory_gb_per_worker"],
          d["disk_gb_per_worker"], d["disk_type"]) == ("n1-standard-1", 1, 3.75, 25,
                                                       "pd-standard")
  assert d["prices_usd"] == {"vcpu_hour": 0.056, "memory_gb_hour": 0.003557,
                             "disk_gb_hour": 0.000054}
  assert "us-central1" in d["prices_source"]
  work_h = cost.cpu_s_per_mb * mb / 3600 * estimate.DATAFLOW_OVERHEAD
  assert d["vcpu_hours_of_work"] == pytest.approx(work_h)
  assert d["workers"] == 1  # a small input: one worker's hour of work is plenty
  wall = estimate.DATAFLOW_STARTUP_MIN / 60 + work_h
  assert d["wall_hours"] == pytest.approx(wall)
  assert d["worker_hours"] == pytest.approx(wall)
  usd = d["cost_usd"]
  assert usd["vcpu"] == pytest.approx(wall * 1 * 0.056)
  assert usd["memory"] == pytest.approx(wall * 3.75 * 0.003557)
  assert usd["disk"] == pytest.approx(wall * 25 * 0.000054)
  assert usd["total"] == pytest.approx(usd["vcpu"] + usd["memory"] + usd["disk"])
  loc = e["local"]
  assert loc["cores"] == os.cpu_count()
  share = loc["share"]  # this process' CPU per wall s, bounded
  assert estimate.SHARE_BOUNDS[0] <= share <= estimate.SHARE_BOUNDS[1]
  parallel = min(os.cpu_count(), share * estimate.JOB_PARALLELISM)
  assert loc["hours"] * 3600 == pytest.approx(cost.fixed_cpu_s / share
                                              + cost.cpu_s_per_mb * mb / parallel, rel=1e-3)
  assert e["annotation"] is None  # no --ner
  assert e["assumptions"] and all(isinstance(a, str) for a in e["assumptions"])


@pytest.mark.parametrize("name", ["hotpotqa", "wikipedia", "books", "triviaqa", "narrativeqa",
                                  "jsonl_qa"])
def test_estimate_of_every_dataset_writes_nothing(name, tmp_path, private_tmp, capsys):
  argv = make_input(name, tmp_path / "in")
  out = tmp_path / "out"
  before = tree(tmp_path)
  code, lines, err = run(name, argv + ["--output_dir", str(out), "--estimate"], capsys)
  assert code == 0, err
  assert tree(tmp_path) == before  # no output dir, claim or temporary file
  assert not out.exists()
  assert lines[0].startswith(f"estimate for {name} ")
  assert any(l.strip().startswith("Dataflow USD") for l in lines)
  e = json.loads(lines[-1])
  assert e["estimate"] is True and e["job"] == name
  assert e["inputs"]["files"] >= 1 and e["inputs"]["bytes"] > 0
  assert e["work"]["bytes"] >= e["inputs"]["uncompressed_bytes"] or name == "wikipedia"
  check_figures(e, name)


@pytest.mark.slow
def test_side_inputs_are_counted_per_reference(tmp_path, private_tmp, capsys):
  # TriviaQA: every evidence file each question names, once per naming.
  argv = make_input("triviaqa", tmp_path / "t")
  code, lines, err = run("triviaqa", argv + ["--output_dir", str(tmp_path / "o"), "--estimate"],
                         capsys)
  assert code == 0, err
  e = json.loads(lines[-1])
  refs = collections.Counter()
  for path in sorted((tmp_path / "t" / "qa").glob("*-dev.json")):
    for datum in json.loads(path.read_text())["Data"]:
      for key, origin in (("EntityPages", "wikipedia"), ("SearchResults", "web")):
        for page in datum.get(key, []):
          refs[os.path.join(str(tmp_path / "t" / "evidence"), origin, page["Filename"])] += 1
  side = e["side_inputs"]["evidence"]
  assert side["references"] == sum(refs.values()) and side["files"] == len(refs)
  assert side["bytes"] == sum(os.path.getsize(p) * n for p, n in refs.items())
  assert side["missing"] == 0 and side["sized"] == "every file"
  assert e["work"]["bytes"] == e["inputs"]["uncompressed_bytes"] + side["bytes"]

  # NarrativeQA: each question's story (generated: NQA_QUESTIONS per story).
  argv = make_input("narrativeqa", tmp_path / "n")
  code, lines, err = run("narrativeqa", argv + ["--output_dir", str(tmp_path / "o"),
                                                "--estimate"], capsys)
  assert code == 0, err
  e = json.loads(lines[-1])
  stories = list((tmp_path / "n" / "tmp").glob("*.content"))
  side = e["side_inputs"]["stories"]
  assert side["stories"] == len(stories) == 2
  assert side["questions"] == 2 * NQA_QUESTIONS
  assert side["bytes"] == sum(p.stat().st_size for p in stories) * NQA_QUESTIONS

  # jsonl_qa: the context_file of every line naming one.
  argv = make_input("jsonl_qa", tmp_path / "j")
  code, lines, err = run("jsonl_qa", argv + ["--output_dir", str(tmp_path / "o"), "--estimate"],
                         capsys)
  assert code == 0, err
  e = json.loads(lines[-1])
  lines_with_file = [json.loads(l) for l in (tmp_path / "j" / "examples.jsonl").read_text()
                     .splitlines() if "context_file" in l]
  side = e["side_inputs"]["context_files"]
  assert side["references"] == len(lines_with_file) and side["files"] == 1
  assert side["bytes"] == len(lines_with_file) * (tmp_path / "j" / "aldbridge.txt").stat().st_size
  assert not (tmp_path / "o").exists()


def test_compressed_and_parquet_inputs_count_uncompressed(tmp_path, private_tmp, capsys):
  from tests.pipelines.datasets.hotpotqa.test_hub_parquet import records, write_parquet
  path, _ = hotpotqa_fake.write_questions(str(tmp_path / "h"), 6)
  raw = open(path, "rb").read()
  with gzip.open(path + ".gz", "wb") as f:
    f.write(raw)
  with open(path + ".bz2", "wb") as f:
    f.write(bz2.compress(raw))
  pq_path = write_parquet(tmp_path / "h" / "data.parquet", records())
  meta = pq.ParquetFile(pq_path).metadata
  pq_bytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
  code, lines, err = run("hotpotqa", ["--input", f"{path}.gz,{path}.bz2,{pq_path}",
                                      "--output_dir", str(tmp_path / "o"), "--estimate"], capsys)
  assert code == 0, err
  e = json.loads(lines[-1])
  kinds = e["inputs"]["by_kind"]
  assert kinds["gz"] == {"files": 1, "bytes": os.path.getsize(path + ".gz"),
                         "uncompressed_bytes": len(raw)}
  assert kinds["bz2"] == {"files": 1, "bytes": os.path.getsize(path + ".bz2"),
                          "uncompressed_bytes": len(raw)}
  assert kinds["parquet"] == {"files": 1, "bytes": os.path.getsize(pq_path),
                              "uncompressed_bytes": pq_bytes}
  assert e["work"]["bytes"] == 2 * len(raw) + pq_bytes
  cost = estimate.measured_costs()["hotpotqa"]
  rates = estimate.DECOMPRESS_CPU_S_PER_MB  # CPU s per uncompressed MB
  decompress = (rates["gz"] + rates["bz2"]) * len(raw) / 1e6
  assert e["decompression_cpu_hours"] == pytest.approx(decompress / 3600)
  assert e["cpu_hours"] == pytest.approx(
      (cost.fixed_cpu_s + cost.cpu_s_per_mb * e["work"]["mb"] + decompress) / 3600)


@pytest.mark.slow
def test_sampled_ratio_of_a_large_compressed_file(tmp_path, monkeypatch):
  monkeypatch.setattr(estimate.sizing, "SAMPLE_BYTES", 1 << 20)
  rng = random.Random(0)
  words = [f"w{i}" for i in range(3000)]
  text = " ".join(rng.choices(words, k=1_200_000)).encode()  # ~5.6 MB: > 1 MiB compressed
  for kind, comp in (("gz", gzip.compress), ("bz2", lambda b: bz2.compress(b, 1))):
    p = tmp_path / f"big.{kind}"
    p.write_bytes(comp(text))
    fed, out, whole = estimate.sample_ratio(str(p), kind)
    assert not whole and fed <= estimate.sizing.SAMPLE_BYTES
    assert out / fed == pytest.approx(len(text) / p.stat().st_size, rel=0.05)


def test_dataflow_workers_and_prices_follow_the_flags(small_input, tmp_path, private_tmp, capsys):
  code, lines, err = run("hotpotqa", [
      "--input", small_input, "--output_dir", str(tmp_path / "o"), "--estimate",
      "--runner", "DataflowRunner", "--project", "p", "--region", "us-central1",
      "--temp_location", "gs://b/tmp", "--machine_type", "n2-standard-4", "--num_workers", "3",
      "--disk_size_gb", "50", "--worker_disk_type", "pd-ssd", "--price_vcpu_hour", "0.1"],
      capsys)
  assert code == 0, err
  d = json.loads(lines[-1])["dataflow"]
  assert (d["machine_type"], d["vcpus_per_worker"], d["memory_gb_per_worker"], d["workers"],
          d["disk_gb_per_worker"], d["disk_type"]) == ("n2-standard-4", 4, 16, 3, 50, "pd-ssd")
  assert d["workers_from"] == "--num_workers"
  assert d["prices_usd"] == {"vcpu_hour": 0.1, "memory_gb_hour": 0.003557,
                             "disk_gb_hour": 0.000298}
  assert d["prices_source"].startswith("--price_* flags")
  wall = estimate.DATAFLOW_STARTUP_MIN / 60 + d["vcpu_hours_of_work"] / (3 * 4)
  assert d["wall_hours"] == pytest.approx(wall) and d["worker_hours"] == pytest.approx(3 * wall)
  usd = d["cost_usd"]
  assert usd["vcpu"] == pytest.approx(3 * wall * 4 * 0.1)
  assert usd["memory"] == pytest.approx(3 * wall * 16 * 0.003557)
  assert usd["disk"] == pytest.approx(3 * wall * 50 * 0.000298)


def test_worker_count_without_num_workers_grows_with_the_work():
  work = estimate.Work([estimate.FileSize("x", "plain", 0, 0, "")])
  workers = estimate.workers_from_args(["--max_num_workers", "7"])
  small = estimate.estimate("hotpotqa", work, workers)
  assert small["dataflow"]["workers"] == 1
  cost = estimate.measured_costs()["hotpotqa"]
  # Enough MB for 20 h of work: capped at --max_num_workers.
  work.extra_bytes = int(20 * 3600 / (cost.cpu_s_per_mb * estimate.DATAFLOW_OVERHEAD) * 1e6)
  big = estimate.estimate("hotpotqa", work, workers)["dataflow"]
  assert big["workers"] == 7 and "--max_num_workers" in big["workers_from"]
  assert big["vcpu_hours_of_work"] == pytest.approx(20, rel=1e-3)
  assert big["wall_hours"] == pytest.approx(estimate.DATAFLOW_STARTUP_MIN / 60 + 20 / 7,
                                            rel=1e-3)


def test_machine_shapes():
  assert estimate.machine_shape("n1-standard-1") == (1, 3.75)
  assert estimate.machine_shape("n1-highmem-8") == (8, 52)
  assert estimate.machine_shape("e2-standard-2") == (2, 8)
  assert estimate.machine_shape("custom-4-16384") == (4, 16)
  assert estimate.machine_shape("n2-custom-8-32768") == (8, 32)
  with pytest.raises(ValueError, match="unknown machine type"):
    estimate.machine_shape("x9-huge-3")


def test_missing_input_is_the_runs_one_line_and_writes_nothing(tmp_path, private_tmp, capsys):
  pattern = str(tmp_path / "nope-*.json")
  before = tree(tmp_path)
  code, lines, err = run("hotpotqa", ["--input", pattern, "--output_dir", str(tmp_path / "o"),
                                      "--estimate"], capsys)
  assert code == 1 and lines == []
  assert err.splitlines() == [
      f"python -m pipelines hotpotqa: error: --input '{pattern}' matches no file"]
  assert tree(tmp_path) == before


def test_a_datasets_own_check_is_the_runs_error(tmp_path, private_tmp, capsys):
  argv = make_input("narrativeqa", tmp_path / "n")
  argv += ["--stories_dir", str(tmp_path / "nowhere"), "--output_dir", str(tmp_path / "o")]
  code, lines, err_estimate = run("narrativeqa", argv + ["--estimate"], capsys)
  assert code == 1 and lines == []
  code, _, err_run = run("narrativeqa", argv, capsys)
  assert code == 1
  assert err_estimate == err_run and len(err_run.splitlines()) == 1
  assert "does not exist or holds no <document_id>.content story" in err_run


@pytest.mark.parametrize("extra, message", [
    (["--ner", "cloud", "--nl_cache_dir", "c", "--dry_run"],
     "--estimate runs nothing and --dry_run runs the annotation planner"),
    (["--price_vcpu_hour", "-1"], "--price_vcpu_hour must be >= 0"),
    (["--machine_type", "x9-huge-3"], "unknown machine type for --estimate"),
    (["--num_workers", "0"], "--num_workers must be >= 1"),
])
def test_bad_estimate_flags_are_usage_errors(extra, message, small_input, tmp_path, capsys):
  code, lines, err = run("hotpotqa", ["--input", small_input, "--output_dir",
                                      str(tmp_path / "o"), "--estimate"] + extra, capsys)
  assert code == 2 and lines == []
  assert len(err.splitlines()) == 1 and message in err
  assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_an_output_dir_holding_a_run_is_fine(small_input, tmp_path, private_tmp, capsys):
  out = tmp_path / "out"
  code, _, err = run("hotpotqa", ["--input", small_input, "--output_dir", str(out)], capsys)
  assert code == 0, err
  assert (out / "COMPLETED").exists()
  before = tree(tmp_path)
  code, lines, err = run("hotpotqa", ["--input", small_input, "--output_dir", str(out),
                                      "--estimate"], capsys)
  assert code == 0, err
  assert json.loads(lines[-1])["job"] == "hotpotqa"
  assert tree(tmp_path) == before


def test_cloud_ner_names_dry_run(small_input, tmp_path, private_tmp, capsys):
  code, lines, err = run("hotpotqa", ["--input", small_input, "--output_dir",
                                      str(tmp_path / "o"), "--estimate", "--ner", "cloud",
                                      "--nl_cache_dir", str(tmp_path / "cache")], capsys)
  assert code == 0, err
  cloud = json.loads(lines[-1])["cloud_nl"]
  assert cloud["units"] >= 1 and cloud["usd"] > 0 and "--dry_run" in cloud["note"]
  assert not (tmp_path / "cache").exists() and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_job_module_estimates_in_a_subprocess_writing_no_temporary_file(tmp_path):
  argv = make_input("triviaqa", tmp_path / "t")
  private = tmp_path / "tmpdir"
  private.mkdir()
  env = dict(os.environ, TMPDIR=str(private), TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run([sys.executable, "-m", "pipelines", "triviaqa", *argv, "--output_dir",
                         str(tmp_path / "o"), "--estimate"], cwd=str(REPO_ROOT), env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  e = json.loads(proc.stdout.strip().splitlines()[-1])
  assert e["job"] == "triviaqa" and e["side_inputs"]["evidence"]["references"] > 0
  assert list(private.iterdir()) == [] and not (tmp_path / "o").exists()


def test_a_job_without_a_measured_cost_is_priced_as_the_dearest_and_says_so():
  work = estimate.Work([estimate.FileSize("x", "plain", 2_000_000, 2_000_000, "as stored")])
  e = estimate.estimate("no_such_dataset", work, estimate.workers_from_args([]), share=1.0)
  name, dearest = max(estimate.measured_costs().items(), key=lambda kv: kv[1].cpu_s_per_mb)
  assert (json.loads(json.dumps(e["cost_model"]))
          == json.loads(json.dumps(dataclasses.asdict(dearest))))
  assert e["assumptions"][0] == (f"no measured cost for no_such_dataset: {name}'s (the dearest "
                                 "per MB) is used")
  assert e["work"]["measure"] == "input bytes"
  assert estimate.dataset_cost("no_such_dataset") is None


def test_side_inputs_count_their_bytes_and_name_their_missing_files(tmp_path):
  """jsonl_qa's context files (its folder's cost.py through Work.add_side): the found file's
  bytes are work, a missing one is a note; a Work without side inputs has neither."""
  from pipelines.beam.inputs import describe_inputs  # pylint: disable=g-import-not-at-top
  (tmp_path / "story.txt").write_text("x" * 1000, encoding="utf-8")
  lines = [{"id": "a", "question": "q?", "answers": ["x"], "context_file": "story.txt"},
           {"id": "b", "question": "q?", "answers": ["x"], "context_file": "story.txt"},
           {"id": "c", "question": "q?", "answers": ["x"], "context_file": "gone.txt"}]
  path = tmp_path / "qa.jsonl"
  path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
  work = estimate.measure("jsonl_qa", describe_inputs(str(path)))
  side = work.side["context_files"]
  assert (side["files"], side["references"], side["bytes"], side["missing"]) == (2, 3, 2000, 1)
  assert work.extra_bytes == 2000 and work.work_bytes == os.path.getsize(path) + 2000
  assert work.notes == ["1 lines name a missing context_file (dead letters "
                        "missing_context_file in a run)"]
  plain = estimate.Work([])
  plain.add_side("x", {"bytes": 5, "missing": 0}, "{n} missing")
  assert plain.notes == [] and plain.extra_bytes == 5
  plain.add_side("y", {"bytes": 0, "missing": 1234}, "{n} missing")
  assert plain.notes == ["1,234 missing"]
