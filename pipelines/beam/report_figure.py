"""``stats.png``: the figure of a job's stats report, drawn from ``stats.json`` alone
(:func:`pipelines.beam.report.build_report`).

One panel per entry of the report's ``panels``, in order, on a grid of 2 or 3 rows (unused grid
cells are removed); the figure's title names the job, its output folder and what it wrote.
Every panel has a title and x/y axis labels with units.  A count axis is logarithmic when the
non-zero counts it shows span more than :data:`LOG_RATIO` times (so 157 cut mentions stay
visible beside 100,000 placed ones), and every bar carries its number.

Headless (matplotlib's Agg backend) and reproducible: a fixed size and dpi, the bundled DejaVu
font, and no ``Software`` (or date) metadata in the PNG, so the same report gives the same bytes.
"""

from __future__ import annotations

import io
import math
import textwrap
from typing import Any, Dict, List, Optional, Sequence

LOG_RATIO = 30  # a count axis is logarithmic when max / min of its non-zero counts exceeds this
DPI = 90
PANEL_SIZE = (4.9, 3.7)  # inches per grid cell
_COLORS = {"outcome": "#55a868", "hist": "#4c72b0", "coverage": "#dd8452",
           "oracle": "#8172b2", "best": "#c44e52", "mentions": "#8172b2", "rank": "#c44e52",
           "packs": "#64b5cd"}
_TITLE, _LABEL, _TICK, _NOTE = 9.5, 8, 7, 7


def needs_log(counts: Sequence[float]) -> bool:
  """Whether counts span decades: max / min of the non-zero ones > :data:`LOG_RATIO`."""
  nonzero = [c for c in counts if c > 0]
  return bool(nonzero) and max(nonzero) / min(nonzero) > LOG_RATIO


def _fmt(n: float) -> str:
  if isinstance(n, float) and not n.is_integer():
    return f"{n:,.2f}"
  n = int(n)
  if n >= 1_000_000:
    return f"{n / 1e6:.3g}M"
  if n >= 10_000:
    return f"{n / 1e3:.3g}k"
  return str(n)


def _bin_label(lo: int, hi: int) -> str:
  """A power-of-two bin ``[lo, hi)`` of integers."""
  return _fmt(lo) if hi - lo == 1 else f"{_fmt(lo)}–{_fmt(hi - 1)}"


def _labels(ax, title: str, xlabel: str, ylabel: str, detail: str = "") -> None:
  """The panel's title (with a smaller second line, ``detail``) and axis labels; plain
  numbers (1, 10, 100), not powers of ten, on log axes."""
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  ax.set_title(title + ("\n" + textwrap.fill(detail, 54) if detail else ""), fontsize=_TITLE)
  ax.set_xlabel(xlabel, fontsize=_LABEL)
  ax.set_ylabel(ylabel, fontsize=_LABEL)
  ax.tick_params(labelsize=_TICK)
  for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
    if axis.get_scale() == "log":
      # Under two decades, also 2 and 5 times the powers of ten (else one tick may show).
      few = max(lim) / max(min(lim), 1e-9) < 100
      axis.set_major_locator(ticker.LogLocator(10, subs=(1.0, 2.0, 5.0) if few else (1.0,)))
      axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _fmt(v) if v >= 1 else f"{v:g}"))
      # No minor ticks: their marks are barely visible at this size, and matplotlib builds,
      # places and measures each of the ~50 per log axis twice (layout, then drawing): half
      # of the figure's time.
      axis.set_minor_locator(ticker.NullLocator())


def _integer_ticks(axis) -> None:
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  axis.set_major_locator(ticker.MaxNLocator(integer=True))


def _note(ax, text: str) -> None:
  ax.text(0.97, 0.96, text, transform=ax.transAxes, ha="right", va="top", fontsize=_NOTE,
          bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "#bbbbbb",
                "alpha": 0.9})


