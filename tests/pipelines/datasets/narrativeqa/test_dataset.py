"""The NarrativeQA job on a hand-made official layout (CSV quirks, CRLF/BOM/Latin-1 stories, an
HTML script, missing markers and files) and on the real-format samples."""

import csv
import io
import json
import os

import pytest

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from pipelines import runner
from pipelines.datasets.narrativeqa import reader, stages
from pipelines.errors import UserError
from tests.pipelines.helpers import read_records

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shared", "samples",
                       "narrativeqa")
FLAGS = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "12"]

BOOK = ("The Project Gutenberg header that is not the story.\r\n\r\n"
        "Produced by Someone\r\n\r\nCHAPTER I.\r\n\r\nOld Mr. Ashby kept bees in the orchard\r\n"
        "behind the mill, and every spring he sold the honey in the town of Wexley.\r\n\r\n"
        "His niece Clara was a teacher at the village school.\r\n\r\n"
        "THE END.\r\n\r\nEnd of the Project Gutenberg EBook; licence text follows.\r\n")
SCRIPT = ("<html><head><title>Script</title><style>b {color: red}</style></head><body><pre>\n"
          "<b>                    SAWMILL</b>\n\n          FADE IN:\n\n"
          "          Jo &amp; Sam argue at the sawmill.<br>\n"
          "          JO: The logs go to Harbor Town by river.\n\n          FADE OUT.\n"
          "</pre></body></html>\n")
LATIN1 = "Producido por Ana.\n\nEl señor Núñez vivía en Cádiz con su perro.\n\nFIN.\n"


def _csv(path, header, rows, line_end="\r\n", bom=False):
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator=line_end)
  w.writerow(header)
  w.writerows(rows)
  with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
    f.write(buf.getvalue())


def make_layout(root):
  """A small official layout: 4 test stories (one without its file), 1 train story."""
  os.makedirs(os.path.join(root, "tmp"))
  os.makedirs(os.path.join(root, "third_party", "wikipedia"))
  header = ["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url",
            "wiki_title", "story_word_count", "story_start", "story_end"]
  docs = [["book1", "test", "gutenberg", "u", "1", "w", "Book", "50", "Produced by Someone",
           "THE END ."],
          ["script1", "test", "movie", "u", "1", "w", "Sawmill", "30", "SAWMILL", "FADE OUT ."],
          ["broken1", "test", "gutenberg", "u", "1", "w", "B", "9", "Produced by Someone",
           "never there"],
          ["nofile1", "test", "gutenberg", "u", "1", "w", "N", "9", "a", "b"],
          ["latin1", "test", "gutenberg", "u", "1", "w", "L", "9", "Producido por", "FIN ."],
          ["trainbook", "train", "gutenberg", "u", "1", "w", "T", "9", "Produced by", "END"]]
  _csv(os.path.join(root, "documents.csv"), header, docs)
  with open(os.path.join(root, "tmp", "book1.content"), "wb") as f:
    f.write(b"\xef\xbb\xbf" + BOOK.encode("utf-8"))  # BOM + CRLF
  with open(os.path.join(root, "tmp", "script1.content"), "w", encoding="utf-8") as f:
    f.write(SCRIPT)
  with open(os.path.join(root, "tmp", "broken1.content"), "w", encoding="utf-8") as f:
    f.write(BOOK)
  with open(os.path.join(root, "tmp", "latin1.content"), "wb") as f:
    f.write(LATIN1.encode("latin-1"))
  qheader = ["document_id", "set", "question", "answer1", "answer2", "question_tokenized",
             "answer1_tokenized", "answer2_tokenized"]
  questions = [
      ["book1", "test", "What did Mr. Ashby keep?", "bees", "He kept bees in the orchard.",
       "", "", ""],
      ["script1", "test", "Where do the logs go?", "To Harbor Town.", "by river", "", "", ""],
      ["book1", "test", "Who was Clara?", "His niece, a teacher at the village school.",
       "a teacher", "", "", ""],
      ["broken1", "test", "Q1?", "a", "b", "", "", ""],
      ["broken1", "test", "Q2?", "a", "b", "", "", ""],
      ["nofile1", "test", "Q?", "a", "b", "", "", ""],
      ["ghost", "test", "Whose story is missing?", "nobody's", "none", "", "", ""],
      ["latin1", "test", "Where did Núñez live?", "In Cádiz", "Cadiz", "", "", ""],
      ["trainbook", "train", "Not this split?", "x", "y", "", "", ""],
  ]
  _csv(os.path.join(root, "qaps.csv"), qheader, questions, line_end="\n")
  _csv(os.path.join(root, "third_party", "wikipedia", "summaries.csv"),
       ["document_id", "set", "summary", "summary_tokenized"],
       [["book1", "test", "Mr. Ashby, a beekeeper, sells honey in Wexley.", ""],
        ["script1", "test", "Two workers argue at a sawmill.", ""]])
  return os.path.join(root, "qaps.csv")


