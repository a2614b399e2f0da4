"""A self-contained HTML page of decoded records (inline CSS, no external resources);
crossing spans are closed and re-opened so the markup stays well nested."""

from __future__ import annotations

import html
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pipelines.inspector.layout import Span, build_pack, summarize
from schemas import records as records_schema

_CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 1.5em;
       color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.8em; }
table.summary td, table.summary th, table.labels td, table.labels th {
  padding: 1px 8px; text-align: left; font-size: 0.85em; border-bottom: 1px solid #eee; }
table.labels { border-collapse: collapse; margin-bottom: 4px; }
div.segment { border: 1px solid #ccc; border-radius: 4px; padding: 6px 10px; margin: 8px 0; }
div.segment h3 { font-size: 0.95em; margin: 0 0 4px 0; }
div.text { white-space: pre-wrap; line-height: 1.7; font-family: Georgia, serif; }
span.q { background: #dbeafe; color: #1e3a8a; }
mark.ans { background: #fde68a; border: 1px solid #d97706; border-radius: 2px; }
span.ent { text-decoration: underline; text-decoration-color: #059669;
           text-decoration-thickness: 2px; }
span.ent sup { color: #059669; font-size: 0.7em; font-family: monospace; }
span.sp { color: #999; font-size: 0.75em; font-family: monospace; }
ul.answers { font-size: 0.85em; margin: 4px 0; }
.problem { color: #b91c1c; font-size: 0.85em; }
.note { color: #666; font-size: 0.85em; }
"""


def _open_tag(sp: Span) -> str:
  if sp.kind == "question":
    return '<span class="q" title="question prefix">'
  if sp.kind == "answer":
    return (f'<mark class="ans" data-answer="{sp.index}" title="ANS#{sp.index} tokens '
            f'[{sp.begin}, {sp.end}]">')
  name = f" {html.escape(sp.entity_title, quote=True)}" if sp.entity_title else ""
  return (f'<span class="ent" data-entity="{sp.entity_id}" title="entity {sp.entity_id}{name} '
          f'tokens [{sp.begin}, {sp.end}]">')


def _close_tag(sp: Span, final: bool) -> str:
  if sp.kind == "answer":
    return "</mark>"
  if sp.kind == "mention" and final:
    name = f" {html.escape(sp.entity_title)}" if sp.entity_title else ""
    return f"<sup>{sp.entity_id}{name}</sup></span>"
  return "</span>"


def _html_body(events: Sequence[Tuple]) -> str:
  """Well-nested HTML for the events; crossing spans are closed and re-opened."""
  out: List[str] = []
  stack: List[Span] = []
  for ev in events:
    if ev[0] == "text":
      if ev[2] == records_schema.TOKEN_KIND_SPECIAL:
        out.append(f'<span class="sp">{html.escape(ev[1])}</span>')
      else:
        out.append(html.escape(ev[1]))
    elif ev[0] == "open":
      stack.append(ev[1])
      out.append(_open_tag(ev[1]))
    else:
      sp = ev[1]
      reopen = []
      while stack and stack[-1] is not sp:
        top = stack.pop()
        out.append(_close_tag(top, final=False))
        reopen.append(top)
      if stack:
        stack.pop()
      out.append(_close_tag(sp, final=True))
      for top in reversed(reopen):
        stack.append(top)
        out.append(_open_tag(top))
  while stack:
    out.append(_close_tag(stack.pop(), final=True))
  return "".join(out)


def render_html(records: Sequence[Dict], tokenizer, manifest: Optional[Dict[str, Any]] = None,
                max_segments: Optional[int] = None, paths: Optional[Sequence[str]] = None,
                title: str = "ReadTwice records") -> str:
  """A self-contained HTML page (inline CSS, no external resources) for ``records``."""
  e = html.escape
  summary = summarize(records, manifest, paths)
  rows = [("files", "<br>".join(e(f) for f in summary["files"]))]
  for key in ("records", "segments", "padding_segments", "documents", "questions",
              "answer_spans", "mentions"):
    rows.append((key, e(str(summary[key]))))
  if "manifest" in summary:
    m = summary["manifest"]
    for key in ("path", "job", "schema_version", "segments_per_pack", "seq_length", "tokenizer"):
      rows.append((f"manifest {key}", e(str(m[key]))))
    rows.append(("manifest counts", e(json.dumps(m["counts"], sort_keys=True))))
    rows.append(("manifest examples", e(json.dumps(m["examples"], sort_keys=True))))
  else:
    rows.append(("manifest", "none found: N and L inferred from the records"))
  parts = [
      "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
      f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
      f"<h1>{e(title)}</h1>", '<table class="summary">',
      *(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows), "</table>",
      '<p class="note">Legend: <span class="q">question prefix</span> · '
      '<mark class="ans">answer span</mark> · '
      '<span class="ent">entity mention<sup>id</sup></span> · '
      '<span class="sp">&lt;s&gt; special token</span></p>',
  ]
  for record in records:
    pack = build_pack(record, tokenizer, manifest, max_segments)
    parts.append(f'<div class="pack"><h2>pack {e(pack.pack_id)}</h2>')
    parts.append(f'<p class="note">{e(pack.file)} record {pack.index}; '
                 f"N={pack.layout.segments_per_pack} L={pack.layout.seq_length}; "
                 f"{len(pack.segments) + pack.hidden_segments} real segments, "
                 f"{pack.padding_segments} padding segments not shown</p>")
    parts.extend(f'<p class="problem">{e(p)}</p>' for p in pack.problems)
    for seg in pack.segments:
      parts.append(f'<div class="segment" id="p{e(pack.pack_id)}-s{seg.position}">')
      parts.append(f"<h3>segment {seg.position} ({seg.num_tokens} tokens)</h3>")
      parts.append('<table class="labels"><tr>' +
                   "".join(f"<th>{e(k)}</th>" for k in seg.labels) + "</tr><tr>" +
                   "".join(f"<td>{e(v)}</td>" for v in seg.labels.values()) + "</tr></table>")
      parts.append(f'<div class="text">{_html_body(seg.events)}</div>')
      if seg.answers:
        parts.append('<ul class="answers">' + "".join(
            f"<li>ANS#{sp.index} tokens [{sp.begin}, {sp.end}]: <q>{e(t)}</q></li>"
            for sp, t in seg.answers) + "</ul>")
      parts.extend(f'<p class="problem">{e(p)}</p>' for p in seg.problems)
      parts.append("</div>")
    if pack.hidden_segments:
      parts.append(f'<p class="note">{pack.hidden_segments} more real segments not shown '
                   "(--max_segments)</p>")
    parts.append("</div>")
  parts += ["</body>", "</html>"]
  return "\n".join(parts) + "\n"
