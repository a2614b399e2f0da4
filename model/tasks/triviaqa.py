"""TriviaQA (reading comprehension, Wikipedia and web): predictions ``{QuestionId: answer}``, or
per (question, page) ``{"<QuestionId>--<Filename>": answer}`` (web; Wikipedia with
``--per_document``), scored by the port of the official evaluation
(:mod:`model.evaluation.triviaqa`) against the official rc question file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from model.evaluation import triviaqa as official
from model.tasks import base

if TYPE_CHECKING:
  from model.inference.decoding import Decoder


def _conflict(doc_id: str, first: str, second: str) -> str:
  return (f"TriviaQA document id {doc_id!r} is read with questions {first!r} and {second!r}; "
          "expected '<QuestionId>--<Filename>'.")


class TriviaQA(base.Task):
  """Answers per question or per (question, page); pages are documents of the records."""

  def build_predictions(self, decoder: Decoder, per_document: bool) -> Dict[str, str]:
    """``per_document=False``: ``{QuestionId: answer}`` aggregated over all of a question's
    documents (Wikipedia per-question evaluation).  ``per_document=True``: ``{document_id:
    answer}``, one answer per question-document pair, where TriviaQA document ids are
    ``"<QuestionId>--<Filename>"`` by convention (:mod:`schemas.documents`), i.e. the official
    Web / per-document keys.  Raises ValueError if a document id is read with two questions."""
    if per_document:
      return base.per_document_answers(decoder, _conflict)
    return {qid: decoder.span_answer(qid) for qid in decoder.question_ids()}

  def records_per_document(self, manifest: Mapping, documents: Mapping[str, Mapping]) -> bool:
    """Records of one document per (question, page) -- the web domain, or Wikipedia with the
    job's ``--per_document`` -- whose official keys are ``<QuestionId>--<Filename>``."""
    return bool(manifest.get("config", {}).get("per_document")) or any(
        doc_id != d.get("question_id", doc_id) for doc_id, d in documents.items())

  def score_options(self, predictions: Mapping) -> Dict[str, Any]:
    """Keys of (question, page) pairs are scored per document."""
    keyed_by_page = any(official.KEY_SEPARATOR in k for k in predictions)
    return {"per_document": True} if keyed_by_page else {}

  def missing_warning(self, metrics: Mapping[str, Any]) -> Optional[str]:
    missing = metrics.get("n_missing", 0)
    if not missing:
      return None
    return (f"warning: {missing} of {metrics.get('n_gold')} gold keys have no prediction; they "
            "score 0 on exact_match and f1")


TASK = base.register(TriviaQA(
    name="triviaqa", metrics=official, gold_help="TriviaQA rc question file", per_document=True,
    flags=(base.Flag("per_document", "triviaqa: score Wikipedia per (question, document)",
                     kind="switch"),)))
