"""The Wikipedia job end to end on hand-made pages with known answers, on generated multistream
dumps read as splits, and on the real dump excerpts when present."""

import glob
import json
import os
import shutil

import pytest

from schemas import documents as documents_schema
from schemas import entities as entities_schema
from schemas import manifest as manifest_schema
from pipelines.datasets.wikipedia import fake_input as synth
from pipelines import runner
from tests.pipelines.helpers import read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SAMPLES = os.path.join(REPO, "..", "shared", "samples", "wikipedia")
SMALL = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "8"]

PAGES = [
    synth.PageSpec("Paris", "'''Paris''' is the capital of [[France]]. It lies on the "
                   "[[Seine|river Seine]], once called [[Lutetia]].\n\nA [[paris]]ian "
                   "walks. {{Infobox city|name=[[Ignored]]}} [[File:Eiffel.jpg|thumb|The "
                   "[[Eiffel Tower]] at night]]\n[[Category:Cities]]", page_id=10),
    synth.PageSpec("France", "'''France''' is a country.<ref>[[Nope]] a ref</ref> Its capital "
                   "is [[Paris]].\n\n== History ==\nKings ruled [[France]] long ago.",
                   page_id=11),
    synth.PageSpec("Lutetia", "#REDIRECT [[Paris]]", page_id=12, redirect="Paris"),
    synth.PageSpec("Seine", "The '''Seine''' flows through [[Paris, France|the city]].",
                   page_id=13),
    synth.PageSpec("Paris, France", "#REDIRECT [[Paris]]", page_id=14, redirect="Paris"),
    synth.PageSpec("Mercury (disambiguation)", "'''Mercury''' may refer to:\n* [[Mercury "
                   "(planet)]]\n{{disambiguation}}", page_id=15),
    synth.PageSpec("Talk:Paris", "Talk about [[Paris]].", namespace=1, page_id=16),
    synth.PageSpec("Empty", "{{stub}}\n[[Category:Stubs]]", page_id=17),
]


def _manifest(out):
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return manifest_schema.loads(f.read())


def _mentions(out):
  """(document id, mention text, entity id) of every mention in the records."""
  docs = documents_schema.load(out)
  found = []
  for r in read_records(out):
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc_id = r["document_id"][s].decode()
      L = len(r["token_ids"]) // len(r["segment_mask"])
      text = docs[doc_id]["text"][r["char_begin"][s * L + b]:r["char_end"][s * L + e]]
      found.append((doc_id, text, ent))
  return found


@pytest.mark.slow
@pytest.mark.parametrize("multistream, siteinfo", [(False, True), (True, True), (True, False)])
def test_links_become_mentions_of_redirect_resolved_entities(tmp_path, multistream, siteinfo):
  dump = str(tmp_path / "tiny-pages-articles-multistream.xml.bz2")
  synth.write_dump(PAGES, dump, multistream=multistream, pages_per_stream=2, siteinfo=siteinfo)
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0

  m = _manifest(out)
  assert m["counts"] == {"input": 8, "written": 3, "skipped": 5, "rejected": 0}
  assert m["skipped_by_reason"] == {"parse/disambiguation": 1, "parse/empty_after_cleaning": 1,
                                    "parse/namespace": 1, "parse/redirect": 2}
  vocab = entities_schema.read_vocabulary(os.path.join(out, "entities", "vocabulary.parquet"))
  # Paris: its bold title, [[Lutetia]] (a redirect), [[paris]]ian, France's [[Paris]] and
  # Seine's [[Paris, France|...]] (a redirect); France: Paris' link, its bold title and its own
  # link; Seine: Paris' link and its bold title.  Nothing from templates, refs or files.
  assert vocab.to_pylist() == [{"entity_id": 1, "title": "Paris", "count": 5},
                               {"entity_id": 2, "title": "France", "count": 3},
                               {"entity_id": 3, "title": "Seine", "count": 2}]
  by_text = {}
  for doc_id, text, ent in _mentions(out):
    by_text.setdefault((doc_id, text), set()).add(int(ent))
  assert by_text == {
      ("10", "Paris"): {1}, ("10", "France"): {2}, ("10", "river Seine"): {3},
      ("10", "Lutetia"): {1}, ("10", "parisian"): {1},
      ("11", "France"): {2}, ("11", "Paris"): {1},
      ("13", "Seine"): {3}, ("13", "the city"): {1}}
  docs = documents_schema.load(out)
  assert sorted(docs) == ["10", "11", "13"]
  assert "Eiffel" not in docs["10"]["text"] and "Ignored" not in docs["10"]["text"]
  assert "a ref" not in docs["11"]["text"]
  aliases = entities_schema.read_aliases(sorted(glob.glob(os.path.join(out, "entities",
                                                                       "aliases-*"))))
  pairs = {(a["alias"], a["title"]): a["count"] for a in aliases.to_pylist()}
  assert pairs[("the city", "Paris")] == 1 and pairs[("river Seine", "Seine")] == 1
  skipped = [json.loads(line) for f in glob.glob(os.path.join(out, "skipped", "*.jsonl"))
             for line in open(f, encoding="utf-8")]
  assert sorted(d["reason"] for d in skipped) == ["disambiguation", "empty_after_cleaning"]
  stats = json.load(open(os.path.join(out, "stats.json"), encoding="utf-8"))
  assert stats["entities"]["vocabulary"] == 3
  assert stats["mentions"]["labels"] >= 9


