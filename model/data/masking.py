"""Masked-LM input masking for ReadTwice pre-training: whole entity mentions + whole-word spans.

``mask_segments`` works on one parsed pack (``model.data.pack_reader.parse_pack``: token features
``[N, L]``) with pure TF ops and static output shapes, so it runs inside ``tf.data`` ``.map``
and under ``tf.function``.  Per segment (row):

1. **Entity mentions.**  Every mention is selected with probability ``mention_rate``; a selected
   mention masks all of its (context) tokens.  Mentions come from the static ``mentions_*``
   features (``parse_pack(..., max_mentions=K)``: exact, overlapping mentions fine) when present,
   else from the ``mention_begin_labels``/``mention_end_labels`` maps (a begin is paired with the
   first end at or after it, so that path assumes non-nested mentions).  With
   ``whole_entity=True`` the draw is per (segment, entity id): every mention of a known entity
   (id != 0) in the segment is masked together (unknown-entity mentions are drawn one by one).
2. **Whole-word spans.**  The *eligible* tokens are the context tokens of words that hold only
   context tokens and no mention token (any mention, selected or not: a mention is never
   partially masked and a word is never partially masked).  The words of the row are cut into
   consecutive chunks of ``U{1..max_span_words}`` words; chunks are taken in a random order
   while the running count of their eligible tokens stays <= ``b = token_rate * #eligible``;
   the chunk that crosses ``b`` is taken with probability ``(b - count before it) / its count``,
   so the expected number of span-masked tokens is exactly ``b`` (no rounding) and the overshoot
   or undershoot is below one chunk.  A chunk interrupted by an ineligible word (a mention, a
   special token) masks only its eligible words: two shorter spans, each still whole words.
3. **Cap.**  At most ``max_predictions`` (P) positions per row are kept, the first ones in
   token order; the dropped ones are left unchanged and counted in ``masked_overflow``.
4. **80/10/10.**  A kept position becomes ``mask_token_id`` with probability ``replace_mask``, a
   uniform random id in ``[0, vocab_size)`` with probability ``replace_random``, else stays.

Special, question and padding tokens (``token_kind`` != ``TOKEN_KIND_CONTEXT``) are never masked.

Word starts: the records' tokenizer is GPT-2 byte-level BPE, where a token starts a word when
its string begins with the ``Ġ`` space marker.  The function takes that as a boolean vocabulary
table ``starts_word[V]`` (``tf.constant``), so it stays tokenizer-agnostic; see
:func:`starts_word_table`.  Without a table the records' own ``word_start`` feature is used.  In
either case a context token that follows a non-context token (the first context token after
``[SEP]``) starts a word, and every non-context token is a word of its own.

Randomness: every random op is ``tf.random.stateless_*``, seeded from the ``[2]`` seed
``(seed, pack_index)`` when ``pack_index`` is given, else ``(seed, farmhash64(token_ids))``.
The hash variant needs no extra input but masks an identical pack identically every time it is
seen (e.g. every epoch); to draw new masks per epoch pass a running index
(``ds.repeat().enumerate().map(lambda i, x: mask_segments(x, cfg, seed, table, pack_index=i))``)
or vary ``seed`` per epoch.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Union

import tensorflow as tf

from model.configs import MaskingConfig
from model.network.layers.memory import span_coverage
from schemas import records

_MENTION_STATIC_KEYS = ("mentions_segment", "mentions_begin", "mentions_end", "mentions_mask")


def starts_word_table(tokens: Iterable[Optional[str]], marker: str = "\u0120") -> tf.Tensor:
  """Bool ``[V]`` table for ``mask_segments``: token id i starts a word iff its string begins
  with ``marker`` (GPT-2 byte-level BPE ``Ġ``; e.g. ``[tok.id_to_token(i) for i in range(V)]``).
  Missing tokens (None) do not start words."""
  return tf.constant([bool(t) and t.startswith(marker) for t in tokens], dtype=tf.bool)


def pack_seed(seed: Union[int, tf.Tensor], token_ids: tf.Tensor,
              pack_index: Optional[Union[int, tf.Tensor]] = None) -> tf.Tensor:
  """The int64 ``[2]`` stateless seed of one pack: ``(seed, pack_index)`` or, without an
  index, ``(seed, farmhash64 of token_ids)``."""
  seed = tf.cast(tf.reshape(seed, []), tf.int64)
  if pack_index is None:
    fp = tf.fingerprint(tf.reshape(tf.cast(token_ids, tf.int64), [1, -1]))  # uint8 [1, 8]
    salt = tf.bitcast(fp[0], tf.int64)
  else:
    salt = tf.cast(tf.reshape(pack_index, []), tf.int64)
  return tf.stack([seed, salt])


def _label_mentions(features: Dict[str, tf.Tensor], n: tf.Tensor, l: tf.Tensor):
  """Per-row mentions ``[N, L]`` (one slot per position) from the begin/end label maps."""
  begins = tf.cast(features["mention_begin_labels"], tf.int32) > 0
  ends = tf.cast(features["mention_end_labels"], tf.int32)
  ends = tf.cast(ends > 0, tf.int32)
  ends_cum = tf.cumsum(ends, axis=1)  # ends at or before q
  before = ends_cum - ends  # ends strictly before p
  # first q with ends_cum[q] >= before[p] + 1: the first end at or after p.
  end_pos = tf.searchsorted(ends_cum, before + 1, side="left", out_type=tf.int32)
  pos = tf.broadcast_to(tf.range(l)[tf.newaxis], [n, l])
  valid = begins & (end_pos < l)
  if "mention_entity_begin" in features:
    ent = tf.cast(features["mention_entity_begin"], tf.int64)
  else:
    ent = tf.zeros([n, l], tf.int64)
  return pos, tf.minimum(end_pos, l - 1), ent, valid


def _static_mentions(features: Dict[str, tf.Tensor], n: tf.Tensor):
  """Per-row mentions ``[N, K]`` from the static ``mentions_*`` features."""
  seg = tf.cast(features["mentions_segment"], tf.int32)
  k = tf.shape(seg)[0]
  mask = tf.cast(features["mentions_mask"], tf.int32) > 0
  valid = mask[tf.newaxis] & tf.equal(seg[tf.newaxis], tf.range(n)[:, tf.newaxis])
  shape = [n, k]
  begin = tf.broadcast_to(tf.cast(features["mentions_begin"], tf.int32)[tf.newaxis], shape)
  end = tf.broadcast_to(tf.cast(features["mentions_end"], tf.int32)[tf.newaxis], shape)
  if "mentions_entity_id" in features:
    ent = tf.cast(features["mentions_entity_id"], tf.int64)
  else:
    ent = tf.zeros([k], tf.int64)
  return begin, end, tf.broadcast_to(ent[tf.newaxis], shape), valid


def _coverage(begin: tf.Tensor, end: tf.Tensor, flags: tf.Tensor, l: tf.Tensor) -> tf.Tensor:
  """Bool ``[N, L]``: positions inside any mention ``m`` (``[N, M]`` spans of row ``n``) with
  ``flags[n, m]``."""
  n = tf.shape(begin)[0]
  row = tf.broadcast_to(tf.range(n)[:, tf.newaxis], tf.shape(begin))
  return span_coverage(row, begin, end, flags, n, l)


def _select_mentions(begin, end, ent, valid, rate: float, whole_entity: bool,
                     seed: tf.Tensor) -> tf.Tensor:
  """Bool ``[N, M]``: which mentions are masked."""
  u = tf.random.stateless_uniform(tf.shape(valid), seed)
  if whole_entity:
    m = tf.shape(valid)[1]
    same = (valid[:, :, tf.newaxis] & valid[:, tf.newaxis, :] &
            tf.equal(ent[:, :, tf.newaxis], ent[:, tf.newaxis, :]) &
            tf.not_equal(ent, 0)[:, :, tf.newaxis])
    same = same | tf.eye(m, dtype=tf.bool)[tf.newaxis]
    idx = tf.range(m)[tf.newaxis, tf.newaxis]
    leader = tf.reduce_min(tf.where(same, idx, m), axis=2)  # first mention of the entity
    u = tf.gather(u, leader, batch_dims=1)
  return valid & (u < rate)


def _span_mask(word_start: tf.Tensor, eligible: tf.Tensor, config: MaskingConfig,
               seeds: tf.Tensor) -> tf.Tensor:
  """Bool ``[N, L]``: eligible tokens chosen in whole-word spans (see the module docstring)."""
  n, l = tf.shape(word_start)[0], tf.shape(word_start)[1]
  flat = lambda x, ids: tf.reshape(
      tf.math.unsorted_segment_sum(tf.reshape(x, [-1]), tf.reshape(ids, [-1]), n * l), [n, l])
  row = tf.range(n)[:, tf.newaxis] * l
  word = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1  # [N, L] in [0, L)
  word = tf.maximum(word, 0)
  ones = tf.ones([n, l], tf.int32)
  word_tokens = flat(ones, row + word)
  word_eligible_tokens = flat(tf.cast(eligible, tf.int32), row + word)
  word_ok = tf.equal(word_tokens, word_eligible_tokens) & (word_tokens > 0)  # [N, words]
  word_count = tf.where(word_ok, word_tokens, 0)
  token_ok = tf.gather(word_ok, word, batch_dims=1)  # eligible token of an eligible word
  budget = config.token_rate * tf.cast(tf.reduce_sum(word_count, axis=1), tf.float32)  # [N]

  # Chunks of U{1..K} consecutive words: chunk c covers words [ends[c-1], ends[c]).
  lengths = tf.random.stateless_uniform([n, l], seeds[0], minval=1,
                                        maxval=config.max_span_words + 1, dtype=tf.int32)
  ends = tf.cumsum(lengths, axis=1)
  chunk_of_word = tf.searchsorted(ends, tf.broadcast_to(tf.range(l)[tf.newaxis], [n, l]),
                                  side="right", out_type=tf.int32)  # [N, words] in [0, L)
  chunk_count = flat(word_count, row + chunk_of_word)  # [N, chunks]
  # Random chunk order; chunks with nothing eligible go last (they add nothing anyway).
  score = tf.random.stateless_uniform([n, l], seeds[1])
  score = tf.where(chunk_count > 0, score, 2.0)
  order = tf.argsort(score, axis=1, stable=True)
  count_sorted = tf.cast(tf.gather(chunk_count, order, batch_dims=1), tf.float32)
  incl = tf.cumsum(count_sorted, axis=1)
  excl = incl - count_sorted
  b = budget[:, tf.newaxis]
  crossing = (excl < b) & (incl > b)
  p_cross = (b - excl) / tf.maximum(count_sorted, 1.0)
  coin = tf.random.stateless_uniform([n, 1], seeds[2])
  take_sorted = (incl <= b) | (crossing & (coin < p_cross))
  # Back to chunk order: chunk order[n, i] has take_sorted[n, i].
  take = tf.cast(flat(tf.cast(take_sorted, tf.int32), row + order), tf.bool)
  word_take = tf.gather(take, chunk_of_word, batch_dims=1)  # [N, words]
  return token_ok & tf.gather(word_take, word, batch_dims=1)


def mask_segments(features: Dict[str, tf.Tensor], config: MaskingConfig,
                  seed: Union[int, tf.Tensor], starts_word: Optional[tf.Tensor] = None,
                  pack_index: Optional[Union[int, tf.Tensor]] = None) -> Dict[str, tf.Tensor]:
  """Masks one pack for the masked-LM objective (see the module docstring).

  Args:
    features: One parsed pack (``token_ids``, ``token_kind`` ``[N, L]``; mentions from
      ``mentions_*`` or ``mention_begin_labels``/``mention_end_labels``; none: no mentions).
    config: The ``MaskingConfig``.
    seed: Int (or int scalar tensor) base seed.
    starts_word: Bool ``[V]`` table, True for the ids of word-starting tokens; None: the
      features' ``word_start``.
    pack_index: Optional int scalar mixed into the seed instead of a hash of ``token_ids``.

  Returns:
    A new dict: ``features`` with ``token_ids`` replaced (same dtype) plus ``masked_positions``
    int32 ``[N, P]`` (0-padded), ``masked_ids`` int32 ``[N, P]`` (original ids),
    ``masked_weights`` float32 ``[N, P]`` (1 real, 0 padding), ``masked_is_entity`` float32
    ``[N, P]`` (1 at positions of masked mentions) and ``masked_overflow`` int32 scalar
    (selected positions dropped by the ``max_predictions`` cap, summed over the pack).
  """
  token_ids = features["token_ids"]
  static_l = token_ids.shape[-1]
  if token_ids.shape.rank != 2 or static_l is None:
    raise ValueError(f"token_ids must be [N, L] with a static L, got {token_ids.shape}.")
  p = config.predictions_for(int(static_l))
  ids = tf.cast(token_ids, tf.int32)
  n, l = tf.shape(ids)[0], tf.shape(ids)[1]
  seeds = tf.random.experimental.stateless_split(pack_seed(seed, ids, pack_index), num=6)

  context = tf.equal(tf.cast(features["token_kind"], tf.int32), records.TOKEN_KIND_CONTEXT)
  if starts_word is not None:
    table = tf.convert_to_tensor(starts_word, tf.bool)
    starts = tf.gather(table, tf.clip_by_value(ids, 0, tf.shape(table)[0] - 1))
  elif "word_start" in features:
    starts = tf.cast(features["word_start"], tf.int32) > 0
  else:
    raise ValueError("mask_segments needs a starts_word table or a word_start feature.")
  prev_context = tf.pad(context[:, :-1], [[0, 0], [1, 0]])
  word_start = ~context | ~prev_context | starts

  # 1. Entity mentions.
  any_mention = tf.zeros([n, l], tf.bool)
  have_labels = "mention_begin_labels" in features and "mention_end_labels" in features
  if have_labels:
    label_m = _label_mentions(features, n, l)
    any_mention |= _coverage(label_m[0], label_m[1], label_m[3], l)
  if all(k in features for k in _MENTION_STATIC_KEYS):
    mentions = _static_mentions(features, n)
    any_mention |= _coverage(mentions[0], mentions[1], mentions[3], l)
  elif have_labels:
    mentions = label_m
  else:
    mentions = None
  if mentions is not None:
    chosen = _select_mentions(*mentions, config.mention_rate, config.whole_entity, seeds[0])
    entity = _coverage(mentions[0], mentions[1], chosen, l) & context
  else:
    entity = tf.zeros([n, l], tf.bool)

  # 2. Whole-word spans over eligible non-mention context tokens.
  spans = _span_mask(word_start, context & ~any_mention, config, seeds[1:4])
  selected = (entity | spans) & context

  # 3. Cap: the first P selected positions of each row.
  sel = tf.cast(selected, tf.int32)
  rank = tf.cumsum(sel, axis=1, exclusive=True)
  keep = selected & (rank < p)
  overflow = tf.reduce_sum(sel) - tf.reduce_sum(tf.cast(keep, tf.int32))
  # Scattered into [N, P] by (row, rank): work in proportion to the kept positions.
  where = tf.where(keep)  # [K, 2]: (row, position)
  target = tf.stack([tf.cast(where[:, 0], tf.int32), tf.gather_nd(rank, where)], axis=1)
  shape = tf.stack([tf.shape(keep)[0], tf.constant(p)])
  masked_positions = tf.scatter_nd(target, tf.cast(where[:, 1], tf.int32), shape)
  masked_weights = tf.scatter_nd(target, tf.ones([tf.shape(where)[0]], tf.float32), shape)
  masked_ids = tf.scatter_nd(target, tf.cast(tf.gather_nd(ids, where), tf.int32), shape)
  masked_is_entity = tf.scatter_nd(target, tf.cast(tf.gather_nd(entity, where), tf.float32),
                                   shape)
  static = [keep.shape[0], p]
  masked_positions, masked_weights, masked_ids, masked_is_entity = (
      tf.ensure_shape(t, static) for t in (masked_positions, masked_weights, masked_ids,
                                          masked_is_entity))

  # 4. 80/10/10 replacement of the kept positions.
  u = tf.random.stateless_uniform([n, l], seeds[4])
  random_ids = tf.random.stateless_uniform([n, l], seeds[5], minval=0,
                                           maxval=config.vocab_size, dtype=tf.int32)
  new_ids = tf.where(u < config.replace_mask, config.mask_token_id,
                     tf.where(u < config.replace_mask + config.replace_random, random_ids, ids))
  new_ids = tf.where(keep, new_ids, ids)

  out = dict(features)
  out["token_ids"] = tf.cast(new_ids, token_ids.dtype)
  out["masked_positions"] = masked_positions
  out["masked_ids"] = masked_ids
  out["masked_weights"] = masked_weights
  out["masked_is_entity"] = masked_is_entity
  out["masked_overflow"] = tf.cast(overflow, tf.int32)
  return out
