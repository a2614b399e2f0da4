"""An anchor-text entity linker over the alias table (pure Python + pyarrow).

The Wikipedia job writes ``entities/aliases-*.parquet`` (:data:`schemas.entities.ALIAS_SCHEMA`:
how often anchor text ``alias`` linked to entity ``title``).  A later stage finds mention spans
in text without links; :class:`AliasLinker` maps a mention's surface text to an entity id:

* the text and every alias are normalised with :func:`normalize`; aliases that normalise to the
  same string are merged (the counts of an entity summed);
* the commonness of an entity for an alias is ``p(entity | alias) = count / total``, where
  ``total`` sums every row of the alias, rows with entity id 0 (outside the vocabulary)
  included: those count in the denominator but are never a link;
* :meth:`AliasLinker.link` returns the best entity (probability, then count descending, then
  title ascending) if its pair has ``count >= min_count`` and ``probability >=
  min_probability``, else :data:`schemas.entities.UNKNOWN_ENTITY_ID` (0).

The lookup is built once, from the table's columns in batches, into a plain dict: normalised
alias -> ``(total, ((entity_id, title, count), ...))`` with the entities sorted best first.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Dict, List, Tuple

import pyarrow as pa

from schemas import entities as entities_schema

_QUOTES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
})
_BATCH_ROWS = 65_536


@dataclasses.dataclass(frozen=True)
class LinkerConfig:
  """Thresholds of :meth:`AliasLinker.link`.

  ``min_count``: the best (alias, entity) pair needs at least this many links (>= 1).
  ``min_probability``: the best entity's commonness ``p(entity | alias)`` must be at least this
  (in [0, 1]).  ``lowercase``: match case-insensitively (see :func:`normalize`).
  """
  min_count: int = 2
  min_probability: float = 0.5
  lowercase: bool = True

  def __post_init__(self):
    if (not isinstance(self.min_count, int) or isinstance(self.min_count, bool)
        or self.min_count < 1):
      raise ValueError(f"--linker_min_count must be an integer >= 1, got {self.min_count!r}")
    p = self.min_probability
    if (not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0):
      raise ValueError(f"--linker_min_probability must be a number in [0, 1], got {p!r}")
    if not isinstance(self.lowercase, bool):
      raise ValueError(f"lowercase must be a bool, got {self.lowercase!r}")


def _is_edge(ch: str) -> bool:
  return ch.isspace() or unicodedata.category(ch).startswith("P")


def _strip(text: str) -> str:
  """``text`` without the whitespace and punctuation (Unicode P*) at its ends."""
  if text and text[0].isalnum() and text[-1].isalnum():  # letters and digits are no edge
    return text
  start, end = 0, len(text)
  while start < end and _is_edge(text[start]):
    start += 1
  while end > start and _is_edge(text[end - 1]):
    end -= 1
  return text[start:end]


def normalize(text: str, lowercase: bool = True) -> str:
  """The matching key of a surface text.

  In order: Unicode NFKC (fullwidth letters, ligatures, ...), ``casefold`` when ``lowercase``,
  curly quotes and apostrophes to ASCII ``'`` / ``"``, inner whitespace collapsed to one space,
  leading and trailing whitespace and punctuation (Unicode category P*) stripped, then a leading
  ``"the "`` (any case) dropped and the rest stripped again.  ``""`` if nothing is left.
  """
  text = unicodedata.normalize("NFKC", text)
  if lowercase:
    text = text.casefold()
  if not text.isascii():  # the curly quotes are not ASCII
    text = text.translate(_QUOTES)
  # Whitespace runs to one space and the ends stripped: " ".join(split()) collapses the same
  # runs (str.split and the regex's \s both use str.isspace) and strips whitespace at the
  # ends, which _strip strips anyway.
  text = _strip(" ".join(text.split()))
  if text[:4].lower() == "the ":
    text = _strip(text[4:])
  return text


Candidate = Tuple[int, str, float, int]


class AliasLinker:
  """Links mention surface texts to entity ids by alias commonness (see the module doc).

  ``stats`` counts :meth:`link` calls: ``linker/mentions`` (all), ``linker/linked``,
  ``linker/unknown_alias`` (the normalised text is empty or not an alias) and
  ``linker/below_threshold`` (an alias whose best entity misses a threshold, or that only
  links outside the vocabulary).
  """

  def __init__(self, table: pa.Table, config: LinkerConfig = LinkerConfig()):
    missing = [n for n in entities_schema.ALIAS_SCHEMA.names if n not in table.column_names]
    if missing:
      raise ValueError(f"alias table lacks columns {missing}")
    self.config = config
    self.stats: Dict[str, int] = {"linker/mentions": 0, "linker/linked": 0,
                                  "linker/unknown_alias": 0, "linker/below_threshold": 0}
    self._table: Dict[str, Tuple[int, Tuple[Tuple[int, str, int], ...]]] = self._build(table)

  def _build(self, table: pa.Table):
    lowercase = self.config.lowercase
    unknown = entities_schema.UNKNOWN_ENTITY_ID
    acc: Dict[str, list] = {}  # normalised alias -> [total, {(entity_id, title): count}]
    titles: Dict[str, str] = {}  # one str object per distinct title
    last_raw, last_key = None, ""
    names = entities_schema.ALIAS_SCHEMA.names
    for batch in table.select(names).to_batches(max_chunksize=_BATCH_ROWS):
      aliases, ids, tts, counts = (batch.column(i).to_pylist() for i in range(4))
      for raw, eid, title, n in zip(aliases, ids, tts, counts):
        if raw != last_raw:  # the table is usually sorted by alias
          last_raw, last_key = raw, normalize(raw or "", lowercase)
        if not last_key or not n:
          continue
        slot = acc.get(last_key)
        if slot is None:
          slot = acc[last_key] = [0, {}]
        slot[0] += n
        if eid == unknown:
          continue
        title = titles.setdefault(title, title)
        ents = slot[1]
        ents[(eid, title)] = ents.get((eid, title), 0) + n
    out = {}
    for key, (total, ents) in acc.items():
      ranked = sorted(ents.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0]))
      out[key] = (total, tuple((eid, t, n) for (eid, t), n in ranked))
    return out

  @classmethod
  def from_directory(cls, output_dir: str, config: LinkerConfig = LinkerConfig()
                     ) -> "AliasLinker":
    """The linker over the alias table of a Wikipedia job's ``output_dir`` (every
    ``entities/aliases-*.parquet``, local or any Beam filesystem such as ``gs://``)."""
    from pipelines.entities import tables  # pylint: disable=g-import-not-at-top  # Beam
    return cls(tables.read_aliases(output_dir), config)

  def __len__(self) -> int:
    """The number of distinct normalised aliases."""
    return len(self._table)

  def candidates(self, text: str) -> List[Candidate]:
    """``(entity_id, title, probability, count)`` for the text's alias, best first
    (probability and count descending, then title); entities outside the vocabulary (id 0)
    count in the probabilities' denominator but are not listed.  ``[]`` for an unknown alias."""
    entry = self._table.get(normalize(text, self.config.lowercase))
    if entry is None:
      return []
    total, ents = entry
    return [(eid, title, n / total, n) for eid, title, n in ents]

  def link(self, text: str) -> int:
    """The best candidate's entity id if its count >= ``min_count`` and its probability >=
    ``min_probability``, else 0 (:data:`schemas.entities.UNKNOWN_ENTITY_ID`)."""
    stats = self.stats
    stats["linker/mentions"] += 1
    entry = self._table.get(normalize(text, self.config.lowercase))
    if entry is None:
      stats["linker/unknown_alias"] += 1
      return entities_schema.UNKNOWN_ENTITY_ID
    total, ents = entry
    if ents:
      eid, _, n = ents[0]
      if n >= self.config.min_count and n / total >= self.config.min_probability:
        stats["linker/linked"] += 1
        return eid
    stats["linker/below_threshold"] += 1
    return entities_schema.UNKNOWN_ENTITY_ID
