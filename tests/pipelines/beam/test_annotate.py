"""The annotation stage in the books and HotpotQA jobs: spaCy (blank model + an EntityRuler of
the Wikipedia job's aliases) finds mentions, the alias linker gives them the entity ids."""

import pytest
import json
import os

from schemas import entities as entities_schema
from schemas import manifest as manifest_schema
from pipelines import runner
from pipelines.inspector import cli as inspector_cli
from tests.pipelines.helpers import hotpot_record, record_mentions, write_json
from tests.pipelines.datasets.wikipedia.test_dataset import SMALL


FLAGS = ["--ner", "spacy", "--linker", "alias", "--linker_min_count", "1"]


@pytest.mark.slow
def test_books_get_linked_mentions(tmp_path, entities_dir):
  src = tmp_path / "in"
  src.mkdir()
  (src / "b.txt").write_text("Paris lies in France.\n\nThe seine flows; Xyzzy does not.\n")
  out = str(tmp_path / "out")
  assert runner.dataset_main("books", ["--input", str(src / "b.txt"), "--output_dir", out,
                                       "--entities_dir", entities_dir] + FLAGS + SMALL) == 0
  # The ruler finds the aliases (case-insensitively); the linker maps each to its entity.
  assert record_mentions(out, entities_dir) == [("France", "France"), ("Paris", "Paris"), ("seine", "Seine")]
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    m = manifest_schema.loads(f.read())
  stage = m["stages"]["annotate"]
  assert {k: stage[k] for k in ("input", "output", "mentions", "linked", "words")} == {
      "input": 1, "output": 1, "mentions": 3, "linked": 3, "words": 10}
  assert stage["busy_ms"] >= 0
  assert m["config"]["ner"] == "spacy" and m["config"]["linker"] == "alias"
  assert m["distributions"]["mentions_per_document"]["max"] == 3


@pytest.mark.slow
def test_hotpotqa_records_carry_entity_ids(tmp_path, entities_dir, capsys):
  path = write_json(tmp_path / "h.json", [hotpot_record(
      "q1", "Which river flows through Paris?", "Seine",
      [["Paris", ["Paris is the capital of France.", " The Seine flows through it."]]])])
  out = str(tmp_path / "out")
  assert runner.dataset_main("hotpotqa", ["--input", path, "--output_dir", out, "--entities_dir",
                                          entities_dir] + FLAGS + SMALL) == 0
  found = record_mentions(out, entities_dir)
  assert ("Seine", "Seine") in found and ("France", "France") in found
  assert all(title is not None for _, title in found)  # all linked: no unknown ids here
  summary = json.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  assert summary["stages"]["annotate"]["linked"] == len(found)
  # The inspector names the entities, from the vocabulary of the job's --entities_dir.
  assert inspector_cli.main(["--records_dir", out]) == 0
  shown = capsys.readouterr().out
  ids = {t: i for i, t in entities_schema.titles_by_id(entities_schema.read_vocabulary(
      os.path.join(entities_dir, "entities", "vocabulary.parquet"))).items()}
  assert f"⟦ENT {ids['Seine']} Seine Seine⟧" in shown
  assert f"⟦ENT {ids['France']} France France⟧" in shown


@pytest.mark.slow
def test_hotpotqa_paragraph_titles_link_their_mentions(tmp_path, entities_dir):
  # With an alias prior too strict to link anything, a mention equal to its paragraph's title
  # still gets that title's entity; others stay unknown.
  path = write_json(tmp_path / "h.json", [hotpot_record(
      "q1", "How long is it?", "long",
      [["Seine", ["The Seine is long.", " It is not in France at all."]]])])
  out = str(tmp_path / "out")
  flags = ["--ner", "spacy", "--linker", "alias", "--linker_min_count", "99"]
  assert runner.dataset_main("hotpotqa", ["--input", path, "--output_dir", out, "--entities_dir",
                                          entities_dir] + flags + SMALL) == 0
  found = set(record_mentions(out, entities_dir))
  assert found == {("Seine", "Seine"), ("France", None)}
  m = json.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  assert m["stages"]["annotate"]["linked_by_title"] >= 1


