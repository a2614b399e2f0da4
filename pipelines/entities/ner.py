"""A spaCy named-entity backend: character spans of entity mentions in plain text (pure Python).

:func:`load_spacy` builds the pipeline named by ``--spacy_model``: ``blank:<lang>`` is
``spacy.blank(lang)`` (a tokenizer only, always available offline); any other name is an
installed model package passed to ``spacy.load`` (models are never downloaded at run time).
Optional phrase patterns add an ``entity_ruler`` that labels case-insensitive matches
:data:`ENTITY_LABEL`.

:class:`SpacyBackend` annotates batches of texts with ``nlp.pipe``.  Texts longer than
``max_length`` characters are split by :func:`split_for_length` and the spans of each piece
shifted back by its offset, so every span is a Python ``str`` offset pair into the original text
(``text[begin:end] == span.text``).  A mention that straddles a cut is lost; cuts prefer
paragraph boundaries so this is rare.

The spaCy pipeline is built lazily (first :meth:`SpacyBackend.annotate` or :attr:`SpacyBackend.nlp`)
and is not pickled, so a backend can be shipped to Beam workers cheaply; call ``backend.nlp`` in
``DoFn.setup`` to surface configuration errors early.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

SPACY_BLANK_PREFIX = "blank:"
ENTITY_LABEL = "ENT"

Span = Tuple[int, int, str]


class NerError(ValueError):
  """A configuration problem of the NER backend (unknown model name etc.)."""


def load_spacy(model: str = "blank:en", patterns: Sequence[str] = (), max_length: int = 1_000_000):
  """A spaCy pipeline: "blank:<lang>" -> spacy.blank(lang); any other name -> spacy.load(name).

  Any other name is an installed package (such as ``en_core_web_sm``); a name that is not
  installed raises :class:`NerError` naming ``--spacy_model``.  When ``patterns`` is non-empty an
  ``entity_ruler`` is added (before ``ner`` if the pipeline has one, else last) with phrase
  patterns ``{"label": ENTITY_LABEL, "pattern": text}`` matched on ``LOWER`` (case-insensitive),
  ``overwrite_ents=False``; empty and duplicate patterns are dropped.
  ``nlp.max_length = max_length``.
  """
  import spacy  # Imported here: only workers that run NER need spaCy.

  if not isinstance(model, str) or not model.strip():
    raise NerError(f"--spacy_model must be a non-empty model name, got {model!r}")
  if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
    raise NerError(f"max_length must be an integer >= 1, got {max_length!r}")
  if model.startswith(SPACY_BLANK_PREFIX):
    lang = model[len(SPACY_BLANK_PREFIX):]
    try:
      nlp = spacy.blank(lang)
    except (ImportError, KeyError, ValueError):
      raise NerError(f"--spacy_model {model!r}: spaCy has no language {lang!r}") from None
  else:
    try:
      nlp = spacy.load(model)
    except (OSError, ImportError) as e:
      raise NerError(
          f"--spacy_model {model!r} is not installed: spaCy models are installed as Python "
          f"packages (e.g. pip install en-core-web-sm), never downloaded at run time; "
          f"use {SPACY_BLANK_PREFIX}<lang> for a blank pipeline ({type(e).__name__})") from None
  nlp.max_length = max_length
  texts = list(dict.fromkeys(p for p in patterns if isinstance(p, str) and p.strip()))
  if texts:
    where = {"before": "ner"} if "ner" in nlp.pipe_names else {"last": True}
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER",
                                                  "overwrite_ents": False}, **where)
    ruler.add_patterns([{"label": ENTITY_LABEL, "pattern": t} for t in texts])
  return nlp


def _cut(window: str) -> int:
  """Where to end a piece that starts ``window`` (``0 < cut <= len(window)``)."""
  i = window.rfind("\n\n")
  if i >= 0:
    return i + 2
  i = window.rfind("\n")
  if i >= 0:
    return i + 1
  for i in range(len(window) - 1, -1, -1):
    if window[i].isspace():
      return i + 1
  return len(window)


def split_for_length(text: str, max_length: int) -> List[Tuple[int, str]]:
  """(offset, piece) covering `text` exactly in order, each piece <= max_length chars.

  Concatenating the pieces gives ``text`` back (``[]`` for ``""``).  A piece is cut after the
  last paragraph boundary ("\\n\\n") in its window when there is one, else after the last
  newline, else after the last whitespace, else hard at ``max_length``.
  """
  if max_length < 1:
    raise ValueError(f"max_length must be >= 1, got {max_length!r}")
  pieces = []
  start = 0
  while start < len(text):
    if len(text) - start <= max_length:
      cut = len(text) - start
    else:
      cut = _cut(text[start:start + max_length])
    pieces.append((start, text[start:start + cut]))
    start += cut
  return pieces


class SpacyBackend:
  """Entity spans of texts with a spaCy pipeline (see :func:`load_spacy` for the arguments).

  ``labels``: keep only entities with these labels (``None``: all).  ``stats`` counts
  ``ner/texts`` (texts annotated), ``ner/split_texts`` (texts split into more than one piece),
  ``ner/mentions`` (spans returned) and ``ner/characters`` (characters of the texts).
  """

  def __init__(self, model: str = "blank:en", patterns: Sequence[str] = (),
               max_length: int = 1_000_000, batch_size: int = 64,
               labels: Optional[FrozenSet[str]] = None):
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
      raise NerError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
      raise NerError(f"max_length must be an integer >= 1, got {max_length!r}")
    self.model = model
    self.patterns = tuple(patterns)
    self.max_length = max_length
    self.batch_size = batch_size
    self.labels = None if labels is None else frozenset(labels)
    self.stats: Dict[str, int] = {"ner/texts": 0, "ner/split_texts": 0, "ner/mentions": 0,
                                  "ner/characters": 0}
    self._nlp = None
    self._label_names: Dict[int, str] = {}

  @property
  def nlp(self):
    """The spaCy pipeline, built on first use."""
    if self._nlp is None:
      self._nlp = load_spacy(self.model, self.patterns, self.max_length)
    return self._nlp

  def __getstate__(self):
    state = dict(self.__dict__)
    state["_nlp"] = None
    return state

  def annotate(self, texts: Sequence[str]) -> List[List[Span]]:
    """Per text, its sorted, non-overlapping ``(begin, end, label)`` entity spans.

    ``end`` is exclusive; offsets are Python ``str`` indices into that text.  All pieces of all
    texts go through one ``nlp.pipe(..., batch_size=batch_size)``.
    """
    owners: List[Tuple[int, int]] = []  # (text index, piece offset) per piece
    pieces: List[str] = []
    for i, text in enumerate(texts):
      split = split_for_length(text, self.max_length)
      if len(split) > 1:
        self.stats["ner/split_texts"] += 1
      for offset, piece in split:
        owners.append((i, offset))
        pieces.append(piece)
      self.stats["ner/characters"] += len(text)
    self.stats["ner/texts"] += len(texts)
    result: List[List[Span]] = [[] for _ in texts]
    if pieces:
      for (i, offset), doc in zip(owners, self.nlp.pipe(pieces, batch_size=self.batch_size)):
        result[i].extend(self._spans(doc, offset))
    for spans in result:  # in order: a doc's entities are, and its pieces follow each other
      self.stats["ner/mentions"] += len(spans)
    return result


  def _spans(self, doc, offset: int) -> List[Span]:
    """The entity spans of one piece at ``offset``, computed on the token arrays (no Python
    work per token, little per entity)."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    found = _entity_arrays(doc)
    if found is None:
      return []
    begins, ends, label_ids = found
    uniques, which = np.unique(label_ids, return_inverse=True)
    names = []
    for label_id in uniques.tolist():
      name = self._label_names.get(label_id)
      if name is None:
        name = self._label_names[label_id] = self.nlp.vocab.strings[label_id]
      names.append(name)
    if self.labels is not None:
      keep = np.array([n in self.labels for n in names])[which]
      begins, ends, which = begins[keep], ends[keep], which[keep]
    if offset:
      begins, ends = begins + offset, ends + offset
    return list(zip(begins.tolist(), ends.tolist(), map(names.__getitem__, which.tolist())))


