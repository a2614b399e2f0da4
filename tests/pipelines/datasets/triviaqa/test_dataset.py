"""The TriviaQA job end to end: hand-made question files and evidence (both domains, a test file,
missing and damaged evidence, bad records), and the official-format samples when present."""

import glob
import json
import os

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from model.evaluation import triviaqa as evaluation
from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from schemas import records
from pipelines import flags, runner
from pipelines.datasets.triviaqa import dataset as triviaqa_dataset
from pipelines.datasets.triviaqa import evidence as evidence_stage
from pipelines.document import BadInput, Document, Paragraph, Question
from pipelines.datasets.triviaqa import reader
from pipelines.datasets.triviaqa.answers import normalize_answer
from tests.pipelines.helpers import SMALL, read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SAMPLES = os.path.join(REPO, "..", "shared", "samples", "triviaqa")
SAMPLE_FILES = ["wikipedia-train", "wikipedia-dev", "wikipedia-test-without-answers",
                "web-train", "web-dev", "web-test-without-answers"]
N, L = SMALL.segments_per_pack, SMALL.segmenter.seq_length

PARIS = "Paris is the capital of France. The Louvre is in Paris.\n"
LYON_RAW = b"\xef\xbb\xbfLyon is a city in France.\r\nIt is south of Paris.\r\n"
LYON = "Lyon is a city in France.\nIt is south of Paris.\n"
ONEILL = "Eugene O\u2019Neill wrote plays. His father was an actor.\n"
MARS_RAW = b"Mars is red.\xff\xfe It has two moons.\n"
WEB_PARIS = "Paris, France is the capital. The city of Paris hosts the Louvre.\n"
PARK = "Grand Canyon National Park"
PARK_TEXT = " and ".join([PARK] * 24) + ".\n"
MARS_WEB = "Test evidence about Mars and its moons.\n"


def answer(value, aliases=(), normalized=()):
  return {"Aliases": list(aliases), "MatchedWikiEntityName": value,
          "NormalizedAliases": list(normalized), "NormalizedValue": value.lower(),
          "Type": "WikipediaEntity", "Value": value}


def page(filename, title=None, **extra):
  return dict({"DocSource": "TagMe", "Filename": filename,
               "Title": title or filename[:-4].replace("_", " ")}, **extra)


def result(filename, rank=0):
  return {"Description": "...", "Filename": filename, "Rank": rank, "Title": f"Result {rank}",
          "Url": f"http://example.com/{rank}"}


PARIS_ANSWER = answer("Paris", ["Paris", "Paris, France"], ["paris", "paris france"])
WIKI_DEV = [
    {"Answer": PARIS_ANSWER, "EntityPages": [page("Paris.txt"), page("Lyon.txt")],
     "Question": "Which city hosts the Louvre?", "QuestionId": "q_w1", "QuestionSource": "x"},
    # One page missing: the other is kept; the answer is found only after normalisation.
    {"Answer": answer("Eugene O'Neill", ["Eugene O'Neill", "O'Neill"],
                      ["eugene o neill", "o neill"]),
     "EntityPages": [page("Missing_page.txt"), page("Eugene_O'Neill.txt")],
     "Question": "Who wrote plays?", "QuestionId": "q_w2"},
    # Every page missing: a dead letter.
    {"Answer": answer("Nothing"), "EntityPages": [page("Gone_1.txt"), page("Gone_2.txt")],
     "Question": "Lost?", "QuestionId": "q_w3"},
    # The answer occurs nowhere (kept, counted); the evidence has invalid UTF-8.
    {"Answer": answer("Phobos", ["Phobos"], ["phobos"]), "EntityPages": [page("Mars.txt")],
     "Question": "Name a moon of Mars?", "QuestionId": "q_w4"},
    # Unexpected JSON types: each one dead letter of the parse stage.
    7,
    {"Answer": PARIS_ANSWER, "EntityPages": [page("Paris.txt")], "Question": "X?",
     "QuestionId": 5},
    {"Answer": "Paris", "EntityPages": [page("Paris.txt")], "Question": "X?",
     "QuestionId": "q_w7"},
    {"Answer": PARIS_ANSWER, "EntityPages": {"Filename": "Paris.txt"}, "Question": "X?",
     "QuestionId": "q_w8"},
    {"Answer": {"Aliases": ["Paris", 3]}, "EntityPages": [page("Paris.txt")], "Question": "X?",
     "QuestionId": "q_w9"},
    {"Answer": PARIS_ANSWER, "EntityPages": [], "Question": "No pages?", "QuestionId": "q_w10"},
]
WEB_DEV = [
    # A missing search result and a repeated one (one pair: one key of the evaluation).
    {"Answer": PARIS_ANSWER, "EntityPages": [page("Paris.txt")],
     "Question": "Which city hosts the Louvre?", "QuestionId": "q_b1",
     "SearchResults": [result("1/1_1.txt", 0), result("1/1_9.txt", 1), result("1/1_1.txt", 2)]},
    # The answer everywhere: occurrences across segment boundaries.
    {"Answer": answer(PARK, [PARK, "Grand Canyon"], [PARK.lower(), "grand canyon"]),
     "EntityPages": [], "Question": "Which park?", "QuestionId": "q_b2",
     "SearchResults": [result("2/2_7.txt")]},
    # A Filename that leaves the evidence directory costs its own pair only (a dead letter of the
    # evidence stage: schemas.data_paths).
    {"Answer": answer("Mars"), "EntityPages": [], "Question": "Which planet?",
     "QuestionId": "q_b3", "SearchResults": [result("../secret.txt"), result("3/3_1.txt", 1)]},
]
WEB_TEST = [
    {"EntityPages": [page("Paris.txt")], "Question": "Where is the Louvre?",
     "QuestionId": "q_t1", "SearchResults": [result("1/1_1.txt")]},
]


