"""Tests of pipelines/inspector/cli.py (``python -m pipelines.inspector``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict

import pytest

from pipelines.inspector import cli, decoder, text_view
from pipelines.text.segmenter import SegmenterConfig
from tests.pipelines.inspector.builders import ROOT, load

def _env() -> Dict[str, str]:
  return dict(os.environ, PYTHONPATH=str(ROOT))


@pytest.mark.slow
def test_hotpotqa_pipeline_output_and_cli_html(tmp_path):
  from pipelines import runner
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
  runner.run_dataset("hotpotqa", str(src), str(out), config)
  pattern = str(out / "records-*.tfrecord")
  paths, manifest, recs = load(pattern)
  tokenizer = decoder.build_tokenizer(manifest)
  text = text_view.render_text(recs, tokenizer, manifest, paths=paths)
  assert "[Q: Which city hosts the Blue Tower?]" in text
  assert "⟦ANS#0 Zurich⟧" in text
  assert "question_id=q-hp" in text and "answer_type=span" in text

  page = tmp_path / "page.html"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.inspector", "--records_dir", str(out), "--html", str(page),
       "--max_records", "1"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  body = page.read_text(encoding="utf-8")
  assert 'title="ANS#0 tokens' in body and ">Zurich</mark>" in body
  assert "tall &amp; &lt;old&gt;." in body


@pytest.mark.slow
def test_cli_text_mode_is_tensorflow_free(output_dir, capsys):
  code = ("import sys; from pipelines.inspector import cli as i; "
          f"rc = i.main(['--records_dir', {os.path.dirname(output_dir)!r}, '--max_segments', '1']); "
          "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'model')]; "
          "assert not bad, bad; sys.exit(rc)")
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                        capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  assert "⟦ANS#0 1903⟧" in proc.stdout
  with pytest.raises(SystemExit) as exit_info:
    cli.parse_args(["--help"])
  assert exit_info.value.code == 0
  usage = capsys.readouterr().out
  for flag in ("--records_dir", "--html", "--max_records", "--max_segments", "--vocab_file",
               "--merges_file", ".tfrecord.gz"):
    assert flag in usage
