"""Plain-text rendering of decoded records (the inspector's stdout)."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Tuple

from pipelines.inspector.layout import build_pack, summarize
from schemas import records as records_schema


def _text_body(events: Sequence[Tuple]) -> str:
  parts = []
  space_after_question = False
  for ev in events:
    if ev[0] == "text":
      if ev[2] != records_schema.TOKEN_KIND_SPECIAL:  # CLS/SEP are implied by the layout
        if space_after_question and not ev[1][:1].isspace():
          parts.append(" ")
        space_after_question = False
        parts.append(ev[1])
    elif ev[1].kind == "question":
      parts.append("[Q: " if ev[0] == "open" else "]")
      space_after_question = ev[0] == "close"
    else:
      if space_after_question and ev[0] == "open":
        parts.append(" ")
        space_after_question = False
      parts.append(f"⟦{ev[1].label} " if ev[0] == "open" else "⟧")
  return "".join(parts).rstrip()


def render_text(records: Sequence[Dict], tokenizer, manifest: Optional[Dict[str, Any]] = None,
                max_segments: Optional[int] = None,
                paths: Optional[Sequence[str]] = None) -> str:
  """Plain-text rendering of ``records`` (as returned by ``load_records``)."""
  summary = summarize(records, manifest, paths)
  lines = [f"# files: {', '.join(summary['files'])}",
           f"# records: {summary['records']}  segments: {summary['segments']} (+ "
           f"{summary['padding_segments']} padding)  documents: {summary['documents']}  "
           f"questions: {summary['questions']}  answer spans: {summary['answer_spans']}  "
           f"mentions: {summary['mentions']}"]
  if "manifest" in summary:
    m = summary["manifest"]
    lines.append(f"# manifest: {m['path']}  job={m['job']}  N={m['segments_per_pack']}  "
                 f"L={m['seq_length']}  tokenizer={m['tokenizer']}")
    lines.append(f"# manifest counts: {json.dumps(m['counts'], sort_keys=True)}  "
                 f"examples: {json.dumps(m['examples'], sort_keys=True)}")
  for record in records:
    pack = build_pack(record, tokenizer, manifest, max_segments)
    lines.append("")
    where = f"{pack.file} record {pack.index}" if pack.file else f"record {pack.index}"
    lines.append(f"=== pack {pack.pack_id}  ({where}; "
                 f"N={pack.layout.segments_per_pack} L={pack.layout.seq_length}; "
                 f"{len(pack.segments) + pack.hidden_segments} real segments, "
                 f"{pack.padding_segments} padding segments not shown)")
    for problem in pack.problems:
      lines.append(f"!! {problem}")
    for seg in pack.segments:
      labels = "  ".join(f"{k}={v}" for k, v in seg.labels.items())
      lines.append(f"--- segment {seg.position}  {labels}  tokens={seg.num_tokens}")
      lines.append(_text_body(seg.events))
      for sp, text in seg.answers:
        quoted = json.dumps(text, ensure_ascii=False)
        lines.append(f"    {sp.label} tokens [{sp.begin}, {sp.end}]: {quoted}")
      for problem in seg.problems:
        lines.append(f"    !! {problem}")
    if pack.hidden_segments:
      lines.append(f"... {pack.hidden_segments} more real segments not shown (--max_segments)")
  return "\n".join(lines) + "\n"