def write_question_file(path, data, domain, split, data_last=False):
  obj = {"Domain": domain, "Split": split, "VerifiedEval": False, "Version": 1.0}
  obj = dict(obj, Data=data) if data_last else dict({"Data": data}, **obj)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f, indent=4, ensure_ascii=False)
  return str(path)


def write_evidence(base):
  files = {"wikipedia/Paris.txt": PARIS.encode(), "wikipedia/Lyon.txt": LYON_RAW,
           "wikipedia/Eugene_O'Neill.txt": ONEILL.encode(), "wikipedia/Mars.txt": MARS_RAW,
           "web/1/1_1.txt": WEB_PARIS.encode(), "web/2/2_7.txt": PARK_TEXT.encode(),
           "web/3/3_1.txt": MARS_WEB.encode(), "secret.txt": b"not evidence"}
  for rel, data in files.items():
    path = os.path.join(base, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
      f.write(data)
  return str(base)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("triviaqa")
  evidence = write_evidence(tmp / "evidence")
  qa = tmp / "qa"
  qa.mkdir()
  paths = {"wiki": write_question_file(qa / "wikipedia-dev.json", WIKI_DEV, "Wikipedia", "dev"),
           "web": write_question_file(qa / "web-dev.json", WEB_DEV, "Web", "dev",
                                      data_last=True),
           "test": write_question_file(qa / "web-test-without-answers.json", WEB_TEST, "Web",
                                       "test")}
  return tmp, evidence, paths


@pytest.fixture(scope="module")
def job(data):
  tmp, evidence, paths = data
  out = str(tmp / "out")
  m = runner.run_dataset("triviaqa", str(tmp / "qa" / "*.json"), out, SMALL,
                         triviaqa_dataset.TriviaQAOptions(evidence_dir=evidence))
  return paths, out, m


def dead_letters(out, kind="dead_letter"):
  return [json.loads(l) for f in sorted(glob.glob(os.path.join(out, kind, "*.jsonl")))
          for l in open(f, encoding="utf-8")]


@pytest.mark.slow
def test_manifest_counts_reconcile(job):
  paths, out, m = job
  # Units: wikipedia-dev 10 questions; web-dev 3 + 1 + 2 question-document pairs; the test
  # file 2 pairs.
  assert m["counts"] == {"input": 18, "written": 9, "skipped": 0, "rejected": 9}
  assert [(r["stage"], r["input"], r["output"], r["skipped"], r["rejected"])
          for r in m["stage_counts"]] == [
              ("read", 18, 18, 0, 0), ("parse", 18, 12, 0, 6), ("evidence", 12, 9, 0, 3),
              ("answers", 9, 9, 0, 0), ("segment", 9, 9, 0, 0), ("labels", 9, 9, 0, 0),
              ("dedup", 9, 9, 0, 0)]
  assert m["rejected_by_reason"] == {
      "evidence/missing_evidence": 2, "evidence/path_outside_root": 1, "parse/bad_Answer": 2,
      "parse/bad_EntityPages": 1, "parse/bad_QuestionId": 1, "parse/no_evidence_pages": 1,
      "parse/not_an_object": 1}
  assert m["input_count_exact"] is True
  manifest_schema.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  st = m["stages"]
  assert st["read"]["items"] == 10 + 3 + 1 and st["read"]["records"] == 18
  assert st["parse"]["duplicate_pages"] == 1  # q_b1's repeated search result
  assert (st["parse"]["web_documents"], st["parse"]["wikipedia_documents"]) == (8, 4)
  assert st["evidence"]["refused_pages"] == 1  # q_b3's ../secret.txt, never read
  # q_w1 2 pages, q_w2 1 (1 missing), q_w4 1, q_b1 2 (1 missing), q_b2 1, q_b3 1, q_t1 2.
  assert st["evidence"]["pages_read"] == 10
  assert st["evidence"]["missing_pages"] == 1 + 2 + 1
  assert st["evidence"]["invalid_utf8_pages"] == 1   # Mars.txt
  assert st["evidence"]["bom_stripped"] == 1 and st["evidence"]["newlines_normalised"] == 1
  # Span questions: q_w1, q_b1 x2, q_b2, q_b3 exact; q_w2 only after normalisation; q_w4 none.
  assert (st["answers"]["exact"], st["answers"]["normalised"], st["answers"]["not_found"]) == (
      5, 1, 1)
  assert st["segment"]["span_questions_without_label"] == 1
  assert m["labels"] == {
      paths["wiki"]: {"mode": "labelled", "labelled": 3, "unlabelled": 0},
      paths["web"]: {"mode": "labelled", "labelled": 4, "unlabelled": 0},
      paths["test"]: {"mode": "unlabelled", "labelled": 0, "unlabelled": 2}}
  assert m["config"]["evidence_dir"].endswith("evidence") and m["config"]["per_document"] is False
  assert m["job"] == "triviaqa"


def test_dead_letters_name_stage_reason_question_and_file(job):
  paths, out, _ = job
  wiki, web = paths["wiki"], paths["web"]
  got = sorted((d["stage"], d["reason"], d["source_id"]) for d in dead_letters(out))
  assert got == sorted([
      ("evidence", "missing_evidence", f"{wiki}#2/q_w3--Gone_1.txt|Gone_2.txt"),
      ("evidence", "missing_evidence", f"{web}#0/q_b1--1/1_9.txt"),
      ("parse", "not_an_object", f"{wiki}#4"), ("parse", "bad_QuestionId", f"{wiki}#5"),
      ("parse", "bad_Answer", f"{wiki}#6"), ("parse", "bad_EntityPages", f"{wiki}#7"),
      ("parse", "bad_Answer", f"{wiki}#8"), ("parse", "no_evidence_pages", f"{wiki}#9"),
      ("evidence", "path_outside_root", f"{web}#2/q_b3--../secret.txt")])
  missing = {d["document_id"]: d for d in dead_letters(out) if d["stage"] == "evidence"}
  assert missing["q_b1--1/1_9.txt"]["missing"] == [os.path.join(
      os.path.dirname(os.path.dirname(web)), "evidence", "web", "1", "1_9.txt")]
  assert missing["q_w3"]["question_id"] == "q_w3" and len(missing["q_w3"]["missing"]) == 2
  assert "FileNotFoundError" in missing["q_w3"]["detail"]
  assert dead_letters(out, "skipped") == []


def test_documents_ids_texts_and_paragraphs(job):
  paths, out, _ = job
  side = documents_schema.load(out)
  assert sorted(side) == sorted([
      "q_w1", "q_w2", "q_w4", "q_b1--Paris.txt", "q_b1--1/1_1.txt", "q_b2--2/2_7.txt",
      "q_b3--3/3_1.txt", "q_t1--Paris.txt", "q_t1--1/1_1.txt"])
  q1 = side["q_w1"]
  lyon_begin = len(PARIS) + 2
  assert q1 == {
      "document_id": "q_w1", "question_id": "q_w1", "question": "Which city hosts the Louvre?",
      "text": PARIS + "\n\n" + LYON, "answers": ["Paris", "Paris, France", "paris",
                                                  "paris france"],
      "answer_type": records.ANSWER_TYPE_SPAN, "source_id": f"{paths['wiki']}#0",
      "paragraphs": [
          {"title": "Paris", "begin": 0, "end": len(PARIS), "supporting": None,
           "sentences": []},
          {"title": "Lyon", "begin": lyon_begin, "end": lyon_begin + len(LYON),
           "supporting": None, "sentences": []}]}
  assert side["q_w2"]["text"] == ONEILL
  assert side["q_w2"]["paragraphs"][0]["title"] == "Eugene O'Neill"
  assert side["q_w4"]["text"] == "Mars is red.\ufffd\ufffd It has two moons.\n"
  web_doc = side["q_b1--1/1_1.txt"]
  assert (web_doc["question_id"], web_doc["text"], web_doc["source_id"]) == (
      "q_b1", WEB_PARIS, f"{paths['web']}#0")
  assert web_doc["paragraphs"][0]["title"] == "Result 0"
  test_doc = side["q_t1--1/1_1.txt"]
  assert (test_doc["answers"], test_doc["answer_type"]) == ([], records.ANSWER_TYPE_NONE)


def _labels(out):
  """{document id: sorted labelled char spans} and {document id: answer type} from records."""
  labels, types = {}, {}
  for rec in read_records(out):
    records.validate_record(rec, N, L)
    for s, did in enumerate(rec["document_id"]):
      if rec["segment_mask"][s]:
        types[did.decode()] = rec["answer_type"][s]
        labels.setdefault(did.decode(), set())
    for seg, b, e in zip(rec["answer_segment"], rec["answer_begin"], rec["answer_end"]):
      assert rec["token_kind"][seg * L + b] == records.TOKEN_KIND_CONTEXT
      labels[rec["document_id"][seg].decode()].add(
          (rec["char_begin"][seg * L + b], rec["char_end"][seg * L + e]))
  return {k: sorted(v) for k, v in labels.items()}, types


def test_records_carry_exact_answer_spans(job):
  _, out, _ = job
  side = documents_schema.load(out)
  labels, types = _labels(out)
  assert set(labels) == set(side)
  text = {k: d["text"] for k, d in side.items()}
  got = {k: [text[k][b:e] for b, e in v] for k, v in labels.items()}
  assert got["q_w1"] == ["Paris", "Paris", "Paris"]
  assert got["q_w2"] == ["Eugene O\u2019Neill", "O\u2019Neill"]  # only after normalisation
  assert got["q_w4"] == []  # not found: written, unlabelled
  assert got["q_b1--1/1_1.txt"] == ["Paris", "Paris, France", "Paris"]
  assert got["q_b1--Paris.txt"] == ["Paris", "Paris"]
  assert got["q_t1--1/1_1.txt"] == [] and got["q_t1--Paris.txt"] == []
  assert types["q_t1--Paris.txt"] == records.ANSWER_TYPE_NONE
  assert types["q_w4"] == types["q_b2--2/2_7.txt"] == records.ANSWER_TYPE_SPAN
  for doc_id, spans in got.items():
    norms = {normalize_answer(a) for a in side[doc_id]["answers"]}
    assert all(normalize_answer(s) in norms for s in spans)


def test_answer_across_a_segment_boundary(job):
  """Every occurrence is labelled in the segments that hold it whole, never cut."""
  _, out, m = job
  doc_id = "q_b2--2/2_7.txt"
  occurrences = []
  start = 0
  while PARK_TEXT.find(PARK, start) >= 0:
    b = PARK_TEXT.find(PARK, start)
    occurrences.append((b, b + len(PARK)))
    start = b + 1
  straddling, labelled = 0, {}
  for rec in read_records(out):
    for s, did in enumerate(rec["document_id"]):
      if did.decode() != doc_id:
        continue
      cb, ce = rec["context_char_begin"][s], rec["context_char_end"][s]
      mine = {(rec["char_begin"][s * L + b], rec["char_end"][s * L + e])
              for seg, b, e in zip(rec["answer_segment"], rec["answer_begin"], rec["answer_end"])
              if seg == s}
      assert all(cb <= b and e <= ce for b, e in mine)  # labels lie inside their segment
      for ob, oe in occurrences:
        whole = cb <= ob and oe <= ce
        cut = ob < ce < oe or ob < cb < oe
        straddling += cut
        assert ((ob, oe) in mine) == whole  # a segment holding part of it has no label for it
        labelled[(ob, oe)] = labelled.get((ob, oe), False) or (whole and (ob, oe) in mine)
  assert straddling >= 1
  assert all(labelled.values()) and len(labelled) == 24
  assert m["stages"]["segment"]["answer_spans_cut"] >= 1
  assert m["stages"]["segment"]["answer_spans_lost"] == 0


def test_web_document_ids_are_the_evaluation_keys(job):
  paths, out, _ = job
  side = documents_schema.load(out)
  gold = json.load(open(paths["web"], encoding="utf-8"))
  keys = set(evaluation.key_to_answer(gold))
  web_ids = {k for k, d in side.items() if d["source_id"].startswith(paths["web"] + "#")}
  assert web_ids == keys - {"q_b1--1/1_9.txt", "q_b3--../secret.txt"}  # the dead letters


@pytest.mark.slow
def test_per_document_mode_and_cli(data, tmp_path, capsys):
  tmp, evidence, paths = data
  out = str(tmp_path / "per_doc")
  small = ["--seq_length", str(L), "--overlap", "8", "--max_segments_per_document", "6",
           "--segments_per_pack", str(N), "--max_question_tokens", "12", "--num_shards", "2",
           "--max_error_fraction", "1"]  # its bad questions are more than the default 0.1
  code = runner.dataset_main("triviaqa", ["--input", paths["wiki"], "--evidence_dir", evidence,
                                          "--output_dir", out, "--per_document", "--log_level",
                                          "WARNING"] + small)
  stdout = capsys.readouterr().out
  assert code == 0
  summary = json.loads(stdout.strip().splitlines()[-1])
  # Units: q_w1 2, q_w2 2, q_w3 2, q_w4 1 pairs; 6 bad items (q_w7, q_w9 and 5 one pair
  # each; the others whole).
  assert summary["counts"] == {"input": 13, "written": 4, "skipped": 0, "rejected": 9}
  assert summary["rejected_by_reason"]["evidence/missing_evidence"] == 3
  side = documents_schema.load(out)
  assert sorted(side) == ["q_w1--Lyon.txt", "q_w1--Paris.txt", "q_w2--Eugene_O'Neill.txt",
                          "q_w4--Mars.txt"]
  assert side["q_w1--Lyon.txt"]["text"] == LYON
  assert side["q_w1--Lyon.txt"]["paragraphs"][0]["title"] == "Lyon"
  m = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
  assert m["config"]["per_document"] is True


def run_main(argv, capsys):
  try:
    code = runner.dataset_main("triviaqa", argv)
  except SystemExit as e:
    code = e.code
  return code, capsys.readouterr().err


def test_evidence_dir_errors_are_one_line_before_any_work(data, tmp_path, capsys):
  tmp, evidence, paths = data
  out = tmp_path / "o"
  for extra, words in (([], "--evidence_dir is required"),
                       (["--evidence_dir", str(tmp_path / "nope")], "is not a directory"),
                       (["--evidence_dir", str(tmp)], "has neither wikipedia/ nor web/ ("
                                                      "expected the evidence/ folder of "
                                                      "TriviaQA rc); did you mean")):
    code, err = run_main(["--input", paths["wiki"], "--output_dir", str(out)] + extra, capsys)
    lines = [l for l in err.splitlines() if l.strip()]
    assert code == flags.EXIT_USAGE and len(lines) == 1, err
    assert lines[0].startswith("python -m pipelines triviaqa: error: --evidence_dir")
    assert words in lines[0], lines[0]
  assert not out.exists()
  # From Python the same check refuses the run (the dataset's build), leaving nothing behind.
  with pytest.raises(ValueError, match="is not a directory"):
    runner.run_dataset("triviaqa", paths["wiki"], str(out), SMALL,
                       triviaqa_dataset.TriviaQAOptions(evidence_dir=str(tmp_path / "nope")))
  assert not out.exists()


@pytest.mark.slow
def test_distributed_layout_writes_the_same(job, data, tmp_path):
  """With the plans reshuffled before the evidence is read (distributed runners)."""
  tmp, evidence, _ = data
  _, out, _ = job
  p = beam.Pipeline(runner=FnApiRunner())
  pattern = str(tmp / "qa" / "*.json")
  options = triviaqa_dataset.TriviaQAOptions(evidence_dir=evidence)
  header = runner.manifest_header("triviaqa", SMALL, pattern)
  paths = [i["path"] for i in header["inputs"]]
  triviaqa_dataset.build(p, paths, str(tmp_path / "c"), SMALL, header, reshuffle=True, options=options)
  p.run().wait_until_finish()

  def contents(d):
    files = sorted(glob.glob(os.path.join(d, "**", "*-of-*"), recursive=True))
    return {os.path.relpath(f, d): open(f, "rb").read() for f in files}
  a, c = contents(out), contents(str(tmp_path / "c"))
  assert sorted(a) == sorted(c) and a == c


# -- the reader, without Beam ---------------------------------------------------------------------

def test_split_and_parse_units():
  datum = WEB_DEV[0]
  units = reader.split_question("f#0", datum)
  assert [u[1][reader.PAGE_KEY] for u in units] == [0, 1, 2]  # the repeated 1/1_1.txt left out
  plans = [reader.parse_record(u, sid)[0] for sid, u in units]
  assert [p.document_id for p in plans] == ["q_b1--Paris.txt", "q_b1--1/1_1.txt",
                                            "q_b1--1/1_9.txt"]
  assert [p.pages[0].relative_path for p in plans] == ["wikipedia/Paris.txt", "web/1/1_1.txt",
                                                       "web/1/1_9.txt"]
  # A Wikipedia datum is one unit (per question), or one per page with per_document.
  assert reader.split_question("f#1", WIKI_DEV[0]) == [("f#1", WIKI_DEV[0])]
  assert len(reader.split_question("f#1", WIKI_DEV[0], per_document=True)) == 2
  plan, stats = reader.parse_record(WIKI_DEV[0], "f#1")
  assert (plan.document_id, plan.per_question, [p.title for p in plan.pages]) == (
      "q_w1", True, ["Paris", "Lyon"])
  assert plan.question == Question("q_w1", "Which city hosts the Louvre?",
                                   ("Paris", "Paris, France", "paris", "paris france"),
                                   records.ANSWER_TYPE_SPAN)
  assert stats == {"wikipedia_documents": 1}
  # Test files: no answers, answer type NONE.
  plan, _ = reader.parse_record(reader.split_question("t#0", WEB_TEST[0])[0][1], "t#0")
  assert (plan.question.answers, plan.question.answer_type) == ((), records.ANSWER_TYPE_NONE)
  # Units that cannot be split are passed on whole and rejected with a reason.
  for bad, reason in ((7, "not_an_object"), ({"QuestionId": "x", "Question": "Q?"},
                                             "no_evidence_pages"),
                      (dict(WIKI_DEV[0], Question=""), "empty_question"),
                      (dict(WIKI_DEV[0], Answer={"Aliases": [" "]}), "empty_answer"),
                      (dict(WIKI_DEV[0], EntityPages=[{"Title": "x"}]), "bad_filename"),
                      (dict(WIKI_DEV[0], EntityPages=[page("A.txt", Title=3)]), "bad_title"),
                      (dict(WIKI_DEV[0], EntityPages=["A.txt"]), "bad_page")):
    with pytest.raises(BadInput) as e:
      for sid, unit in reader.split_question("f#0", bad, per_document=True):
        reader.parse_record(unit, sid, per_document=True)
    assert e.value.reason == reason


def test_evidence_decoding_and_documents():
  assert reader.decode_evidence(LYON_RAW) == (LYON, {"bom_stripped": 1,
                                                     "newlines_normalised": 1})
  assert reader.decode_evidence(b"a\rb\r\nc") == ("a\nb\nc", {"newlines_normalised": 1})
  assert reader.decode_evidence(b"caf\xc3\xa9 \xff") == ("caf\u00e9 \ufffd",
                                                          {"invalid_utf8_pages": 1})
  plan, _ = reader.parse_record(WIKI_DEV[0], "f#0")
  doc = reader.build_document(plan, [PARIS, None])
  assert doc == Document("q_w1", PARIS, "f#0", (Paragraph("Paris", 0, len(PARIS)),),
                         question=plan.question)
  doc = reader.build_document(plan, ["  \n", LYON])
  assert (doc.text, doc.paragraphs) == (LYON, (Paragraph("Lyon", 0, len(LYON)),))
  with pytest.raises(BadInput, match="empty_evidence"):
    reader.build_document(plan, [None, " "])


def test_which_read_errors_are_missing_evidence():
  class NotFound(Exception):  # as google.api_core.exceptions.NotFound (gs:// reads) is named
    code = 404
  assert evidence_stage.is_missing_file_error(FileNotFoundError("x"))
  assert evidence_stage.is_missing_file_error(IsADirectoryError("x"))
  assert evidence_stage.is_missing_file_error(NotFound())
  assert not evidence_stage.is_missing_file_error(RuntimeError("503 backend error"))


# -- the official-format samples ------------------------------------------------------------------

def _sample_keys(gold, per_document=False):
  """The evaluation keys of a gold file (test files have no Answer: a placeholder)."""
  gold = dict(gold, Data=[dict({"Answer": {"NormalizedAliases": []}}, **d)
                          for d in gold["Data"]])
  return set(evaluation.key_to_answer(gold, per_document))


@pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="shared samples not present")
@pytest.mark.parametrize("name,per_document", [(n, False) for n in SAMPLE_FILES]
                         + [("wikipedia-train", True), ("wikipedia-dev", True)])
