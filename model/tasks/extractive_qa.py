"""The generic extractive QA task (``extractive_qa``): any dataset whose answers are spans of a
document, one question per document.

* Predictions: ``{"<document id>": "<answer text>"}``, one per document (the JSON-lines ``id``
  of the ``jsonl_qa`` dataset); a document read as several sub-documents or segments gets one
  answer, reduced over all of them (``--reduction``).
* Gold: the dataset's own JSON-lines file (:mod:`schemas.jsonl_qa`, the format the pipeline
  reads), giving ``{id: [gold answer texts]}``.  A span answer without ``text`` takes its text
  from the context, which is then read (from ``context_file``, under the JSONL's folder
  (:mod:`schemas.data_paths`), unless inline); other contexts are never read.  Local paths are read without TensorFlow,
  URLs (``gs://``) through ``tf.io.gfile`` (:mod:`model.evaluation.common`).
* Metrics: SQuAD v1.1 exact match and F1 (:mod:`model.evaluation.squad`); F1 picks the best
  checkpoint.

Records dirs name this task in their manifest (``"task": "extractive_qa"``); the job that wrote
them (``jsonl_qa``) differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from model.evaluation import common
from model.evaluation import squad as official
from model.tasks import base
from schemas import data_paths, jsonl_qa

if TYPE_CHECKING:
  from model.inference.decoding import Decoder


def _conflict(doc_id: str, first: str, second: str) -> str:
  return (f"document id {doc_id!r} is read with questions {first!r} and {second!r}; the "
          "extractive_qa task expects one question per document")


def _read_context(example: jsonl_qa.Example, jsonl_path: str) -> str:
  """The inline context, or the ``context_file``'s text: only under the JSONL file's folder, a
  regular file of at most the default cap (:mod:`schemas.data_paths`; a refused name is a
  ValueError naming it, as the pipeline's dead letter does)."""
  if example.context is not None:
    return example.context
  policy = data_paths.DataPathPolicy()
  root = jsonl_qa.context_root(jsonl_path)
  if data_paths.is_url(root):
    with common.open_text(policy.resolve(root, example.context_file, "context_file")) as f:
      return f.read()
  path, data = policy.read(root, example.context_file, what="context_file")
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(f"context_file {path} is not UTF-8: {e}") from None


def read_gold(path: str) -> Dict[str, List[str]]:
  """``{id: [gold answer texts]}`` of a ``jsonl_qa`` JSON-lines file, in file order (blank lines
  are skipped; an example without answers maps to ``[]``).

  Raises:
    OSError: The file, or a context file that is needed, cannot be read.
    ValueError: A line is not a valid example (the message names the line), or an id repeats.
  """
  gold: Dict[str, List[str]] = {}
  with common.open_text(path) as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        example = jsonl_qa.parse_line(line)
        needs_context = any(a.text is None for a in example.answers)
        context = _read_context(example, path) if needs_context else None
        texts = jsonl_qa.answer_texts(example, context)
      except ValueError as e:  # jsonl_qa.FormatError included
        raise ValueError(f"line {number}: {e}") from e
      except OSError as e:
        raise OSError(f"line {number}: context file of example {example.id!r}: {e}") from e
      if example.id in gold:
        raise ValueError(f"line {number}: id {example.id!r} repeats an earlier line")
      gold[example.id] = texts
  return gold


class ExtractiveQA(base.Task):
  """One span answer per document, scored against the JSON-lines file's answers."""

  def build_predictions(self, decoder: Decoder, per_document: bool) -> Dict[str, str]:
    """``{document_id: answer}`` (reduced over the document's segments and sub-documents);
    ValueError if a document id is read with two questions."""
    return base.per_document_answers(decoder, _conflict)

  def load_gold(self, path: str) -> Dict[str, List[str]]:
    return read_gold(path)

  def missing_warning(self, metrics: Mapping[str, Any]) -> Optional[str]:
    missing = metrics.get("n_missing", 0)
    if not missing:
      return None
    return (f"warning: {missing} of {metrics.get('n_gold')} gold questions have no prediction; "
            "they score 0 on exact_match and f1")


TASK = base.register(ExtractiveQA(
    name="extractive_qa", metrics=official,
    gold_help="extractive_qa: the dataset's JSON-lines file (schemas/jsonl_qa.py)"))
