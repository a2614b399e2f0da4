"""Whole-book memory (``--memory_scope book``): every segment of a book reads the memories of
the whole book, across its explicit sub-documents and the packs that hold them.

A document longer than the pipeline's ``max_segments_per_document`` is written as explicit
sub-documents (``sub_document_index`` k of ``num_sub_documents``), each with its own
``document_index`` in its pack and ``segment_index`` restarting at 0; with the default
``--memory_scope sub_document`` they are separate documents for the model (the paper's
behaviour).  A *book* is all sub-documents with the same ``(document_id, question_id)``; the
segmenter cuts sub-document k at segments ``[k * S, (k + 1) * S)`` of the document
(``S = max_segments_per_document`` of the manifest), so the global position of a segment in its
book is ``k * S + segment_index``.

With ``--memory_scope book``:

1. :func:`book_scope` rewrites a pack's ``document_index`` to the pack's *book* index (the
   sub-documents of one book in one pack become one document: memories, the relative segment
   bias on global positions, and the document-level losses all see the book) and
   ``segment_index`` to the global position.  For a book whose sub-documents are all in one
   pack this is exactly the model's reading of the unsplit document: same logits, losses and
   gradients.
2. A book's sub-documents in *other* packs contribute their memories as an *external table*
   (``external_memories`` ``[E, H]`` and ``external_document`` / ``external_position`` /
   ``external_mask`` / ``external_entity_id`` ``[E]``, see :data:`EXTERNAL_KEYS`), appended to
   the pack's own (all-gathered) table without gradient
   (:meth:`model.network.readtwice.ReadTwiceModel.call`).  They come from a :class:`BookMemoryStore`
   filled by a first pass (:func:`fill_store`: BERT_1 and the memory extraction over every pack
   holding part of a book that spans several packs) with the same weights, so at prediction the
   logits equal the unsplit document's (the two passes cost one extra BERT_1 read of those
   packs).  In training the store is refilled every ``--book_memory_refresh`` steps from the
   current weights (memories older than that are stale by at most that many updates), and no
   gradient flows into another pack's memories: the one difference from reading the whole book
   in one batch.

Memory: the store holds, for every book spanning several packs, its memories (``[m, H]``
float32 plus four int32 per memory), so it grows linearly with the total length of those books
(CLS memories: one per segment; a 1,400-segment book at H 768 is ~4.3 MB; entity memories: one
per mention).  :class:`BookMemoryStore` reports its size (``nbytes``).  Pass 2 at prediction
reads the pack's table (its own memories + the external ones) in chunks of
:data:`MEMORY_CHUNK` memories (``MemoryAttention``'s chunked ``memory_chunk`` read), so its
attention scores are ``[N, heads, L, MEMORY_CHUNK]`` however long the book: what grows with the
book is the table (``M x H``), not the scores (``N x heads x L x M`` with the one-shot read).
Training reads the table in one shot (gradients), so its scores grow with the book's memories.
"""

from __future__ import annotations

import collections
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from model.network import memory_table

# Memories per chunk of pass 2's memory attention at prediction (``memory_chunk`` of
# model.network.layers.MemoryAttention): its scores are [N, heads, L, MEMORY_CHUNK] whatever the
# book's length, the size of one self-attention layer's scores at L = 512.
MEMORY_CHUNK = 512
EXTERNAL_KEYS = memory_table.EXTERNAL_KEYS
# The pack features that say which book and sub-document each segment belongs to.
BOOK_FEATURES = ("segment_mask", "document_index", "document_id", "question_id",
                 "sub_document_index", "num_sub_documents")
BookKey = Tuple[bytes, bytes]


