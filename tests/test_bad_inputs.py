"""Bad input, run through every pipeline's command line (issue 15, item 2).

Each case feeds one job a small input holding good records and one kind of bad one, and checks
what the conventions promise: the job completes (or, where failing is right, exits 1 with one
``error:`` line); every bad record is a dead letter (``dead_letter/``) or a skipped item
(``skipped/``) with the expected stage and reason and a source id; nothing is lost silently:
the manifest's ``counts`` and ``stage_counts`` reconcile (``input = written + skipped +
rejected``, checked by ``schemas.manifest.loads``); cases whose bad records outnumber the
default error budget pass ``--max_error_fraction 1``.  Then ``--max_error_fraction`` (fails the
job, no ``COMPLETED``, when more than that share of the input is rejected; default 0.1) and a
trainer fed
records of another major schema version (one line, exit 1; in a subprocess, since TensorFlow
and the pipelines' ``tfrecord`` protos cannot share a process).
"""

from __future__ import annotations

import bz2
import collections
import gzip
import dataclasses
import glob
import io
import json
import os
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from pipelines.datasets.wikipedia import fake_input as synth
from schemas import manifest as manifest_schema
from pipelines import runner
from tests.pipelines.helpers import PARIS, hotpot_record, write_json
from tests.pipelines.datasets.narrativeqa.test_dataset import make_layout
from tests.pipelines.datasets.triviaqa.test_dataset import (PARIS_ANSWER, answer, page,
                                                    write_evidence, write_question_file)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "12"]


@dataclasses.dataclass
class Outcome:
  rc: int
  stderr: str
  out: str
  manifest: Optional[Dict]
  dead: List[Tuple[str, str, str]]     # (stage, reason, source id)
  skipped: List[Tuple[str, str, str]]

  @property
  def completed(self) -> bool:
    return os.path.exists(os.path.join(self.out, manifest_schema.COMPLETED_FILE))

  def error_lines(self) -> List[str]:
    return [l for l in self.stderr.splitlines() if ": error: " in l]


def _side(out: str, kind: str) -> List[Tuple[str, str, str]]:
  found = []
  for path in sorted(glob.glob(os.path.join(out, kind, "*.jsonl"))):
    with open(path, encoding="utf-8") as f:
      for line in f:
        d = json.loads(line)
        assert d["source_id"], d  # every dead letter / skipped item names its source
        found.append((d["stage"], d["reason"], d["source_id"]))
  return sorted(found)


def run_job(job: str, inputs: List[str], out: str, capsys, flags=()) -> Outcome:
  capsys.readouterr()
  given = {f for f in flags if f.startswith("--")}
  small = [word for flag, value in zip(SMALL[::2], SMALL[1::2]) if flag not in given
           for word in (flag, value)]
  # A case's flags replace SMALL's (a flag given twice is an error).
  rc = runner.dataset_main(job, list(inputs) + ["--output_dir", out, "--log_level", "WARNING"]
                           + small + list(flags))
  err = capsys.readouterr().err
  path = os.path.join(out, manifest_schema.MANIFEST_FILE)
  m = None
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      m = manifest_schema.loads(f.read())  # validates: counts and stage_counts reconcile
  return Outcome(rc, err, out, m, _side(out, "dead_letter"), _side(out, "skipped"))


def reasons(o: Outcome) -> Dict[str, int]:
  return dict(o.manifest["rejected_by_reason"], **{
      f"skipped:{k}": v for k, v in o.manifest["skipped_by_reason"].items()})


def check_reconciles(o: Outcome) -> None:
  """The run completed and accounts for every input record (files match the counters)."""
  assert o.rc == 0, o.stderr
  assert o.completed
  c = o.manifest["counts"]
  assert c["input"] == c["written"] + c["skipped"] + c["rejected"]
  # The dead-letter files hold exactly the rejections the manifest counts, reason by reason.
  assert dict(collections.Counter(f"{s}/{r}" for s, r, _ in o.dead)) == (
      o.manifest["rejected_by_reason"])
  # Skipped items of some stages (redirects, namespaces) are only counted, the rest listed.
  for key, n in collections.Counter(f"{s}/{r}" for s, r, _ in o.skipped).items():
    assert o.manifest["skipped_by_reason"][key] == n
  rows = o.manifest["stage_counts"]
  assert rows[0]["input"] == c["input"] and rows[-1]["output"] == c["written"]
  for r in rows:
    assert r["input"] == r["output"] + r["skipped"] + r["rejected"], r


