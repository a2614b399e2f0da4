"""Tests of the TF-free records inspector (pipelines/inspect.py)."""

from __future__ import annotations

import gzip
import html.parser
import json
import os
import pathlib
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import pytest

from pipelines import inspect as insp
from pipelines.beam.packing import pack_features, serialize_pack
from pipelines.text.segmenter import SegmenterConfig, segment_document
from pipelines.text.tokenizer import Tokenizer
from schemas import manifest as manifest_schema
from schemas import records, tfrecord_io

ROOT = pathlib.Path(__file__).resolve().parents[2]
N, L = 4, 48
CONTEXT = ("Marie Curie won the Nobel Prize in 1903 for work on <radioactivity> & polonium. "
           "Café 東京 naïve. " + "She kept working in Paris for many years. " * 6)
QUESTION = "When did Marie Curie first win the Nobel Prize?"


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
  return Tokenizer()


def _char_span(text: str, needle: str) -> Tuple[int, int]:
  begin = text.index(needle)
  return begin, begin + len(needle)


def _pack(tokenizer: Tokenizer, schema_version: Optional[str] = None) -> bytes:
  """One pack: a 3-segment QA document (answers '1903' and 'won the Nobel', mentions
  'Marie Curie' = entity 42 and 'Nobel Prize' = entity 7, crossing the second answer)."""
  config = SegmenterConfig(seq_length=L, overlap=4, max_segments_per_document=8,
                           max_question_tokens=16)
  subs, _ = segment_document(
      "doc-1", "q-1", tokenizer.encode(CONTEXT), tokenizer.encode(QUESTION),
      tokenizer.special_ids, config,
      answer_char_spans=[_char_span(CONTEXT, "1903"), _char_span(CONTEXT, "won the Nobel")],
      mentions=[(0, 11, 42), (*_char_span(CONTEXT, "Nobel Prize"), 7)],
      answer_type=records.ANSWER_TYPE_SPAN,
      supporting_ranges=[(0, CONTEXT.index("Café"))])
  feats = pack_features(subs, N, L, tokenizer.pad_id, "00000-000000")
  if schema_version is not None:
    feats["schema_version"] = [schema_version.encode()]
  return serialize_pack(feats)


def _write_output(directory: pathlib.Path, payloads: List[bytes], tokenizer_desc: Optional[Dict],
                  compression: Optional[str] = None, name: Optional[str] = None) -> str:
  """Writes records (and a manifest like a pipeline's when ``tokenizer_desc`` is given).

  ``compression`` "gzip" gzips the records (``.tfrecord.gz``, as ``--compression gzip``) and,
  like "none", is stated in the manifest's config (None: not stated, as before the option).
  """
  directory.mkdir(parents=True, exist_ok=True)
  gzipped = compression == "gzip"
  name = name or "records-00000-of-00001.tfrecord" + (".gz" if gzipped else "")
  framed = b"".join(tfrecord_io.encode_record(payload) for payload in payloads)
  with open(directory / name, "wb") as f:
    f.write(gzip.compress(framed, mtime=0) if gzipped else framed)
  if tokenizer_desc is not None:
    manifest = {
        "manifest_version": manifest_schema.MANIFEST_VERSION,
        "schema_name": records.SCHEMA_NAME, "schema_version": records.SCHEMA_VERSION,
        "job": "test", "tokenizer": tokenizer_desc,
        "config": {"seq_length": L, "segments_per_pack": N,
                   **({"compression": compression} if compression else {})},
        "counts": {"input": 1, "written": 1, "skipped": 0, "rejected": 0},
        "skipped_by_reason": {}, "rejected_by_reason": {},
        "examples": {"documents": 1, "segments": 3, "packs": len(payloads)},
        "shards": [{"path": name, "records": len(payloads), "segments": 3}],
    }
    (directory / manifest_schema.MANIFEST_FILE).write_text(manifest_schema.dumps(manifest))
  return str(directory / "records-*")


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory, tokenizer) -> str:
  """Glob of a records directory with a manifest, holding one hand-built pack."""
  return _write_output(tmp_path_factory.mktemp("insp") / "out", [_pack(tokenizer)],
                       tokenizer.describe())


def _load(pattern: str):
  paths = insp.match_paths(pattern)
  return paths, insp.read_manifest(paths), insp.load_records(paths)


def test_render_text_shows_question_answers_mentions_and_labels(output_dir, tokenizer):
  paths, manifest, recs = _load(output_dir)
  assert manifest is not None and len(recs) == 1
  text = insp.render_text(recs, tokenizer, manifest, paths=paths)
  assert "=== pack 00000-000000" in text
  assert "3 real segments, 1 padding segments not shown" in text
  assert f"[Q: {QUESTION}]" in text
  assert "⟦ANS#0 1903⟧" in text
  assert "⟦ENT 42 Marie Curie⟧" in text
  assert "⟦ANS#1 won the ⟦ENT 7 Nobel⟧ Prize⟧" in text  # crossing spans
  assert 'ANS#0 tokens [21, 21]: "1903"' in text
  assert 'ANS#1 tokens [16, 18]: "won the Nobel"' in text
  # Multi-byte characters and specials decode correctly (runs, not single tokens).
  assert "<radioactivity> & polonium. Café 東京 naïve." in text
  seg0 = ("--- segment 0  document_id=doc-1  question_id=q-1  document_index=0  "
          "sub_document=0/1  segment=0/3  question_length=13  answer_type=span  supporting=yes")
  assert seg0 in text
  assert "segment=2/3" in text and "supporting=no" in text
  assert "--- segment 3" not in text  # padding
  assert "# manifest:" in text and "N=4  L=48" in text
  assert "!!" not in text


