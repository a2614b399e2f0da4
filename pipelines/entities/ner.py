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
    return [list(zip(*found)) for found in self._find(texts, True)]

  def offsets(self, texts: Sequence[str]) -> List[Tuple[List[int], List[int]]]:
    """Per text, the ``(begins, ends)`` of the spans :meth:`annotate` returns, as two lists
    (the same spans, stats and ``labels`` filter, without the labels): what the annotation
    stage needs, without a tuple and a label name per span."""
    return [(begins, ends) for begins, ends, _ in self._find(texts, False)]

  def _find(self, texts: Sequence[str], labelled: bool
            ) -> List[Tuple[List[int], List[int], Optional[List[str]]]]:
    """Per text, ``(begins, ends, label names)`` of its spans (names None unless
    ``labelled``), its pieces' spans concatenated; counts the stats."""
    owners: List[Tuple[int, int]] = []  # (text index, piece offset) per piece
    pieces: List[str] = []
    max_length = self.max_length
    for i, text in enumerate(texts):
      if len(text) <= max_length:  # the common case: one piece (none when empty)
        if text:
          owners.append((i, 0))
          pieces.append(text)
      else:
        split = split_for_length(text, max_length)
        self.stats["ner/split_texts"] += 1
        for offset, piece in split:
          owners.append((i, offset))
          pieces.append(piece)
      self.stats["ner/characters"] += len(text)
    self.stats["ner/texts"] += len(texts)
    result: List[Tuple[List[int], List[int], Optional[List[str]]]] = [
        ([], [], [] if labelled else None) for _ in texts]
    if pieces:
      for (i, offset), doc in zip(owners, self.nlp.pipe(pieces, batch_size=self.batch_size)):
        found = self._spans(doc, offset, labelled)
        if found is None:
          continue
        mine = result[i]
        if mine[0]:  # a later piece of a split text: in order, its pieces follow each other
          for have, more in zip(mine, found):
            if have is not None:
              have.extend(more)
        else:
          result[i] = found
    self.stats["ner/mentions"] += sum(len(begins) for begins, _, _ in result)
    return result

  def _spans(self, doc, offset: int, labelled: bool = True):
    """``(begins, ends, label names or None)`` of the entities of one piece at ``offset``
    (None when there is none), computed on the token arrays (no Python work per token, little
    per entity)."""
    found = _entity_arrays(doc, types=labelled or self.labels is not None)
    if found is None:
      return None
    begins, ends, label_ids = found
    names = None
    if label_ids is not None:
      cache = self._label_names
      names = list(map(cache.get, label_ids))
      if None in names:
        strings = self.nlp.vocab.strings
        for label_id in label_ids:
          if label_id not in cache:
            cache[label_id] = strings[label_id]
        names = list(map(cache.__getitem__, label_ids))
      if self.labels is not None:
        keep = [name in self.labels for name in names]
        if not all(keep):
          begins, ends, names = ([x for x, k in zip(xs, keep) if k]
                                 for xs in (begins, ends, names))
          if not begins:
            return None
    if offset:
      begins = [b + offset for b in begins]
      ends = [e + offset for e in ends]
    return begins, ends, names if labelled else None


def _entity_offsets(doc) -> List[Tuple[int, int, int]]:
  """``(start_char, end_char, label id)`` of ``doc.ents``, in order (see
  :func:`_entity_arrays`)."""
  found = _entity_arrays(doc)
  return [] if found is None else list(zip(*found))


_ATTRS: Dict[bool, List[int]] = {}  # with the label ids -> the attribute ids to read


def _entity_arrays(doc, types: bool = True):
  """Lists ``(start_char, end_char, label id or None)`` of ``doc.ents`` (None when there is
  none), in order, from the token arrays
  (``ENT_IOB``: 3 begins an entity, 1 continues it) rather than one ``Span`` object per
  entity: the same offsets (``IDX`` is a token's character offset; a token's text ends where
  the next one starts, less the one space ``SPACY`` says follows it, or at the end of the
  text), without the objects and without reading every token's length.  ``types`` False:
  the label ids (``ENT_TYPE``) are not read (None in their place)."""
  attrs = _ATTRS.get(types)
  if attrs is None:
    from spacy.attrs import ENT_IOB, ENT_TYPE, IDX, SPACY  # pylint: disable=g-import-not-at-top
    attrs = _ATTRS[types] = [ENT_IOB, IDX, SPACY] + ([ENT_TYPE] if types else [])
  n = len(doc)
  if not n:
    return None
  # One uint64 array (label ids are 64-bit hashes); no Python int is mixed into its
  # arithmetic, which would make it float64.
  arr = doc.to_array(attrs)
  iob = arr[:, 0]
  starts = (iob == 3).nonzero()[0]
  if not len(starts):
    return None
  breaks = (iob != 1).nonzero()[0]  # where an entity cannot go on
  after = breaks.searchsorted(starts, "right")  # per entity, its first break after its start
  idx, space = arr[:, 1], arr[:, 2]
  if after[-1] == len(breaks):  # the last entity runs to the end of the text
    following = breaks[after[:-1]]
    ends = (idx[following] - space[following - 1]).tolist()
    last = doc[n - 1]
    ends.append(last.idx + len(last.text))
  else:
    following = breaks[after]  # the token after each entity
    ends = (idx[following] - space[following - 1]).tolist()
  return idx[starts].tolist(), ends, arr[starts, 3].tolist() if types else None
