"""Golden outputs of the five jobs: byte-identical before and after a refactoring (issue 26).

Each case runs one or more jobs in-process (``runner.dataset_main(job, argv)``, the local
in-memory FnApiRunner) with fixed small flags on a deterministic input -- generated
(``tests/golden/inputs.py``: seeded demo generators plus the pipeline tests' hand-made edge
cases) or the shared real-format samples (``../shared/samples``; those cases skip when it is
absent) -- and fingerprints the output directory: the sha256 of every file's bytes, keyed by
its path relative to the output directory (records shards, ``documents/``, ``dead_letter/``,
``skipped/``, ``manifest.json``, ``COMPLETED``, and the side files: ``entities/*.parquet``,
``stats.json``, ``stats.png``), plus the job's exit code.  The expected fingerprints are
``tests/golden/fingerprints.json``.

What is normalised before hashing, and why (nothing else is; everything else was checked to be
byte-identical across runs in separate processes and directories):

* the absolute path of the test's temporary directory becomes ``<TMP>`` and that of the shared
  samples ``<SAMPLES>``, in every file (the manifest's ``config.input``, ``inputs``, ``labels``
  and the ``source_id`` of documents, dead letters and skipped items name input files);
* in ``manifest.json``, the values of ``created_at`` (wall clock), ``git_revision`` (changes
  with every commit, ``+dirty`` with any edit) and of every ``*_ms`` counter (timings: the
  annotate stage's ``busy_ms`` and ``cpu_ms``, Cloud NL's ``rate_limit_wait_ms``) become
  ``"<varies>"``.

Parquet files are hashed as bytes: pyarrow writes them identically run after run (its version is
in their footer, so a pyarrow upgrade changes them; ``fingerprints.json`` records the library
versions it was made with, and a mismatch message shows when they differ).

When a difference is intended (a deliberate change of an output format or content), regenerate
the expected fingerprints and review the diff of ``fingerprints.json`` with the change:

    READTWICE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/golden

That rewrites the entries of the cases that ran (cases skipped for want of samples keep theirs)
and passes.  Never use it to make an unexplained difference go away: a refactoring must leave
this file untouched.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import hashlib
import json
import os
import re
from importlib import metadata
from typing import Callable, Dict, List, Optional

import pytest

from pipelines import runner
from tests.golden import inputs

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fingerprints.json")
REPO = os.path.dirname(os.path.dirname(HERE))
SAMPLES = os.path.abspath(os.path.join(REPO, "..", "shared", "samples"))
UPDATE = os.environ.get("READTWICE_UPDATE_GOLDEN") == "1"

# Fixed for every run (a case adds its own flags after these).  The inputs hold bad records on
# purpose, more than the default error budget (0.1) allows: any share is accepted (as the
# default was when the fingerprints were made).
FLAGS = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "12", "--log_level", "WARNING",
         "--max_error_fraction", "1"]
VARYING_MANIFEST_KEYS = ("created_at", "git_revision")
LIBRARIES = ("apache-beam", "pyarrow", "matplotlib", "tokenizers", "spacy", "numpy", "tfrecord")


@dataclasses.dataclass
class Run:
  name: str                           # the output directory's name, the fingerprint keys' prefix
  job: str
  args: Callable[[str], List[str]]    # input dir -> input flags (writes the input there)
  flags: List[str] = dataclasses.field(default_factory=list)  # may name "{out:<run>}"
  rc: int = 0


@dataclasses.dataclass
class Case:
  name: str
  runs: List[Run]
  samples: Optional[str] = None       # a path under ../shared/samples the case needs


def _samples(*parts: str) -> str:
  return os.path.join(SAMPLES, *parts)


def _timemachine_questions(base: str) -> List[str]:
  """Questions on the full Time Machine story of the samples, in the sample qaps.csv format."""
  os.makedirs(base, exist_ok=True)
  with open(_samples("narrativeqa", "qaps.csv"), encoding="utf-8", newline="") as f:
    header = next(csv.reader(f))
  path = os.path.join(base, "qaps.csv")
  doc = "72ddeff1fe6bb9841d1c1da4b3031001bf6b1f58"
  with open(path, "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerow([doc, "test", "What did the Time Traveller build?", "A time machine",
                "a machine", "", "", ""] + [""] * (len(header) - 8))
    w.writerow([doc, "test", "Who are the Eloi?", "People of the future", "the Eloi", "", "",
                ""] + [""] * (len(header) - 8))
  return ["--input", path, "--split", "test",
          "--documents", _samples("narrativeqa", "documents_full.csv"),
          "--stories_dir", _samples("narrativeqa", "stories")]


CASES = [
    # -- generated inputs ------------------------------------------------------------------
    Case("hotpotqa", [Run("out", "hotpotqa", inputs.hotpotqa, ["--num_shards", "3"])]),
    Case("wikipedia", [Run("out", "wikipedia", inputs.wikipedia)]),
    Case("books", [Run("out", "books", inputs.books)]),
    Case("triviaqa", [Run("out", "triviaqa", inputs.triviaqa),
                      Run("per_document", "triviaqa", inputs.triviaqa, ["--per_document"])]),
    Case("narrativeqa", [Run("story", "narrativeqa", inputs.narrativeqa),
                         Run("summary", "narrativeqa", inputs.narrativeqa,
                             ["--context", "summary"])]),
    # Entity annotation (spaCy ruler + alias linker) over the Wikipedia job's entities.
    Case("linked", [
        Run("entities", "wikipedia", inputs.wikipedia),
        Run("books", "books", inputs.books_annotated_text,
            ["--ner", "spacy", "--linker", "alias", "--linker_min_count", "1",
             "--entities_dir", "{out:entities}"]),
        Run("narrativeqa", "narrativeqa", inputs.narrativeqa,
            ["--ner", "spacy", "--linker", "alias", "--entities_dir", "{out:entities}"])]),
    # -- the shared real-format samples ----------------------------------------------------
    Case("hotpotqa-sample", [Run("out", "hotpotqa", lambda _: [
        "--input", _samples("hotpotqa", "hotpot_dev_distractor_v1.head20.json")])],
        samples="hotpotqa"),
    Case("triviaqa-sample", [Run("out", "triviaqa", lambda _: [
        "--input", _samples("triviaqa", "qa", "*.json"),
        "--evidence_dir", _samples("triviaqa", "evidence")])], samples="triviaqa"),
    Case("narrativeqa-sample", [
        Run(f"summary-{split}", "narrativeqa", lambda _, s=split: [
            "--input", _samples("narrativeqa", "qaps.csv"), "--split", s,
            "--context", "summary"]) for split in ("train", "valid", "test")] + [
        # The sample stories are excerpts without their end markers: nothing written, exit 1.
        Run("story-test", "narrativeqa", lambda _: [
            "--input", _samples("narrativeqa", "qaps.csv"), "--split", "test"], rc=1),
        Run("timemachine", "narrativeqa", _timemachine_questions)], samples="narrativeqa"),
    Case("wikipedia-sample", [Run("out", "wikipedia", lambda _: [
        "--input", ",".join([_samples("wikipedia", "testcorpus.xml.bz2"),
                             _samples("wikipedia", "enwiki-table-markup.xml.bz2")])])],
        samples="wikipedia"),
    Case("books-sample", [Run("out", "books", lambda _: [
        "--input", ",".join(sorted(glob.glob(_samples("books", "pg19", "*", "*.txt"))))])],
        samples=os.path.join("books", "pg19")),
]


# -- fingerprints --------------------------------------------------------------------------

def _normalise(rel: str, data: bytes, replacements: Dict[str, str]) -> bytes:
  for path, placeholder in replacements.items():
    data = data.replace(path.encode("utf-8"), placeholder.encode("utf-8"))
  if os.path.basename(rel) == "manifest.json":
    keys = "|".join(VARYING_MANIFEST_KEYS)
    data = re.sub(rb'"(' + keys.encode() + rb')": ("[^"]*"|null)', rb'"\1": "<varies>"', data)
    data = re.sub(rb'"(\w+_ms)": -?[0-9.]+', rb'"\1": "<varies>"', data)  # timings
  return data


def fingerprint(out: str, replacements: Dict[str, str]) -> Dict[str, str]:
  """sha256 of every file under ``out`` (normalised as the module docstring says), by relative
  path."""
  found = {}
  for root, dirs, files in os.walk(out):
    dirs.sort()
    for name in sorted(files):
      path = os.path.join(root, name)
      rel = os.path.relpath(path, out).replace(os.sep, "/")
      with open(path, "rb") as f:
        found[rel] = hashlib.sha256(_normalise(rel, f.read(), replacements)).hexdigest()
  return found


def run_case(case: Case, tmp: str) -> Dict[str, str]:
  outs: Dict[str, str] = {}
  result: Dict[str, str] = {}
  replacements = {tmp: "<TMP>", SAMPLES: "<SAMPLES>"}
  real = os.path.realpath(tmp)
  if real != tmp:
    replacements[real] = "<TMP>"
  for run in case.runs:
    out = os.path.join(tmp, "out", run.name)
    outs[run.name] = out
    flags = [re.sub(r"\{out:([^}]+)\}", lambda m: outs[m.group(1)], f) for f in run.flags]
    argv = run.args(os.path.join(tmp, "in", run.name)) + ["--output_dir", out] + FLAGS + flags
    rc = runner.dataset_main(run.job, argv)
    assert rc == run.rc, f"{case.name}/{run.name}: exit {rc}, expected {run.rc}"
    result[f"{run.name}/(exit code)"] = str(rc)
    result.update({f"{run.name}/{rel}": h for rel, h in fingerprint(out, replacements).items()})
  return result


def _environment() -> Dict[str, str]:
  env = {}
  for lib in LIBRARIES:
    try:
      env[lib] = metadata.version(lib)
    except metadata.PackageNotFoundError:
      env[lib] = "absent"
  return env


def _load() -> Dict:
  if not os.path.exists(GOLDEN):
    return {"environment": {}, "cases": {}}
  with open(GOLDEN, encoding="utf-8") as f:
    return json.load(f)


def _save(golden: Dict) -> None:
  with open(GOLDEN, "w", encoding="utf-8") as f:
    json.dump(golden, f, indent=1, sort_keys=True)
    f.write("\n")


def differences(expected: Dict[str, str], actual: Dict[str, str]) -> List[str]:
  lines = []
  for key in sorted(set(expected) | set(actual)):
    if key not in actual:
      lines.append(f"  missing now:  {key}")
    elif key not in expected:
      lines.append(f"  new file:     {key}")
    elif expected[key] != actual[key]:
      what = "changed" if not key.endswith("(exit code)") else (
          f"was {expected[key]}, now {actual[key]}:")
      lines.append(f"  {what:13} {key}")
  return lines


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_job_outputs_match_the_golden_fingerprints(case: Case, tmp_path, restore_logging):
  if case.samples and not os.path.exists(_samples(case.samples)):
    pytest.skip(f"../shared/samples/{case.samples} not present")
  actual = run_case(case, str(tmp_path))
  golden = _load()
  if UPDATE:
    golden["cases"][case.name] = actual
    golden["environment"] = _environment()
    _save(golden)
    return
  expected = golden["cases"].get(case.name)
  assert expected is not None, (
      f"no golden fingerprints for case {case.name!r}; run with READTWICE_UPDATE_GOLDEN=1")
  diff = differences(expected, actual)
  if diff:
    env, now = golden.get("environment", {}), _environment()
    changed_libs = [f"{k} {env.get(k)} -> {v}" for k, v in now.items() if env.get(k) != v]
    pytest.fail(
        f"outputs of case {case.name!r} differ from tests/golden/fingerprints.json "
        f"({len(diff)} of {len(set(expected) | set(actual))} entries):\n" + "\n".join(diff)
        + ("\nlibrary versions differ from the golden run: " + ", ".join(changed_libs)
           if changed_libs else "")
        + f"\n(outputs kept in {tmp_path / 'out'}; READTWICE_UPDATE_GOLDEN=1 rewrites the "
          "golden file -- only for an intended output change)", pytrace=False)


# The jobs reading JSON files, run again with the files split into ~1 KB byte ranges (every
# file of these cases is split into several), on two worker threads (a run on one worker reads
# every file whole): every output but the stats is byte-identical to the whole-file read's
# golden one (issue 29).  The stats (``stats.json``, its figure and the manifest's stage
# counters) gain ``read/splits``, the number of ranges.
SPLIT_CASES = [c for c in CASES if c.name in ("hotpotqa", "triviaqa", "hotpotqa-sample",
                                              "triviaqa-sample")]
SPLIT_FLAGS = ["--json_split_mb", str(1000 / 2 ** 20), "--direct_running_mode=multi_threading",
               "--direct_num_workers=2"]
STATS_FILES = ("manifest.json", "stats.json", "stats.png")


@pytest.mark.parametrize("case", SPLIT_CASES, ids=[c.name for c in SPLIT_CASES])
def test_json_read_in_byte_ranges_gives_the_golden_outputs(case: Case, tmp_path,
                                                           restore_logging):
  if case.samples and not os.path.exists(_samples(case.samples)):
    pytest.skip(f"../shared/samples/{case.samples} not present")
  split = Case(case.name, [dataclasses.replace(r, flags=r.flags + SPLIT_FLAGS)
                           for r in case.runs])
  actual = run_case(split, str(tmp_path))
  expected = _load()["cases"][case.name]
  stats = [k for k in expected if k.rsplit("/", 1)[-1] in STATS_FILES]
  assert stats and len(expected) > len(stats) + 3
  same = {k: v for k, v in expected.items() if k not in stats}
  assert differences(same, {k: v for k, v in actual.items() if k not in stats}) == []
  for run in split.runs:
    with open(os.path.join(tmp_path, "out", run.name, "manifest.json"), encoding="utf-8") as f:
      manifest = json.load(f)
    assert manifest["stages"]["read"]["splits"] > len(manifest["inputs"]), manifest["stages"]