def test_max_segments_and_inferred_layout_without_manifest(tmp_path, tokenizer):
  pattern = _write_output(tmp_path / "bare", [_pack(tokenizer)], None)
  paths, manifest, recs = _load(pattern)
  assert manifest is None
  assert insp.record_layout(recs[0]) == insp.Layout(N, L)
  text = insp.render_text(recs, tokenizer, max_segments=1)
  assert "N=4 L=48" in text
  assert "--- segment 0" in text and "--- segment 1" not in text
  assert "2 more real segments not shown" in text


class _Collector(html.parser.HTMLParser):
  """Checks nesting and collects the text inside <mark class="ans"> and mention spans."""

  VOID = {"meta", "br", "link", "img", "hr", "input"}

  def __init__(self):
    super().__init__()
    self.stack: List[Tuple[str, Dict]] = []
    self.answers: Dict[str, str] = {}
    self.mentions: List[Tuple[str, str]] = []
    self.errors: List[str] = []

  def handle_starttag(self, tag, attrs):
    if tag in self.VOID:
      return
    self.stack.append((tag, dict(attrs)))

  def handle_endtag(self, tag):
    if tag in self.VOID:
      return
    if not self.stack or self.stack[-1][0] != tag:
      self.errors.append(f"unbalanced </{tag}>")
      return
    self.stack.pop()

  def handle_data(self, data):
    for tag, attrs in self.stack:
      if tag == "mark" and attrs.get("class") == "ans":
        key = attrs.get("title", "legend")
        self.answers[key] = self.answers.get(key, "") + data
      if tag == "span" and attrs.get("class") == "ent":
        self.mentions.append((attrs.get("data-entity", "legend"), data))


def test_render_html_is_well_formed_escaped_and_highlights(output_dir, tokenizer):
  paths, manifest, recs = _load(output_dir)
  page = insp.render_html(recs, tokenizer, manifest, paths=paths)
  parser = _Collector()
  parser.feed(page)
  parser.close()
  assert not parser.errors and not parser.stack
  assert parser.answers["ANS#0 tokens [21, 21]"] == "1903"
  assert parser.answers["ANS#1 tokens [16, 18]"] == "won the Nobel"
  entity42 = "".join(d for e, d in parser.mentions if e == "42")
  assert entity42 == "Marie Curie42"  # text, then the <sup> entity id
  assert "<sup>42</sup>" in page and "<sup>7</sup>" in page
  assert f'<span class="q" title="question prefix">{QUESTION}</span>' in page
  assert "&lt;radioactivity&gt; &amp; polonium" in page
  assert "<radioactivity>" not in page
  assert '<table class="labels">' in page and "<td>span</td>" in page
  assert "<td>doc-1</td>" in page and "<td>0/3</td>" in page
  for external in ("src=", "href=", "@import", "http://", "https://"):
    assert external not in page
  assert "<style>" in page


def test_other_major_schema_version_fails(tmp_path, tokenizer, capsys):
  pattern = _write_output(tmp_path / "v2", [_pack(tokenizer, schema_version="2.0.0")], None)
  with pytest.raises(records.SchemaVersionError, match="2.0.0"):
    insp.load_records(insp.match_paths(pattern))
  assert insp.main(["--records_dir", os.path.dirname(pattern)]) == 1
  assert "2.0.0" in capsys.readouterr().err
  # A minor version bump is still readable.
  ok = _write_output(tmp_path / "v1_1", [_pack(tokenizer, schema_version="1.1.0")], None)
  assert len(insp.load_records(insp.match_paths(ok))) == 1


def test_tokenizer_mismatch_and_missing_vocab_fail(tmp_path, tokenizer):
  desc = dict(tokenizer.describe(), fingerprint="sha256:" + "0" * 64)
  paths = insp.match_paths(_write_output(tmp_path / "fp", [_pack(tokenizer)], desc))
  with pytest.raises(insp.InspectError, match="fingerprint"):
    insp.build_tokenizer(insp.read_manifest(paths))
  desc = dict(tokenizer.describe(), name="/data/roberta/vocab.json")
  paths = insp.match_paths(_write_output(tmp_path / "roberta", [_pack(tokenizer)], desc))
  with pytest.raises(insp.InspectError, match="--vocab_file"):
    insp.build_tokenizer(insp.read_manifest(paths))
  # The error says what matched nothing (it used to name the job's --input).
  with pytest.raises(insp.InspectError, match=r"^records '.*nothing-\*\.tfrecord' matches no file"):
    insp.match_paths(str(tmp_path / "nothing-*.tfrecord"))


