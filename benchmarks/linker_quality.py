r"""Precision and recall of the anchor-text entity linker on a small hand-labelled set.

  python -m benchmarks.linker_quality [--data_dir benchmarks/data/linker_eval]
      [--min_count 2] [--min_probability 0.5] [--ruler_patterns 100000] [--examples 8]

The data (``--data_dir``):

* ``aliases.tsv``: a hand-made alias table, tab-separated, header ``alias  title  count`` (how
  often an anchor text linked to a Wikipedia title).  Lines starting with ``#`` are comments,
  except ``#oov<TAB>Title``: that title is outside the entity vocabulary, so its rows get
  entity id 0 (:data:`schemas.entities.UNKNOWN_ENTITY_ID`: in the denominator of
  ``p(entity | alias)``, never a link).  The other titles get ids from
  :func:`schemas.entities.rank` over their summed counts, as the Wikipedia job numbers its
  vocabulary.  The rows become a table of :data:`schemas.entities.ALIAS_SCHEMA`.
* ``mentions.jsonl``: one sentence a line, ``{"id", "text", "mentions": [{"begin", "end",
  "title"}]}``; ``text[begin:end]`` is a mention (Python ``str`` offsets), ``title`` the
  entity a reader understands (a title of ``aliases.tsv``) or ``null`` (NIL: an entity, or a
  sense, the table lacks).  A mention's gold id is its title's id: 0 for ``null`` and for a
  title outside the vocabulary.

Two settings, with :class:`pipelines.entities.linker.AliasLinker` (``--min_count``,
``--min_probability``):

* gold spans: each gold mention's surface text is linked.  Precision = correct links / links
  made (non-zero ids); recall = correct links / linkable gold mentions (gold id non-zero);
  NIL accuracy = share of the ``null`` mentions left at 0 (and OOV accuracy the same for
  mentions of a title outside the vocabulary).
* end to end: the spans of ``ner.SpacyBackend("blank:en", patterns=most_linked_aliases(table,
  --ruler_patterns))`` (the annotation stage's offline NER), each linked.  A predicted (span,
  id) with a non-zero id is correct when the span equals a gold span exactly and the id is its
  gold id; precision over the predicted links, recall over the linkable gold mentions.  (The
  stage's paragraph-title linking does not apply: the sentences have no titles.)

A precision with nothing predicted is 0, as is an F1 with precision + recall = 0.  A few
errors of each setting are printed, then one line per setting, then the JSON figure (F1 on
gold spans; no target).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from typing import Dict, List, Optional, Sequence, Set, Tuple

from pipelines.entities import linker as linker_lib
from schemas import entities as entities_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DATA_DIR = os.path.join(ROOT, "benchmarks", "data", "linker_eval")
ALIASES_FILE = "aliases.tsv"
MENTIONS_FILE = "mentions.jsonl"
OOV_MARK = "#oov\t"
HEADER = ["alias", "title", "count"]


def read_alias_rows(path: str) -> Tuple[List[Tuple[str, str, int]], Set[str]]:
  """``(alias, title, count)`` rows and the titles marked out of the vocabulary."""
  rows: List[Tuple[str, str, int]] = []
  oov: Set[str] = set()
  seen: Set[Tuple[str, str]] = set()
  header = None
  with open(path, encoding="utf-8", newline="") as f:
    for lineno, line in enumerate(f, start=1):
      line = line.rstrip("\r\n")
      if line.startswith(OOV_MARK):
        oov.add(line[len(OOV_MARK):].strip())
        continue
      if not line.strip() or line.startswith("#"):
        continue
      fields = next(csv.reader([line], delimiter="\t", quoting=csv.QUOTE_NONE))
      if header is None:
        if fields != HEADER:
          raise ValueError(f"{path}:{lineno}: header {fields} is not {HEADER}")
        header = fields
        continue
      if len(fields) != 3 or not fields[0] or not fields[1]:
        raise ValueError(f"{path}:{lineno}: want alias<TAB>title<TAB>count, got {line!r}")
      alias, title, count = fields[0], fields[1], int(fields[2])
      if count < 1:
        raise ValueError(f"{path}:{lineno}: count {count} < 1")
      if (alias, title) in seen:
        raise ValueError(f"{path}:{lineno}: the pair ({alias!r}, {title!r}) again")
      seen.add((alias, title))
      rows.append((alias, title, count))
  if header is None:
    raise ValueError(f"{path}: no header line")
  unknown = oov - {t for _, t, _ in rows}
  if unknown:
    raise ValueError(f"{path}: #oov titles without rows: {sorted(unknown)}")
  return rows, oov


def build_table(rows: Sequence[Tuple[str, str, int]], oov: Set[str]):
  """(alias table of ALIAS_SCHEMA sorted by alias then title, title -> id of the vocabulary)."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  totals: Dict[str, int] = {}
  for _, title, count in rows:
    if title not in oov:
      totals[title] = totals.get(title, 0) + count
  title_ids = {t: i for i, t, _ in entities_schema.rank(totals.items())}
  full = sorted(((a, title_ids.get(t, entities_schema.UNKNOWN_ENTITY_ID), t, n)
                 for a, t, n in rows), key=lambda r: (r[0], r[2]))
  cols = list(zip(*full)) if full else [(), (), (), ()]
  table = pa.table({"alias": pa.array(cols[0], pa.string()),
                    "entity_id": pa.array(cols[1], pa.int64()),
                    "title": pa.array(cols[2], pa.string()),
                    "count": pa.array(cols[3], pa.int64())},
                   schema=entities_schema.ALIAS_SCHEMA)
  return table, title_ids


