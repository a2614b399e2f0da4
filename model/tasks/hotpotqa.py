"""HotpotQA (distractor / fullwiki): predictions ``{"answer": {qid: str}, "sp": {qid: [[title,
sent_id], ...]}}`` with yes / no from the answer-type head, scored by the port of the official
``hotpot_evaluate_v1.py`` (:mod:`model.evaluation.hotpotqa`) against the official JSON list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from model.evaluation import hotpotqa as official
from model.tasks import base
from schemas import records

if TYPE_CHECKING:
  from model.inference.decoding import Decoder

# Answer types answered from the answer-type head instead of a span.
ANSWER_TYPE_TEXT = {records.ANSWER_TYPE_YES: "yes", records.ANSWER_TYPE_NO: "no"}


class HotpotQA(base.Task):
  """Question-level answers (span, "yes" or "no") and supporting facts."""

  def build_predictions(self, decoder: Decoder, per_document: bool) -> Dict:
    """``{"answer": {qid: str}, "sp": {qid: [[title, sent_id], ...]}}``: "yes" / "no" where the
    answer-type head says so (:meth:`Decoder.answer_type`), else the span answer."""
    answers, sp = {}, {}
    for qid in decoder.question_ids():
      answers[qid] = ANSWER_TYPE_TEXT.get(decoder.answer_type(qid)) or decoder.span_answer(qid)
      sp[qid] = decoder.supporting_facts(qid)
    return {"answer": answers, "sp": sp}

  def count(self, predictions: Mapping) -> int:
    return len(predictions["answer"])

  def empty_predictions(self) -> Dict:
    return {"answer": {}, "sp": {}}

  def missing_warning(self, metrics: Mapping[str, Any]) -> Optional[str]:
    answer, sp = metrics.get("n_missing_answer", 0), metrics.get("n_missing_sp", 0)
    if not (answer or sp):
      return None
    return (f"warning: of {metrics.get('n_gold')} gold questions, {answer} have no answer "
            f"prediction and {sp} no supporting-fact (sp) prediction; a missing answer scores 0 "
            "on the answer and joint metrics, a missing sp 0 on the sp and joint metrics")


TASK = base.register(HotpotQA(name="hotpotqa", metrics=official, gold_help="HotpotQA JSON"))