# ---- input builders ----------------------------------------------------------------------


def _hotpot(tmp, records, name="in.json") -> List[str]:
  return ["--input", write_json(tmp / name, records)]


def _hotpot_good():
  return [hotpot_record("q1", "Which city hosts the Louvre?", "Paris", PARIS),
          hotpot_record("q2", "Is Lyon in France?", "yes", PARIS[:2])]


def _multistream(tmp, page_bytes: List[bytes], name="x-pages-articles-multistream.xml.bz2"
                 ) -> str:
  """A multistream dump of one page per bz2 stream, the page XML given as raw bytes (so a test
  can damage one page), with its index beside it."""
  path = str(tmp / name)
  with open(path, "wb") as f:
    f.write(bz2.compress(synth._header("0.11", True).encode("utf-8")))  # pylint: disable=protected-access
    lines = []
    for i, data in enumerate(page_bytes):
      lines.append(f"{f.tell()}:{100 + i}:Page {i}\n")
      f.write(bz2.compress(data))
    f.write(bz2.compress(b"</mediawiki>\n"))
  with open(synth.index_path_for(path), "wb") as f:
    f.write(bz2.compress("".join(lines).encode("utf-8")))
  return path


def _page(title: str, text: str, page_id: int) -> bytes:
  return synth.page_xml(synth.PageSpec(title, text, page_id=page_id), page_id).encode("utf-8")


GOOD_PAGES = [("Paris", "'''Paris''' is the capital of [[France]]. It lies on the Seine.", 10),
              ("France", "'''France''' is a country. Its capital is [[Paris]].", 11)]


def _wiki(tmp, extra: List[bytes]) -> List[str]:
  return ["--input", _multistream(tmp, [_page(*p) for p in GOOD_PAGES] + extra)]


def _books(tmp, files: Dict[str, bytes]) -> List[str]:
  for rel, data in files.items():
    path = tmp / "books" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
  return ["--input", ",".join(str(tmp / "books" / rel) for rel in files)]


GOOD_BOOK = b"Paris is the capital of France.\n\nIt hosts the Louvre.\n"


def _trivia(tmp, data: List) -> List[str]:
  evidence = write_evidence(tmp / "evidence")
  (tmp / "qa").mkdir()
  path = write_question_file(tmp / "qa" / "wikipedia-dev.json", data, "Wikipedia", "dev")
  return ["--input", path, "--evidence_dir", evidence]


def _trivia_q(qid, pages=("Paris.txt",), ans=PARIS_ANSWER, **extra):
  return dict({"Answer": ans, "EntityPages": [page(p) for p in pages],
               "Question": "Which city hosts the Louvre?", "QuestionId": qid}, **extra)


def _narrative_gz_rows(path: str, extra: int) -> bytes:
  """The questions file plus ``extra`` answerable questions, gzip-compressed."""
  with open(path, "rb") as f:
    data = f.read()
  rows = "".join(f"book1,test,Question {i}?,bees,honey,,,\n" for i in range(extra))
  return gzip.compress(data + rows.encode("utf-8"))


def _truncated_gz_questions(tmp) -> List[str]:
  """qaps.csv.gz cut in the middle: the rows before the cut are read, the rest is one
  uncertain dead letter (an unknown number of rows is lost)."""
  qaps = make_layout(str(tmp / "nqa"))
  cut = qaps + ".gz"
  with open(cut, "wb") as f:
    f.write(_truncated(_narrative_gz_rows(qaps, 3000)))
  return ["--input", cut, "--split", "test", "--documents", str(tmp / "nqa" / "documents.csv"),
          "--stories_dir", str(tmp / "nqa" / "tmp")]