def read_sentences(path: str, titles: Set[str]) -> List[Dict]:
  """The sentences of ``mentions.jsonl``, checked: offsets inside the text, a non-blank
  surface, mentions sorted and not overlapping, titles ``null`` or in ``titles``."""
  sentences = []
  ids = set()
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      if not line.strip():
        continue
      where = f"{path}:{lineno}"
      s = json.loads(line)
      if not isinstance(s.get("id"), str) or s["id"] in ids:
        raise ValueError(f"{where}: missing or repeated id {s.get('id')!r}")
      ids.add(s["id"])
      text = s.get("text")
      if not isinstance(text, str) or not text:
        raise ValueError(f"{where}: empty text")
      last_end = 0
      for m in s.get("mentions", []):
        begin, end, title = m["begin"], m["end"], m["title"]
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin < end <= len(text)):
          raise ValueError(f"{where}: offsets ({begin}, {end}) outside a text of {len(text)}")
        if not text[begin:end].strip():
          raise ValueError(f"{where}: blank mention at ({begin}, {end})")
        if begin < last_end:
          raise ValueError(f"{where}: mention ({begin}, {end}) overlaps or precedes another")
        last_end = end
        if title is not None and title not in titles:
          raise ValueError(f"{where}: title {title!r} is not in the alias table")
      sentences.append(s)
  return sentences


def _prf(correct: int, predicted: int, gold: int) -> Dict[str, float]:
  p = correct / predicted if predicted else 0.0
  r = correct / gold if gold else 0.0
  f1 = 2 * p * r / (p + r) if p + r else 0.0
  return {"precision": p, "recall": r, "f1": f1}


def evaluate_gold_spans(sentences, linker, title_ids, names) -> Tuple[Dict, List[Tuple]]:
  """(metrics, errors as (sentence id, surface, gold title, predicted title)) on gold spans."""
  gold_linkable = made = correct = nil = nil_kept = oov = oov_kept = 0
  errors = []
  for s in sentences:
    for m in s["mentions"]:
      surface = s["text"][m["begin"]:m["end"]]
      gold = title_ids.get(m["title"], 0) if m["title"] is not None else 0
      got = linker.link(surface)
      if gold:
        gold_linkable += 1
      elif m["title"] is None:
        nil += 1
        nil_kept += got == 0
      else:
        oov += 1
        oov_kept += got == 0
      if got:
        made += 1
        correct += got == gold
      if got != gold:
        errors.append((s["id"], surface, m["title"], names.get(got)))
  mentions = sum(len(s["mentions"]) for s in sentences)
  out = {"mentions": mentions, "linkable": gold_linkable, "links": made, "correct": correct,
         **_prf(correct, made, gold_linkable),
         "nil": nil, "nil_accuracy": nil_kept / nil if nil else 0.0,
         "oov": oov, "oov_accuracy": oov_kept / oov if oov else 0.0}
  return out, errors


def evaluate_end_to_end(sentences, linker, title_ids, names, patterns: Sequence[str]
                        ) -> Tuple[Dict, List[Tuple]]:
  """(metrics, errors as (sentence id, surface, gold title or "-" for no gold span, predicted
  title or None)) with spaCy spans (blank:en + an EntityRuler of ``patterns``)."""
  from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
  backend = ner.SpacyBackend("blank:en", patterns=patterns)
  found = backend.annotate([s["text"] for s in sentences])
  spans = made = correct = exact = gold_linkable = 0
  errors = []
  for s, predicted in zip(sentences, found):
    text = s["text"]
    gold = {(m["begin"], m["end"]): m["title"] for m in s["mentions"]}
    hit: Set[Tuple[int, int]] = set()  # gold spans linked right
    shown: Set[Tuple[int, int]] = set()  # gold spans linked wrong (already an error)
    for begin, end, _ in predicted:
      spans += 1
      got = linker.link(text[begin:end])
      in_gold = (begin, end) in gold
      exact += in_gold
      if not got:
        continue
      made += 1
      gold_title = gold.get((begin, end))
      if in_gold and gold_title is not None and title_ids.get(gold_title, 0) == got:
        correct += 1
        hit.add((begin, end))
      else:
        shown.add((begin, end))
        errors.append((s["id"], text[begin:end], gold_title if in_gold else "-", names.get(got)))
    for (begin, end), title in gold.items():
      if title is not None and title_ids.get(title, 0):
        gold_linkable += 1
        if (begin, end) not in hit and (begin, end) not in shown:
          errors.append((s["id"], text[begin:end], title, None))
  out = {"spans": spans, "exact_spans": exact, "linkable": gold_linkable, "links": made,
         "correct": correct, **_prf(correct, made, gold_linkable)}
  return out, errors