def _manifest(out):
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return manifest_schema.loads(f.read())  # validates: counters reconcile


def _dead(out):
  lines = []
  d = os.path.join(out, "dead_letter")
  for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), encoding="utf-8") as f:
      lines += [json.loads(x) for x in f if x.strip()]
  return sorted((x["stage"], x["reason"], x["source_id"].rsplit(":", 1)[1]) for x in lines)


@pytest.mark.slow
def test_stories_are_read_once_and_every_question_is_accounted_for(tmp_path):
  qaps = make_layout(str(tmp_path / "nqa"))
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", out, "--split",
                                             "test", "--max_error_fraction", "1"] + FLAGS) == 0
  m = _manifest(out)
  # 8 test questions (the train one is not an input): 4 written, 4 dead letters.
  assert m["counts"] == {"input": 8, "written": 4, "skipped": 0, "rejected": 4}
  assert _dead(out) == [("parse", "missing_story_end", "5"), ("parse", "missing_story_end", "6"),
                        ("parse", "missing_story_file", "7"), ("parse", "unknown_document", "8")]
  stages = m["stages"]
  assert stages["read"]["other_split_rows"] == 1
  assert stages["parse"]["stories"] == 3 and stages["parse"]["output"] == 4
  assert stages["answers"]["stories"] == 3  # one word index per story, not per question
  # The texts tokenised: 3 stories + 4 questions, not a story per question.
  assert stages["segment"]["texts_tokenised"] == 7
  docs = documents_schema.load(out)
  assert sorted(docs) == ["book1:0", "book1:1", "latin1:0", "script1:0"]
  book = docs["book1:0"]["text"]
  assert book.startswith("Produced by Someone\n\nCHAPTER I.") and book.endswith("THE END.")
  assert "\r" not in book and "\ufeff" not in book and "header" not in book
  assert "orchard behind the mill" in book  # hard-wrapped lines joined
  assert docs["book1:1"]["text"] == book
  assert {d["source_document_id"] for k, d in docs.items() if k.startswith("book1")} == {"book1"}
  assert docs["book1:1"]["question"] == "Who was Clara?"
  script = docs["script1:0"]["text"]
  assert script.startswith("SAWMILL") and script.endswith("FADE OUT.")
  assert "<" not in script and "Jo & Sam" in script
  assert "señor Núñez vivía en Cádiz" in docs["latin1:0"]["text"]
  # Oracle spans, read back from the records through their char offsets.
  spans = {}
  for r in read_records(out):
    L = len(r["token_ids"]) // len(r["segment_mask"])
    for s, b, e in zip(r["answer_segment"], r["answer_begin"], r["answer_end"]):
      doc_id = r["document_id"][s].decode()
      text = docs[doc_id]["text"]
      spans.setdefault(doc_id, set()).add(
          text[r["char_begin"][s * L + b]:r["char_end"][s * L + e]])
  # Exact matches of either answer score 1.0; longer windows scoring >= 0.9 ("kept bees in the
  # orchard": 0.91 against answer2) overlap them, and kept spans never overlap.  A window is
  # whole words of the text ("river." keeps its full stop).
  assert spans == {"book1:0": {"bees"}, "book1:1": {"a teacher"}, "latin1:0": {"Cádiz"},
                   "script1:0": {"to Harbor Town", "by river."}}


