"""Packs whole (sub-)documents into records of ``segments_per_pack`` segments.

Why packing lives in the pipeline and not in the trainer's tf.data input:

* The model needs every segment of a document in the same global batch (memories are gathered
  over all segments of a document, across replicas).  Packing whole documents into fixed
  ``[N, L]`` records gives the trainer static shapes (XLA/TPU) and a trivial input pipeline:
  one record = one global batch, shuffled freely at record level without breaking documents.
* Bin packing is a global, stateful operation; in tf.data it would need a stateful ``scan`` per
  host, would differ between hosts and restarts, and would run again every epoch.  Done once in
  Beam it is deterministic (same input -> same bytes), inspectable, and costs nothing at training.
* The price: N is fixed when the data are written (the manifest records it).  A trainer that
  wants a smaller per-replica batch splits a pack over replicas; a different N means re-running
  the pipeline, which is cheap relative to training.

Packing is first-fit decreasing on segment counts, inside each shard, with ties broken by key, so
it depends only on the shard's content.  Padding segments have ``segment_mask`` 0,
``document_index`` -1, PAD tokens and ``input_mask`` 0.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from schemas import example_proto, records
from pipelines.beam import spill
from pipelines.beam.stats import REPORT_PREFIX, ValueCounts
from pipelines.text.segmenter import (SEGMENT_FEATURES, TOKEN_FEATURES, SubDocument,
                                      empty_token_features, entity_ids, lay_out,
                                      sub_document_key)

DTYPES = {f.name: f.dtype for f in records.FEATURES}


def plan_packs(sizes: Sequence[Tuple[str, int]], capacity: int) -> List[List[int]]:
  """First-fit decreasing; returns lists of indices into ``sizes`` (key, num_segments)."""
  order = sorted(range(len(sizes)), key=lambda i: (-sizes[i][1], sizes[i][0]))
  bins: List[List[int]] = []
  free: List[int] = []
  for i in order:
    n = sizes[i][1]
    if n > capacity:
      raise ValueError(f"{sizes[i][0]!r} has {n} segments, more than a pack holds ({capacity}).")
    for b, room in enumerate(free):
      if room >= n:
        bins[b].append(i)
        free[b] -= n
        break
    else:
      bins.append([i])
      free.append(capacity - n)
  return [sorted(b, key=lambda i: sizes[i][0]) for b in bins]


def pack_features(docs: Sequence[SubDocument], segments_per_pack: int, seq_length: int,
                  pad_id: int, pack_id: str,
                  entity_table: Optional[Mapping[str, int]] = None) -> Dict[str, np.ndarray | list]:
  """The record's features for documents laid out in order, then padding segments.

  ``entity_table``: entity key -> id, for documents whose mentions carry entity keys
  (:attr:`SubDocument.entity_keys`; unknown keys get id 0)."""
  N, L = segments_per_pack, seq_length
  used = sum(d.num_segments for d in docs)
  if used > N:
    raise ValueError(f"pack {pack_id} needs {used} segments > {N}")
  pad = N - used
  feats: Dict[str, np.ndarray | list] = dict(empty_token_features(N, L, pad_id))
  lay_out(docs, feats, 0)
  for name in TOKEN_FEATURES:
    feats[name] = feats[name].reshape(-1)
  pad_segment = {"answer_type": records.ANSWER_TYPE_NONE, "supporting": -1}
  for name in SEGMENT_FEATURES:
    parts = [d.segments[name] for d in docs]
    parts.append(np.full(pad, pad_segment.get(name, 0), dtype=np.int64))
    feats[name] = np.concatenate(parts)

  def per_segment(fn, fill):
    return [fn(i, d) for i, d in enumerate(docs) for _ in range(d.num_segments)] + [fill] * pad

  feats["segment_mask"] = np.array([1] * used + [0] * pad, dtype=np.int64)
  feats["document_index"] = np.array(per_segment(lambda i, d: i, -1), dtype=np.int64)
  feats["document_id"] = per_segment(lambda i, d: d.document_id.encode("utf-8"), b"")
  feats["question_id"] = per_segment(lambda i, d: d.question_id.encode("utf-8"), b"")
  feats["sub_document_index"] = np.array(per_segment(lambda i, d: d.sub_document_index, 0))
  feats["num_sub_documents"] = np.array(per_segment(lambda i, d: d.num_sub_documents, 0))

  offsets = np.cumsum([0] + [d.num_segments for d in docs])[:-1]
  answers = [d.answers + np.array([o, 0, 0]) for d, o in zip(docs, offsets)]
  mentions = []
  for d, o in zip(docs, offsets):
    m = d.mentions + np.array([o, 0, 0, 0])
    if d.entity_keys and len(m):
      m[:, 3] = entity_ids(d.entity_keys, entity_table)[d.mentions[:, 3]]
    mentions.append(m)
  answers = np.concatenate(answers or [np.zeros((0, 3), np.int64)]).reshape(-1, 3)
  mentions = np.concatenate(mentions or [np.zeros((0, 4), np.int64)]).reshape(-1, 4)
  for j, name in enumerate(("answer_segment", "answer_begin", "answer_end")):
    feats[name] = answers[:, j]
  for j, name in enumerate(("mention_segment", "mention_begin", "mention_end",
                            "mention_entity_id")):
    feats[name] = mentions[:, j]
  feats["schema_version"] = [records.SCHEMA_VERSION.encode()]
  feats["pack_id"] = [pack_id.encode()]
  return feats


def serialize_pack(feats: Dict[str, np.ndarray | list]) -> bytes:
  return example_proto.encode_example(feats, DTYPES)


class SpilledPackEncoder:
  """``writer.ShardEncoder`` for ``(document id, spill.Entry)`` items: packs the shard's
  spilled sub-documents exactly as :class:`PackEncoder` would, reading them back a few packs at
  a time.

  The packs are planned from the entries alone (each entry knows its sub-documents' segment
  counts, and a sub-document's key follows from the document and question ids), so the
  payloads of only ``packs_per_read`` packs (~``packs_per_read`` x 128 segments of compact
  sub-documents, a few MB) are in memory at once, whatever the shard's size.
  """

  def __init__(self, segments_per_pack: int, seq_length: int, pad_id: int,
               packs_per_read: int = 16):
    self._encoder = PackEncoder(segments_per_pack, seq_length, pad_id)
    self._packs_per_read = packs_per_read

  def __call__(self, shard: int, items: List[Tuple[str, spill.Entry]],
               entity_table: Optional[Mapping[str, int]] = None):
    """``entity_table`` (a side input of the writer, when the job builds one): entity key ->
    id for documents whose mentions carry keys."""
    subs = sorted((sub_document_key(e.id, e.question_id, k), n, e)
                  for _, e in items for k, n in enumerate(e.sub_segments))
    plan = plan_packs([(key, n) for key, n, _ in subs], self._encoder.segments_per_pack)
    stats = self._encoder.stats(plan, [n for _, n, _ in subs])

    def payloads():
      for first in range(0, len(plan), self._packs_per_read):
        group = plan[first:first + self._packs_per_read]
        entries = {subs[i][2] for members in group for i in members}
        data = spill.read({r for e in entries for r in (e.records, e.context) if r})
        contexts = {ref: spill.decode(data[ref]) for ref in {e.context for e in entries} if ref}
        by_key = {sub.key: sub.attached(contexts[e.context]) if e.context else sub
                  for e in entries for sub in spill.decode(data[e.records])}
        for j, members in enumerate(group, first):
          missing = [subs[i][0] for i in members if subs[i][0] not in by_key]
          if missing:
            raise ValueError(f"shard {shard}: spilled payloads lack sub-documents {missing[:3]}")
          yield self._encoder.encode(shard, j, [by_key[subs[i][0]] for i in members],
                                     entity_table)

    return payloads(), stats


def spilled_side_lines(shard: int, items: List[Tuple[str, spill.Entry]],
                       lines_per_read: int = 1024):
  """``writer.ShardEncoder`` for the documents side file: the spilled lines, in key order,
  read back ``lines_per_read`` at a time."""
  del shard

  def lines():
    for first in range(0, len(items), lines_per_read):
      chunk = items[first:first + lines_per_read]
      payloads = spill.read(e.side for _, e in chunk)
      yield from (payloads[e.side] for _, e in chunk)

  return lines(), {}


class PackEncoder:
  """``writer.ShardEncoder`` for sub-documents: plans packs and serialises them."""

  def __init__(self, segments_per_pack: int, seq_length: int, pad_id: int):
    self.segments_per_pack = segments_per_pack
    self.seq_length = seq_length
    self.pad_id = pad_id

  def stats(self, plan: List[List[int]], segments: Sequence[int]) -> Dict[str, Any]:
    """The shard's counts for the manifest, plus (for the stats report only) how many
    segments and sub-documents each pack holds."""
    total = sum(segments)
    return {"packs": len(plan), "segments": total, "sub_documents": len(segments),
            "padding_segments": len(plan) * self.segments_per_pack - total,
            REPORT_PREFIX + "segments_per_pack": ValueCounts.of(
                sum(segments[i] for i in b) for b in plan),
            REPORT_PREFIX + "sub_documents_per_pack": ValueCounts.of(len(b) for b in plan)}

  def encode(self, shard: int, j: int, docs: Sequence[SubDocument],
             entity_table: Optional[Mapping[str, int]] = None) -> bytes:
    """Pack ``j`` of ``shard``, serialised."""
    return serialize_pack(pack_features(docs, self.segments_per_pack, self.seq_length,
                                        self.pad_id, f"{shard:05d}-{j:06d}", entity_table))

  def __call__(self, shard: int, items: List[Tuple[str, SubDocument]]):
    plan = plan_packs([(k, d.num_segments) for k, d in items], self.segments_per_pack)
    stats = self.stats(plan, [d.num_segments for _, d in items])
    payloads = (self.encode(shard, j, [items[i][1] for i in members])
                for j, members in enumerate(plan))
    return payloads, stats