def _narrative(tmp) -> List[str]:
  qaps = make_layout(str(tmp / "nqa"))
  with open(qaps, "a", encoding="utf-8") as f:  # an answer that occurs nowhere in its story
    f.write("book1,test,Which animal?,zebra unicorn,giraffes,,,\n")
  return ["--input", qaps, "--split", "test"]


# ---- the cases ---------------------------------------------------------------------------

def _expect(rejected: Dict[str, int], written: Optional[int] = None,
            source: Optional[str] = None) -> Callable[[Outcome], None]:
  """A check: the run reconciles, with exactly these dead-letter/skipped reasons (a key
  ``skipped:<stage>/<reason>`` for skipped items), ``written`` documents, and (when given) a
  dead letter or skipped item whose source id contains ``source``."""
  def check(o: Outcome) -> None:
    check_reconciles(o)
    assert reasons(o) == rejected, reasons(o)
    if written is not None:
      assert o.manifest["counts"]["written"] == written
    if source is not None:
      assert any(source in s for _, _, s in o.dead + o.skipped), (o.dead, o.skipped)
  return check


def _invalid_utf8_hotpot(tmp):
  good = json.dumps(_hotpot_good()).encode("utf-8")
  bad = json.dumps(hotpot_record("q3", "Broken bytes?", "x", PARIS[:1])).encode("utf-8")
  bad = bad.replace(b"Broken", b"Bro\xff\xfeken")
  path = tmp / "in.json"
  path.write_bytes(good[:-1] + b", " + bad + b"]")
  return ["--input", str(path)]


def _truncated(data: bytes) -> bytes:
  return data[:len(data) // 2]


def _truncated_bz2_hotpot(tmp):
  """Two bz2 blocks of 100 kB (level 1), cut inside the second: the first block's questions
  are read, the rest is one uncertain dead letter."""
  data = bz2.compress(json.dumps(_hotpot_good() + [
      hotpot_record(f"q{i}", f"Question {i}?", "Paris", PARIS) for i in range(3, 300)]
                                 ).encode("utf-8"), 1)
  path = tmp / "in.json.bz2"
  path.write_bytes(data[:len(data) * 3 // 4])
  return ["--input", str(path)]


def _truncated_bz2_wiki(tmp):
  path = _multistream(tmp, [_page(*p) for p in GOOD_PAGES]
                      + [_page("Seine", "The '''Seine''' flows. " * 200, 12)])
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[:-len(bz2.compress(b"</mediawiki>\n")) - 40])  # cut inside the last page
  return ["--input", path]


def _truncated_single_stream_wiki(tmp):
  path = str(tmp / "x-pages-articles.xml.bz2")
  synth.write_dump([synth.PageSpec(t, x, page_id=i) for t, x, i in GOOD_PAGES], path)
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 2])
  return ["--input", path]


def _long_book(chars: int) -> bytes:
  words = []
  n = 0
  i = 0
  while n < chars:
    w = f"word{i}"
    words.append(w + ("\n\n" if i % 50 == 49 else " "))
    n += len(words[-1])
    i += 1
  return "".join(words)[:chars].encode("utf-8")


def _stage(name: str, counter: str, value) -> Callable[[Outcome], None]:
  def check(o: Outcome) -> None:
    assert o.manifest["stages"][name].get(counter) == value, o.manifest["stages"][name]
  return check


def _written_at_least(n: int) -> Callable[[Outcome], None]:
  def check(o: Outcome) -> None:
    assert o.manifest["counts"]["written"] >= n, o.manifest["counts"]
  return check


def _rejected_at_least(rejected: Dict[str, int]) -> Callable[[Outcome], None]:
  """These reasons with exactly these counts, others allowed (a cut may fall in a row)."""
  def check(o: Outcome) -> None:
    assert {k: reasons(o).get(k) for k in rejected} == rejected, reasons(o)
  return check


def _inexact(o: Outcome) -> None:
  assert o.manifest["input_count_exact"] is False  # an unreadable region, counted as one