@pytest.mark.slow
def test_summary_context(tmp_path):
  qaps = make_layout(str(tmp_path / "nqa"))
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", out, "--split",
                                             "test", "--context", "summary", "--max_error_fraction",
                                             "1"] + FLAGS) == 0
  m = _manifest(out)
  assert m["counts"]["written"] == 3  # book1 (2 questions) and script1 have summaries
  assert m["rejected_by_reason"] == {"parse/missing_summary": 5}
  docs = documents_schema.load(out)
  assert docs["book1:0"]["text"] == "Mr. Ashby, a beekeeper, sells honey in Wexley."


def test_markers_are_tokenised_text():
  text = "xx Produced by Nick\nA tale.\nto hear about new eBooks. And new eBooks.\nlicence"
  assert reader.cut_story(text, "Produced by Nick", "new eBooks .") == (
      "Produced by Nick\nA tale.\nto hear about new eBooks. And new eBooks.")
  with pytest.raises(Exception, match="missing_story_start"):
    reader.cut_story(text, "Produced by Jane", "new eBooks .")


def test_bad_flags_and_paths(tmp_path, capsys):
  qaps = make_layout(str(tmp_path / "nqa"))
  with pytest.raises(SystemExit) as e:
    runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", str(tmp_path / "o"),
                                        "--split", "dev"])
  assert e.value.code == 2 and "--split" in capsys.readouterr().err
  code = runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", str(tmp_path / "o"),
                                             "--stories_dir", str(tmp_path / "nowhere")])
  assert code == 1 and "holds no <document_id>.content" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no ../shared/samples")
@pytest.mark.parametrize("context", ["story", "summary"])
def test_real_format_samples(tmp_path, context, capsys):
  written = 0
  for split in reader.SPLITS:
    out = str(tmp_path / f"{split}-{context}")
    code = runner.dataset_main("narrativeqa", ["--input", os.path.join(SAMPLES, "qaps.csv"),
                                               "--output_dir", out, "--split", split, "--context",
                                               context])
    m = _manifest(out)
    assert m["counts"]["input"] == 1
    written += m["counts"]["written"]
    if context == "story":  # the sample stories are short excerpts: their markers are cut off
      assert m["counts"]["rejected"] == 1 and list(m["rejected_by_reason"])[0] in (
          "parse/missing_story_start", "parse/missing_story_end")
      # Nothing written: exit 1 naming the reason, no COMPLETED (the manifest stays).
      assert code == 1 and not os.path.exists(os.path.join(out, "COMPLETED"))
      err = capsys.readouterr().err
      assert "error: no document was written: 1 input record rejected (missing_story_" in err
    else:
      assert code == 0
  assert written == (3 if context == "summary" else 0)


@pytest.mark.slow
def test_annotation_runs_once_per_story(tmp_path, entities_dir):
  qaps = make_layout(str(tmp_path / "nqa"))
  out = str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", out, "--split",
                                             "test", "--ner", "spacy", "--linker", "alias",
                                             "--entities_dir", entities_dir, "--max_error_fraction",
                                             "1"] + FLAGS) == 0
  stage = _manifest(out)["stages"]["annotate"]
  assert stage["input"] == stage["output"] == 4 and stage["texts"] == 3


def test_a_split_without_questions_names_the_file_and_its_sets(tmp_path):
  """Issue 41: --split valid on a qaps.csv without valid questions is one line naming the file,
  the sets it holds and what to do (not an empty run)."""
  qaps = make_layout(str(tmp_path / "nqa"))
  with pytest.raises(UserError) as e:
    list(stages.ReadQuestionsFn("valid").process(qaps))
  assert str(e.value).endswith(
      f"] {qaps} holds no question of --split valid (its set column: 'test' 8, 'train' 1): pass "
      "the --split of your questions, or fix the set column of their rows (train, valid or "
      "test)")
  header_only = tmp_path / "empty.csv"
  header_only.write_text("document_id,set,question,answer1,answer2\n")
  with pytest.raises(UserError, match="holds no question .only its header line."):
    list(stages.ReadQuestionsFn("test").process(str(header_only)))