def bars(ax, names: Sequence[str], counts: Sequence[int], color: str,
         horizontal: bool = False, total: Optional[int] = None) -> bool:
  """Bars with their numbers (and share of ``total``) written at their ends; the count axis
  logarithmic per :func:`needs_log`.  Returns whether it is."""
  log = needs_log(counts)
  pos = list(range(len(counts)))
  # On a log axis a bar starts at 0.5, so that a count of 1 is a visible bar.
  base = 0.5 if log else 0
  heights = [max(c - base, 0) for c in counts]
  if horizontal:
    ax.barh(pos, heights, left=base, color=color)
    ax.set_yticks(pos)
    ax.set_yticklabels(names)
    ax.invert_yaxis()
  else:
    ax.bar(pos, heights, bottom=base, color=color)
    ax.set_xticks(pos)
    tilt = sum(len(n) + 2 for n in names) > 40  # would the labels touch?
    ax.set_xticklabels(names, rotation=35 if tilt else 0, ha="right" if tilt else "center",
                       rotation_mode="anchor")
  top = max(list(counts) + [1])
  if log:
    (ax.set_xscale if horizontal else ax.set_yscale)("log")
    limit = (base, top * (12 if horizontal else 6))
  else:
    limit = (0, top * (1.3 if horizontal else 1.18))
    _integer_ticks(ax.xaxis if horizontal else ax.yaxis)
  (ax.set_xlim if horizontal else ax.set_ylim)(*limit)
  for p, c in zip(pos, counts):
    text = _fmt(c) + (f" ({c / total:.0%})" if total and c else "")
    at = max(c, base) if log else c
    if horizontal:
      ax.annotate(text, (at, p), xytext=(3, 0), textcoords="offset points", va="center",
                  fontsize=_NOTE)
    else:
      ax.annotate(text, (p, at), xytext=(0, 2), textcoords="offset points", ha="center",
                  va="bottom", fontsize=_NOTE)
  return log


def histogram(ax, hist: Dict[str, Any], title: str, xlabel: str, ylabel: str) -> None:
  """A ``histograms`` entry of the report (power-of-two bins) as annotated bars."""
  edges = hist["bin_edges"]
  names = [_bin_label(lo, hi) for lo, hi in zip(edges, edges[1:])]
  bars(ax, names, hist["counts"], _COLORS["hist"])
  _labels(ax, title, xlabel, ylabel,
          f"n {_fmt(hist['count'])}, mean {hist['mean']:,.1f}, min {_fmt(hist['min'])}, "
          f"max {_fmt(hist['max'])}" if hist["count"] else "none")


def _short(text: str, width: int = 34) -> str:
  return text if len(text) <= width else text[:width - 1] + "…"


def outcome_panel(ax, report: Dict[str, Any]) -> None:
  c = report["counts"]
  names, counts = ["written"], [c["written"]]
  for kind in ("skipped", "rejected"):
    for reason, n in report[f"{kind}_by_reason"].items():
      names.append(_short(f"{kind}: {reason}"))
      counts.append(n)
  log = bars(ax, names, counts, _COLORS["outcome"], horizontal=True, total=c["input"])
  _labels(ax, f"input records by outcome ({_fmt(c['input'])} read)",
          "input records" + (" (log scale)" if log else ""), "outcome (stage/reason)")


_COVERAGE_NAMES = {"in_segment": "answer in a segment",
                   "lost_in_segmentation": "lost at segment edges",
                   "not_in_text": "answer not in the text", "yes_no": "yes/no answer",
                   "no_answer": "no reference answer"}


def coverage_panel(ax, report: Dict[str, Any]) -> None:
  cov = report["coverage"]
  keys = ["in_segment", "lost_in_segmentation", "not_in_text"]
  keys += [k for k in ("yes_no", "no_answer") if cov[k]]
  names = [_COVERAGE_NAMES[k] for k in keys]
  if "oracle" in report:
    names[keys.index("not_in_text")] = "no span ≥ min ROUGE-L"
  log = bars(ax, names, [cov[k] for k in keys], _COLORS["coverage"], horizontal=True,
             total=cov["questions"])
  share = f" ({cov['in_segment'] / cov['answerable']:.0%})" if cov["answerable"] else ""
  _labels(ax, "answer coverage", f"questions ({_fmt(cov['questions'])} in all, one per "
          f"document)" + (" (log scale)" if log else ""), "what became of the answer",
          f"{_fmt(cov['in_segment'])} of {_fmt(cov['answerable'])} answerable{share} found "
          f"in a segment")