def _long(min_segments: int, min_sub_documents: int) -> Callable[[Outcome], None]:
  """A document of more segments than --max_segments_per_document (128 here) is written as
  explicit sub-documents of at most 128 segments."""
  def check(o: Outcome) -> None:
    ex = o.manifest["examples"]
    assert ex["segments"] >= min_segments and ex["sub_documents"] >= min_sub_documents, ex
    assert o.manifest["stages"]["segment"]["documents_split"] == 1
  return check


LONG = ["--max_segments_per_document", "128", "--segments_per_pack", "128"]
BIG = ["--seq_length", "512", "--overlap", "128"] + LONG
SEINE = "The '''Seine''' flows."

# case -> (job, builder(tmp) -> job arguments, checks, extra flags)
CASES: Dict[str, Tuple[str, Callable, List[Callable[[Outcome], None]], List[str]]] = {
    # ---- HotpotQA
    "hotpotqa-invalid_utf8": ("hotpotqa", _invalid_utf8_hotpot, [_expect(
        {"read/invalid_utf8": 1}, written=2, source="in.json#2")], []),
    "hotpotqa-truncated_bz2": ("hotpotqa", _truncated_bz2_hotpot, [_expect(
        {"read/invalid_compression": 1}, source="in.json.bz2"), _inexact,
        _written_at_least(100)], []),
    "hotpotqa-empty_documents": ("hotpotqa", lambda t: _hotpot(t, _hotpot_good() + [
        hotpot_record("q3", "Empty?", "x", [])]), [_expect(
            {"parse/bad_context": 1}, written=2, source="in.json#2")], []),
    "hotpotqa-duplicate_ids": ("hotpotqa", lambda t: _hotpot(t, _hotpot_good() + [
        hotpot_record("q1", "Again?", "Paris", PARIS)]), [_expect(
            {"skipped:dedup/duplicate_id": 1}, written=2, source="in.json#2")], []),
    "hotpotqa-answer_absent": ("hotpotqa", lambda t: _hotpot(t, _hotpot_good() + [
        hotpot_record("q3", "Capital of Germany?", "Berlin", PARIS)]), [
            _expect({}, written=3), _stage("answers", "not_found", 1)], []),
    "hotpotqa-unexpected_json": ("hotpotqa", lambda t: _hotpot(t, _hotpot_good() + [
        hotpot_record("q3", "Extra field?", "Paris", PARIS, novel_field={"a": [1]}),
        hotpot_record(5, "Numeric id?", "Paris", PARIS),
        dict(hotpot_record("q6", "Context a string?", "Paris", PARIS), context="Paris"),
        dict(hotpot_record("q7", "Answer a list?", "Paris", PARIS), answer=["Paris"]),
        "just a string", 42, None]), [_expect(
            {"parse/bad_id": 1, "parse/bad_context": 1, "parse/bad_answer": 1,
             "parse/not_an_object": 3}, written=3, source="in.json#8")], []),
    # ---- Wikipedia
    "wikipedia-truncated_bz2": ("wikipedia", _truncated_bz2_wiki, [_expect(
        {"read/truncated_bz2": 1}, written=2, source="multistream.xml.bz2@"), _inexact], []),
    "wikipedia-truncated_single_stream": ("wikipedia", _truncated_single_stream_wiki, [_expect(
        {"read/truncated_bz2": 1}, written=0, source="x-pages-articles.xml.bz2"), _inexact],
                                          ["--allow_empty"]),
    "wikipedia-malformed_xml": ("wikipedia", lambda t: _wiki(t, [
        _page("Seine", SEINE, 12).replace(b"</title>", b"</titel>")]), [
            _expect({"read/malformed_xml": 1}, written=2, source="multistream.xml.bz2@"),
            _inexact], []),
    "wikipedia-invalid_utf8": ("wikipedia", lambda t: _wiki(t, [
        _page("Seine", SEINE, 12).replace(b"flows", b"fl\xff\xfeows")]), [
            _expect({"read/malformed_xml": 1}, written=2, source="multistream.xml.bz2@")], []),
    "wikipedia-empty_and_markup_only": ("wikipedia", lambda t: _wiki(t, [
        _page("Empty", "", 12), _page("Markup", "{{stub}}\n[[Category:Stubs]]\n<!-- x -->", 13),
        _page("Table", "{| class=wikitable\n|-\n| a || b\n|}\n<ref>r</ref>", 14)]), [
            _expect({"skipped:parse/empty_after_cleaning": 3}, written=2, source="#14")], []),
    "wikipedia-duplicate_ids": ("wikipedia", lambda t: _wiki(t, [
        _page("Paris again", "Another '''Paris''' page.", 10)]), [_expect(
            {"skipped:dedup/duplicate_id": 1}, written=2, source="#10")], []),
    "wikipedia-over_128_segments": ("wikipedia", lambda t: _wiki(t, [
        _page("Long", " ".join(f"word{i}" for i in range(9000)), 12)]), [
            _expect({}, written=3), _long(400, 4)], LONG),
    # ---- books
    "books-invalid_utf8": ("books", lambda t: _books(t, {
        "good.txt": GOOD_BOOK, "bytes.txt": b"Caf\xe9 \xff\xfe society.\n"}), [
            _expect({}, written=2), _stage("parse", "books/encoding/cp1252", 1)], []),
    "books-empty_documents": ("books", lambda t: _books(t, {
        "good.txt": GOOD_BOOK, "empty.txt": b"", "blank.txt": b" \r\n\r\n\t\n"}), [
            _expect({"parse/empty_book": 2}, written=1, source="blank.txt")], []),
    "books-only_markup": ("books", lambda t: _books(t, {
        "good.txt": GOOD_BOOK,
        "boiler.txt": (b"The Project Gutenberg EBook of X\r\n\r\n*** START OF THIS PROJECT "
                       b"GUTENBERG EBOOK X ***\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK "
                       b"X ***\r\n")}), [
            _expect({"parse/empty_book": 1}, written=1, source="boiler.txt")], []),
    "books-2m_chars": ("books", lambda t: _books(t, {
        "good.txt": GOOD_BOOK, "huge.txt": _long_book(2_000_000)}), [
            _expect({}, written=2), _long(1500, 12)], BIG),
    "books-duplicate_ids": ("books", lambda t: _books(t, {
        "a/same.txt": GOOD_BOOK, "b/same.txt": b"Another book with the same name.\n"}), [
            _expect({"skipped:dedup/duplicate_id": 1}, written=1, source="b/same.txt")], []),
    "books-truncated_bz2": ("books", lambda t: _books(t, {
        "good.txt": GOOD_BOOK, "cut.txt.bz2": _truncated(bz2.compress(_long_book(20000)))}), [
            _expect({"read/invalid_compression": 1}, written=1, source="cut.txt.bz2")], []),
    # ---- TriviaQA
    "triviaqa-missing_evidence": ("triviaqa", lambda t: _trivia(t, [
        _trivia_q("q1"), _trivia_q("q2", pages=("Gone.txt",)),
        _trivia_q("q3", pages=("Gone.txt", "Lyon.txt"))]), [
            _expect({"evidence/missing_evidence": 1}, written=2, source="q2--Gone.txt"),
            _stage("evidence", "missing_pages", 2)], []),
    "triviaqa-answer_absent": ("triviaqa", lambda t: _trivia(t, [
        _trivia_q("q1"), _trivia_q("q2", ans=answer("Berlin", ["Berlin"], ["berlin"]))]), [
            _expect({}, written=2), _stage("answers", "not_found", 1)], []),
    "triviaqa-unexpected_json": ("triviaqa", lambda t: _trivia(t, [
        _trivia_q("q1"), _trivia_q("q2", Novel={"x": 1}), _trivia_q(5), "text", None,
        dict(_trivia_q("q6"), Answer="Paris"), dict(_trivia_q("q7"), EntityPages="Paris.txt"),
        dict(_trivia_q("q8"), Question=["a", "list"])]), [_expect(
            {"parse/bad_QuestionId": 1, "parse/not_an_object": 2, "parse/bad_Answer": 1,
             "parse/bad_EntityPages": 1, "parse/bad_Question": 1}, written=2,
            source="wikipedia-dev.json#7")], []),
    "triviaqa-duplicate_ids": ("triviaqa", lambda t: _trivia(t, [
        _trivia_q("q1"), _trivia_q("q1", pages=("Lyon.txt",))]), [_expect(
            {"skipped:dedup/duplicate_id": 1}, written=1, source="wikipedia-dev.json#1")], []),
    "triviaqa-invalid_utf8_evidence": ("triviaqa", lambda t: _trivia(t, [
        _trivia_q("q1"), _trivia_q("q2", pages=("Mars.txt",))]), [
            _expect({}, written=2), _stage("evidence", "invalid_utf8_pages", 1)], []),
    # ---- NarrativeQA (the fixture layout of its tests: a story without its file, one whose
    # end marker is missing, a question naming no document, a Latin-1 story; plus a question
    # whose answer is nowhere in the story: written, counted)
    "narrativeqa-missing_undecodable_stories_absent_answer": ("narrativeqa", _narrative, [
        _expect({"parse/missing_story_end": 2, "parse/missing_story_file": 1,
                 "parse/unknown_document": 1}, written=5, source="qaps.csv:7"),
        _stage("parse", "encoding_cp1252", 1), _stage("answers", "not_found", 1)], []),
    "narrativeqa-truncated_gz_questions": ("narrativeqa", _truncated_gz_questions, [
        check_reconciles, _rejected_at_least({"read/invalid_compression": 1}),
        _written_at_least(10), _inexact], []),
}


