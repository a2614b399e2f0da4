"""``--estimate`` counts what a run spends time on (:mod:`pipelines.estimate`): entity
annotation (spaCy, the alias table, the EntityRuler's patterns; Cloud NL requests, units and
price) and the start-up, scaled by the share of a core a run gets here now.  That each README
quick start's pipeline commands take within +-30% of their estimate is checked where they run:
``tests/test_readme_quickstarts.py`` estimates each right before its run."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import estimate
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.entities.cloud_nl import CloudConfig
from pipelines.errors import UserError
from schemas import entities as entities_schema


def books_work(files: int = 2, mb_each: float = 1.0) -> estimate.Work:
  return estimate.Work([estimate.FileSize(f"/b/{i}.txt", "plain", int(mb_each * 1e6),
                                          int(mb_each * 1e6), "as stored")
                        for i in range(files)])


def entities_dir(root, rows: int) -> str:
  """A Wikipedia job's entity tables with ``rows`` aliases (two alias files)."""
  d = root / "wiki"
  (d / entities_schema.ENTITIES_DIR).mkdir(parents=True)
  pq.write_table(pa.Table.from_pydict({"entity_id": [1], "title": ["A"], "count": [2]},
                                      schema=entities_schema.VOCABULARY_SCHEMA),
                 d / entities_schema.ENTITIES_DIR / entities_schema.VOCABULARY_FILE)
  half = rows // 2
  for k, (lo, hi) in enumerate(((0, half), (half, rows))):
    names = [f"Name{i}" for i in range(lo, hi)]
    pq.write_table(pa.Table.from_pydict(
        {"alias": names, "entity_id": [1] * len(names), "title": names,
         "count": [3] * len(names)}, schema=entities_schema.ALIAS_SCHEMA),
        d / entities_schema.ENTITIES_DIR
        / f"{entities_schema.ALIASES_PREFIX}-0000{k}-of-00002.parquet")
  return str(d)


def run_estimate(options, share=0.5, work=None):
  return estimate.estimate("books", work or books_work(), estimate.workers_from_args([]),
                           options, share=share)


def test_spacy_annotation_is_in_the_estimate(tmp_path):
  a = estimate.ANNOTATION
  plain = run_estimate(AnnotationConfig())
  spacy = run_estimate(AnnotationConfig(ner="spacy"))
  wiki = entities_dir(tmp_path, 3000)
  linked = run_estimate(AnnotationConfig(ner="spacy", linker="alias", entities_dir=wiki,
                                         ruler_patterns=1000))
  words = 2.0 * estimate.dataset_cost("books").words_per_mb
  assert plain["annotation"] is None
  ann = spacy["annotation"]
  assert ann["words"] == pytest.approx(words, abs=1) and ann["alias_rows"] == 0
  assert ann["cpu_s"] == pytest.approx(a["start_cpu_s"] + a["cpu_s_per_word"] * words, rel=1e-4)
  # The CPU, the local time and Dataflow's work all grow by it (the same 0.1 min before).
  assert (spacy["cpu_hours"] - plain["cpu_hours"]) * 3600 == pytest.approx(ann["cpu_s"])
  assert (spacy["local"]["hours"] - plain["local"]["hours"]) * 3600 == pytest.approx(
      ann["cpu_s"] / 0.5, rel=1e-3)
  assert spacy["dataflow"]["vcpu_hours_of_work"] > plain["dataflow"]["vcpu_hours_of_work"]
  # The alias table (every row: linker and ranking) and the ruler (--ruler_patterns of them).
  ann = linked["annotation"]
  assert (ann["alias_rows"], ann["patterns"]) == (3000, 1000)
  assert ann["start_cpu_s"] == pytest.approx(
      a["start_cpu_s"] + 3000 * a["cpu_s_per_alias_row"] + 1000 * a["cpu_s_per_pattern"])
  assert ann["cpu_s_per_word"] == pytest.approx(
      a["cpu_s_per_word"] + a["cpu_s_per_word_per_1k_patterns"])
  # An installed model (a folder spaCy loads): its load and its (much lower) words per second;
  # a name that is not installed fails as the run's workers would, in one line.
  with pytest.raises(UserError, match=r"--spacy_model 'no_such_model_xyz' is not installed"):
    run_estimate(AnnotationConfig(ner="spacy", spacy_model="no_such_model_xyz"))
  on_dataflow = estimate.estimate(  # the workers' container may hold it: a note
      "books", books_work(), estimate.workers_from_args(["--runner", "DataflowRunner"]),
      AnnotationConfig(ner="spacy", spacy_model="no_such_model_xyz"), share=0.5)
  assert any("'no_such_model_xyz' is not installed here (the workers' container must hold it)"
             in a for a in on_dataflow["assumptions"])
  model = run_estimate(AnnotationConfig(ner="spacy", spacy_model=str(tmp_path)))["annotation"]
  assert model["cpu_s"] == pytest.approx(
      a["start_cpu_s"] + estimate.MODEL_LOAD_CPU_S
      + words * (a["cpu_s_per_word"] + 1 / estimate.MODEL_WORDS_PER_CPU_S), rel=1e-4)