def test_most_linked_aliases_leave_out_stop_words_and_short_ascii():
  import pyarrow as pa
  from pipelines.beam.annotate import most_linked_aliases
  rows = [("the", 1, 50), ("US", 2, 40), ("東京", 3, 30), ("京", 3, 20), ("Paris", 4, 10),
          ("Paris", 5, 5), ("Lutetia", 4, 12), ("Nowhere", 0, 99)]
  table = pa.table({"alias": [r[0] for r in rows], "entity_id": [r[1] for r in rows],
                    "count": [r[2] for r in rows]})
  # By links to entities of the vocabulary (id 0 is outside it); "the" is a stop word, "US"
  # and "京" too short, 東京 kept (two characters, not ASCII).
  assert most_linked_aliases(table, 10) == ["東京", "Paris", "Lutetia"]
  assert most_linked_aliases(table, 1) == ["東京"]


@pytest.mark.slow
def test_annotate_fn_mentions_and_counters(entities_dir):
  # The DoFn without Beam: the lean path (no mentions yet, no titles) gives what the general
  # one gives; mentions are Mention tuples; counters and the distribution are the sums over
  # the documents, counted once a batch.
  from apache_beam.utils import shared
  from pipelines.beam.annotate import _AnnotateFn
  from pipelines.beam.annotation_config import AnnotationConfig
  from pipelines.document import Document, Mention

  config = AnnotationConfig(ner="spacy", linker="alias", entities_dir=entities_dir,
                            linker_min_count=1, batch_size=2)
  fn = _AnnotateFn(config, shared.Shared())
  fn.setup()
  fn.start_bundle()
  text = "Paris lies in France. The seine flows; Xyzzy does not. paris!"
  docs = [Document("a", text, "a"),
          Document("b", "Nothing here.", "b"),
          Document("c", text, "c"),  # the same text, in the next batch: annotated once
          Document("d", "France and the Seine.", "d", mentions=(Mention(0, 6, 0, "France"),)),
          Document("e", "", "e")]
  out = [d for batch in (docs[:2], docs[2:4], docs[4:]) for d in fn.process(batch)]
  assert [d.id for d in out] == ["a", "b", "c", "d", "e"]
  found = fn._annotators.find([text])[0]
  general = fn._resolve(zip(*found), text, [], {})
  assert out[0].mentions == out[2].mentions == tuple(general)
  assert [text[m.begin:m.end] for m in out[0].mentions] == ["Paris", "France", "seine", "paris"]
  assert all(type(m) is Mention and m.entity_id and m.entity == "" for m in out[0].mentions)
  assert out[1].mentions == () and out[4].mentions == ()
  assert out[3].mentions[0] == Mention(0, 6, 0, "France")  # kept; the overlapping span dropped
  assert ["Seine"] == ["France and the Seine."[m.begin:m.end] for m in out[3].mentions[1:]]
  added = [len(d.mentions) - len(i.mentions) for d, i in zip(out, docs)]
  stats = fn._stats
  assert {k: stats.counters[k] for k in ("annotate/input", "annotate/output",
                                         "annotate/mentions", "annotate/linked")} == {
      "annotate/input": 5, "annotate/output": 5, "annotate/mentions": sum(added),
      "annotate/linked": sum(1 for d, i in zip(out, docs) for m in d.mentions[len(i.mentions):]
                             if m.entity_id)}
  dist = stats.distributions["annotate/mentions_per_document"]
  assert (dist.count, dist.total, dist.max) == (5, sum(added), max(added))
  # An alias prior too strict to link anything: mentions, none linked.
  strict = _AnnotateFn(AnnotationConfig(ner="spacy", linker="alias", entities_dir=entities_dir,
                                        linker_min_count=99), shared.Shared())
  strict.setup()
  strict.start_bundle()
  (doc,) = strict.process([Document("a", text, "a")])
  assert [m.entity_id for m in doc.mentions] == [0, 0, 0, 0]
  assert strict._stats.counters["annotate/mentions"] == 4
  assert strict._stats.counters["annotate/linked"] == 0