def _show(errors: Sequence[Tuple], limit: int, title: str) -> None:
  print(f"{title} ({len(errors)} in all; surface | gold | predicted):")
  for sid, surface, gold, got in errors[:limit]:
    print(f"  {sid}  {surface!r:28s} gold={gold if gold is not None else 'NIL'}  "
          f"predicted={got if got is not None else 'none'}")


def run(data_dir: str, min_count: int, min_probability: float, ruler_patterns: int = 100_000,
        examples: int = 8) -> Dict:
  """Evaluates both settings, prints the report and returns the JSON figure."""
  from pipelines.beam.annotate import most_linked_aliases  # pylint: disable=g-import-not-at-top
  rows, oov = read_alias_rows(os.path.join(data_dir, ALIASES_FILE))
  table, title_ids = build_table(rows, oov)
  sentences = read_sentences(os.path.join(data_dir, MENTIONS_FILE), {t for _, t, _ in rows})
  config = linker_lib.LinkerConfig(min_count=min_count, min_probability=min_probability)
  linker = linker_lib.AliasLinker(table, config)
  names: Dict[int, Optional[str]] = {i: t for t, i in title_ids.items()}
  names[entities_schema.UNKNOWN_ENTITY_ID] = None
  gold, gold_errors = evaluate_gold_spans(sentences, linker, title_ids, names)
  e2e, e2e_errors = evaluate_end_to_end(sentences, linker, title_ids, names,
                                        most_linked_aliases(table, ruler_patterns))
  print(f"{len(sentences)} sentences, {gold['mentions']} mentions ({gold['linkable']} linkable, "
        f"{gold['nil']} NIL, {gold['oov']} outside the vocabulary); alias table {table.num_rows} "
        f"rows, {len(title_ids)} entities, {len(linker)} normalised aliases; min_count "
        f"{min_count}, min_probability {min_probability}")
  _show(gold_errors, examples, "gold-span errors")
  _show(e2e_errors, examples, "end-to-end errors")
  print(f"{'setting':12s} {'mentions':>8s} {'links':>6s} {'precision':>9s} {'recall':>7s} "
        f"{'F1':>6s}")
  for name, r, n in (("gold spans", gold, gold["mentions"]), ("end to end", e2e, e2e["spans"])):
    print(f"{name:12s} {n:8d} {r['links']:6d} {r['precision']:9.3f} {r['recall']:7.3f} "
          f"{r['f1']:6.3f}")
  print(f"NIL accuracy (gold spans): {gold['nil_accuracy']:.3f} of {gold['nil']}; outside the "
        f"vocabulary left unlinked: {gold['oov_accuracy']:.3f} of {gold['oov']}; end-to-end "
        f"spans equal to a gold span: {e2e['exact_spans']} of {e2e['spans']}")
  figure = {"metric": "linker_f1_gold_spans", "value": round(gold["f1"], 4), "target": None,
            "unit": "F1", "precision": round(gold["precision"], 4),
            "recall": round(gold["recall"], 4), "nil_accuracy": round(gold["nil_accuracy"], 4),
            "oov_accuracy": round(gold["oov_accuracy"], 4),
            "end_to_end": {"spans": e2e["spans"], "exact_spans": e2e["exact_spans"],
                           "links": e2e["links"], "correct": e2e["correct"],
                           "precision": round(e2e["precision"], 4),
                           "recall": round(e2e["recall"], 4), "f1": round(e2e["f1"], 4)},
            "mentions": gold["mentions"], "linkable": gold["linkable"], "links": gold["links"],
            "correct": gold["correct"], "sentences": len(sentences), "min_count": min_count,
            "min_probability": min_probability}
  print(json.dumps(figure, ensure_ascii=False))
  return figure


def main(argv: Optional[Sequence[str]] = None) -> None:
  d = linker_lib.LinkerConfig()
  ap = argparse.ArgumentParser(prog="python -m benchmarks.linker_quality",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--data_dir", default=DATA_DIR,
                  help="folder with aliases.tsv and mentions.jsonl (default: %(default)s)")
  ap.add_argument("--min_count", type=int, default=d.min_count,
                  help="the linker's min_count (default: %(default)s)")
  ap.add_argument("--min_probability", type=float, default=d.min_probability,
                  help="the linker's min_probability (default: %(default)s)")
  ap.add_argument("--ruler_patterns", type=int, default=100_000,
                  help="most linked aliases as EntityRuler patterns (default: %(default)s)")
  ap.add_argument("--examples", type=int, default=8,
                  help="errors shown per setting (default: %(default)s)")
  args = ap.parse_args(argv)
  try:
    run(args.data_dir, args.min_count, args.min_probability, args.ruler_patterns,
        args.examples)
  except (OSError, ValueError) as e:
    raise SystemExit(f"linker_quality: {e}") from None


if __name__ == "__main__":
  main()
