"""Tokenizer: offsets, word starts, special ids from the vocabulary, fingerprints."""

import json

import numpy as np
import pytest

from pipelines.text import answers
from pipelines.text.segmenter import char_spans_to_tokens
from pipelines.text.tokenizer import SPECIAL_TOKENS, Tokenizer, TokenizerSpec


@pytest.fixture(scope="module")
def tok():
  return Tokenizer()


def test_default_vocab_special_ids_come_from_vocabulary(tok):
  assert tok.vocab_size == 50257 + 4
  for key, token in SPECIAL_TOKENS.items():
    assert tok.id_to_token(tok.special_ids[key]) == token
  assert len(set(tok.special_ids.values())) == 4
  assert tok.fingerprint.startswith("sha256:")


def test_offsets_and_word_starts_on_unicode(tok):
  text = "Zürich's café — 東京 😀ok  end"
  enc = tok.encode(text)
  assert tok.decode(enc.ids) == text
  pieces = [text[b:e] for b, e in zip(enc.begins, enc.ends)]
  # Byte tokens of one character share that character's offsets: keep one of each run.
  distinct = [p for i, p in enumerate(pieces)
              if i == 0 or (enc.begins[i], enc.ends[i]) != (enc.begins[i - 1], enc.ends[i - 1])]
  assert "".join(distinct).replace(" ", "") == text.replace(" ", "")
  starts = [p for p, w in zip(pieces, enc.word_start) if w]
  assert starts[0].startswith("Z")
  # "'s" continues "Zürich"; several byte tokens of one character are never word starts twice.
  assert not any(w and p == "'s" for p, w in zip(pieces, enc.word_start))
  for i in range(1, len(enc)):
    if enc.begins[i] == enc.begins[i - 1]:
      assert not enc.word_start[i]
  # 東京 maps back to exactly its characters.
  spans, how = answers.find_answer_spans(text, ["東京"])
  assert how == "exact"
  (tb, te), = char_spans_to_tokens(enc, spans).tolist()
  assert text[enc.begins[tb]:enc.ends[te]] == "東京"
  assert tok.decode(enc.ids[tb:te + 1]).strip() == "東京"


def test_roberta_style_vocab_files(tmp_path):
  vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "Ġ": 6, "ab": 7,
           "Ġab": 8, "<mask>": 9}
  (tmp_path / "vocab.json").write_text(json.dumps(vocab))
  (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nĠ ab\n")
  t = Tokenizer(TokenizerSpec(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")))
  assert t.special_ids == {"cls": 0, "sep": 2, "pad": 1, "mask": 9}
  assert t.encode("ab ab").ids.tolist() == [7, 8]
  assert t.fingerprint != Tokenizer().fingerprint


def test_spec_needs_both_files():
  with pytest.raises(ValueError, match="both"):
    TokenizerSpec("vocab.json", None)


@pytest.mark.parametrize("text,answer,expected,how", [
    ("The Beatles and the beatles.", "the Beatles", [(0, 11), (16, 27)], "exact"),
    ("in 1990s music", "1990", [], "not_found"),
    ("Paris, France", "Paris", [(0, 5)], "exact"),
    ("He went  to\nNew   York.", "New York", [(12, 22)], "exact"),
    ("the band Beatles played", "The Beatles.", [(9, 16)], "normalised"),
    ("U.S. Army", "U.S.", [(0, 4)], "exact"),
])
def test_answer_occurrences(text, answer, expected, how):
  assert answers.find_answer_spans(text, [answer]) == (expected, how)