def _entity_offsets(doc) -> List[Tuple[int, int, int]]:
  """``(start_char, end_char, label id)`` of ``doc.ents``, in order (see
  :func:`_entity_arrays`)."""
  found = _entity_arrays(doc)
  return [] if found is None else list(zip(*(a.tolist() for a in found)))


def _entity_arrays(doc):
  """Arrays ``(start_char, end_char, label id)`` of ``doc.ents`` (None when there is none), in
  order, from the token arrays
  (``ENT_IOB``: 3 begins an entity, 1 continues it) rather than one ``Span`` object per
  entity: the same offsets (``IDX`` is a token's character offset, ``LENGTH`` its length),
  without the objects."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from spacy.attrs import ENT_IOB, ENT_TYPE, IDX, LENGTH  # pylint: disable=g-import-not-at-top
  if not len(doc):
    return None
  arr = doc.to_array([ENT_IOB, IDX, LENGTH]).astype(np.int64)
  iob = arr[:, 0]
  starts = np.flatnonzero(iob == 3)
  if not len(starts):
    return None
  breaks = np.append(np.flatnonzero(iob != 1), len(iob))  # where an entity cannot go on
  last = breaks[np.searchsorted(breaks, starts, side="right")] - 1
  # Label ids are 64-bit hashes: read as they are (uint64), not through the int64 array.
  return arr[starts, 1], arr[last, 1] + arr[last, 2], doc.to_array(ENT_TYPE)[starts]
