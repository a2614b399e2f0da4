"""The chance level of long-range QA documents: the official HotpotQA EM / F1 of a reader
that picks one of a document's candidate cities uniformly."""

from __future__ import annotations

import collections
from typing import Any, Dict, Iterable, Mapping, Sequence

from model.evaluation import hotpotqa as hotpot_eval  # TF-free
from synthetic.long_range_qa.documents import LongRangeDoc


def _field(doc: Any, key: str) -> Any:
  return doc[key] if isinstance(doc, Mapping) else getattr(doc, key)


def chance_level(docs: Iterable[Any]) -> Dict[str, float]:
  """EM and F1 of a reader that knows the answer is one of a document's candidate cities and
  picks one uniformly: per document, the mean over its candidates of the official HotpotQA
  EM / token F1 (:mod:`model.evaluation.hotpotqa`) against the gold, averaged over documents.
  ``docs``: :class:`LongRangeDoc` or mappings with ``answer`` and ``candidates``."""
  em = f1 = 0.0
  n = 0
  for d in docs:
    gold, cands = _field(d, "answer"), list(_field(d, "candidates"))
    if not cands:
      raise ValueError("a document without candidates")
    em += sum(float(hotpot_eval.exact_match_score(c, gold)) for c in cands) / len(cands)
    f1 += sum(hotpot_eval.f1_score(c, gold)[0] for c in cands) / len(cands)
    n += 1
  if not n:
    raise ValueError("no documents")
  return {"em": em / n, "f1": f1 / n, "documents": n}


def chance_report(docs: Sequence[LongRangeDoc]) -> Dict[str, Any]:
  """:func:`chance_level` overall and per distance."""
  by = collections.defaultdict(list)
  for d in docs:
    by[d.distance].append(d)
  return {"all": chance_level(docs),
          "by_distance": {str(k): chance_level(v) for k, v in sorted(by.items())}}
