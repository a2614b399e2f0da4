"""One pack (the global batch) split over the replicas of a ``tf.distribute`` strategy.

Replica ``r`` of ``R`` gets pack rows ``[r * N / R, (r + 1) * N / R)`` of every per-segment
feature (``[N, ...]``).  ``document_index`` is already global within the pack, so a document
whose segments land on several replicas is still one document: memories are all-gathered
(:func:`model.network.layers.memory_attention.gather_memories`) and the document-level losses are
normalised over all replicas (:mod:`model.training.losses`).  The pack-level mention lists
(``mentions_*``, ``[max_mentions]``, rows as pack row indices) are split by the row of their
segment and re-indexed to the replica's rows, keeping at most ``max_mentions // R`` per replica
(``mentions_dropped`` counts the rest, per replica).  The external memory table
(``external_*``, :mod:`model.network.book_memory`) is not per segment: every replica gets all of it.
"""

from __future__ import annotations

from typing import Dict, List

import tensorflow as tf

MENTION_KEYS = ("mentions_segment", "mentions_begin", "mentions_end", "mentions_entity_id")


def split_pack(features: Dict[str, tf.Tensor], num_replicas: int) -> List[Dict[str, tf.Tensor]]:
  """The per-replica feature dicts of one pack (static shapes; see the module docstring)."""
  n = features["token_ids"].shape[0]
  if n is None or n % num_replicas:
    raise ValueError(f"a pack of {n} segments does not split evenly over {num_replicas} "
                     f"replicas")
  rows = n // num_replicas
  per_segment = {k: v for k, v in features.items()
                 if v.shape.rank and v.shape[0] == n and not k.startswith("mentions_")
                 and not k.startswith("external_")}
  # Another pack's memories of the same books (model.network.book_memory): every replica reads all.
  shared = {k: v for k, v in features.items() if k.startswith("external_")}
  out = []
  for r in range(num_replicas):
    lo, hi = r * rows, (r + 1) * rows
    part = {k: v[lo:hi] for k, v in per_segment.items()}
    part.update(shared)
    if "mentions_mask" in features:
      cap_total = features["mentions_mask"].shape[0]
      cap = cap_total // num_replicas
      seg = tf.cast(features["mentions_segment"], tf.int32)
      mine = tf.logical_and(tf.cast(features["mentions_mask"], tf.bool),
                            tf.logical_and(seg >= lo, seg < hi))
      index = tf.reshape(tf.where(mine), [-1])
      kept = index[:cap]
      fill = cap - tf.shape(kept)[0]
      for k in MENTION_KEYS:
        v = tf.gather(tf.cast(features[k], tf.int32), kept)
        if k == "mentions_segment":
          v = v - lo
        part[k] = tf.ensure_shape(tf.pad(v, [[0, fill]]), [cap])
      part["mentions_mask"] = tf.ensure_shape(tf.pad(tf.ones_like(kept, tf.int32), [[0, fill]]),
                                              [cap])
      part["mentions_dropped"] = tf.shape(index)[0] - tf.shape(kept)[0]
    out.append(part)
  return out