def oracle_panel(ax, report: Dict[str, Any]) -> None:
  o = report["oracle"]
  spans, best = o["span_rouge_l"], o["best_rouge_l"]
  edges = spans["bin_edges"]
  widths = [b - a for a, b in zip(edges, edges[1:])]
  log = needs_log(spans["counts"] + best["counts"])
  ax.bar(edges[:-1], spans["counts"], width=widths, align="edge", color=_COLORS["oracle"],
         edgecolor="white", label=f"chosen spans ({_fmt(spans['count'])})")
  shown = [(a + w / 2, n) for a, w, n in zip(edges, widths, best["counts"]) if n]
  ax.plot([x for x, _ in shown], [n for _, n in shown], linestyle="none", marker="D",
          markersize=4.5, color=_COLORS["best"],
          label=f"questions by best score ({_fmt(best['count'])})")
  for x, n in zip(edges, spans["counts"]):
    if n:
      ax.annotate(_fmt(n), (x + widths[0] / 2, n), xytext=(0, 2), textcoords="offset points",
                  ha="center", va="bottom", fontsize=_NOTE - 1)
  if o.get("min_score") is not None:
    ax.axvline(o["min_score"], color="#555555", linestyle="--", linewidth=1,
               label=f"min score {o['min_score']:g}")
  top = max(spans["counts"] + best["counts"] + [1])
  if log:  # headroom for the legend above the bars
    ax.set_yscale("log")
    ax.set_ylim(0.5, top * 25)
  else:
    ax.set_ylim(0, top * 1.7)
    _integer_ticks(ax.yaxis)
  ax.set_xlim(0, 1)
  ax.legend(fontsize=_NOTE, loc="upper center")
  _labels(ax, "oracle answer spans: ROUGE-L F1", "ROUGE-L F1 vs the reference answer (0–1, "
          "bins of 0.05)", "spans / questions" + (" (log scale)" if log else ""),
          f"min {spans['min']:.2f}, p25 {spans['p25']:.2f}, median {spans['median']:.2f}, "
          f"p75 {spans['p75']:.2f}, max {spans['max']:.2f}" if spans["count"]
          else "no span reached the threshold")


def mentions_panel(ax, report: Dict[str, Any]) -> None:
  m = report["mentions"]
  keys = ("labels", "unmappable", "cut", "lost")
  log = bars(ax, ["placed", "unmappable", "cut at an edge", "lost"], [m[k] for k in keys],
             _COLORS["mentions"])
  _labels(ax, "mentions placed in segments / not placed",
          "outcome (placed: per segment; cut: per window)",
          "mentions" + (" (log scale)" if log else ""))


def entities_panel(ax, report: Dict[str, Any]) -> None:
  e = report["entities"]
  curve = e["rank_curve"]
  if curve["ranks"]:
    ax.loglog(curve["ranks"], curve["counts"], color=_COLORS["rank"], marker=".",
              markersize=3, linewidth=1.2)
  _labels(ax, "entity frequency by rank", "entity rank (1 = most mentioned, log scale)",
          "mentions of the entity (log scale)",
          f"{_fmt(e['vocabulary'])} entities, {_fmt(e['mentions'])} mentions")
  if e["top"]:
    _note(ax, "most mentioned:\n" + "\n".join(
        f"{_short(t['title'], 26)} ({_fmt(t['count'])})" for t in e["top"][:3]))


