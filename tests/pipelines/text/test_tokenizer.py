"""Tokenizer: offsets, word starts, special ids from the vocabulary, fingerprints."""

import json

import numpy as np
import pytest

from pipelines.text import answers
from pipelines.text.segmenter import char_spans_to_tokens
from pipelines.text.tokenizer import SPECIAL_TOKENS, Tokenizer, TokenizerSpec, word_starts


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


def _pieces(text, enc):
  return [text[b:e] for b, e in zip(enc.begins, enc.ends)]


def test_word_starts_on_cjk_each_ideograph_is_a_word(tok):
  # Issue 8.5: without spaces the old rule found one word start in a whole CJK text, so window
  # edges had no word boundary to fall on.
  text = "日本の最高峰は富士山です"
  enc = tok.encode(text)
  assert len(enc) > len(text)  # byte tokens: most characters take several tokens
  starts = [text[b] for b, w in zip(enc.begins, enc.word_start) if w]
  # Every ideograph starts a word, as does the kana after one; kana after kana does not.
  assert starts == list("日本の最高峰は富士山で")
  for i in range(1, len(enc)):
    continuation = enc.begins[i] == enc.begins[i - 1] or enc.begins[i] < enc.ends[i - 1]
    if continuation:
      assert not enc.word_start[i], "a continuation byte token starts a word"


def test_word_starts_never_inside_a_character(tok):
  from pipelines.text.segmenter import character_starts
  texts = ["東京Tower 😀ok", "深圳市龍崗區 𠀋𡈽 漢字", "ภาษาไทยไม่มีช่องว่าง", "Zürich's café — 東京",
           "日本の最高峰は富士山です。" * 3, "  end  \n\n x"]
  saw_straddling = False
  for text in texts:
    enc = tok.encode(text)
    cs = character_starts(enc.begins, enc.ends)
    # A token that begins inside the previous token's characters (its last bytes and the
    # first of the next character) is neither a character nor a word start.
    straddles = np.zeros(len(enc), dtype=bool)
    straddles[1:] = (enc.begins[1:] != enc.begins[:-1]) & (enc.begins[1:] < enc.ends[:-1])
    saw_straddling |= straddles.any()
    assert not (enc.word_start & straddles).any() and not (cs & straddles).any()
    assert not (enc.word_start & ~cs).any()
    for i in np.flatnonzero(cs):
      # Cutting before a character start leaves valid UTF-8 on both sides.
      assert "\ufffd" not in tok.decode(enc.ids[:i]) + tok.decode(enc.ids[i:])
  assert saw_straddling
  enc = tok.encode("東京Tower")
  assert [p for p, w in zip(_pieces("東京Tower", enc), enc.word_start) if w] == ["東", "京", "T"]


def test_bulk_offsets_equal_the_tokenizers_own(tok):
  """The offsets computed from ids in bulk equal ``Encoding.offsets`` (an independent
  computation inside the Rust tokenizer), on random texts mixing spaces, newlines, tabs,
  accents, CJK, emoji, zero-width and no-break spaces and special-token strings."""
  import random
  rng = random.Random(0)
  alphabet = list("abc xyz  \n\t.,Ééü日本語🙂\u200b\u00a0-e\u0301") + [
      "  ", "\n\n", "<mask>", "</s>", "<s>", "<pad>", " the", "ing"]
  texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
           for _ in range(3000)] + ["", " ", "  x", "x  ", "富士山", "🙂🙂 🙂"]
  backend = tok.backend
  for start in range(0, len(texts), 500):
    batch = texts[start:start + 500]
    ours = tok.encode_batch(batch)
    theirs = backend.encode_batch(batch, add_special_tokens=False)
    for text, enc, ref in zip(batch, ours, theirs):
      assert enc.ids.tolist() == ref.ids, text
      assert list(zip(enc.begins.tolist(), enc.ends.tolist())) == ref.offsets, repr(text)


def test_offsets_fall_back_to_the_backends_character_offsets(tok, monkeypatch):
  """When the bulk offsets do not apply, the offsets are the backend's character offsets --
  not those of the fast encodings the ids come from (all ``(0, 0)``), nor byte offsets (they
  differ past ``é``)."""
  text = "Café au lait, 日本 and </s> more"
  ref = tok.backend.encode(text, add_special_tokens=False)
  monkeypatch.setattr(tok._offsets, "batch", lambda texts, ids_list: None)
  monkeypatch.setattr(tok._offsets, "char_offsets", lambda text, ids: None)
  enc = tok.encode_batch([text])[0]
  assert enc.ids.tolist() == ref.ids
  assert list(zip(enc.begins.tolist(), enc.ends.tolist())) == ref.offsets
  assert ref.offsets[-1][1] == len(text) < len(text.encode("utf-8"))


def test_a_batch_gives_each_text_what_it_gets_alone(tok):
  """Offsets and word starts computed over a whole batch at once equal those of each text on
  its own (``char_offsets`` + ``word_starts``, text by text), at every text boundary: empty
  texts, texts ending or starting in whitespace, in an ideograph, in a multi-byte character,
  ASCII-only batches and mixed ones."""
  import random
  rng = random.Random(1)
  alphabet = list("ab xy  \n\t.,éü日本🙂\u3000\u00a0") + ["  ", " the", "ing", "</s>"]
  for ascii_only in (True, False):
    pool = [c for c in alphabet if c.isascii()] if ascii_only else alphabet
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(600)]
    texts[:4] = ["", " ", "x ", ""]
    raw = tok.backend._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    ids_list = [np.array(e.ids, dtype=np.int64) for e in raw]
    bulk = tok._offsets.batch(texts, ids_list)
    assert bulk is not None and len(bulk) == len(texts)
    for text, ids, (begins, ends, starts) in zip(texts, ids_list, bulk):
      alone = tok._offsets.char_offsets(text, ids)
      assert begins.tolist() == alone[0].tolist() and ends.tolist() == alone[1].tolist(), text
      assert starts.tolist() == word_starts(text, *alone).tolist(), repr(text)
  assert tok._offsets.batch([], []) == []


def test_a_batch_with_a_text_its_tokens_do_not_cover_is_done_text_by_text(tok):
  texts = ["one text", "another one"]
  ids_list = [np.array(e.ids, dtype=np.int64) for e in tok.backend._tokenizer.encode_batch_fast(
      texts, add_special_tokens=False)]
  assert tok._offsets.batch(texts, [ids_list[0], ids_list[1][:-1]]) is None
  assert tok._offsets.batch(texts, [ids_list[0], ids_list[1][:0]]) is None
  assert tok._offsets.batch(texts + [""], ids_list + [ids_list[0][:0]]) is not None