def book_scope(features: Mapping[str, tf.Tensor], max_segments_per_document: int
               ) -> Dict[str, tf.Tensor]:
  """Pack features with ``document_index`` = the pack's book index (books numbered by first
  appearance, -1 for padding) and ``segment_index`` = the global position in the book
  (``sub_document_index * max_segments_per_document + segment_index``); other keys unchanged.

  Args:
    features: one pack's features: ``document_id``, ``question_id`` (bytes) and
      ``segment_mask``, ``document_index``, ``sub_document_index``, ``segment_index`` (int)
      ``[N]``.
    max_segments_per_document: the records' ``max_segments_per_document``.
  """
  out = dict(features)
  doc = tf.cast(features["document_index"], tf.int32)
  real = tf.logical_and(tf.cast(features["segment_mask"], tf.bool), doc >= 0)
  key = tf.strings.join([features["document_id"], features["question_id"]], separator="\x1f")
  where = tf.where(real)
  _, book = tf.unique(tf.boolean_mask(key, real))
  out["document_index"] = tf.tensor_scatter_nd_update(
      tf.fill(tf.shape(doc), -1), where, book)
  position = (tf.cast(features["sub_document_index"], tf.int32) * max_segments_per_document
              + tf.cast(features["segment_index"], tf.int32))
  out["segment_index"] = tf.where(real, position, tf.cast(features["segment_index"], tf.int32))
  return out


def _str(value) -> bytes:
  return value if isinstance(value, bytes) else str(value).encode("utf-8")


def pack_books(features: Mapping[str, np.ndarray]) -> Dict[BookKey, Dict]:
  """The books of one pack (NumPy features, before :func:`book_scope`): key -> ``{"book":
  index in the pack (as :func:`book_scope` numbers them), "sub_documents": set of k present,
  "num_sub_documents": int}``."""
  books: Dict[BookKey, Dict] = {}
  for s in range(len(features["segment_mask"])):
    if not features["segment_mask"][s] or features["document_index"][s] < 0:
      continue
    key = (_str(features["document_id"][s]), _str(features["question_id"][s]))
    entry = books.setdefault(key, {"book": len(books), "sub_documents": set(),
                                   "num_sub_documents": int(features["num_sub_documents"][s])})
    entry["sub_documents"].add(int(features["sub_document_index"][s]))
  return books


