"""Where the sentences and answers of a HotpotQA record land in segments, computed with the
pipeline's own reader, tokenizer, answer labeller and segmenter."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from pipelines.datasets.hotpotqa import reader as hotpot_reader
from pipelines.text import answers as answers_lib
from pipelines.text import segmenter as segmenter_lib
from pipelines.text.tokenizer import shared_tokenizer


def job_tokenizer():
  """The HotpotQA job's default tokenizer (shared within the process)."""
  from pipelines.beam.config import RecordsConfig  # pylint: disable=g-import-not-at-top
  return shared_tokenizer(RecordsConfig().tokenizer)


def _strip_span(text: str, b: int, e: int) -> Tuple[int, int]:
  while b < e and text[b].isspace():
    b += 1
  while e > b and text[e - 1].isspace():
    e -= 1
  return b, e


def fact_segments(record: Mapping[str, Any], seq_length: int = 128, overlap: int = 0,
                  max_question_tokens: int = 64, max_segments_per_document: int = 128,
                  tokenizer=None) -> Dict[str, Any]:
  """Where the sentences and answers of a HotpotQA ``record`` land, by the pipeline's own code:
  the reader's document (:func:`pipelines.datasets.hotpotqa.reader.parse_record`), the job's default
  tokenizer, the answer labeller (:func:`pipelines.text.answers.find_answer_spans`) and
  :func:`pipelines.text.segmenter.segment_document` (a sentence's span, without its surrounding
  spaces, is placed like an entity mention: in every segment that contains it entirely).

  Returns ``num_segments`` and ``num_sub_documents``, ``question_tokens`` and
  ``question_truncated``, ``sentences`` (per context paragraph, per sentence: the sorted
  document-wide indices of the segments that hold it wholly; ``[]`` when cut), the
  ``supporting_facts`` as ``[title, sentence, segments]``, ``answer_segments`` (segments with an
  answer label) and ``answer_spans`` (occurrences of the answer in the context).
  """
  tok = tokenizer or job_tokenizer()
  doc, _ = hotpot_reader.parse_record(dict(record), "fact_segments")
  ctx, q_enc = tok.encode_batch([doc.text, doc.question.text])
  spans, where = [], []
  for p, para in enumerate(doc.paragraphs):
    for i, (b, e) in enumerate(para.sentences):
      b, e = _strip_span(doc.text, b, e)
      spans.append((b, e, len(spans)))
      where.append((p, i))
  answer_spans = []
  if doc.question.answers:
    answer_spans, _ = answers_lib.find_answer_spans(doc.text, doc.question.answers)
  config = segmenter_lib.SegmenterConfig(
      seq_length=seq_length, overlap=overlap, max_question_tokens=max_question_tokens,
      max_segments_per_document=max_segments_per_document)
  subs, stats = segmenter_lib.segment_document(
      doc.id, doc.id, ctx, q_enc, tok.special_ids, config, answer_char_spans=answer_spans,
      mentions=spans, answer_type=doc.question.answer_type)
  sentences: List[List[List[int]]] = [[[] for _ in p.sentences] for p in doc.paragraphs]
  answer_segments = set()
  first = 0
  for sub in subs:
    for seg, _, _, idx in sub.mentions.tolist():
      p, i = where[idx]
      sentences[p][i].append(first + seg)
    answer_segments.update(first + int(s) for s in sub.answers[:, 0].tolist())
    first += sub.num_segments
  for para in sentences:
    for segs in para:
      segs.sort()
  index = {(p.title, i): (k, i) for k, p in enumerate(doc.paragraphs)
           for i in range(len(p.sentences))}
  supporting = []
  for title, i in record.get("supporting_facts", []):
    k = index.get((title, i))
    supporting.append([title, i, sentences[k[0]][k[1]] if k else []])
  return {"num_segments": first, "num_sub_documents": len(subs),
          "question_tokens": len(q_enc), "question_truncated": bool(stats["questions_truncated"]),
          "sentences": sentences, "supporting_facts": supporting,
          "answer_segments": sorted(answer_segments), "answer_spans": len(answer_spans)}
