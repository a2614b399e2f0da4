"""The anchor-text entity linker over a hand-made alias table."""


import pyarrow as pa
import pytest

from schemas import entities as entities_schema
from pipelines.entities.linker import AliasLinker, LinkerConfig, normalize

ROWS = [  # (alias, entity_id, title, count)
    ("Paris", 1, "Paris", 8),
    ("Paris", 7, "Paris Hilton", 2),
    ("paris", 1, "Paris", 1),              # merged with "Paris" when lowercasing
    ("Jordan", 3, "Jordan", 5),
    ("Jordan", 4, "Michael Jordan", 5),    # a tie: count, then title decides
    ("Mercury", 5, "Mercury (planet)", 1),  # below min_count
    ("Obscure", 0, "Some Obscure Page", 6),  # only outside the vocabulary
    ("Apple", 6, "Apple Inc.", 6),
    ("Apple", 0, "Apple (band)", 4),       # id 0: in the denominator only
]


def _table(rows):
  alias, ids, titles, counts = (list(c) for c in zip(*rows))
  return pa.table({"alias": pa.array(alias, pa.string()), "entity_id": pa.array(ids, pa.int64()),
                   "title": pa.array(titles, pa.string()),
                   "count": pa.array(counts, pa.int64())}, schema=entities_schema.ALIAS_SCHEMA)


@pytest.mark.parametrize("text,lowercase,expected", [
    ("The Beatles", True, "beatles"),
    ("  \u201cParis\u201d, ", True, "paris"),
    ("\uff21\uff22\uff23", True, "abc"),
    ("Rock  and\troll", True, "rock and roll"),
    ("...", True, ""),
    ("", True, ""),
    ("Rock  and\troll", False, "Rock and roll"),
    ("The Beatles", False, "Beatles"),
    ("\u2018Tis", False, "Tis"),
    ("Rock \u2019n\u2019 roll", True, "rock 'n' roll"),
])
def test_normalize(text, lowercase, expected):
  assert normalize(text, lowercase) == expected


def _normalize_by_the_rules(text, lowercase=True):
  """normalize as its doc states it, step by step (the regex and a character loop): the
  reference its fast paths (ASCII, letters at both ends, split/join) must agree with."""
  import re
  import unicodedata
  from pipelines.entities.linker import _QUOTES

  def strip(t):
    edge = [c.isspace() or unicodedata.category(c).startswith("P") for c in t]
    start, end = 0, len(t)
    while start < end and edge[start]:
      start += 1
    while end > start and edge[end - 1]:
      end -= 1
    return t[start:end]

  t = unicodedata.normalize("NFKC", text)
  t = t.casefold() if lowercase else t
  t = strip(re.sub(r"\s+", " ", t.translate(_QUOTES)))
  return strip(t[4:]) if t[:4].lower() == "the " else t


def test_normalize_equals_its_rules_on_random_text():
  import random
  rng = random.Random(5)
  pieces = ["a", "Z", "7", "the", "The ", " ", "  ", "\t", "\n", "\u00a0", "\u2009", "\u3000",
            "\x1c", "\x85", ".", ",", "-", "'", '"', "\u2019", "\u201c", "\u201d", "(", ")",
            "\uff21", "\ufb01", "\u00df", "\u0130", "e\u0301", "\u2160", "\u00bd", "東京",
            "🎉", "\u00e9", "$", "+", "_", "\u00bf"]
  for _ in range(20000):
    text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 8)))
    for lowercase in (True, False):
      assert normalize(text, lowercase) == _normalize_by_the_rules(text, lowercase), text


def test_candidates_merge_and_commonness():
  linker = AliasLinker(_table(ROWS))
  # "Paris" and "paris" are one alias: 8 + 1 = 9 of 11 for Paris.
  assert linker.candidates("PARIS") == [(1, "Paris", 9 / 11, 9), (7, "Paris Hilton", 2 / 11, 2)]
  assert linker.candidates("  the Paris. ") == linker.candidates("paris")
  assert linker.candidates("Jordan") == [(3, "Jordan", 0.5, 5), (4, "Michael Jordan", 0.5, 5)]
  assert linker.candidates("Apple") == [(6, "Apple Inc.", 0.6, 6)]
  assert linker.candidates("Obscure") == []
  assert linker.candidates("Nowhere") == []
  assert len(linker) == 5  # paris, jordan, mercury, obscure, apple