def test_an_entities_dir_without_readable_alias_files_is_one_line(tmp_path):
  wiki = entities_dir(tmp_path, 10)
  files = sorted((tmp_path / "wiki" / entities_schema.ENTITIES_DIR).glob("aliases-*"))
  config = AnnotationConfig(ner="spacy", linker="alias", entities_dir=wiki)
  files[0].write_bytes(b"not parquet")
  with pytest.raises(UserError, match=r"aliases-00000-of-00002\.parquet is not a readable "
                                      r"Parquet alias file \(ArrowInvalid\); rerun python -m "
                                      r"pipelines wikipedia$"):
    run_estimate(config)
  for f in files:
    f.unlink()
  with pytest.raises(UserError, match=r"--entities_dir .*wiki: no alias files match .*"
                                      r"aliases-\*\.parquet \(the output dir of python -m "
                                      r"pipelines wikipedia holds them\)$"):
    run_estimate(config)


def test_cloud_nl_requests_units_and_price(tmp_path):
  def cloud(**kw):
    config = AnnotationConfig(ner="cloud", cloud=CloudConfig(cache_dir=str(tmp_path), **kw.pop(
        "cloud", {})), **kw)
    return run_estimate(config, work=books_work(3, 1.0))
  e = cloud()
  chars = 3.0 * estimate.dataset_cost("books").words_per_mb * estimate.CHARS_PER_WORD
  requests = max(3, chars / 100_000)  # one per book at least, <= --nl_max_request_chars each
  units = chars / 1000 + requests / 2
  c = e["cloud_nl"]
  assert c["characters"] == pytest.approx(chars, abs=1)
  assert c["requests"] == pytest.approx(requests, abs=1)
  assert c["units"] == pytest.approx(units, abs=1)
  assert c["usd"] == pytest.approx(units / 1000 * 1.0)  # the documented $1.00 per 1,000 units
  assert e["dataflow"]["cost_usd"]["total_with_cloud_nl"] == pytest.approx(
      e["dataflow"]["cost_usd"]["total"] + c["usd"])
  stage = "Cloud NL requests (rate limit, one worker process)"
  assert e["local"]["stages_s"][stage] == pytest.approx(requests * 60 / 600, abs=0.01)
  # NarrativeQA: 30 questions per story, each holding the story; a story is sent once.
  nqa = books_work(1, 3.0)
  nqa.side["stories"] = {"stories": 2, "files": 2, "questions": 60, "bytes": 0}
  config = AnnotationConfig(ner="cloud", cloud=CloudConfig(cache_dir=str(tmp_path)))
  n = estimate.estimate("narrativeqa", nqa, estimate.workers_from_args([]), config, share=1.0)
  assert n["cloud_nl"]["characters"] == pytest.approx(
      3.0 * estimate.dataset_cost("narrativeqa").words_per_mb * estimate.CHARS_PER_WORD / 30, abs=1)
  assert n["cloud_nl"]["requests"] == 2
  cheap = cloud(price_per_1000_units=0.25, cloud={"max_request_chars": 10_000})["cloud_nl"]
  assert cheap["requests"] == pytest.approx(chars / 10_000, abs=1)
  assert cheap["usd"] == pytest.approx((chars / 1000 + chars / 10_000 / 2) / 1000 * 0.25,
                                       rel=1e-3)


def test_local_time_follows_the_share_of_a_core():
  cost = estimate.measured_costs()["books"]
  half, whole = run_estimate(None, share=0.5), run_estimate(None, share=1.0)
  start = "start-up (interpreter, imports, graph, manifest, stats report)"
  assert half["local"]["stages_s"][start] == pytest.approx(cost.fixed_cpu_s / 0.5, abs=0.01)
  assert whole["local"]["stages_s"][start] == pytest.approx(cost.fixed_cpu_s, abs=0.01)
  per_mb = "read, parse, tokenize, segment, write"
  assert whole["local"]["stages_s"][per_mb] == pytest.approx(
      cost.cpu_s_per_mb * 2 / min(os.cpu_count(), estimate.JOB_PARALLELISM), abs=0.01)
  low = run_estimate(None, share=0.01)["local"]
  assert low["share"] == estimate.SHARE_BOUNDS[0]
  measured = estimate.process_share()  # this process, on Linux
  assert measured is None or measured > 0