@pytest.mark.slow
def test_a_truncated_side_table_is_one_line_and_no_output(tmp_path, capsys):
  """documents.csv.gz cut short: its missing rows would make questions look like questions
  about unknown stories, so the job stops with one line naming the file."""
  qaps = make_layout(str(tmp_path / "nqa"))
  docs = tmp_path / "nqa" / "documents.csv"
  table = docs.read_bytes() + b"".join(
      b"extra%d,train,gutenberg,u,1,w,T,9,a,b\r\n" % i for i in range(3000))
  (tmp_path / "documents.csv.gz").write_bytes(_truncated(gzip.compress(table)))
  o = run_job("narrativeqa", ["--input", qaps, "--split", "test", "--documents",
                              str(tmp_path / "documents.csv.gz")], str(tmp_path / "out"),
              capsys)
  assert o.rc == 1 and not o.completed
  lines = o.error_lines()
  assert len(lines) == 1 and "documents.csv.gz" in lines[0] and "truncated" in lines[0], o.stderr


# Cases whose few good records make the bad ones more than the default --max_error_fraction
# (0.1) of the input: they accept any share, to check what each bad record becomes.
HIGH_SHARE = {"books-empty_documents", "books-only_markup", "books-truncated_bz2",
              "hotpotqa-empty_documents", "hotpotqa-invalid_utf8", "hotpotqa-unexpected_json",
              "narrativeqa-missing_undecodable_stories_absent_answer",
              "triviaqa-missing_evidence", "triviaqa-unexpected_json", "wikipedia-invalid_utf8",
              "wikipedia-malformed_xml", "wikipedia-truncated_bz2",
              "wikipedia-truncated_single_stream"}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case, tmp_path, capsys):
  job, build, checks, flags = CASES[case]
  if case in HIGH_SHARE:
    flags = list(flags) + ["--max_error_fraction", "1"]
  o = run_job(job, build(tmp_path), str(tmp_path / "out"), capsys, flags)
  assert not o.error_lines(), o.stderr
  for check in checks:
    check(o)