def test_gzip_records_render_like_uncompressed(tmp_path, tokenizer, capsys):
  payloads = [_pack(tokenizer), _pack(tokenizer, schema_version="1.1.0")]
  desc = tokenizer.describe()
  texts = {}
  for compression in ("none", "gzip"):
    pattern = _write_output(tmp_path / compression, payloads, desc, compression)
    assert insp.main(["--records_dir", os.path.dirname(pattern)]) == 0
    texts[compression] = capsys.readouterr().out.replace(str(tmp_path / compression), "OUT")
  assert "OUT/records-00000-of-00001.tfrecord.gz record 1" in texts["gzip"]
  assert texts["gzip"].replace(".tfrecord.gz", ".tfrecord") == texts["none"]
  assert "⟦ANS#0 1903⟧" in texts["gzip"]
  # No manifest: detected by the .gz name, or by the gzip magic bytes.
  for name in ("records-00000-of-00001.tfrecord.gz", "records-00000-of-00001.tfrecord"):
    pattern = _write_output(tmp_path / f"bare-{name}", payloads, None, "gzip", name)
    recs = insp.load_records(insp.match_paths(pattern))
    assert [r["schema_version"] for r in recs] == [[records.SCHEMA_VERSION.encode()], [b"1.1.0"]]


def test_manifest_compression_is_followed(tmp_path, tokenizer, capsys):
  # gzip records whose manifest says "none": corrupt, as tf.data would find them.
  pattern = _write_output(tmp_path / "lying", [_pack(tokenizer)], None, "gzip")
  _write_output(tmp_path / "manifest_only", [], tokenizer.describe(), "none",
                "records-00000-of-00001.tfrecord.gz")
  os.replace(tmp_path / "manifest_only" / manifest_schema.MANIFEST_FILE,
             tmp_path / "lying" / manifest_schema.MANIFEST_FILE)
  paths = insp.match_paths(pattern)
  assert [os.path.basename(p) for p in paths] == ["records-00000-of-00001.tfrecord.gz"]
  with pytest.raises(tfrecord_io.CorruptRecordError, match="checksum"):
    insp.load_records(paths, manifest=insp.read_manifest(paths))
  assert insp.main(["--records_dir", os.path.dirname(pattern)]) == 1
  assert "checksum" in capsys.readouterr().err
  assert len(insp.load_records(paths)) == 1  # detected by name without the manifest


def _env() -> Dict[str, str]:
  return dict(os.environ, PYTHONPATH=str(ROOT))


def test_hotpotqa_pipeline_output_and_cli_html(tmp_path):
  from pipelines import hotpotqa
  from pipelines.beam.config import RecordsConfig

  data = [{
      "_id": "q-hp", "question": "Which city hosts the Blue Tower?", "answer": "Zurich",
      "type": "bridge", "level": "easy",
      "context": [["Blue Tower", ["The Blue Tower stands in Zurich.", " It is tall & <old>."]],
                  ["Red Hall", ["The Red Hall is in Basel."]]],
      "supporting_facts": [["Blue Tower", 0]],
  }]
  src = tmp_path / "hotpot.json"
  src.write_text(json.dumps(data))
  out = tmp_path / "records"
  config = RecordsConfig(segmenter=SegmenterConfig(seq_length=64, overlap=8,
                                                   max_segments_per_document=4,
                                                   max_question_tokens=16),
                         segments_per_pack=4)
  hotpotqa.run(str(src), str(out), config)
  pattern = str(out / "records-*.tfrecord")
  paths, manifest, recs = _load(pattern)
  tokenizer = insp.build_tokenizer(manifest)
  text = insp.render_text(recs, tokenizer, manifest, paths=paths)
  assert "[Q: Which city hosts the Blue Tower?]" in text
  assert "⟦ANS#0 Zurich⟧" in text
  assert "question_id=q-hp" in text and "answer_type=span" in text

  page = tmp_path / "page.html"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.inspect", "--records_dir", str(out), "--html", str(page),
       "--max_records", "1"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  body = page.read_text(encoding="utf-8")
  assert 'title="ANS#0 tokens' in body and ">Zurich</mark>" in body
  assert "tall &amp; &lt;old&gt;." in body


def test_cli_text_mode_is_tensorflow_free(output_dir, capsys):
  code = ("import sys; from pipelines import inspect as i; "
          f"rc = i.main(['--records_dir', {os.path.dirname(output_dir)!r}, '--max_segments', '1']); "
          "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'model')]; "
          "assert not bad, bad; sys.exit(rc)")
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  assert "⟦ANS#0 1903⟧" in proc.stdout
  with pytest.raises(SystemExit) as exit_info:
    insp.parse_args(["--help"])
  assert exit_info.value.code == 0
  usage = capsys.readouterr().out
  for flag in ("--records_dir", "--html", "--max_records", "--max_segments", "--vocab_file",
               "--merges_file", ".tfrecord.gz"):
    assert flag in usage
