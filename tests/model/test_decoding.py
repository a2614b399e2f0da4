"""Decoding on hand-made packs and logits (pure NumPy; no model, no TensorFlow).

Two packs (built with the record helpers of :mod:`tests.model.packs`) hold four questions:

* ``q1`` -- one document read as two sub-documents over both packs.  "London" scores 10 once;
  "Paris" / "PARIS" / "paris" score 9.5 / 9.4 / 9.3 in three different segments (logsumexp
  10.50), so ``max`` answers "London" and ``sum`` answers "Paris".
* ``q2`` -- two TriviaQA-style documents; in the first, the highest-logit pairs are begin > end or
  too long (excluded); the second document (later pack) holds the higher-scoring span.
* ``q3`` -- a text with non-ASCII and non-BMP characters; the span maps through char offsets.
* ``q4`` -- answer-type logits averaged over two packs say "yes".
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Sequence

import numpy as np
import pytest

from model import decoding
from model.evaluation import hotpotqa, narrativeqa, triviaqa
from schemas import records
from tests.model import packs

S, Q, C, P = (records.TOKEN_KIND_SPECIAL, records.TOKEN_KIND_QUESTION,
              records.TOKEN_KIND_CONTEXT, records.TOKEN_KIND_PAD)
L = 12  # [CLS] q [SEP] + up to 8 context tokens + [SEP] (+ padding)
FIRST = 3  # token index of the first context token
LOW = -20.0  # logit of tokens that should not start / end an answer

D1, D2A, D2B, D3, D4 = ("q1--Paris.txt", "q2--a.txt", "q2--b.txt", "q3--uni.txt", "q4--yes.txt")
TEXT1 = "Paris is big. Then PARIS rules. London wins. paris again."
TEXT2A = "Alpha Beta Gamma Delta Epsilon Zeta Eta Theta"
TEXT2B = "Eta Theta Iota"
TEXT3 = "Zürich 🙂 Straße 東京 café end"
TEXT4 = "Yes it is."


def _paragraph(text: str, title: str, sentences: Sequence[str]) -> Dict:
  spans = []
  for sent in sentences:
    b = text.index(sent)
    spans.append([b, b + len(sent)])
  return {"title": title, "begin": spans[0][0], "end": spans[-1][1], "supporting": False,
          "sentences": spans}


def _documents() -> Dict[str, Dict]:
  def doc(doc_id, qid, question, text, paragraphs=()):
    return {"document_id": doc_id, "question_id": qid, "question": question, "text": text,
            "answers": [], "answer_type": records.ANSWER_TYPE_SPAN,
            "paragraphs": list(paragraphs), "source_id": qid}
  return {
      D1: doc(D1, "q1", "Which city?", TEXT1, [
          _paragraph(TEXT1, "A", ["Paris is big."]),
          _paragraph(TEXT1, "B", ["Then PARIS rules.", "London wins."]),
          _paragraph(TEXT1, "C", ["paris again."])]),
      D2A: doc(D2A, "q2", "Which letters?", TEXT2A),
      D2B: doc(D2B, "q2", "Which letters?", TEXT2B),
      D3: doc(D3, "q3", "Wo liegt 東京?", TEXT3),
      D4: doc(D4, "q4", "Is it?", TEXT4),
  }


class _PackBuilder:
  """One pack of ``n`` segments plus matching model outputs, filled segment by segment."""

  def __init__(self, n: int, pack_id: str):
    self.features = packs.empty_pack(n, L, pack_id=pack_id)
    self.outputs = {"begin_logits": np.full([n, L], LOW), "end_logits": np.full([n, L], LOW),
                    "answer_type_logits": np.zeros([n, 3]), "supporting_logits": np.full(n, -5.0)}
    # Special / question tokens get the highest logits: they must never be decoded.
    self.outputs["begin_logits"][:, :FIRST] = 50.0
    self.outputs["end_logits"][:, :FIRST] = 50.0

  def segment(self, s: int, document_index: int, doc_id: str, qid: str, text: str,
              words: Sequence[int], begin: Mapping[int, float], end: Mapping[int, float],
              answer_type: Sequence[float] = (3.0, 0.0, 0.0), supporting: float = -5.0,
              sub_document_index: int = 0) -> None:
    """Segment ``s`` with the context words ``words`` of ``text``; logits keyed by word index."""
    offsets = packs.word_offsets(text)
    packs.fill_segment(self.features, s, document_index, doc_id, qid, [5],
                       [10] * len(words), [offsets[w] for w in words],
                       sub_document_index=sub_document_index)
    for w, logit in begin.items():
      self.outputs["begin_logits"][s, FIRST + words.index(w)] = logit
    for w, logit in end.items():
      self.outputs["end_logits"][s, FIRST + words.index(w)] = logit
    self.outputs["answer_type_logits"][s] = answer_type
    self.outputs["supporting_logits"][s] = supporting


def _packs() -> List[_PackBuilder]:
  # TEXT1 words: 0 Paris 1 is 2 big. 3 Then 4 PARIS 5 rules. 6 London 7 wins. 8 paris 9 again.
  a = _PackBuilder(4, "00000-0")
  a.segment(0, 0, D1, "q1", TEXT1, [0, 1, 2, 3], {0: 4.75}, {0: 4.75}, supporting=3.0)
  a.segment(1, 0, D1, "q1", TEXT1, [4, 5, 6, 7], {4: 4.9, 6: 6.0}, {4: 4.5, 6: 4.0},
            supporting=-2.0)
  # TEXT2A: the best pairs (Epsilon, Beta) (begin > end) and (Epsilon, Theta) (too long for
  # max_answer_tokens=3) are excluded; "Gamma Delta" (3 + 3) is the best valid span.
  a.segment(2, 1, D2A, "q2", TEXT2A, list(range(8)), {4: 9.0, 2: 3.0}, {1: 9.0, 7: 9.0, 3: 3.0})
  a.segment(3, 2, D4, "q4", TEXT4, [0, 1, 2], {1: 2.0}, {2: 2.0}, answer_type=(2.0, 0.0, 0.0))
  b = _PackBuilder(5, "00000-1")  # segment 4 is padding
  b.segment(0, 0, D1, "q1", TEXT1, [8, 9], {8: 4.65}, {8: 4.65}, supporting=-3.0,
            sub_document_index=1)
  b.segment(1, 1, D2B, "q2", TEXT2B, [0, 1, 2], {1: 4.0}, {2: 3.5})
  # TEXT3 words: 0 Zürich 1 🙂 2 Straße 3 東京 4 café 5 end
  b.segment(2, 2, D3, "q3", TEXT3, list(range(6)), {3: 5.0}, {4: 5.0})
  b.segment(3, 3, D4, "q4", TEXT4, [0, 1, 2], {0: 1.0}, {0: 1.0}, answer_type=(0.0, 4.0, 0.0))
  return [a, b]


def _decoder(reduction: str = "max", **kwargs) -> decoding.Decoder:
  dec = decoding.Decoder(_documents(), top_k=20, max_answer_tokens=3, reduction=reduction,
                         **kwargs)
  for p in _packs():
    dec.add_pack(p.features, p.outputs)
  return dec


def test_span_candidates_all_valid_pairs():
  kinds = np.array([S, Q, S, C, C, C, C, S, P])
  begin = np.array([99, 98, 0, 1, 5, 0, 0, 97, 0], np.float64)
  end = np.array([99, 98, 0, 9, 0, 1, 3, 97, 0], np.float64)
  cands = decoding.span_candidates(begin, end, kinds, top_k=2, max_answer_tokens=2)
  # Top-2 begins: tokens 4 (5), 3 (1); top-2 ends: 3 (9), 6 (3).  (4, 3) has begin > end,
  # (4, 6) and (3, 6) are too long: only (3, 3) is left.
  assert cands == [(10.0, 3, 3)]
  cands = decoding.span_candidates(begin, end, kinds, top_k=4, max_answer_tokens=4)
  # All 10 pairs b <= e of the 4 context tokens, best first; ties in (begin rank, end rank)
  # order (begin ranks 4, 3, 5, 6; end ranks 3, 6, 5, 4).
  assert cands == [(10.0, 3, 3), (8.0, 4, 6), (6.0, 4, 5), (5.0, 4, 4), (4.0, 3, 6),
                   (3.0, 5, 6), (3.0, 6, 6), (2.0, 3, 5), (1.0, 3, 4), (1.0, 5, 5)]
  assert decoding.best_span(begin, end, kinds, top_k=4, max_answer_tokens=4) == cands[0]
  assert decoding.span_candidates(begin, end, np.full(9, S)) == []


def test_max_and_sum_reductions_pick_different_answers():
  assert math.log(math.exp(9.5) + math.exp(9.4) + math.exp(9.3)) > 10.0
  assert decoding.hotpotqa_predictions(_decoder("max"))["answer"]["q1"] == "London"
  assert decoding.hotpotqa_predictions(_decoder("sum"))["answer"]["q1"] == "Paris"
  assert decoding.triviaqa_predictions(_decoder("max"))["q1"] == "London"
  assert decoding.triviaqa_predictions(_decoder("sum"))["q1"] == "Paris"


def test_sum_groups_by_normalised_text():
  assert decoding.normalize_answer_text("  (The  Beatles.) ") == "the beatles"
  assert decoding.normalize_answer_text("«Zürich»\n") == "zürich"
  assert decoding.normalize_answer_text("o'neil") == "o'neil"
  dec = _decoder("sum")
  groups = dec.questions["q1"].aggregate.groups
  score, best = groups["paris"]
  assert best.text == "Paris" and best.document_id == D1 and (best.char_begin,
                                                              best.char_end) == (0, 5)
  assert score == pytest.approx(math.log(math.exp(9.5) + math.exp(9.4) + math.exp(9.3)))
  assert groups["london"][0] == pytest.approx(10.0)


@pytest.mark.parametrize("reduction", ["max", "sum"])
def test_exclusions_and_later_pack_wins(reduction):
  dec = _decoder(reduction)
  per_doc = dec.document_answers("q2")
  # begin > end and too-long pairs are not candidates: the best of D2A is "Gamma Delta" (6.0).
  assert per_doc == {D2A: "Gamma Delta", D2B: "Theta Iota"}
  cands = dec.segment_candidates(_packs()[0].features, _packs()[0].outputs, 2)
  assert cands[0] == decoding.Candidate(6.0, D2A, 11, 22, "Gamma Delta")
  # (Epsilon, Beta) and (Epsilon, Theta) would score 18.
  assert max(c.score for c in cands) == 6.0
  assert "Epsilon Zeta Eta Theta" not in [c.text for c in cands]
  # The second document, in the later pack, scores 7.5 > 6.0 and wins the question.
  assert dec.span_answer("q2") == "Theta Iota"


def test_unicode_maps_exactly_through_offsets():
  dec = _decoder()
  c = dec.questions["q3"].aggregate.winner()
  assert c.text == "東京 café" == TEXT3[c.char_begin:c.char_end]
  assert (c.char_begin, c.char_end) == (TEXT3.index("東京"), TEXT3.index("café") + 4)
  assert c.char_begin == 16  # code points (the non-BMP emoji counts once)
  assert decoding.hotpotqa_predictions(dec)["answer"]["q3"] == "東京 café"


def test_yes_no_from_answer_type_head():
  dec = _decoder()
  # Mean of [2, 0, 0] (pack 0) and [0, 4, 0] (pack 1) -> [1, 2, 0]: "yes".
  assert dec.questions["q4"].answer_type() == records.ANSWER_TYPE_YES
  assert decoding.hotpotqa_predictions(dec)["answer"]["q4"] == "yes"
  # TriviaQA / NarrativeQA answers are always spans.
  assert decoding.triviaqa_predictions(dec)["q4"] in TEXT4
  # The paper's mode: the type of the best (segment, type) pair, [2, 0, 0] vs [0, 4, 0]: yes
  # too; and a case where the two modes differ: mean [1.5, 1, 1] -> span, best pair 3 -> no.
  assert dec.questions["q4"].answer_type("paper") == records.ANSWER_TYPE_YES
  q = dec.questions["q4"]
  q.answer_type_sum, q.answer_type_max, q.segments = (np.array([3.0, 2.0, 2.0]),
                                                       np.array([2.0, 0.0, 3.0]), 2)
  assert q.answer_type() == records.ANSWER_TYPE_SPAN
  assert q.answer_type("paper") == records.ANSWER_TYPE_NO
  with pytest.raises(ValueError, match="answer_type_mode"):
    decoding.Decoder({}, answer_type_mode="max")


def test_supporting_facts_paragraph_level():
  dec = _decoder()
  sp = decoding.hotpotqa_predictions(dec)["sp"]
  # Only q1's first segment (context "Paris is big. Then") is supporting: it overlaps paragraphs
  # A and B (partly), so all sentences of A and B are predicted, none of C.
  assert sp["q1"] == [["A", 0], ["B", 0], ["B", 1]]
  assert sp["q2"] == sp["q3"] == sp["q4"] == []


def test_supporting_facts_sentence_hook():
  def evidence(features, outputs, s):
    if features["question_id"][s] == "q1" and features["segment_index"][s] == 0 and \
        features["context_char_begin"][s] == 0:
      return [(TEXT1.index("Then"), TEXT1.index("Then") + 4, 0.9)]
    return []
  dec = _decoder(supporting_evidence_fn=evidence, sp_granularity="sentence")
  assert decoding.hotpotqa_predictions(dec)["sp"]["q1"] == [["B", 0]]
  doc = _documents()[D1]
  assert decoding.supporting_facts(doc, [(0, 3)], "paragraph") == [["A", 0]]
  assert decoding.supporting_facts(doc, [(40, 42)], "sentence") == [["B", 1]]
  with pytest.raises(ValueError):
    decoding.Decoder({}, sp_granularity="token")


def test_output_formats_keys_and_official_checks():
  dec = _decoder("sum")
  hp = decoding.hotpotqa_predictions(dec)
  assert set(hp) == {"answer", "sp"}
  assert list(hp["answer"]) == list(hp["sp"]) == ["q1", "q2", "q3", "q4"]
  assert hp["answer"] == {"q1": "Paris", "q2": "Theta Iota", "q3": "東京 café", "q4": "yes"}
  hotpotqa.check_predictions(hp)

  tq = decoding.triviaqa_predictions(dec)
  assert set(tq) == {"q1", "q2", "q3", "q4"}
  triviaqa.check_predictions(tq)
  tq_doc = decoding.triviaqa_predictions(dec, per_document=True)
  assert set(tq_doc) == {D1, D2A, D2B, D3, D4}
  assert all(k.split("--")[0] in tq for k in tq_doc)  # "<QuestionId>--<Filename>"
  assert tq_doc[D2A] == "Gamma Delta" and tq_doc[D2B] == "Theta Iota" and tq_doc[D1] == "Paris"
  triviaqa.check_predictions(tq_doc)

  nq = decoding.narrativeqa_predictions(dec)
  assert set(nq) == {f"{D1}: Which city?", f"{D2A}: Which letters?", f"{D2B}: Which letters?",
                     f"{D3}: Wo liegt 東京?", f"{D4}: Is it?"}
  assert nq[narrativeqa.prediction_key(D3, "Wo liegt 東京?")] == "東京 café"
  assert nq[f"{D2A}: Which letters?"] == nq[f"{D2B}: Which letters?"] == "Theta Iota"
  narrativeqa.check_predictions(nq)

  assert decoding.task_predictions(dec, "narrativeqa") == nq
  assert decoding.task_predictions(dec, "triviaqa", per_document=True) == tq_doc
  with pytest.raises(ValueError):
    decoding.task_predictions(dec, "hotpotqa", per_document=True)
  with pytest.raises(ValueError):
    decoding.Decoder({}, reduction="mean")


def test_official_evaluation_accepts_predictions():
  dec = _decoder("max")
  hp = decoding.hotpotqa_predictions(dec)
  gold = [{"_id": "q1", "answer": "London", "supporting_facts": [["A", 0], ["B", 0], ["B", 1]]}]
  metrics = hotpotqa.evaluate(hp, gold)
  assert metrics["em"] == 1.0 and metrics["sp_em"] == 1.0
