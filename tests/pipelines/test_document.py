"""The documents side-file line: SideLines against json.dumps of side_record."""

import json

from pipelines.document import Document, Mention, Paragraph, Question, SideLines
from schemas import records


def _reference(doc: Document) -> str:
  return json.dumps(doc.side_record(), ensure_ascii=False, sort_keys=True)


def test_side_lines_equal_json_dumps_of_the_side_record_and_reuse_a_story():
  story = 'Él dijo "hola"\n\tand \\ left \u2028 \U0001F600 \x00 {"text": 1}, '
  paragraphs = (Paragraph("Tí\"tle", 0, 5, ((0, 2), (3, 5)), True), Paragraph("", 6, 9))
  questions = [Question("q1", 'what "text": ?', ("a", "b\n"), records.ANSWER_TYPE_SPAN),
               Question("q2", "", (), records.ANSWER_TYPE_NONE, ((1, 2),)),
               Question('"paragraphs": [', "ü", ("ü",), records.ANSWER_TYPE_YES)]
  docs = [Document(f"s:{k}", story, f"qaps#{k}", paragraphs, question=q, source_document_id="s")
          for k, q in enumerate(questions)]
  docs += [Document("other", "plain text", "f.txt", mentions=(Mention(0, 5, 3),)),
           Document("s:9", story, "qaps#9", paragraphs[:1], source_document_id="s"),  # other paragraphs
           Document("t:0", story[:-1] + "!", "x#0", paragraphs, source_document_id="t")]
  lines = SideLines()
  for doc in docs:
    line = lines(doc)
    assert line == _reference(doc)
    assert json.loads(line) == doc.side_record()


def test_side_lines_encode_a_shared_story_once(monkeypatch):
  story = "one long story " * 100
  docs = [Document(f"s:{k}", story, f"q#{k}", question=Question(f"q{k}", f"why {k}?"),
                   source_document_id="s") for k in range(5)]
  encoded = []
  real = json.dumps

  def counting(value, **kw):
    encoded.append(value)
    return real(value, **kw)

  monkeypatch.setattr(json, "dumps", counting)
  lines = SideLines()
  out = [lines(d) for d in docs]
  monkeypatch.setattr(json, "dumps", real)
  assert sum(v is story for v in encoded) == 1
  assert out == [_reference(d) for d in docs]
