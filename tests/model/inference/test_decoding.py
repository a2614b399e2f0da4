"""Decoding on hand-made packs and logits (pure NumPy; no model, no TensorFlow).

Two packs (built with the record helpers of :mod:`tests.model.packs`) hold four questions:

* ``q1`` -- one document read as two sub-documents over both packs.  "London" scores 10 once;
  "Paris" / "PARIS" / "paris" score 9.5 / 9.4 / 9.3 in three different segments (logsumexp
  10.50), so ``max`` answers "London" and ``sum`` answers "Paris".
* ``q2`` -- two TriviaQA-style documents; in the first, the highest-logit pairs are begin > end or
  too long (excluded); the second document (later pack) holds the higher-scoring span.
* ``q3`` -- a text with non-ASCII and non-BMP characters; the span maps through char offsets.
* ``q4`` -- answer-type logits averaged over two packs say "yes".

The tests of the tasks' prediction formats (``tests/model/tasks/``) read the same decoder
(:func:`_decoder`).
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Sequence

import numpy as np
import pytest

from model.inference import decoding
from model.inference import spans
from model import tasks
from schemas import records
from tests.model import packs

HOTPOTQA, TRIVIAQA = tasks.get("hotpotqa"), tasks.get("triviaqa")

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


def test_max_and_sum_reductions_pick_different_answers():
  assert math.log(math.exp(9.5) + math.exp(9.4) + math.exp(9.3)) > 10.0
  assert HOTPOTQA.predictions(_decoder("max"))["answer"]["q1"] == "London"
  assert HOTPOTQA.predictions(_decoder("sum"))["answer"]["q1"] == "Paris"
  assert TRIVIAQA.predictions(_decoder("max"))["q1"] == "London"
  assert TRIVIAQA.predictions(_decoder("sum"))["q1"] == "Paris"


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
  assert HOTPOTQA.predictions(dec)["answer"]["q3"] == "東京 café"


def test_yes_no_from_answer_type_head():
  dec = _decoder()
  # Mean of [2, 0, 0] (pack 0) and [0, 4, 0] (pack 1) -> [1, 2, 0]: "yes".
  assert dec.questions["q4"].answer_type() == records.ANSWER_TYPE_YES
  assert dec.answer_type("q4") == records.ANSWER_TYPE_YES
  assert HOTPOTQA.predictions(dec)["answer"]["q4"] == "yes"
  # TriviaQA / NarrativeQA answers are always spans.
  assert TRIVIAQA.predictions(dec)["q4"] in TEXT4
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
  sp = HOTPOTQA.predictions(dec)["sp"]
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
  assert HOTPOTQA.predictions(dec)["sp"]["q1"] == [["B", 0]]
  doc = _documents()[D1]
  assert decoding.supporting_facts(doc, [(0, 3)], "paragraph") == [["A", 0]]
  assert decoding.supporting_facts(doc, [(40, 42)], "sentence") == [["B", 1]]
  with pytest.raises(ValueError):
    decoding.Decoder({}, sp_granularity="token")


def test_unknown_reduction():
  with pytest.raises(ValueError, match="reduction"):
    decoding.Decoder({}, reduction="mean")


# --- snapping to whole words ---------------------------------------------------------------
# Byte-level BPE tokens of BPE_TEXT as the project's tokenizer splits it (GPT-2 vocabulary):
# (char_begin, char_end, word_start) per context token.
BPE_TEXT = "Erskine Hamilton Childers. Hamilton's (born 1905)"
BPE_TOKENS = [
    (0, 1, 1), (1, 3, 0), (3, 4, 0), (4, 7, 0),  # 0-3: E rs k ine
    (8, 16, 1),  # 4: Hamilton
    (17, 22, 1), (22, 25, 0), (25, 26, 0),  # 5-7: Child ers .
    (27, 35, 1), (35, 37, 0),  # 8-9: Hamilton 's
    (38, 39, 1), (39, 43, 0),  # 10-11: ( born
    (44, 48, 1), (48, 49, 0),  # 12-13: 1905 )
]
BPE_DOC = "bpe--doc.txt"
BPE_L = 20


def _bpe_pack(tokens=BPE_TOKENS, text=BPE_TEXT, begin=None, end=None, qid="qb",
              word_start=True, pack_id="00000-0"):
  """One segment ``[CLS] q [SEP] context [SEP]`` over ``tokens``; logits keyed by context index.

  Question and special tokens get the highest logits (and the question token a word start):
  they must never be decoded.
  """
  f = packs.empty_pack(1, BPE_L, pack_id=pack_id)
  packs.fill_segment(f, 0, 0, BPE_DOC, qid, [5], [10] * len(tokens),
                     [(b, e) for b, e, _ in tokens])
  f["word_start"][0, FIRST:FIRST + len(tokens)] = [w for _, _, w in tokens]
  if not word_start:
    del f["word_start"]
  out = {"begin_logits": np.full([1, BPE_L], LOW), "end_logits": np.full([1, BPE_L], LOW),
         "answer_type_logits": np.array([[3.0, 0.0, 0.0]]), "supporting_logits": np.array([-5.0])}
  out["begin_logits"][0, :FIRST] = out["end_logits"][0, :FIRST] = 50.0
  for i, logit in (begin or {}).items():
    out["begin_logits"][0, FIRST + i] = logit
  for i, logit in (end or {}).items():
    out["end_logits"][0, FIRST + i] = logit
  return f, out


def _bpe_decoder(text=BPE_TEXT, **kwargs) -> decoding.Decoder:
  docs = {BPE_DOC: {"document_id": BPE_DOC, "question_id": "qb", "question": "Who?",
                    "text": text, "answers": [], "answer_type": records.ANSWER_TYPE_SPAN,
                    "paragraphs": [], "source_id": "qb"}}
  return decoding.Decoder(docs, top_k=20, max_answer_tokens=kwargs.pop("max_answer_tokens", 30),
                          **kwargs)


def _answers(pack_kwargs, **decoder_kwargs):
  """(old token-span answer, new snapped answer) of one ``_bpe_pack``."""
  got = []
  for snap in (False, True):
    dec = _bpe_decoder(snap_to_words=snap, **decoder_kwargs)
    dec.add_pack(*_bpe_pack(**pack_kwargs))
    got.append(HOTPOTQA.predictions(dec)["answer"]["qb"])
  return tuple(got)


@pytest.mark.parametrize("begin, end, old, new", [
    # The case: begin on "rs", end on "Child".
    (1, 5, "rskine Hamilton Child", "Erskine Hamilton Childers"),
    (2, 3, "kine", "Erskine"),
    # "Childers." is one word_start word, but the snapped span stops at the punctuation ...
    (6, 6, "ers", "Childers"),
    # ... so neither "Hamilton's" nor "(born" is taken in by snapping.
    (8, 8, "Hamilton", "Hamilton"),
    (11, 12, "born 1905", "born 1905"),
    # The model's own choice of punctuation stays.
    (6, 7, "ers.", "Childers."),
    (10, 13, "(born 1905)", "(born 1905)"),
])
def test_spans_snap_to_whole_words(begin, end, old, new):
  assert _answers({"begin": {begin: 8.0}, "end": {end: 8.0}}) == (old, new)


def test_inner_apostrophes_join_but_clitics_do_not():
  # "Eugene O’Neill’s play" as the tokenizer splits it; each "’" is two byte tokens.
  text = "Eugene O\u2019Neill\u2019s play"
  tokens = [(0, 1, 1), (1, 3, 0), (3, 6, 0),  # 0-2: E ug ene
            (7, 8, 1), (8, 9, 0), (8, 9, 0), (9, 14, 0),  # 3-6: O ’ ’ Neill
            (14, 15, 0), (14, 15, 0), (15, 16, 0),  # 7-9: ’ ’ s
            (17, 21, 1)]  # 10: play
  for (b, e), expected in {(3, 3): ("O", "O\u2019Neill"), (6, 6): ("Neill", "O\u2019Neill"),
                           (1, 6): ("ugene O\u2019Neill", "Eugene O\u2019Neill"),
                           (3, 10): ("O\u2019Neill\u2019s play",) * 2}.items():
    assert _answers({"tokens": tokens, "text": text, "begin": {b: 8.0}, "end": {e: 8.0}},
                    text=text) == expected


def test_snap_joins_tokens_that_share_a_character():
  # "Zürich": the two UTF-8 bytes of "ü" are two tokens with the same offsets.
  tokens = [(0, 1, 1), (1, 2, 0), (1, 2, 0), (2, 6, 0), (7, 10, 1)]
  kw = {"tokens": tokens, "text": "Zürich end"}
  assert _answers(dict(kw, begin={3: 8.0}, end={3: 8.0}), text="Zürich end") == (
      "rich", "Zürich")
  assert _answers(dict(kw, begin={2: 8.0}, end={2: 8.0}), text="Zürich end") == (
      "ü", "Zürich")


def test_snap_stays_inside_the_segment_context():
  # A segment cut inside "Erskine" (its first context token "k" continues a word) and inside
  # "Childers" (its last context token is "Child"): snapping never reaches the question prefix
  # or the special tokens, whatever their logits and word starts, and stops at the cut.
  cut = BPE_TOKENS[2:6]  # k ine Hamilton Child
  assert _answers({"tokens": cut, "begin": {1: 8.0}, "end": {3: 8.0}}) == (
      "ine Hamilton Child", "kine Hamilton Child")
  dec = _bpe_decoder()
  f, out = _bpe_pack(tokens=cut, begin={1: 8.0}, end={3: 8.0})
  assert [(c.char_begin, c.char_end) for c in dec.segment_candidates(f, out, 0)][0] == (3, 22)
  # The neighbouring (overlapping) segment holds the whole words and offers them itself.
  assert _answers({"tokens": BPE_TOKENS[:8], "begin": {3: 9.0}, "end": {5: 9.0}}) == (
      "ine Hamilton Child", "Erskine Hamilton Childers")


def test_snapped_spans_are_unique_with_the_best_pair_score():
  f, out = _bpe_pack(begin={0: 5.0, 1: 5.5}, end={3: 5.0})
  args = (out["begin_logits"][0], out["end_logits"][0], f["token_kind"][0])
  ws = f["word_start"][0]
  # Token spans: (rs, ine) 10.5 and (E, ine) 10.0; both snap to "Erskine" (tokens 3..6).
  raw = spans.span_candidates(*args, top_k=2, max_answer_tokens=30)
  assert raw[:2] == [(10.5, FIRST + 1, FIRST + 3), (10.0, FIRST, FIRST + 3)]
  snapped = spans.span_candidates(*args, top_k=2, max_answer_tokens=30, word_start=ws)
  assert snapped[0] == (10.5, FIRST, FIRST + 3)
  assert len(snapped) == len(set((b, e) for _, b, e in snapped))
  assert spans.best_span(*args, top_k=2, word_start=ws) == snapped[0]
  # The sum reduction counts the span once (10.5), not logsumexp(10.5, 10.0).
  dec = _bpe_decoder(reduction="sum")
  dec.add_pack(f, out)
  score, best = dec.questions["qb"].aggregate.groups["erskine"]
  assert score == pytest.approx(10.5) and best.text == "Erskine"


def test_snapped_span_over_the_length_limit_keeps_the_token_span():
  # One 8-token "word" (no word starts inside, as in scripts written without spaces).
  tokens = [(i, i + 1, int(i == 0)) for i in range(8)]
  kw = {"tokens": tokens, "text": "abcdefgh", "begin": {3: 8.0}, "end": {4: 8.0}}
  assert _answers(kw, text="abcdefgh", max_answer_tokens=4) == ("de", "de")
  assert _answers(kw, text="abcdefgh", max_answer_tokens=10) == ("de", "abcdefgh")


def test_without_word_start_falls_back_to_token_spans_with_one_warning():
  dec = _bpe_decoder()
  with pytest.warns(RuntimeWarning, match="no word_start feature") as caught:
    for k in range(2):
      dec.add_pack(*_bpe_pack(begin={1: 8.0}, end={5: 8.0}, word_start=False,
                              pack_id=f"00000-{k}"))
  assert len(caught) == 1 and dec.segments_without_word_start == 2
  assert dec.span_answer("qb") == "rskine Hamilton Child"
  # Records with an all-zero word_start (no word start on any context token): the same.
  dec = _bpe_decoder()
  f, out = _bpe_pack(begin={1: 8.0}, end={5: 8.0})
  f["word_start"][:] = 0
  with pytest.warns(RuntimeWarning, match="word_start is 0") as caught:
    dec.add_pack(f, out)
    dec.add_pack(f, out)
  assert len(caught) == 1 and dec.segments_without_word_start == 2
  assert dec.span_answer("qb") == "rskine Hamilton Child"
