"""The renderable view of one decoded record (shared by the text and HTML renderers).

A record (one pack of N segments x L tokens, see ``schemas/records.py``) becomes a :class:`Pack`:
its layout (N and L, from the manifest when there is one, else inferred, and checked against the
record), and per real segment (padding segments are skipped and counted) the labels and the
tokens decoded back to text as open / text / close events around the question prefix, answer
spans and entity mentions.  Text is decoded one contiguous run of tokens at a time (never token
by token), so characters split over several byte-level tokens render correctly.
:func:`summarize` counts over all the records rendered.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pipelines.inspector.inspect_error import InspectError
from pipelines.inspector.record_io import ENTITY_TITLES_KEY, FILE_KEY, INDEX_KEY
from schemas import records as records_schema

ANSWER_TYPE_WORDS = {
    records_schema.ANSWER_TYPE_NONE: "unknown",
    records_schema.ANSWER_TYPE_SPAN: "span",
    records_schema.ANSWER_TYPE_YES: "yes",
    records_schema.ANSWER_TYPE_NO: "no",
}
SUPPORTING_WORDS = {1: "yes", 0: "no", -1: "unknown"}


@dataclasses.dataclass(frozen=True)
class Layout:
  """Shape of one record: ``segments_per_pack`` (N) segments of ``seq_length`` (L) tokens."""
  segments_per_pack: int
  seq_length: int


def record_layout(record: Dict, manifest: Optional[Dict[str, Any]] = None) -> Layout:
  """N and L of ``record``: from the manifest if given (and checked), else inferred."""
  n = len(record.get("segment_mask", []))
  total = len(record.get("token_ids", []))
  where = f"{record.get(FILE_KEY, 'record')} #{record.get(INDEX_KEY, '?')}"
  if n == 0 or total % n:
    raise InspectError(f"{where}: {total} token values do not split into {n} segments.")
  layout = Layout(n, total // n)
  if manifest is not None:
    cfg = manifest.get("config", {})
    want = Layout(int(cfg.get("segments_per_pack", n)),
                  int(cfg.get("seq_length", layout.seq_length)))
    if want != layout:
      raise InspectError(f"{where}: record shape N={layout.segments_per_pack}, "
                         f"L={layout.seq_length} differs from the manifest's N="
                         f"{want.segments_per_pack}, L={want.seq_length}.")
  records_schema.validate_record(record, layout.segments_per_pack, layout.seq_length)
  return layout


@dataclasses.dataclass(frozen=True)
class Span:
  """An answer span or entity mention inside one segment (inclusive token indices)."""
  kind: str  # "answer" | "mention" | "question" (the question prefix region)
  index: int  # position in the pack's ragged list (answers: the ANS#k number)
  begin: int
  end: int
  entity_id: int = 0
  entity_title: str = ""  # from the job's entity vocabulary, when it wrote one

  @property
  def label(self) -> str:
    if self.kind == "answer":
      return f"ANS#{self.index}"
    if self.kind == "mention":
      return f"ENT {self.entity_id}" + (f" {self.entity_title}" if self.entity_title else "")
    return "Q"


@dataclasses.dataclass
class Segment:
  """One real segment of a record, ready to render."""
  position: int  # index in the pack
  labels: Dict[str, str]
  events: List[Tuple]  # ("text", str, token_kind) | ("open", Span) | ("close", Span)
  answers: List[Tuple[Span, str]]  # span and its decoded text
  mentions: List[Tuple[Span, str]]
  problems: List[str]
  num_tokens: int


@dataclasses.dataclass
class Pack:
  """One record: its id, where it came from, and its real segments."""
  pack_id: str
  file: str
  index: int
  layout: Layout
  segments: List[Segment]
  padding_segments: int
  hidden_segments: int  # real segments not shown because of max_segments
  problems: List[str]


def _str(value: Any) -> str:
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _segment_labels(record: Dict, s: int) -> Dict[str, str]:
  def v(name):
    return record[name][s]

  return {
      "document_id": _str(v("document_id")),
      "question_id": _str(v("question_id")),
      "document_index": str(v("document_index")),
      "sub_document": f"{v('sub_document_index')}/{v('num_sub_documents')}",
      "segment": f"{v('segment_index')}/{v('num_segments')}",
      "question_length": str(v("question_length")),
      "answer_type": ANSWER_TYPE_WORDS.get(v("answer_type"), f"?{v('answer_type')}"),
      "supporting": SUPPORTING_WORDS.get(v("supporting"), f"?{v('supporting')}"),
      "context_chars": f"{v('context_char_begin')}-{v('context_char_end')}",
  }


def _split_ws(text: str) -> Tuple[str, str, str]:
  """(leading whitespace, core, trailing whitespace)."""
  core = text.strip()
  if not core:
    return text, "", ""
  lead = text[:len(text) - len(text.lstrip())]
  trail = text[len(text.rstrip()):]
  return lead, core, trail


def _segment_events(ids: Sequence[int], kinds: Sequence[int], length: int, spans: List[Span],
                    tokenizer) -> List[Tuple]:
  """Open/text/close events over tokens ``[0, length)``; text decoded per contiguous run.

  Runs break at span edges and token-kind changes.  Whitespace at the edge of a run moves outside
  the markers that open before / close after it, so ``⟦ANS#0 word⟧`` never starts with a space.
  """
  cuts = {0, length}
  for sp in spans:
    cuts.update((sp.begin, sp.end + 1))
  for t in range(1, length):
    if kinds[t] != kinds[t - 1]:
      cuts.add(t)
  cuts = sorted(c for c in cuts if 0 <= c <= length)
  events: List[Tuple] = []
  for a, b in zip(cuts, cuts[1:]):
    opens = sorted((sp for sp in spans if sp.begin == a),
                   key=lambda sp: (-sp.end, sp.kind != "question", sp.kind, sp.index))
    closes = sorted((sp for sp in spans if sp.end + 1 == b),
                    key=lambda sp: (-sp.begin, sp.kind == "question", sp.kind, -sp.index))
    kind = kinds[a]
    text = tokenizer.decode(list(ids[a:b]))
    lead, core, trail = _split_ws(text)
    if lead and opens:
      events.append(("text", lead, kind))
      lead = ""
    events.extend(("open", sp) for sp in opens)
    if closes and trail:
      events.append(("text", lead + core, kind))
      events.extend(("close", sp) for sp in closes)
      events.append(("text", trail, kind))
    else:
      events.append(("text", lead + core + trail, kind))
      events.extend(("close", sp) for sp in closes)
  return [e for e in events if e[0] != "text" or e[1]]


def build_pack(record: Dict, tokenizer, manifest: Optional[Dict[str, Any]] = None,
               max_segments: Optional[int] = None) -> Pack:
  """The renderable view of one decoded record."""
  layout = record_layout(record, manifest)
  L = layout.seq_length
  problems: List[str] = []
  mask = record["segment_mask"]
  real = [s for s in range(layout.segments_per_pack) if mask[s]]
  shown = real if max_segments is None else real[:max_segments]

  def spans_of(kind, seg_key, begin_key, end_key):
    out: Dict[int, List[Span]] = {}
    segs, begins, ends = record[seg_key], record[begin_key], record[end_key]
    entity = record.get("mention_entity_id", [])
    titles = (manifest or {}).get(ENTITY_TITLES_KEY) or {}
    for k, (s, b, e) in enumerate(zip(segs, begins, ends)):
      entity_id = int(entity[k]) if kind == "mention" else 0
      span = Span(kind, k, int(b), int(e), entity_id, titles.get(entity_id, ""))
      if not 0 <= s < layout.segments_per_pack or not mask[s]:
        problems.append(f"{span.label} [{b}, {e}] points at segment {s}, which is not a real "
                        "segment")
        continue
      out.setdefault(int(s), []).append(span)
    return out

  answers = spans_of("answer", "answer_segment", "answer_begin", "answer_end")
  mentions = spans_of("mention", "mention_segment", "mention_begin", "mention_end")
  segments = []
  for s in shown:
    ids = record["token_ids"][s * L:(s + 1) * L]
    kinds = record["token_kind"][s * L:(s + 1) * L]
    in_mask = record["input_mask"][s * L:(s + 1) * L]
    length = max([t + 1 for t in range(L) if in_mask[t]] or [0])
    seg_problems: List[str] = []
    valid: List[Span] = []
    for sp in answers.get(s, []) + mentions.get(s, []):
      if not 0 <= sp.begin <= sp.end < length:
        seg_problems.append(f"{sp.label} [{sp.begin}, {sp.end}] is outside tokens [0, {length})")
      else:
        if kinds[sp.begin] != records_schema.TOKEN_KIND_CONTEXT or \
            kinds[sp.end] != records_schema.TOKEN_KIND_CONTEXT:
          seg_problems.append(f"{sp.label} [{sp.begin}, {sp.end}] is not inside the context")
        valid.append(sp)
    q_tokens = [t for t in range(length) if kinds[t] == records_schema.TOKEN_KIND_QUESTION]
    regions = []
    if q_tokens:
      regions.append(Span("question", 0, q_tokens[0], q_tokens[-1]))
    events = _segment_events(ids, kinds, length, regions + valid, tokenizer)

    def decoded(sp):
      return tokenizer.decode(list(ids[sp.begin:sp.end + 1])).strip()

    seg_answers = [(sp, decoded(sp)) for sp in valid if sp.kind == "answer"]
    seg_mentions = [(sp, decoded(sp)) for sp in valid if sp.kind == "mention"]
    segments.append(Segment(s, _segment_labels(record, s), events, seg_answers, seg_mentions,
                            seg_problems, length))
  return Pack(_str(record["pack_id"][0]), str(record.get(FILE_KEY, "")),
              int(record.get(INDEX_KEY, 0)), layout, segments,
              layout.segments_per_pack - len(real), len(real) - len(shown), problems)



def summarize(records: Sequence[Dict], manifest: Optional[Dict[str, Any]] = None,
              paths: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Counts over the loaded records (and the manifest's counts when there is one)."""
  files = list(paths) if paths is not None else sorted({r.get(FILE_KEY, "") for r in records})
  segments = sum(sum(1 for m in r["segment_mask"] if m) for r in records)
  padding = sum(sum(1 for m in r["segment_mask"] if not m) for r in records)
  docs = {_str(d) for r in records for d, m in zip(r["document_id"], r["segment_mask"]) if m}
  questions = {_str(q) for r in records for q, m in zip(r["question_id"], r["segment_mask"])
               if m and q}
  out = {
      "files": files, "records": len(records), "segments": segments,
      "padding_segments": padding, "documents": len(docs), "questions": len(questions),
      "answer_spans": sum(len(r["answer_segment"]) for r in records),
      "mentions": sum(len(r["mention_segment"]) for r in records),
  }
  if manifest is not None:
    out["manifest"] = {
        "path": (manifest.get("_paths") or [""])[0],
        "job": manifest.get("job"), "schema_version": manifest.get("schema_version"),
        "seq_length": manifest.get("config", {}).get("seq_length"),
        "segments_per_pack": manifest.get("config", {}).get("segments_per_pack"),
        "tokenizer": manifest.get("tokenizer", {}).get("name"),
        "counts": manifest.get("counts", {}), "examples": manifest.get("examples", {}),
    }
  return out
