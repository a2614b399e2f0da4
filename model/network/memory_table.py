"""The memory table that a pack's tokens read: one definition of its fields.

A table is a dict of tensors with one row per memory, ``M`` rows:

* ``memories``: float ``[M, H]``, the memory vectors;
* ``document``: int32 ``[M]``, the pack's document (or, for external rows, book) index of the
  memory's segment, -1 for none;
* ``position``: int32 ``[M]``, the segment's index in its document (its global index in a
  split book);
* ``mask``: int32 ``[M]``, 1 for a real memory;
* ``entity_id``: int32 ``[M]``, the mention's entity (0: none or unknown).

:meth:`model.network.readtwice.ReadTwiceModel.first_pass` makes a pack's own rows and
``readtwice.gather_memories`` joins the replicas'.  External rows -- a whole book's memories from
other packs (:mod:`model.network.book_memory`) -- come in as pack features named
``external_<field>`` (:data:`EXTERNAL_KEYS`) and are appended by :func:`with_external`.
"""

from __future__ import annotations

from typing import Dict, Mapping

import tensorflow as tf

FIELDS = ("memories", "document", "position", "mask", "entity_id")
EXTERNAL_PREFIX = "external_"
# The pack features of an external table, in FIELDS order.
EXTERNAL_KEYS = tuple(EXTERNAL_PREFIX + f for f in FIELDS)


def has_external(inputs: Mapping[str, tf.Tensor]) -> bool:
  return EXTERNAL_KEYS[0] in inputs


def with_external(table: Mapping[str, tf.Tensor], inputs: Mapping[str, tf.Tensor]
                  ) -> Dict[str, tf.Tensor]:
  """``table`` (the pack's gathered memories) followed by the inputs' external table, which
  carries no gradient."""
  out = {}
  for field, key in zip(FIELDS, EXTERNAL_KEYS):
    ext = tf.cast(inputs[key], table[field].dtype)
    if field == "memories":
      ext = tf.stop_gradient(ext)
    out[field] = tf.concat([table[field], ext], axis=0)
  return out
