"""Generates long-range QA documents: names, facts placed by :mod:`.layout`, the HotpotQA
record, each document checked with the real code path (:func:`check_doc`) and rebuilt when a
fact is cut or lands elsewhere."""

from __future__ import annotations

import random
from typing import List, Optional, Tuple

from pipelines.datasets.hotpotqa import reader as hotpot_reader
from synthetic.long_range_qa.documents import (BIRTH_FACT, BOOK_FACT, QUESTION, Fact,
                                               LongRangeDoc, Params)
from synthetic.long_range_qa.layout import lay_out, place_triples
from synthetic.long_range_qa.names import Filler, NamePool
from synthetic.long_range_qa.segments import fact_segments, job_tokenizer


def _make_doc(tok, filler: Filler, names: NamePool, rng: random.Random, params: Params,
              split: str, doc_id: str, attempts: int = 50) -> LongRangeDoc:
  M = params.candidates
  triples = [names.triple(rng) for _ in range(M)]
  question = QUESTION.format(book=triples[0][0])
  q_tokens = len(tok.encode(question))
  budget = params.seq_length - min(q_tokens, params.max_question_tokens) - 3
  distance = rng.choice(params.distances)  # drawn once: retries keep it (no bias)
  for _ in range(attempts):
    pairs = place_triples(rng, params, distance)
    facts = []
    for t, ((book, author, city), (b_seg, r_seg)) in enumerate(zip(triples, pairs)):
      facts.append(Fact("book", t, BOOK_FACT.format(book=book, author=author), b_seg))
      facts.append(Fact("birth", t, BIRTH_FACT.format(author=author, city=city), r_seg))
    laid = lay_out(tok, filler, rng, params, budget, facts)
    if laid is None:
      continue
    layout, spans = laid
    # Where each fact went: its paragraph title and sentence index.
    starts = []
    pos = 0
    for p, (title, sents) in enumerate(layout.paragraphs):
      if p:
        pos += len(hotpot_reader.PARAGRAPH_SEPARATOR)
      pos += len(title) + 1
      for i, s in enumerate(sents):
        starts.append((pos + (len(s) - len(s.lstrip(" "))), title, i))
        pos += len(s)
    where = {b: (title, i) for b, title, i in starts}
    for i, f in enumerate(facts):
      f.title, f.sentence = where[spans[i][0]]
    target_book, target_birth = facts[0], facts[1]
    record = {"_id": doc_id, "answer": triples[0][2], "question": question,
              "supporting_facts": [[target_book.title, target_book.sentence],
                                   [target_birth.title, target_birth.sentence]],
              "context": [[t, list(s)] for t, s in layout.paragraphs],
              "type": "bridge", "level": "hard"}
    births = sorted((spans[i][0], facts[i].triple) for i in range(len(facts))
                    if facts[i].kind == "birth")
    doc = LongRangeDoc(
        id=doc_id, split=split, question=question, answer=triples[0][2], distance=distance,
        book_segment=target_book.segment, birth_segment=target_birth.segment,
        candidates=[triples[t][2] for _, t in births], triples=triples, facts=facts,
        num_segments=params.segments, record=record)
    if not check_doc(doc, params, tok)[0]:
      continue
    return doc
  raise RuntimeError(f"{doc_id}: could not lay out a document for {params} in {attempts} "
                     "attempts")


def check_doc(doc: LongRangeDoc, params: Params, tokenizer=None) -> Tuple[bool, List[str]]:
  """Checks a document with the real code path (:func:`fact_segments`); returns (ok, problems):
  the segment (and sub-document) count, every fact wholly in its segment only, the target's
  facts ``distance`` apart, the answer once in the context (in the target's birth fact) and
  not in the question, the answer labelled in that segment only."""
  sub = params.sub_document_segments
  r = fact_segments(doc.record, params.seq_length, params.overlap, params.max_question_tokens,
                    max_segments_per_document=sub or 128, tokenizer=tokenizer)
  problems = []
  subs = -(-params.segments // sub) if sub else 1
  if r["num_segments"] != params.segments or r["num_sub_documents"] != subs:
    problems.append(f"{r['num_segments']} segments, {r['num_sub_documents']} sub-documents")
  if r["question_truncated"]:
    problems.append("question truncated")
  titles = {t: k for k, (t, _) in enumerate(doc.record["context"])}
  for f in doc.facts:
    got = r["sentences"][titles[f.title]][f.sentence]
    if got != [f.segment]:
      problems.append(f"{f.kind} fact of triple {f.triple} in segments {got}, not "
                      f"[{f.segment}]")
  if abs(doc.book_segment - doc.birth_segment) != doc.distance or doc.distance < 1:
    problems.append("target facts not at the distance")
  if r["answer_spans"] != 1 or r["answer_segments"] != [doc.birth_segment]:
    problems.append(f"answer found {r['answer_spans']} times, labelled in segments "
                    f"{r['answer_segments']}")
  if doc.answer.lower() in doc.question.lower():
    problems.append("answer in the question")
  return not problems, problems


def generate(split: str, num_docs: int, seed: int = 0, params: Params = Params(),
             names: Optional[NamePool] = None) -> List[LongRangeDoc]:
  """``num_docs`` documents of ``split``, deterministic for (split, seed, params); names are
  unique within the split (``names``: a pool to continue) and disjoint from other splits'."""
  tok = job_tokenizer()
  filler = Filler()
  names = names or NamePool(split)
  rng = random.Random(f"long_range_qa:{split}:{seed}")
  return [_make_doc(tok, filler, names, rng, params, split, f"lrqa-{split}-s{seed}-{i:06d}")
          for i in range(num_docs)]