def test_case_sensitive_keeps_aliases_apart():
  linker = AliasLinker(_table(ROWS), LinkerConfig(lowercase=False))
  assert linker.candidates("Paris") == [(1, "Paris", 0.8, 8), (7, "Paris Hilton", 0.2, 2)]
  assert linker.candidates("paris") == [(1, "Paris", 1.0, 1)]
  assert linker.link("paris") == 0  # 1 < min_count
  assert len(linker) == 6


def test_link_thresholds_and_stats():
  linker = AliasLinker(_table(ROWS))
  assert linker.link("Paris") == 1
  assert linker.link("Jordan") == 3          # probability 0.5 >= 0.5; "Jordan" < "Michael ..."
  assert linker.link("Mercury") == 0         # count 1 < 2
  assert linker.link("Obscure") == 0         # only entity id 0
  assert linker.link("Apple") == 6           # 6 / 10
  assert linker.link("Atlantis") == 0        # unknown
  assert linker.link("...") == 0            # normalises to nothing: unknown
  assert linker.stats == {"linker/mentions": 7, "linker/linked": 3,
                          "linker/unknown_alias": 2, "linker/below_threshold": 2}
  strict = AliasLinker(_table(ROWS), LinkerConfig(min_probability=0.51))
  assert strict.link("Jordan") == 0
  assert strict.link("Apple") == 6
  assert strict.link("Paris") == 1
  assert strict.stats["linker/below_threshold"] == 1
  loose = AliasLinker(_table(ROWS), LinkerConfig(min_count=1, min_probability=0.0))
  assert loose.link("Mercury") == 5
  assert loose.link("Obscure") == 0


def test_tie_break_by_count_then_title():
  rows = [("Mustang", 9, "Ford Mustang", 3), ("Mustang", 8, "Mustang (horse)", 3),
          ("Mustang", 2, "Mustang", 4)]
  linker = AliasLinker(_table(rows), LinkerConfig(min_probability=0.0))
  assert [c[1] for c in linker.candidates("mustang")] == ["Mustang", "Ford Mustang",
                                                          "Mustang (horse)"]
  assert linker.link("Mustang") == 2


def test_from_directory_sums_files(tmp_path):
  d = tmp_path / entities_schema.ENTITIES_DIR
  d.mkdir()
  (d / "aliases-00000-of-00002.parquet").write_bytes(entities_schema.aliases_bytes(
      [("Paris", 1, "Paris", 1), ("Paris", 7, "Paris Hilton", 1)]))
  (d / "aliases-00001-of-00002.parquet").write_bytes(entities_schema.aliases_bytes(
      [("Paris", 1, "Paris", 2), ("Lutetia", 1, "Paris", 2)]))
  (d / "vocabulary.parquet").write_bytes(entities_schema.vocabulary_bytes([(1, "Paris", 5)]))
  linker = AliasLinker.from_directory(str(tmp_path))  # a Wikipedia job's output dir
  assert linker.candidates("paris") == [(1, "Paris", 0.75, 3), (7, "Paris Hilton", 0.25, 1)]
  assert linker.link("Paris") == 1
  assert linker.link("Lutetia") == 1
  assert len(linker) == 2
  with pytest.raises(FileNotFoundError):
    AliasLinker.from_directory(str(tmp_path / "missing"))


def test_empty_table():
  linker = AliasLinker(entities_schema.ALIAS_SCHEMA.empty_table())
  assert len(linker) == 0
  assert linker.link("Paris") == 0
  assert linker.stats["linker/unknown_alias"] == 1


@pytest.mark.parametrize("kwargs,flag", [
    ({"min_count": 0}, "--linker_min_count"),
    ({"min_count": 1.5}, "--linker_min_count"),
    ({"min_probability": 1.5}, "--linker_min_probability"),
    ({"min_probability": -0.1}, "--linker_min_probability"),
    ({"min_probability": "0.5"}, "--linker_min_probability"),
])
def test_config_validation(kwargs, flag):
  with pytest.raises(ValueError, match=flag):
    LinkerConfig(**kwargs)


@pytest.mark.slow
def test_a_large_table():
  # 300k rows, 100k lookups: the size a test can afford (speed is not asserted here; tests
  # check behaviour, benchmarks/ measure time).
  n = 300_000
  rows = [(f"Alias {i // 3}", 1 + i % 1000, f"Title {i % 1000}", 1 + i % 5) for i in range(n)]
  table = _table(rows)
  linker = AliasLinker(table)
  assert len(linker) == n // 3
  queries = [f"the alias {i % (n // 3)}" for i in range(100_000)]
  linked = [linker.link(q) for q in queries]
  assert linker.stats["linker/mentions"] == 100_000
  assert linker.stats["linker/unknown_alias"] == 0
  assert any(linked)
