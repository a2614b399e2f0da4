"""Masked-LM masking: whole mentions, whole-word spans, rates, 80/10/10, cap, determinism."""

import numpy as np
import pytest
import tensorflow as tf

from model.data import masking
from schemas import records

N, L, V, K = 8, 128, 1000, 128
CLS, PAD, SEP, MASK = 0, 1, 2, 3
# Synthetic vocabulary: ids < 10 are special; from 10 on, even ids start words, odd ids continue.
STARTS = np.array([i >= 10 and i % 2 == 0 for i in range(V)])
TABLE = tf.constant(STARTS)
CFG = masking.MaskingConfig(mask_token_id=MASK, vocab_size=V, max_predictions=L)
STATIC_KEYS = ("mentions_segment", "mentions_begin", "mentions_end", "mentions_entity_id",
               "mentions_mask", "mentions_dropped")


def _word(rng):
  n = rng.integers(1, 4)
  return [int(rng.integers(5, V // 2)) * 2] + [int(rng.integers(5, V // 2)) * 2 + 1
                                               for _ in range(n - 1)]


def _pack(rng, n=N, l=L, k=K):
  """One parse_pack-like feature dict (numpy) with word-aligned, non-overlapping mentions."""
  ids = np.full([n, l], PAD, np.int32)
  kind = np.zeros([n, l], np.int32)
  ms = []  # (segment, begin, end, entity)
  for s in range(n):
    q = [int(x) for x in rng.integers(10, V, size=rng.integers(2, 8))]
    row = [CLS] + q + [SEP]
    kinds = [1] + [2] * len(q) + [1]
    limit = int(rng.integers(l // 2, l - 1))
    while True:
      is_mention = rng.random() < 0.15
      toks = _word(rng) + (_word(rng) if is_mention and rng.random() < 0.5 else [])
      if len(row) + len(toks) > limit:
        break
      if is_mention:
        ms.append((s, len(row), len(row) + len(toks) - 1, int(rng.integers(1, 6))))
      row += toks
      kinds += [3] * len(toks)
    row.append(SEP)
    kinds.append(1)
    ids[s, :len(row)] = row
    kind[s, :len(row)] = kinds
  assert len(ms) <= k
  f = {"token_ids": ids, "input_mask": (kind > 0).astype(np.int32), "token_kind": kind}
  begin_l, end_l = np.zeros([n, l], np.int32), np.zeros([n, l], np.int32)
  ent_l = np.zeros([n, l], np.int64)
  for s, b, e, ent in ms:
    begin_l[s, b], end_l[s, e], ent_l[s, b] = 1, 1, ent
  f.update(mention_begin_labels=begin_l, mention_end_labels=end_l, mention_entity_begin=ent_l)
  pad = lambda col: np.array([m[col] for m in ms] + [0] * (k - len(ms)), np.int32)
  f.update(mentions_segment=pad(0), mentions_begin=pad(1), mentions_end=pad(2),
           mentions_entity_id=pad(3),
           mentions_mask=np.array([1] * len(ms) + [0] * (k - len(ms)), np.int32),
           mentions_dropped=np.int32(0))
  return f


def _stack(packs):
  return {key: np.stack([p[key] for p in packs]) for key in packs[0]}


def _run(packs, cfg=CFG, seed=7, drop=()):
  """Masks every pack inside tf.data .map (pack_index = position) and returns numpy arrays."""
  data = {k: v for k, v in _stack(packs).items() if k not in drop}
  ds = tf.data.Dataset.from_tensor_slices(data).enumerate().map(
      lambda i, x: masking.mask_segments(x, cfg, seed, TABLE, pack_index=i))
  out = next(iter(ds.batch(len(packs))))
  return data, {k: v.numpy() for k, v in out.items()}


def _masked_map(out):
  """Bool [B, N, L] of the positions listed (weight 1) in masked_positions."""
  b, n, _ = out["masked_positions"].shape
  m = np.zeros(out["token_ids"].shape, bool)
  bi, ni, pi = np.nonzero(out["masked_weights"] > 0)
  m[bi, ni, out["masked_positions"][bi, ni, pi]] = True
  return m


def _word_ids(ids, kind):
  """Word index per token, as the masking defines words (ctx boundaries + starts table)."""
  ctx = kind == records.TOKEN_KIND_CONTEXT
  prev = np.pad(ctx[..., :-1], [(0, 0)] * (ctx.ndim - 1) + [(1, 0)])
  start = ~ctx | ~prev | STARTS[ids]
  return np.cumsum(start, axis=-1)


@pytest.fixture(scope="module")
def many():
  rng = np.random.default_rng(0)
  packs = [_pack(rng) for _ in range(200)]
  return _run(packs)


@pytest.mark.slow
def test_invariants(many):
  data, out = many
  ids, kind = data["token_ids"], data["token_kind"]
  masked = _masked_map(out)
  w = out["masked_weights"]
  assert out["masked_positions"].shape == (200, N, L) and out["masked_overflow"].sum() == 0
  assert not (masked & (kind != records.TOKEN_KIND_CONTEXT)).any()  # never special/q/pad
  # masked_ids are the originals at masked_positions; padding slots: weight 0, position/id 0.
  orig = np.take_along_axis(ids, out["masked_positions"], axis=-1)
  np.testing.assert_array_equal(out["masked_ids"][w > 0], orig[w > 0])
  assert (out["masked_positions"][w == 0] == 0).all() and (out["masked_ids"][w == 0] == 0).all()
  assert (out["masked_is_entity"][w == 0] == 0).all()
  # Slots are packed first, positions increasing, weights a prefix of ones.
  assert (np.diff(w, axis=-1) <= 0).all()
  pos = np.where(w > 0, out["masked_positions"], L + np.arange(L))
  assert (np.diff(pos, axis=-1) > 0).all()
  # Tokens change only at masked positions.
  assert not ((out["token_ids"] != ids) & ~masked).any()


@pytest.mark.slow
def test_rates_whole_mentions_and_words(many):
  data, out = many
  ids, kind = data["token_ids"], data["token_kind"]
  masked = _masked_map(out)
  mention_tok = np.zeros_like(masked)
  full = []
  for b in range(len(ids)):
    for s, mb, me, ok in zip(data["mentions_segment"][b], data["mentions_begin"][b],
                             data["mentions_end"][b], data["mentions_mask"][b]):
      if ok:
        span = masked[b, s, mb:me + 1]
        assert span.all() or not span.any(), "mention partially masked"
        full.append(span.all())
        mention_tok[b, s, mb:me + 1] = True
  assert len(full) > 5000
  assert abs(np.mean(full) - 0.25) < 0.03, np.mean(full)
  # masked_is_entity marks exactly the masked mention tokens.
  ent = np.take_along_axis(mention_tok, out["masked_positions"], -1) & (out["masked_weights"] > 0)
  np.testing.assert_array_equal(out["masked_is_entity"] > 0, ent)
  other = (kind == records.TOKEN_KIND_CONTEXT) & ~mention_tok
  rate = masked[other].mean()
  assert abs(rate - 0.15) < 0.02, rate
  # Whole words: every word touched by a non-mention mask is entirely masked.
  words = _word_ids(ids, kind)
  for b in range(0, len(ids), 10):
    for s in range(N):
      hit = set(words[b, s][masked[b, s] & other[b, s]])
      for wd in hit:
        assert masked[b, s][words[b, s] == wd].all()
  # Some spans are longer than one word (up to max_span_words).
  multi = 0
  for b in range(0, len(ids), 10):
    for s in range(N):
      run = 0
      prev_w = -1
      for t in range(L):
        if masked[b, s, t] and other[b, s, t]:
          if words[b, s, t] != prev_w:
            run += 1
            prev_w = words[b, s, t]
            multi += run >= 2
        else:
          run = 0
  assert multi > 0


@pytest.mark.slow
def test_replacement_proportions(many):
  data, out = many
  masked = _masked_map(out)
  orig, new = data["token_ids"][masked], out["token_ids"][masked]
  assert len(orig) > 20000
  to_mask = np.mean(new == MASK)
  kept = np.mean(new == orig)
  rand = 1.0 - to_mask - kept
  assert abs(to_mask - 0.8) < 0.03 and abs(kept - 0.1) < 0.03 and abs(rand - 0.1) < 0.03
  assert ((new >= 0) & (new < V)).all()


@pytest.mark.slow
def test_deterministic_and_seeded():
  rng = np.random.default_rng(1)
  f = {k: tf.constant(v) for k, v in _pack(rng).items()}
  a = masking.mask_segments(f, CFG, 3, TABLE)
  b = masking.mask_segments(f, CFG, 3, TABLE)
  c = masking.mask_segments(f, CFG, 4, TABLE)
  d = masking.mask_segments(f, CFG, 3, TABLE, pack_index=5)
  for key in ("token_ids", "masked_positions", "masked_ids", "masked_weights",
              "masked_is_entity"):
    np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
  assert not np.array_equal(a["masked_positions"].numpy(), c["masked_positions"].numpy())
  assert not np.array_equal(a["masked_positions"].numpy(), d["masked_positions"].numpy())
  # Same result under tf.function (with static output shapes) and in tf.data.
  spec = {k: tf.TensorSpec(v.shape, v.dtype) for k, v in f.items()}
  fn = tf.function(lambda x: masking.mask_segments(x, CFG, 3, TABLE), input_signature=[spec],
                   jit_compile=False)
  concrete = fn.get_concrete_function()
  assert concrete.structured_outputs["masked_positions"].shape.as_list() == [N, L]
  assert concrete.structured_outputs["masked_overflow"].shape.rank == 0
  e = fn(f)
  ds = tf.data.Dataset.from_tensors(f).map(lambda x: masking.mask_segments(x, CFG, 3, TABLE))
  assert ds.element_spec["masked_weights"].shape.as_list() == [N, L]
  g = next(iter(ds))
  for key in ("token_ids", "masked_positions", "masked_ids"):
    np.testing.assert_array_equal(a[key].numpy(), e[key].numpy())
    np.testing.assert_array_equal(a[key].numpy(), g[key].numpy())


@pytest.mark.slow
def test_cap_keeps_first_positions_and_counts_overflow():
  rng = np.random.default_rng(2)
  packs = [_pack(rng) for _ in range(4)]
  _, full = _run(packs)
  small = masking.MaskingConfig(mask_token_id=MASK, vocab_size=V, max_predictions=5)
  _, cut = _run(packs, small)
  assert cut["masked_positions"].shape == (4, N, 5)
  count = full["masked_weights"].sum(-1)
  np.testing.assert_array_equal(cut["masked_weights"].sum(-1), np.minimum(count, 5))
  np.testing.assert_array_equal(cut["masked_positions"], full["masked_positions"][..., :5])
  np.testing.assert_array_equal(cut["masked_overflow"], np.maximum(count - 5, 0).sum(1))
  # Default P = ceil(0.2 * L).
  dflt = masking.MaskingConfig(mask_token_id=MASK, vocab_size=V)
  _, d = _run(packs[:1], dflt)
  assert d["masked_positions"].shape == (1, N, 26)


@pytest.mark.slow
def test_label_map_path_and_whole_entity():
  rng = np.random.default_rng(3)
  packs = [_pack(rng) for _ in range(40)]
  # Without the static mentions_* features the label maps give the same mentions.
  data, out = _run(packs, drop=STATIC_KEYS)
  masked = _masked_map(out)
  full = []
  for b, p in enumerate(packs):
    for s, mb, me, ok in zip(p["mentions_segment"], p["mentions_begin"], p["mentions_end"],
                             p["mentions_mask"]):
      if ok:
        span = masked[b, s, mb:me + 1]
        assert span.all() or not span.any()
        full.append(span.all())
  assert abs(np.mean(full) - 0.25) < 0.06
  # whole_entity: all mentions of one entity in a segment share their fate.
  cfg = masking.MaskingConfig(mask_token_id=MASK, vocab_size=V, max_predictions=L,
                              whole_entity=True)
  for drop in ((), STATIC_KEYS):
    _, out = _run(packs, cfg, drop=drop)
    masked = _masked_map(out)
    fate = {}
    for b, p in enumerate(packs):
      for s, mb, me, ent, ok in zip(p["mentions_segment"], p["mentions_begin"],
                                    p["mentions_end"], p["mentions_entity_id"],
                                    p["mentions_mask"]):
        if ok:
          fate.setdefault((b, s, ent), set()).add(bool(masked[b, s, mb:me + 1].all()))
    assert all(len(v) == 1 for v in fate.values())
    assert sum(len(v) for v in fate.values()) < len(full)  # some entities repeat
    assert 0.15 < np.mean([v.pop() for v in fate.values()]) < 0.35


def test_no_mentions_and_word_start_feature():
  rng = np.random.default_rng(4)
  p = _pack(rng)
  keep = ("token_ids", "input_mask", "token_kind")
  f = {k: tf.constant(p[k]) for k in keep}
  f["word_start"] = tf.constant(STARTS[p["token_ids"]].astype(np.int32))
  a = masking.mask_segments(f, CFG, 0)  # records' word_start instead of a table
  b = masking.mask_segments(f, CFG, 0, TABLE)
  np.testing.assert_array_equal(a["masked_positions"].numpy(), b["masked_positions"].numpy())
  assert a["masked_is_entity"].numpy().sum() == 0 and a["masked_weights"].numpy().sum() > 0
  del f["word_start"]
  with pytest.raises(ValueError, match="starts_word"):
    masking.mask_segments(f, CFG, 0)


def test_starts_word_table():
  t = masking.starts_word_table(["\u0120the", "the", None, "<s>", "\u0120"])
  assert t.numpy().tolist() == [True, False, False, False, True]


@pytest.mark.parametrize("kwargs", [
    dict(mask_token_id=V, vocab_size=V), dict(mask_token_id=3, vocab_size=0),
    dict(mask_token_id=3, vocab_size=V, mention_rate=1.5),
    dict(mask_token_id=3, vocab_size=V, token_rate=-0.1),
    dict(mask_token_id=3, vocab_size=V, replace_mask=0.8, replace_random=0.3),
    dict(mask_token_id=3, vocab_size=V, max_span_words=0),
    dict(mask_token_id=3, vocab_size=V, max_predictions=0),
    dict(mask_token_id=3, vocab_size=V, max_predictions=2.5),
    dict(mask_token_id=True, vocab_size=V),
])
def test_config_validation(kwargs):
  with pytest.raises(ValueError):
    masking.MaskingConfig(**kwargs)
