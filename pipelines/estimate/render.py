"""``--estimate``'s human-readable table (:func:`render`)."""

from __future__ import annotations

from typing import Any, Dict

from pipelines.estimate.costs import MB

def _mb(n: float) -> str:
  return f"{n / MB:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"


def _h(hours: float) -> str:
  return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:,.2f} h"


def _s(seconds: float) -> str:
  return f"{seconds:.1f} s" if seconds < 90 else _h(seconds / 3600)


def _usd(x: float) -> str:
  return f"{x:,.2f}" if x >= 1 else f"{x:.3f}"


def price_text(x: float) -> str:
  return format(x, ".6f").rstrip("0").rstrip(".")


def render(e: Dict[str, Any]) -> str:
  """The human-readable table of an :func:`estimate`."""
  i, d, loc, usd = e["inputs"], e["dataflow"], e["local"], e["dataflow"]["cost_usd"]
  kinds = ", ".join(f"{k} {v['files']} file(s) {_mb(v['bytes'])}"
                    + (f" ({_mb(v['uncompressed_bytes'])} uncompressed)" if k != "plain" else "")
                    for k, v in sorted(i["by_kind"].items()))
  lines = [f"estimate for {e['job']} (nothing was run or written)",
           f"  input        {i['files']} file(s), {_mb(i['bytes'])}: {kinds}"]
  for role, s in e["side_inputs"].items():
    if not s["files"]:
      continue
    refs = f", {s['references']:,} references" if "references" in s else ""
    refs += f", {s['questions']:,} questions" if "questions" in s else ""
    missing = f", {s['missing']:,} missing" if s.get("missing") else ""
    read = " (not in the work)" if s.get("in_work") is False else " read"
    lines.append(f"  {role:<12} {s['files']:,} file(s){refs}, {_mb(s['bytes'])}{read}"
                 f"{missing}" + (f" (sized: {s['sized']})" if "sized" in s else ""))
  lines += [
      f"  work         {_mb(e['work']['bytes'])} ({e['work']['measure']})",
      f"  CPU          {e['cpu_hours']:.3f} h on this machine's cores",
      f"  local        {_s(loc['hours'] * 3600)} wall on {loc['cores']} cores, {loc['mode']}",
      "  local stages " + "; ".join(f"{k} {_s(v)}" for k, v in loc["stages_s"].items()),
      f"  Dataflow     {d['workers']} x {d['machine_type']} ({d['vcpus_per_worker']} vCPU, "
      f"{d['memory_gb_per_worker']:g} GB, {d['disk_gb_per_worker']} GB {d['disk_type']}); "
      f"{d['vcpu_hours_of_work']:.3f} vCPU-h of work; wall {_h(d['wall_hours'])} incl. "
      f"{d['startup_minutes']:g} min start-up; {d['worker_hours']:.2f} worker-h",
      f"  Dataflow USD {_usd(usd['total'])} = vCPU {_usd(usd['vcpu'])} + memory "
      f"{_usd(usd['memory'])} + disk {_usd(usd['disk'])} (at ${price_text(d['prices_usd']['vcpu_hour'])}"
      f"/vCPU-h, ${price_text(d['prices_usd']['memory_gb_hour'])}/GB-h, "
      f"${price_text(d['prices_usd']['disk_gb_hour'])}/disk GB-h)"]
  a = e.get("annotation")
  if a and a["ner"] == "spacy":
    lines.append(f"  annotation   --ner spacy ({a['spacy_model']}, linker {a['linker']}): "
                 f"{a['words']:,} words, {a['alias_rows']:,} alias rows, {a['patterns']:,} "
                 f"ruler patterns: {a['cpu_s']:.1f} CPU s ({a['start_cpu_s']:.1f} s of it to "
                 f"start, per worker process)")
  if "cloud_nl" in e:
    c = e["cloud_nl"]
    lines.append(f"  Cloud NL     ~{c['requests']:,} requests, {c['units']:,} units "
                 f"({c['characters']:,} characters), USD {_usd(c['usd'])} at "
                 f"${price_text(c['price_per_1000_units'])} per 1,000 units; {c['note']}")
  lines.append("  assumptions:")
  lines += [f"    - {a}" for a in e["assumptions"]]
  return "\n".join(lines)