@pytest.mark.slow
def test_official_samples(name, per_document, tmp_path):
  path = os.path.join(SAMPLES, "qa", f"{name}.json")
  out = str(tmp_path / "out")
  m = runner.run_dataset("triviaqa", path, out, SMALL, triviaqa_dataset.TriviaQAOptions(
      evidence_dir=os.path.join(SAMPLES, "evidence"), per_document=per_document))
  manifest_schema.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  gold = json.load(open(path, encoding="utf-8"))
  keys = _sample_keys(gold, per_document)
  # Every evidence file named is found; one document per evaluation key, nothing rejected.
  assert m["counts"] == {"input": len(keys), "written": len(keys), "skipped": 0, "rejected": 0}
  assert m["stages"]["evidence"].get("missing_pages", 0) == 0
  side = documents_schema.load(out)
  assert set(side) == keys
  labelled = "without-answers" not in name
  assert m["labels"] == {path: {"mode": "labelled" if labelled else "unlabelled",
                                "labelled": len(keys) if labelled else 0,
                                "unlabelled": 0 if labelled else len(keys)}}
  labels, types = _labels(out)
  assert set(types.values()) == {records.ANSWER_TYPE_SPAN if labelled
                                 else records.ANSWER_TYPE_NONE}
  for doc_id, spans in labels.items():
    norms = set(gold_aliases(gold, side[doc_id]["question_id"]))
    assert all(normalize_answer(side[doc_id]["text"][b:e]) in norms for b, e in spans)


