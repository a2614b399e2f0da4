"""NarrativeQA (reading the full stories): predictions ``{"<document_id>: <question>": answer}``
(the ``qaps.csv`` keys), scored with nlg-eval's ROUGE-L / BLEU / METEOR
(:mod:`model.evaluation.narrativeqa`) against ``qaps.csv``.  ROUGE-L picks the best checkpoint;
METEOR (Java) is left out of the dev evaluation during fine-tuning, which scores the rows of the
dev records' split (their manifest's ``config.split``), as ``model.evaluate --split``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from model.evaluation import narrativeqa as official
from model.tasks import base

if TYPE_CHECKING:
  from model.inference.decoding import Decoder


class NarrativeQA(base.Task):
  """Question-level answers keyed by story and question text."""

  def build_predictions(self, decoder: Decoder, per_document: bool) -> Dict[str, str]:
    """``{"<document_id>: <question>": answer}`` (NarrativeQA ``qaps.csv`` keys).

    The question text is the side file's ``question`` of that document, exactly, and the
    document id its ``source_document_id`` (the story: the pipeline writes one document per
    question) or, without one, its ``document_id``; the answer is the question-level span answer
    (aggregated over all its segments and sub-documents).  A question read with several
    documents gets one key per document.
    """
    out = {}
    for qid in decoder.question_ids():
      answer = decoder.span_answer(qid)
      for doc_id in sorted(decoder.questions[qid].per_document):
        doc = decoder.documents.get(doc_id)
        if doc is None:
          continue
        story = doc.get("source_document_id") or doc_id
        out[official.prediction_key(story, doc["question"])] = answer
    return out

  def records_options(self, manifest: Mapping, records_dir: str = "the records dir"
                      ) -> Dict[str, Any]:
    """``{"split": <the pipeline's --split>}``: ``qaps.csv`` holds the questions of every set,
    and only the rows of the set the records were written from are scored (as ``model.evaluate
    --split``); rows of other sets would count as missing answers."""
    split = manifest.get("config", {}).get("split")
    if not isinstance(split, str) or not split:
      raise ValueError(f"{records_dir}: its manifest.json records no NarrativeQA split "
                       "(config.split), so the qaps.csv rows to score are unknown; rewrite the "
                       "records with python -m pipelines narrativeqa --split valid")
    return {"split": split}

  def load_gold(self, path: str) -> List[Dict[str, str]]:
    """The rows of a ``qaps.csv`` file (OSError / ValueError)."""
    return official.load_gold(path)

  def missing_warning(self, metrics: Mapping[str, Any]) -> Optional[str]:
    missing = metrics.get("n_missing", 0)
    if not missing:
      return None
    return (f"warning: {missing} of {metrics.get('n_gold')} gold questions have no prediction; "
            "they are scored as an empty answer (0 ROUGE-L and METEOR; reference length but no "
            "n-grams for BLEU)")


TASK = base.register(NarrativeQA(
    name="narrativeqa", metrics=official, gold_help="NarrativeQA qaps.csv", best_metric="rouge_l",
    dev_options={"meteor": False},  # METEOR needs Java: `model.evaluate` it afterwards
    unavailable_errors=(official.MeteorUnavailableError,),
    flags=(base.Flag("protocol", 'narrativeqa: "paper" lowercases and strips a trailing run of '
                     'spaces/periods (default); "raw" scores as is', choices=official.PROTOCOLS),
           base.Flag("meteor", "narrativeqa: also METEOR (needs Java + pycocoevalcap; on by "
                     "default)", kind="bool"),
           base.Flag("split", "narrativeqa: only score rows of this set (train/valid/test)"))))