# ---- --max_error_fraction ----------------------------------------------------------------


def _two_of_five(tmp) -> List[str]:
  """5 input records, 2 rejected (a record without a question, one that is not an object)."""
  return _hotpot(tmp, _hotpot_good() + [hotpot_record("q3", "Q?", "Paris", PARIS),
                                        {"_id": "q4", "context": PARIS}, 7])


@pytest.mark.slow
@pytest.mark.parametrize("fraction", ["0.4", "1"])
def test_max_error_fraction_at_or_above_the_share_completes(fraction, tmp_path, capsys):
  o = run_job("hotpotqa", _two_of_five(tmp_path), str(tmp_path / "out"), capsys,
              ["--max_error_fraction", fraction])
  check_reconciles(o)
  assert o.manifest["counts"]["rejected"] == 2 and o.manifest["counts"]["input"] == 5
  assert o.manifest["config"]["max_error_fraction"] == float(fraction)


@pytest.mark.parametrize("job,build,flags,reasons_shown", [
    ("hotpotqa", _two_of_five, ["--max_error_fraction", "0.3"],
     "(missing_question 1, not_an_object 1)"),
    ("books", lambda t: _books(t, {"good.txt": GOOD_BOOK, "empty.txt": b""}),
     ["--max_error_fraction", "0.3"], "(empty_book 1)"),
    # the default (0.1) trips on a large share: issue 41's JSON lines, 4 of 7 rejected, exited 0
    ("hotpotqa", _two_of_five, [], "(missing_question 1, not_an_object 1)")])