@pytest.mark.slow
def test_multistream_splits_equal_a_sequential_read_in_every_runner_mode(tmp_path):
  pages = list(synth.generate_pages(400, seed=3, words_per_page=120))
  split_dir, seq_dir = tmp_path / "split", tmp_path / "seq"
  split_dir.mkdir()
  seq_dir.mkdir()
  dump = str(split_dir / "gen-pages-articles-multistream.xml.bz2")
  synth.write_dump(pages, dump, multistream=True, pages_per_stream=20)
  shutil.copy(dump, seq_dir / "gen-pages-articles.xml.bz2")  # no index beside it: one split
  outs = {}
  runs = (("split", dump, []), ("seq", str(seq_dir / "gen-pages-articles.xml.bz2"), []),
          ("multi", dump, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]))
  for name, path, beam_flags in runs:
    outs[name] = str(tmp_path / f"out_{name}")
    assert runner.dataset_main("wikipedia", ["--input", path, "--output_dir", outs[name],
                                             "--streams_per_split", "3"] + SMALL + beam_flags) == 0
  split_m, seq_m = _manifest(outs["split"]), _manifest(outs["seq"])
  assert split_m["stages"]["read"]["splits"] >= 4 and seq_m["stages"]["read"]["splits"] == 1
  assert split_m["counts"] == seq_m["counts"]
  assert split_m["counts"]["input"] == len(pages)
  for pattern in ("records-*", "entities/*.parquet", "documents/*"):
    a = sorted(glob.glob(os.path.join(outs["split"], pattern)))
    for other in (("seq", "multi") if pattern != "documents/*" else ("multi",)):
      b = sorted(glob.glob(os.path.join(outs[other], pattern)))
      assert [os.path.basename(p) for p in a] == [os.path.basename(p) for p in b]
      for x, y in zip(a, b):  # whatever the splitting and the runner mode
        assert open(x, "rb").read() == open(y, "rb").read(), (x, other)
  strip = lambda d: {k: {f: v for f, v in doc.items() if f != "source_id"}  # noqa: E731
                     for k, doc in d.items()}
  assert strip(documents_schema.load(outs["split"])) == strip(documents_schema.load(outs["seq"]))


@pytest.mark.slow
def test_a_damaged_stream_is_one_dead_letter_and_the_rest_is_written(tmp_path):
  pages = list(synth.generate_pages(120, seed=5, words_per_page=80))
  dump = str(tmp_path / "d-pages-articles-multistream.xml.bz2")
  synth.write_dump(pages, dump, multistream=True, pages_per_stream=10)
  data = bytearray(open(dump, "rb").read())
  middle = len(data) // 2
  data[middle:middle + 40] = b"\x00" * 40  # corrupt one bz2 stream in the middle
  open(dump, "wb").write(bytes(data))
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0
  m = _manifest(out)
  assert m["rejected_by_reason"] and all(k.startswith("read/") for k in m["rejected_by_reason"])
  assert m["input_count_exact"] is False
  assert m["counts"]["written"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["testcorpus.xml.bz2", "enwiki-table-markup.xml.bz2"])
def test_real_dump_excerpts(tmp_path, name):
  path = os.path.join(SAMPLES, name)
  if not os.path.exists(path):
    pytest.skip(f"{path} not present")
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", ["--input", path, "--output_dir", out]) == 0
  m = _manifest(out)
  c = m["counts"]
  assert c["input"] == c["written"] + c["skipped"] + c["rejected"] and c["written"] > 0
  docs = documents_schema.load(out)
  for doc_id, text, _ in _mentions(out):
    assert text.strip() and "[[" not in text and "{{" not in text, (doc_id, text)
  for d in docs.values():
    assert "{|" not in d["text"] and "<ref" not in d["text"]


def test_bad_flags_are_usage_errors(tmp_path, capsys):
  for argv, flag in ((["--max_entities", "-1"], "--max_entities"),
                     (["--min_entity_count", "0"], "--min_entity_count"),
                     (["--streams_per_splits", "2"], "did you mean --streams_per_split")):
    with pytest.raises(SystemExit) as e:
      runner.dataset_main("wikipedia", ["--input", "x", "--output_dir", str(tmp_path / "o")] + argv)
    assert e.value.code == 2
    assert flag in capsys.readouterr().err


def test_a_missing_index_is_one_line_before_any_work(tmp_path, capsys):
  dump = str(tmp_path / "x-pages-articles-multistream.xml.bz2")
  synth.write_dump(PAGES[:2], dump, multistream=True)
  out = tmp_path / "out"
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", str(out), "--index",
                                           str(tmp_path / "missing-index.txt.bz2")]) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].endswith("does not exist") and "Traceback" not in "\n".join(err)
  assert not out.exists()


@pytest.mark.slow
def test_an_unusable_index_falls_back_to_reading_the_dump_whole(tmp_path):
  dump = str(tmp_path / "x-pages-articles-multistream.xml.bz2")
  index = synth.write_dump(PAGES, dump, multistream=True, pages_per_stream=2)
  with open(index, "wb") as f:
    f.write(b"not an index")
  out = str(tmp_path / "out")
  assert runner.dataset_main("wikipedia", ["--input", dump, "--output_dir", out] + SMALL) == 0
  m = _manifest(out)
  assert m["counts"] == {"input": 8, "written": 3, "skipped": 5, "rejected": 0}
  assert m["stages"]["read"]["unusable_index"] == 1 and m["stages"]["read"]["splits"] == 1
