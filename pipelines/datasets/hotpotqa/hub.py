"""HotpotQA as the Hugging Face Hub stores it (``hotpotqa/hotpot_qa``, configs ``distractor``
and ``fullwiki``; Parquet) -> the official JSON record, which :mod:`.reader` parses.

The Hub's features (its loading script / dataset card, as listed e.g. by the TensorFlow
community catalog ``huggingface:hotpot_qa/distractor``): ``id``, ``question``, ``answer``,
``type``, ``level`` (strings), ``supporting_facts``: Sequence of ``{title: string, sent_id:
int32}`` and ``context``: Sequence of ``{title: string, sentences: Sequence(string)}``.  A
Sequence of a dict is stored column-wise, so in Parquet they are ``struct<title: list<string>,
sent_id: list<int32>>`` and ``struct<title: list<string>, sentences: list<list<string>>>``.

:func:`to_record` turns them back into the official rows (``"_id"``, ``"supporting_facts":
[[title, sent_id], ...]``, ``"context": [[title, [sentence, ...]], ...]``).  The Hub's
``fullwiki`` test rows have no answer: an empty ``answer`` with no supporting facts is read as
"no answer" (the official test file has no ``answer`` key), never as the answer "".
"""

from __future__ import annotations

from typing import Any, Dict, List

from pipelines.beam.read_parquet import HubSchema


def _rows(columns: Any, names: tuple) -> List[List[Any]]:
  """``{a: [...], b: [...]}`` -> ``[[a0, b0], ...]`` (a missing struct: no rows)."""
  if columns is None:
    return []
  cols = [columns.get(n) or [] for n in names]
  if len({len(c) for c in cols}) != 1:
    raise ValueError(f"columns {names} have different lengths")
  return [list(row) for row in zip(*cols)]


def to_record(row: Dict[str, Any]) -> Dict[str, Any]:
  """One Hub row -> the official HotpotQA record (see the module docstring)."""
  record: Dict[str, Any] = {"_id": row["id"]}
  facts = _rows(row.get("supporting_facts"), ("title", "sent_id"))
  answer = row.get("answer")
  answered = answer is not None and (answer != "" or bool(facts))
  if answered:
    record["answer"] = answer
  record["question"] = row["question"]
  if answered:
    record["supporting_facts"] = facts
  record["context"] = _rows(row.get("context"), ("title", "sentences"))
  for key in ("type", "level"):
    if row.get(key) is not None:
      record[key] = row[key]
  return record


SCHEMA = HubSchema(required=("id", "question", "context.title", "context.sentences"),
                   to_record=to_record)
