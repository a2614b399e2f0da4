"""The books job end to end: files in, records, documents, dead letters, report and manifest out."""

import glob
import json
import os

import pytest

from schemas import documents as documents_schema
from schemas import manifest as manifest_schema
from pipelines import runner
from pipelines.datasets.books import reader
from tests.pipelines.helpers import read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SAMPLES = os.path.join(REPO, "..", "shared", "samples")
SMALL_FLAGS = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
               "--segments_per_pack", "8", "--max_question_tokens", "8"]

HEADER = ("The Project Gutenberg EBook of A Test, by Someone\r\n\r\n"
          "*** START OF THIS PROJECT GUTENBERG EBOOK A TEST ***\r\n\r\n")
FOOTER = ("\r\n\r\nEnd of the Project Gutenberg EBook of A Test\r\n\r\n"
          "*** END OF THIS PROJECT GUTENBERG EBOOK A TEST ***\r\n\r\nLicence text here.\r\n")


@pytest.mark.slow
def test_books_job_writes_whole_books_as_sub_documents_and_reconciles(tmp_path):
  src = tmp_path / "in"
  src.mkdir()
  long_body = "\r\n\r\n".join(
      f"Chapter {i}. " + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(12))
  (src / "long.txt").write_bytes((HEADER + long_body + FOOTER).encode("utf-8"))
  (src / "short.txt").write_bytes(b"Caf\xe9 society\r\nwas wrapped here.\r\n\r\nThe end.\r\n")
  (src / "empty.txt").write_bytes(HEADER.encode() + FOOTER.encode())
  out = str(tmp_path / "out")
  assert runner.dataset_main("books", ["--input", str(src / "*.txt"), "--output_dir", out,
                                       "--max_error_fraction", "1"]  # 1 of 3 is empty
                             + SMALL_FLAGS) == 0

  m = manifest_schema.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  assert m["counts"] == {"input": 3, "written": 2, "skipped": 0, "rejected": 1}
  assert m["rejected_by_reason"] == {"parse/empty_book": 1}
  dead = [json.loads(line) for f in glob.glob(os.path.join(out, "dead_letter", "*.jsonl"))
          for line in open(f, encoding="utf-8")]
  assert [(d["stage"], d["reason"], os.path.basename(d["source_id"])) for d in dead] == [
      ("parse", "empty_book", "empty.txt")]
  assert m["config"]["ner"] == "none"

  docs = documents_schema.load(out)
  long_doc = reader.parse_book((src / "long.txt").read_bytes(), str(src / "long.txt"))
  assert docs["long"]["text"] == long_doc.text
  assert long_doc.text.startswith("Chapter 0. word0x0") and "Licence" not in long_doc.text
  assert docs["short"]["text"] == "Café society was wrapped here.\n\nThe end."

  recs = read_records(out)
  seen = {}
  for r in recs:
    for s, doc_id in enumerate(r["document_id"]):
      if r["segment_mask"][s]:
        seen.setdefault(doc_id.decode(), set()).add(r["sub_document_index"][s])
        assert r["question_length"][s] == 1  # no question prefix: [CLS] then the text
  assert seen["short"] == {0}
  assert len(seen["long"]) > 1  # longer than 4 segments: explicit sub-documents

  stats = json.load(open(os.path.join(out, "stats.json"), encoding="utf-8"))
  assert stats["counts"] == m["counts"]
  assert stats["distributions"]["segments_per_document"]["count"] == 2
  assert open(os.path.join(out, "stats.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.path.exists(os.path.join(out, "COMPLETED"))


def test_books_job_flags(tmp_path, capsys):
  for argv, message in ((["--ner", "stanza"], "--ner"),
                        (["--linker", "alias"], "give --ner spacy"),
                        (["--ner", "spacy", "--linker", "alias"], "needs --entities_dir"),
                        (["--ner", "spacy", "--entities_dir", str(tmp_path / "e")],
                         "no entities/")):
    with pytest.raises(SystemExit) as e:
      runner.dataset_main("books", ["--input", "x", "--output_dir", str(tmp_path / "o")] + argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    runner.dataset_main("books", ["--input", "x", "--output_dir", str(tmp_path / "o"), "--nerr",
                                  "none"])
  assert e.value.code == 2
  assert "did you mean --ner" in capsys.readouterr().err


@pytest.mark.slow
def test_pg19_samples_go_through(tmp_path):
  paths = sorted(glob.glob(os.path.join(SAMPLES, "books", "pg19", "*", "*.txt")))
  if not paths:
    pytest.skip("../shared/samples/books/pg19 not present")
  out = str(tmp_path / "out")
  assert runner.dataset_main("books", ["--input", ",".join(paths), "--output_dir", out]) == 0
  m = manifest_schema.loads(open(os.path.join(out, "manifest.json"), encoding="utf-8").read())
  assert m["counts"] == {"input": 3, "written": 3, "skipped": 0, "rejected": 0}
  docs = documents_schema.load(out)
  assert docs["12204"]["text"].startswith("ODD CRAFT")
  assert docs["12204"]["text"].endswith("never set eyes on 'im again.")
  assert m["stages"]["parse"]["books/gutenberg_footer_removed"] == 3
