r"""Records inspector: renders packed ReadTwice TFRecords back to readable text or HTML.

  python -m pipelines.inspect --records_dir /tmp/hotpot_records \
    [--html out.html] [--max_records K] [--max_segments S] \
    [--vocab_file vocab.json --merges_file merges.txt]

``--records_dir`` is a job's ``--output_dir``: the shards read are those its ``manifest.json``
lists (``shards[].path``), never a glob, so a leftover or foreign file beside them is not read.
A directory without ``COMPLETED`` (a failed or running job) or without a manifest (its
``records-*.tfrecord[.gz]`` files are then read) gets one warning line on stderr.

For every record (one pack of N segments x L tokens, see ``schemas/records.py``) it shows the pack
id and, segment by segment (padding segments are skipped and counted), the labels
(``document_id``, ``question_id``, sub-document, segment position, question length, answer type,
supporting flag) and the tokens decoded back to text: the question prefix as ``[Q: ...]``, answer
spans as ``⟦ANS#k ...⟧`` (``k`` = index of the span in the pack's answer lists) and entity
mentions as ``⟦ENT id title ...⟧`` (the title from the entity vocabulary beside the records, or
in the ``--entities_dir`` the job annotated with, when it is there).  Each answer span is also listed with its token range and decoded
text.  Text is decoded one contiguous run of tokens at a time (never token by token), so
characters split over several byte-level tokens render correctly.

``N``, ``L`` and the tokenizer come from ``manifest.json`` next to the records when present; the
tokenizer built here must have the manifest's fingerprint.  Without a manifest, N is
``len(segment_mask)`` and L is ``len(token_ids) / N``.  Every record's ``schema_version`` is
checked (``schemas.records.SchemaVersionError`` on another major version).

Gzip-compressed records (``--compression gzip``: ``records-*.tfrecord.gz``) are read as they are:
the compression is the manifest's ``config.compression`` when the directory has a manifest that
states it, else decided per file (``.gz`` name, or the gzip magic bytes).

TensorFlow-free: files are read with Beam's ``FileSystems`` (so ``gs://`` works) and parsed with
``schemas.example_proto``.  Use ``load_records`` / ``render_text`` / ``render_html`` from Python.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import json
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from schemas import example_proto, records as records_schema, tfrecord_io
from schemas import entities as entities_schema
from schemas import manifest as manifest_schema

ANSWER_TYPE_WORDS = {
    records_schema.ANSWER_TYPE_NONE: "unknown",
    records_schema.ANSWER_TYPE_SPAN: "span",
    records_schema.ANSWER_TYPE_YES: "yes",
    records_schema.ANSWER_TYPE_NO: "no",
}
SUPPORTING_WORDS = {1: "yes", 0: "no", -1: "unknown"}

# Keys added to each decoded record by load_records (not features).
FILE_KEY = "_file"
INDEX_KEY = "_index"
# Key added to the manifest by read_manifest: {directory: compression}.
COMPRESSION_KEY = "_compression"
ENTITY_TITLES_KEY = "_entity_titles"


class InspectError(ValueError):
  """Inputs the inspector cannot render (no files, tokenizer mismatch, bad shapes)."""


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def match_paths(patterns: str | Sequence[str]) -> List[str]:
  """Files matching a glob, a comma-separated list of globs, or a list of them (gs:// too);
  for Python use (the command reads a directory's manifest: :func:`records_dir_paths`)."""
  from pipelines.beam.inputs import match_inputs  # pylint: disable=g-import-not-at-top
  from pipelines.errors import UserError  # pylint: disable=g-import-not-at-top

  try:
    return match_inputs(patterns if isinstance(patterns, str) else ",".join(patterns),
                        flag="records")
  except (FileNotFoundError, UserError) as e:
    raise InspectError(getattr(e, "message", None) or str(e)) from e


RECORDS_GLOBS = ("records-*.tfrecord", "records-*.tfrecord.gz")


def records_dir_paths(records_dir: str) -> Tuple[List[str], Optional[Dict[str, Any]], List[str]]:
  """``(shard paths, manifest or None, warnings)`` of a job's output directory.

  The shards are those the manifest lists; without a manifest, the directory's
  ``records-*.tfrecord[.gz]`` files (a warning says so).  A directory without ``COMPLETED``
  gets a warning (its job failed or is still running).  InspectError when the directory is
  missing, is a file or a glob, or a listed shard is missing.
  """
  import os  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top

  if any(c in records_dir for c in "*?["):
    parent = _dirname(records_dir.split("*")[0].split("?")[0].split("[")[0]) or "."
    raise InspectError(f"--records_dir takes a job's output directory (where manifest.json "
                       f"lists the shards), not a glob: try --records_dir {parent}")
  local = "://" not in records_dir
  directory = records_dir.rstrip("/") or "/" if local else records_dir.rstrip("/")
  if local and os.path.isfile(directory):
    raise InspectError(f"--records_dir {records_dir} is a file; give the job's output "
                       f"directory (the one holding manifest.json)")
  if local and not os.path.isdir(directory):
    raise InspectError(f"--records_dir {records_dir} does not exist")
  manifest_path = FileSystems.join(directory, manifest_schema.MANIFEST_FILE)
  warnings: List[str] = []
  if not FileSystems.exists(manifest_path):
    found = sorted({m.path for r in FileSystems.match(
        [FileSystems.join(directory, g) for g in RECORDS_GLOBS]) for m in r.metadata_list})
    if not found:
      raise InspectError(f"--records_dir {records_dir} has no manifest.json and no "
                         f"records-*.tfrecord files: is it a job's --output_dir?")
    warnings.append(f"{directory} has no manifest.json (not a complete job's output): reading "
                    f"its {len(found)} records-*.tfrecord file(s); N, L and the tokenizer are "
                    f"not checked")
    return found, None, warnings
  manifest = read_manifest_dirs([directory])
  if not FileSystems.exists(FileSystems.join(directory, manifest_schema.COMPLETED_FILE)):
    warnings.append(f"{directory} has no {manifest_schema.COMPLETED_FILE}: the job that wrote "
                    f"it failed or is still running; its records may be incomplete")
  paths = [FileSystems.join(directory, s["path"]) for s in manifest.get("shards", [])]
  missing = [p for p in paths if not FileSystems.exists(p)]
  if missing:
    raise InspectError(f"{len(missing)} shard(s) that {manifest_path} lists are missing, e.g. "
                       f"{missing[0]}")
  return paths, manifest, warnings


def _dirname(path: str) -> str:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  return FileSystems.split(path)[0]


def read_manifest(paths: Sequence[str]) -> Optional[Dict[str, Any]]:
  """The ``manifest.json`` of the directory holding ``paths``, or None if there is none.

  Raises InspectError when the files lie in several directories whose manifests disagree on
  ``seq_length``, ``segments_per_pack`` or the tokenizer fingerprint.
  """
  return read_manifest_dirs(sorted({_dirname(p) for p in paths}))


def read_manifest_dirs(directories: Sequence[str]) -> Optional[Dict[str, Any]]:
  """:func:`read_manifest` of the manifests in ``directories``."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top

  found: Dict[str, Dict[str, Any]] = {}
  for directory in sorted(directories):
    path = FileSystems.join(directory, manifest_schema.MANIFEST_FILE)
    if not FileSystems.exists(path):
      continue
    with FileSystems.open(path, compression_type="uncompressed") as f:
      found[path] = manifest_schema.loads(f.read().decode("utf-8"))
  if not found:
    return None

  def key(m):
    cfg = m.get("config", {})
    return (cfg.get("seq_length"), cfg.get("segments_per_pack"),
            m.get("tokenizer", {}).get("fingerprint"))

  keys = {key(m) for m in found.values()}
  if len(keys) > 1:
    raise InspectError(f"Manifests {sorted(found)} disagree on (seq_length, segments_per_pack, "
                       f"tokenizer fingerprint): {sorted(map(str, keys))}.")
  manifest = dict(next(iter(found.values())))
  manifest["_paths"] = sorted(found)
  # Compression of each directory's records ("gzip"/"none"; None: the manifest does not say).
  manifest[COMPRESSION_KEY] = {_dirname(p): tfrecord_io.manifest_compression(m)
                               for p, m in found.items()}
  # Entity titles by id, from the entity vocabulary a pretraining-corpus job writes beside its
  # records (schemas/entities.py), or the one an annotated job linked with (--entities_dir).
  titles: Dict[int, str] = {}
  sources = {_dirname(p) for p in found} | {
      m["config"]["entities_dir"] for m in found.values()
      if (m.get("config") or {}).get("entities_dir")}
  from pipelines.entities import tables as entity_tables  # pylint: disable=g-import-not-at-top
  for directory in sorted(sources):
    if entity_tables.has_entities(directory):
      titles.update(entities_schema.titles_by_id(entity_tables.read_vocabulary(directory)))
  manifest[ENTITY_TITLES_KEY] = titles
  return manifest


def file_compression(path: str, manifest: Optional[Dict[str, Any]] = None) -> Optional[str]:
  """The compression the manifest of ``path``'s directory states, else None (detect)."""
  if not manifest:
    return None
  return manifest.get(COMPRESSION_KEY, {}).get(_dirname(path))


def iter_file_records(path: str, compression: Optional[str] = None) -> Iterator[bytes]:
  """Payloads of one TFRecord file (local or gs://), streamed.

  ``compression``: "gzip" (``.tfrecord.gz``), "none", or None to detect it from the name
  (``.gz``) or the first bytes.
  """
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top

  with FileSystems.open(path, compression_type="uncompressed") as f:
    yield from tfrecord_io.iter_records(f, path, compression)


def decode_record(payload: bytes, where: str = "record") -> Dict[str, List]:
  """Parses one record and checks its ``schema_version`` (SchemaVersionError if incompatible)."""
  features = example_proto.decode_example(payload)
  version = features.get("schema_version")
  if not version:
    raise records_schema.SchemaVersionError(f"{where} has no schema_version feature.")
  records_schema.check_version(version[0], where)
  return features


def load_records(paths: Sequence[str], max_records: Optional[int] = None,
                 manifest: Optional[Dict[str, Any]] = None) -> List[Dict]:
  """Decoded records (``{feature: list}``) of ``paths`` in order, at most ``max_records``.

  Each dict also holds ``_file`` (its path) and ``_index`` (its position in that file).  Files
  are gzip or not as ``manifest`` (from :func:`read_manifest`) says, else as detected.
  """
  out: List[Dict] = []
  for path in paths:
    for i, payload in enumerate(iter_file_records(path, file_compression(path, manifest))):
      if max_records is not None and len(out) >= max_records:
        return out
      rec = decode_record(payload, f"{path} record {i}")
      rec[FILE_KEY] = path
      rec[INDEX_KEY] = i
      out.append(rec)
  return out


# --------------------------------------------------------------------------------------------
# Tokenizer and layout
# --------------------------------------------------------------------------------------------


def build_tokenizer(manifest: Optional[Dict[str, Any]] = None, vocab_file: Optional[str] = None,
                    merges_file: Optional[str] = None):
  """The tokenizer that wrote the records; InspectError if it differs from the manifest's.

  With ``vocab_file``/``merges_file`` those files are used; otherwise the packaged GPT-2 BPE,
  which is only accepted when there is no manifest or its tokenizer name says gpt2.
  """
  # pylint: disable-next=g-import-not-at-top
  from pipelines.text.tokenizer import Tokenizer, TokenizerSpec

  described = (manifest or {}).get("tokenizer", {})
  if vocab_file or merges_file:
    try:
      spec = TokenizerSpec(vocab_file, merges_file)
    except ValueError as e:
      raise InspectError(str(e)) from e
  elif manifest is not None and "gpt2" not in str(described.get("name", "")).lower():
    raise InspectError(
        f"The manifest's tokenizer is {described.get('name')!r}, not the packaged GPT-2 BPE: "
        "pass the --vocab_file and --merges_file the records were written with.")
  else:
    spec = TokenizerSpec()
  tokenizer = Tokenizer(spec)
  want = described.get("fingerprint")
  if manifest is not None and want != tokenizer.fingerprint:
    raise InspectError(
        f"Tokenizer mismatch: the records were written with {described.get('name')!r} "
        f"(fingerprint {want}), but the inspector built {tokenizer.name!r} (fingerprint "
        f"{tokenizer.fingerprint}). Pass the --vocab_file/--merges_file used by the pipeline.")
  return tokenizer


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


# --------------------------------------------------------------------------------------------
# Segment model shared by the text and HTML renderers
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


EXAMPLE = ("python -m pipelines.inspect --records_dir /tmp/hotpot_records --html page.html "
           "--max_records 2")


def new_parser():
  from schemas import cli as schema_cli  # pylint: disable=g-import-not-at-top
  parser = schema_cli.Parser(
      "pipelines.inspect",
      "Render packed ReadTwice TFRecords (plain or gzip .tfrecord.gz) back to text (stdout) or "
      "HTML.", EXAMPLE)
  parser.add_argument("--records_dir", required=True,
                      help="a job's --output_dir (local or gs://): the shards its manifest.json "
                           "lists are read (.tfrecord or gzip .tfrecord.gz), and the manifest "
                           "supplies N, L, the tokenizer and the compression")
  parser.add_argument("--html", default=None,
                      help="write a self-contained HTML page here instead of text to stdout")
  parser.add_argument("--max_records", type=int, default=None,
                      help="render at most this many records (default: all)")
  parser.add_argument("--max_segments", type=int, default=None,
                      help="render at most this many real segments per record (default: all)")
  parser.add_argument("--vocab_file", default=None,
                      help="byte-level BPE vocab.json the records were written with "
                           "(default: packaged GPT-2 BPE, if the manifest says gpt2)")
  parser.add_argument("--merges_file", default=None,
                      help="merges.txt that goes with --vocab_file")
  return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  return new_parser().parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """CLI entry point; returns the exit status (2: bad flags; 1: unusable input, one line)."""
  from schemas import cli as schema_cli  # pylint: disable=g-import-not-at-top
  parser = new_parser()
  args = parser.parse_args(argv)
  for name in ("max_records", "max_segments"):
    value = getattr(args, name)
    if value is not None and value < 1:
      parser.error(f"--{name} must be >= 1, got {value}")

  def body() -> int:
    paths, manifest, warnings = records_dir_paths(args.records_dir)
    for warning in warnings:
      print(f"{parser.prog}: warning: {warning}", file=sys.stderr, flush=True)
    tokenizer = build_tokenizer(manifest, args.vocab_file, args.merges_file)
    recs = load_records(paths, args.max_records, manifest)
    if args.html:
      page = render_html(recs, tokenizer, manifest, args.max_segments, paths)
      from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
      with FileSystems.create(args.html) as f:
        f.write(page.encode("utf-8"))
      print(f"wrote {args.html}: {len(recs)} records from {len(paths)} files", file=sys.stderr)
    else:
      sys.stdout.write(render_text(recs, tokenizer, manifest, args.max_segments, paths))
    return 0

  return schema_cli.run_command(
      parser.prog, body,
      user_errors=(InspectError, records_schema.SchemaVersionError,
                   manifest_schema.ManifestError, tfrecord_io.CorruptRecordError, ValueError,
                   OSError))


if __name__ == "__main__":
  sys.exit(main())