def _story_dead_letters(stories_dir, document_id, joined):
  fn = stages.StoryFn("story", str(stories_dir))
  fn.setup()
  fn.start_bundle()
  out = list(fn.process((document_id, joined)))
  assert all(getattr(o, "tag", None) == "dead_letter" for o in out), out
  return [o.value for o in out]


@pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no ../shared/samples")
def test_a_story_without_its_start_marker_names_its_file_and_the_fix():
  """The samples' story excerpts lack their start marker: the dead letter names the .content
  file, the marker and where the whole story comes from."""
  doc = "0029bdbe75423337b551e42bb31f9a102785376f"
  with open(os.path.join(SAMPLES, "documents.csv"), encoding="utf-8", newline="") as f:
    row = next(r for r in csv.DictReader(f) if r["document_id"] == doc)
  question = {"document_id": doc, "set": "train", "question": "Who?", "answer1": "a",
              "answer2": "b"}
  dead = _story_dead_letters(os.path.join(SAMPLES, "tmp"), doc, {
      "questions": [("qaps.csv:3", question)], "story": [row]})
  assert len(dead) == 1 and dead[0]["reason"] == "missing_story_start", dead
  detail = dead[0]["detail"]
  path = os.path.join(SAMPLES, "tmp", f"{doc}.content")
  assert detail.startswith(f"{path}: story_start 'Produced by Nick' not in the story "
                           "(story_start of its documents.csv row)"), detail
  assert "download_stories.sh" in detail and "\n" not in detail


def test_a_split_mismatch_between_documents_and_questions_is_named(tmp_path):
  """documents.csv lists the story in another set than its questions: the dead letter says
  which sets and which files to make agree (it was 'no row for ... in this split')."""
  question = {"document_id": "book1", "set": "valid", "question": "Who?", "answer1": "a",
              "answer2": "b"}
  dead = _story_dead_letters(tmp_path, "book1", {
      "questions": [("qaps.csv:2", question)], "story": [{stages.OTHER_SPLIT: "test"}]})
  assert [d["reason"] for d in dead] == ["document_in_other_split"]
  assert dead[0]["detail"] == (
      "documents.csv lists book1 in set test, but qaps.csv asks its questions in set valid "
      "(--split valid): make the set column of the story's documents.csv row and of its "
      "qaps.csv rows agree")
  dead = _story_dead_letters(tmp_path, "ghost", {
      "questions": [("qaps.csv:2", dict(question, document_id="ghost"))], "story": []})
  assert [d["reason"] for d in dead] == ["unknown_document"]
  assert "documents.csv has no row for ghost, which qaps.csv names" in dead[0]["detail"]


@pytest.mark.slow
def test_split_errors_end_to_end(tmp_path, capsys):
  """Through the command line: a --split without questions is one error line (exit 1); a
  split mismatch is a dead letter and the run's one line names its reason."""
  qaps = make_layout(str(tmp_path / "nqa"))
  code = runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", str(tmp_path / "o1"),
                                             "--split", "valid"] + FLAGS)
  err = [l for l in capsys.readouterr().err.splitlines() if ": error: " in l]
  assert code == 1 and len(err) == 1 and "holds no question of --split valid" in err[0], err
  with open(qaps, "a", encoding="utf-8") as f:
    f.write("book1,valid,Who keeps bees?,Mr. Ashby,Ashby,,,\n")
  code = runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", str(tmp_path / "o2"),
                                             "--split", "valid"] + FLAGS)
  err = [l for l in capsys.readouterr().err.splitlines() if ": error: " in l]
  assert code == 1 and len(err) == 1, err
  assert "1 input record rejected (document_in_other_split 1)" in err[0], err
  assert _dead(str(tmp_path / "o2")) == [("parse", "document_in_other_split", "11")]