def gold_aliases(gold, qid):
  (datum,) = [d for d in gold["Data"] if d["QuestionId"] == qid]
  answer = datum.get("Answer", {})
  return [normalize_answer(a) for a in [answer.get("Value", "")] + answer.get("Aliases", [])
          + answer.get("NormalizedAliases", [])]


@pytest.mark.slow
def test_unanswered_web_question_with_several_pages_is_one_dead_letter_per_page(data, tmp_path):
  """A web question without an answer, in a file whose other questions have one, is read as one
  document per page; each is a labels/missing_answer dead letter, named by its document (two
  identical lines once crashed the dead-letter writer)."""
  _, evidence, _ = data
  unanswered = {"EntityPages": [page("Paris.txt")], "Question": "Where is the Louvre?",
                "QuestionId": "q_u1", "SearchResults": [result("1/1_1.txt")]}
  path = write_question_file(tmp_path / "web-dev.json", [WEB_DEV[0], unanswered], "Web", "dev")
  out = str(tmp_path / "out")
  m = runner.run_dataset("triviaqa", path, out, SMALL,
                         triviaqa_dataset.TriviaQAOptions(evidence_dir=evidence))
  missing = [d for d in dead_letters(out) if d["reason"] == "missing_answer"]
  assert sorted(d["detail"].split(" has no answer")[0] for d in missing) == [
      "question 'q_u1' (document 'q_u1--1/1_1.txt')",
      "question 'q_u1' (document 'q_u1--Paris.txt')"]
  assert m["counts"]["input"] == (m["counts"]["written"] + m["counts"]["skipped"]
                                  + m["counts"]["rejected"])