@pytest.mark.slow
def test_max_error_fraction_trips_loudly_without_completed(job, build, flags, reasons_shown,
                                                           tmp_path, capsys):
  out = str(tmp_path / "out")
  o = run_job(job, build(tmp_path), out, capsys, flags)
  assert o.rc == 1
  assert not o.completed  # never looks complete
  lines = o.error_lines()
  assert len(lines) == 1 and "Traceback" not in o.stderr, o.stderr
  c = o.manifest["counts"]  # still written (and reconciling), for diagnosis
  assert f"{c['rejected']} of {c['input']} input records were rejected {reasons_shown}" in (
      lines[0])
  assert f"--max_error_fraction={flags[1] if flags else '0.1'};" in lines[0]
  assert "--max_error_fraction 1" in lines[0]  # how to accept more
  assert os.path.join(out, "dead_letter") in lines[0]
  assert len(o.dead) == c["rejected"]
  assert not os.path.exists(os.path.join(out, "_spill")) or not os.listdir(
      os.path.join(out, "_spill"))


@pytest.mark.slow
def test_a_user_error_on_local_worker_processes_is_one_line(tmp_path):
  """With --direct_running_mode=multi_processing the error is raised in an SDK worker process,
  which prints its traceback to its own stderr: the user still sees only the one line."""
  out = str(tmp_path / "out")
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines", "hotpotqa"] + _two_of_five(tmp_path)
      + ["--output_dir", out, "--max_error_fraction", "0.3",
         "--direct_running_mode=multi_processing", "--direct_num_workers=2"] + SMALL,
      capture_output=True, text=True, check=False)
  assert proc.returncode == 1
  assert "Traceback" not in proc.stderr and "semi_persistent" not in proc.stderr, proc.stderr
  errors = [l for l in proc.stderr.splitlines() if ": error: " in l]
  assert len(errors) == 1 and "2 of 5 input records were rejected" in errors[0], proc.stderr
  assert not os.path.exists(os.path.join(out, manifest_schema.COMPLETED_FILE))


_RELEASED_TWICE = """Traceback (most recent call last):
  File "apache_beam/runners/worker/sdk_worker.py", line 310, in _execute
    response = task()
  File "apache_beam/runners/worker/sdk_worker.py", line 724, in process_bundle
    self.bundle_processor_cache.release(instruction_id)
  File "apache_beam/runners/worker/sdk_worker.py", line 596, in release
    self.active_bundle_processors.pop(instruction_id))
KeyError: 'bundle_55'
"""