class BookMemoryStore:
  """The memories of every sub-document of the books that span several packs (host memory).

  ``put`` takes one pack's local memory table (after :func:`book_scope`) and files each memory
  under its ``(book key, sub-document)``; ``external`` builds a pack's external table: the
  memories of its books' sub-documents that are not in the pack.
  """

  def __init__(self, max_segments_per_document: int):
    self.max_segments = int(max_segments_per_document)
    self._tables: Dict[Tuple[BookKey, int], Dict[str, np.ndarray]] = {}

  def __len__(self) -> int:
    return len(self._tables)

  @property
  def nbytes(self) -> int:
    return sum(v.nbytes for t in self._tables.values() for v in t.values())

  def clear(self) -> None:
    self._tables.clear()

  def put(self, books: Mapping[BookKey, Dict], table: Mapping[str, np.ndarray],
          keep: Optional[Iterable[BookKey]] = None) -> None:
    """Files a pack's memory table (``memories`` ``[M, H]``, ``document`` = book index,
    ``position`` = global position, ``mask``, ``entity_id``); only books in ``keep`` (default:
    every book of the pack)."""
    keep = set(books if keep is None else keep)
    by_index = {v["book"]: k for k, v in books.items() if k in keep}
    mask = np.asarray(table["mask"]) > 0
    document, position = np.asarray(table["document"]), np.asarray(table["position"])
    groups = collections.defaultdict(list)
    for j in np.flatnonzero(mask):
      key = by_index.get(int(document[j]))
      if key is not None:
        groups[(key, int(position[j]) // self.max_segments)].append(j)
    for (key, sub), rows in groups.items():
      rows = np.asarray(rows)
      self._tables[(key, sub)] = {
          "memories": np.asarray(table["memories"], np.float32)[rows],
          "position": position[rows].astype(np.int32),
          "entity_id": np.asarray(table["entity_id"])[rows].astype(np.int32)}

  def external(self, books: Mapping[BookKey, Dict], hidden_size: int,
               capacity: Optional[int] = None) -> Dict[str, np.ndarray]:
    """The external table of a pack whose books are ``books`` (:func:`pack_books`): per book,
    the stored memories of its sub-documents not in the pack, ``document`` = the book's index
    in the pack.  Padded with masked rows to ``capacity`` (a fixed shape for a traced step;
    raises ValueError when it does not fit), else to a multiple of 64 (few retraces)."""
    parts: List[Dict[str, np.ndarray]] = []
    for key, entry in books.items():
      for sub in range(entry["num_sub_documents"]):
        if sub in entry["sub_documents"]:
          continue
        t = self._tables.get((key, sub))
        if t is None:
          continue
        n = len(t["position"])
        parts.append({"memories": t["memories"], "position": t["position"],
                      "entity_id": t["entity_id"], "mask": np.ones(n, np.int32),
                      "document": np.full(n, entry["book"], np.int32)})
    n = sum(len(p["position"]) for p in parts)
    size = capacity if capacity is not None else max(64, -(-n // 64) * 64)
    if n > size:
      raise ValueError(f"a pack's books have {n} memories in other packs, more than the external "
                       f"table's capacity {size} (raise --max_book_memories)")
    columns = {"memories": np.zeros([size, hidden_size], np.float32),
               "document": np.full([size], -1, np.int32), "position": np.zeros([size], np.int32),
               "mask": np.zeros([size], np.int32), "entity_id": np.zeros([size], np.int32)}
    at = 0
    for p in parts:
      m = len(p["position"])
      for field in memory_table.FIELDS:
        columns[field][at:at + m] = p[field]
      at += m
    return {key: columns[field]
            for field, key in zip(memory_table.FIELDS, memory_table.EXTERNAL_KEYS)}


def spans_packs(book_packs: Mapping[BookKey, set]) -> set:
  """The books (keys) whose sub-documents lie in more than one pack."""
  return {k for k, packs in book_packs.items() if len(packs) > 1}


def book_pack_index(books_per_pack: Iterable[Mapping[BookKey, Dict]]) -> Dict[BookKey, set]:
  """book key -> the indexes of the packs holding part of it, from each pack's
  :func:`pack_books` (in pack order)."""
  index: Dict[BookKey, set] = collections.defaultdict(set)
  for i, books in enumerate(books_per_pack):
    for key in books:
      index[key].add(i)
  return dict(index)


def fill_store(model, packs: Iterable[Mapping[str, np.ndarray]], store: BookMemoryStore,
               wanted: Optional[set] = None) -> int:
  """Pass 1: BERT_1 and the memory extraction over ``packs`` (NumPy pack features), filing
  the memories of the books in ``wanted`` (default: all) into ``store``.  Returns the packs
  read."""
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  first_pass = tf.function(model.first_pass, reduce_retracing=True, autograph=False)
  read = 0
  for features in packs:
    books = pack_books(features)
    keep = set(books) if wanted is None else set(books) & wanted
    if not keep:
      continue
    scoped = book_scope({k: tf.constant(v) for k, v in features.items()}, store.max_segments)
    _, local = first_pass(readtwice.model_inputs(scoped), training=False)
    store.put(books, {k: v.numpy() for k, v in local.items()}, keep)
    read += 1
  return read


class BookMemory:
  """Whole-book memory over a set of packs, for prediction and (:class:`TrainingBookMemory`)
  training: one pass over the packs' book keys finds the books that span several packs
  (``wanted``; each pack's :func:`pack_books` is kept, a few keys per pack); :meth:`fill`
  runs pass 1 into ``store``; :meth:`pack_inputs` gives a pack's pass-2 inputs.

  Args:
    packs_fn: ``() -> iterable`` of the packs (NumPy feature dicts, one pass, the same order
      every call).
    max_segments_per_document: the records'.
    hidden_size: the model's.
  """

  def __init__(self, packs_fn, max_segments_per_document: int, hidden_size: int):
    self.packs_fn = packs_fn
    self.max_segments = int(max_segments_per_document)
    self.hidden_size = int(hidden_size)
    self.store = BookMemoryStore(self.max_segments)
    self.books_per_pack = [pack_books({k: f[k] for k in BOOK_FEATURES}) for f in packs_fn()]
    self.wanted = spans_packs(book_pack_index(self.books_per_pack))

  def fill(self, model) -> None:
    """Pass 1 with ``model``'s current weights (the store is emptied first)."""
    self.store.clear()
    if self.wanted:
      fill_store(model, self.packs_fn(), self.store, self.wanted)

  def pack_inputs(self, features: Mapping[str, tf.Tensor],
                  arrays: Mapping[str, np.ndarray]) -> Dict[str, tf.Tensor]:
    """A pack's inputs with book scope, plus its external table when one of its books spans
    several packs (eager; ``arrays``: the same features as NumPy)."""
    scoped = dict(book_scope(features, self.max_segments))
    books = pack_books(arrays)
    if set(books) & self.wanted:
      scoped.update({k: tf.constant(v) for k, v in
                     self.store.external(books, self.hidden_size).items()})
    return scoped


class TrainingBookMemory(BookMemory):
  """Whole-book memory in training: the store is refilled from the current weights every
  ``refresh`` steps (:meth:`maybe_refresh`, on the host between training loops), and
  :meth:`add_external` serves the traced step (book scope plus the pack's external table of a
  fixed ``capacity``, looked up on the host with ``tf.numpy_function``: CPU/GPU strategies,
  not TPUs).

  Args: those of :class:`BookMemory`, and ``refresh``: steps between refills (>= 1).
  """

  def __init__(self, packs_fn, max_segments_per_document: int, hidden_size: int,
               refresh: int):
    if refresh < 1:
      raise ValueError(f"the book memory refresh interval must be >= 1, got {refresh}")
    super().__init__(packs_fn, max_segments_per_document, hidden_size)
    self.refresh = int(refresh)
    self.filled_at: Optional[int] = None
    self.capacity = 64

  def maybe_refresh(self, model, step: int) -> bool:
    """Refills the store when ``refresh`` steps have passed since the last fill (or never
    filled); returns whether it did."""
    if not self.wanted or (self.filled_at is not None and step - self.filled_at < self.refresh):
      return False
    self.fill(model)
    if self.filled_at is None:  # the largest external table of any pack, fixed from now on
      need = max(int(self.store.external(books, self.hidden_size)["external_mask"].sum())
                 for books in self.books_per_pack if set(books) & self.wanted)
      self.capacity = max(64, -(-need // 64) * 64)
    self.filled_at = step
    return True

  def next_refresh(self, step: int) -> Optional[int]:
    """The step at which the store must be refilled next (None: nothing to refill)."""
    if not self.wanted or self.filled_at is None:
      return None
    return self.filled_at + self.refresh

  def _lookup(self, *values):
    books = pack_books(dict(zip(BOOK_FEATURES, values)))
    ext = self.store.external(books, self.hidden_size, self.capacity)
    return tuple(ext[k] for k in EXTERNAL_KEYS)

  def add_external(self, pack: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """In a traced step: the pack with book scope and its external memory table."""
    out = book_scope(pack, self.max_segments)
    values = tf.numpy_function(self._lookup, [pack[k] for k in BOOK_FEATURES],
                               [tf.float32, tf.int32, tf.int32, tf.int32, tf.int32],
                               stateful=True)
    for key, value in zip(EXTERNAL_KEYS, values):
      value.set_shape([self.capacity, self.hidden_size] if key == EXTERNAL_KEYS[0]
                      else [self.capacity])
      out[key] = value
    for key in ("document_id", "question_id", "sub_document_index", "num_sub_documents"):
      out.pop(key, None)  # (strings cannot enter an XLA-compiled step)
    return out
