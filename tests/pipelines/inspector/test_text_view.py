"""Tests of pipelines/inspector/text_view.py (and the layout it renders)."""

from __future__ import annotations

from pipelines.inspector import layout, text_view
from tests.pipelines.inspector.builders import L, N, QUESTION, load, make_pack, write_output

def test_render_text_shows_question_answers_mentions_and_labels(output_dir, tokenizer):
  paths, manifest, recs = load(output_dir)
  assert manifest is not None and len(recs) == 1
  text = text_view.render_text(recs, tokenizer, manifest, paths=paths)
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
  pattern = write_output(tmp_path / "bare", [make_pack(tokenizer)], None)
  paths, manifest, recs = load(pattern)
  assert manifest is None
  assert layout.record_layout(recs[0]) == layout.Layout(N, L)
  text = text_view.render_text(recs, tokenizer, max_segments=1)
  assert "N=4 L=48" in text
  assert "--- segment 0" in text and "--- segment 1" not in text
  assert "2 more real segments not shown" in text