def test_a_local_worker_drops_only_the_tracebacks_the_job_reports_itself():
  """A worker's stderr (pipelines.errors._WorkerStderr) drops the traceback of a user error and
  of the bundle torn down twice after it (Beam's KeyError 'bundle_<n>', seen once under load in
  the test above); any other traceback, and the text around, pass through."""
  from pipelines import errors  # pylint: disable=g-import-not-at-top
  out = io.StringIO()
  worker = errors._WorkerStderr(out)  # pylint: disable=protected-access
  user = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
          f"ValueError: {errors.MARKER}bad input\n")
  other = _RELEASED_TWICE.replace("KeyError: 'bundle_55'", "KeyError: 'missing_key'")
  elsewhere = _RELEASED_TWICE.replace("bundle_processor_cache.release", "cache.get")
  for text in ("before\n", user, "\n", _RELEASED_TWICE, "\n", other, "\n", elsewhere, "\n",
               "after\n"):
    worker.write(text)
  assert out.getvalue() == "before\n" + other + "\n" + elsewhere + "\nafter\n"


@pytest.mark.parametrize("value", ["-0.1", "1.5", "nan", "x"])
def test_max_error_fraction_is_validated(value, tmp_path, capsys):
  with pytest.raises(SystemExit) as e:
    runner.dataset_main("hotpotqa", _two_of_five(tmp_path) + ["--output_dir", str(tmp_path / "out"),
                                                             "--max_error_fraction", value])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "--max_error_fraction" in err[0], err
  assert not os.path.exists(tmp_path / "out")


# ---- the trainer, on records of another major schema version ------------------------------


@pytest.fixture(scope="module")
def records_dir(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("records")
  out = str(tmp / "out")
  assert runner.dataset_main("hotpotqa", _hotpot(tmp, _hotpot_good()) + ["--output_dir", out,
                                                                         "--log_level", "WARNING"]
                             + SMALL) == 0
  return out


def _records_of_version(d: str, version: str) -> None:
  """Rewrites every record under ``d`` with another ``schema_version`` feature (the manifest
  keeps the current one)."""
  from schemas import example_proto, records, tfrecord_io  # pylint: disable=g-import-not-at-top
  dtypes = {f.name: f.dtype for f in records.FEATURES}
  for path in glob.glob(os.path.join(d, "records-*.tfrecord")):
    payloads = []
    for payload in tfrecord_io.read_records(path):
      features = example_proto.decode_example(payload)
      features["schema_version"] = [version.encode("utf-8")]
      payloads.append(example_proto.encode_example(features, dtypes))
    with open(path, "wb") as f:
      f.write(b"".join(tfrecord_io.encode_record(p) for p in payloads))


def _manifest_of_version(d: str, version: str) -> None:
  path = os.path.join(d, manifest_schema.MANIFEST_FILE)
  with open(path, encoding="utf-8") as f:
    m = json.load(f)
  m["schema_version"] = version
  with open(path, "w", encoding="utf-8") as f:
    json.dump(m, f)


@pytest.mark.parametrize("where", [_manifest_of_version, _records_of_version])
@pytest.mark.parametrize("command", [
    ["model.pretrain", "--records_dir", "{d}"],
    ["model.finetune", "--task", "hotpotqa", "--records_dir", "{d}"]])
@pytest.mark.slow
def test_trainer_refuses_another_major_schema_version(command, where, records_dir, tmp_path,
                                                      capfd):
  """The command's main() in this process (the refusal, not the process, is under test: the
  model commands' exit codes and stderr as a process are tests/model/test_cli_errors.py's)."""
  import importlib  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  d = str(tmp_path / "v2")
  shutil.copytree(records_dir, d)
  where(d, "2.0.0")
  argv = [a.format(d=d) for a in command[1:]] + ["--model_dir", str(tmp_path / "model")]
  capfd.readouterr()
  assert importlib.import_module(command[0]).main(argv) == 1
  err = capfd.readouterr().err
  errors = [l for l in err.splitlines() if "error:" in l]
  assert len(errors) == 1 and "Traceback" not in err, err
  assert errors[0].startswith(f"python -m {command[0]}: error: "), errors[0]
  assert "2.0.0" in errors[0] and "schema" in errors[0].lower(), errors[0]
  assert not os.path.exists(tmp_path / "model")