def packs_panel(ax, report: Dict[str, Any]) -> None:
  p = report["packs"]
  cap = p["segments_per_pack"] or max((int(v) for v in p["segments_in_pack"]["values"]),
                                      default=1)
  values = p["segments_in_pack"]["values"]
  xs = list(range(1, cap + 1))
  if len(xs) > 32:  # large packs: bins of 1/16 of the capacity
    step = -(-cap // 16)
    edges = list(range(1, cap + 1, step)) + [cap + 1]
    names = [_bin_label(a, b) for a, b in zip(edges, edges[1:])]
    counts = [sum(n for v, n in values.items() if a <= int(v) < b)
              for a, b in zip(edges, edges[1:])]
  else:
    names = [str(x) for x in xs]
    counts = [values.get(str(x), 0) for x in xs]
  log = bars(ax, names, counts, _COLORS["packs"])
  _labels(ax, f"pack fill ({_fmt(p['packs'])} pack{'' if p['packs'] == 1 else 's'} of {cap} "
              f"segment slots)",
          f"segments in the pack (padding slots in all: {_fmt(p['padding_segments'])})",
          "packs" + (" (log scale)" if log else ""),
          f"fill {p['fill']:.1%}, {p['sub_documents_per_pack']:.2f} sub-documents per pack")


def _draw(ax, panel: str, report: Dict[str, Any]) -> None:
  hists = report["histograms"]
  qa = "coverage" in report
  if panel == "outcome":
    outcome_panel(ax, report)
  elif panel == "tokens_per_document":
    histogram(ax, hists[panel], "tokens per document" + (" (context)" if qa else ""),
              "tokens (power-of-two bins)", _count_label("documents", hists[panel]))
  elif panel == "segments_per_document":
    histogram(ax, hists[panel], "segments per document" + (" (question + context)" if qa
                                                           else ""),
              "segments (power-of-two bins)", _count_label("documents", hists[panel]))
  elif panel == "answers_per_question":
    histogram(ax, hists[panel], "answer spans per question",
              "answer spans found in the text (power-of-two bins)",
              _count_label("questions", hists[panel]))
  elif panel == "mentions_per_segment":
    histogram(ax, hists[panel], "mentions per segment", "mentions (power-of-two bins)",
              _count_label("segments", hists[panel]))
  elif panel == "coverage":
    coverage_panel(ax, report)
  elif panel == "oracle":
    oracle_panel(ax, report)
  elif panel == "mentions":
    mentions_panel(ax, report)
  elif panel == "entities":
    entities_panel(ax, report)
  elif panel == "packs":
    packs_panel(ax, report)
  else:
    raise ValueError(f"unknown panel {panel!r}")


def _count_label(what: str, hist: Dict[str, Any]) -> str:
  return what + (" (log scale)" if needs_log(hist["counts"]) else "")


def grid(n: int) -> tuple:
  """(rows, columns) for ``n`` panels."""
  if n <= 4:
    return (1, max(n, 1)) if n <= 2 else (2, 2)
  if n <= 6:
    return 2, 3
  if n <= 8:
    return 2, 4
  if n == 9:
    return 3, 3
  return math.ceil(n / 4), 4


def build_figure(report: Dict[str, Any]):
  """The report's figure (a matplotlib ``Figure``, Agg backend; not shown)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  panels: List[str] = report["panels"]
  rows, cols = grid(len(panels))
  fig = Figure(figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows + 0.5), dpi=DPI)
  # On its Agg canvas from the start: the layout below and render_png's drawing then measure
  # the texts with one renderer, and the second finds the first's text metrics cached.
  FigureCanvasAgg(fig)
  axes = fig.subplots(rows, cols, squeeze=False).ravel()
  for ax, panel in zip(axes, panels):
    _draw(ax, panel, report)
  for ax in axes[len(panels):]:
    fig.delaxes(ax)
  fig.suptitle(textwrap.fill(report["title"], 150), fontsize=11.5, fontweight="bold")
  fig.tight_layout(rect=(0, 0, 1, 0.97 if rows > 1 else 0.94))
  return fig


def render_png(fig) -> bytes:
  """The figure's PNG bytes (fixed dpi, no ``Software`` metadata: reproducible).  Drawn once
  on the figure's Agg canvas: ``savefig`` would first draw the whole figure without rendering
  (a pass for layout engines, which ``tight_layout`` leaves a placeholder of) on a canvas of
  its own, for the same bytes (with :func:`build_figure`'s canvas: ~20% less time)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
  buf = io.BytesIO()
  canvas.print_png(buf, metadata={"Software": None})
  return buf.getvalue()
