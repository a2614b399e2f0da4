"""The spaCy NER backend with blank pipelines and an entity ruler (no trained model needed)."""

import random

import pytest

from pipelines.entities import ner
from pipelines.entities.ner import (ENTITY_LABEL, NerError, SpacyBackend, load_spacy,
                                    split_for_length)

PATTERNS = ["Paris", "Barack Obama", "東京"]


def test_load_spacy_blank_and_missing_model():
  nlp = load_spacy("blank:en", max_length=123)
  assert nlp.lang == "en" and nlp.pipe_names == [] and nlp.max_length == 123
  assert load_spacy("blank:en", PATTERNS).pipe_names == ["entity_ruler"]
  with pytest.raises(NerError, match="--spacy_model") as info:
    load_spacy("en_core_web_nonexistent")
  assert "installed" in str(info.value) and "\n" not in str(info.value)
  with pytest.raises(NerError, match="--spacy_model"):
    load_spacy("blank:zz")


def test_ruler_goes_before_ner(monkeypatch):
  import spacy  # pylint: disable=g-import-not-at-top  (2.5 s: only where used)

  def fake_load(name):
    nlp = spacy.blank("en")
    nlp.add_pipe("ner")
    return nlp
  monkeypatch.setattr(spacy, "load", fake_load)
  assert load_spacy("some_model", ["Paris"]).pipe_names == ["entity_ruler", "ner"]
  assert load_spacy("some_model").pipe_names == ["ner"]


def test_spans_exact_offsets():
  backend = SpacyBackend(patterns=PATTERNS)
  texts = ["I saw barack obama in PARIS.", "東京 is big 🎉 and Paris too", "",
           "Cafe\u0301 \U0001F600 pAris"]
  got = backend.annotate(texts)
  assert got == [[(6, 18, ENTITY_LABEL), (22, 27, ENTITY_LABEL)],
                 [(0, 2, ENTITY_LABEL), (16, 21, ENTITY_LABEL)],
                 [],
                 [(8, 13, ENTITY_LABEL)]]
  lowered = {p.lower() for p in PATTERNS}
  for text, spans in zip(texts, got):
    for b, e, _ in spans:
      assert text[b:e].lower() in lowered


def test_long_text_is_split_with_absolute_offsets():
  paragraphs = ["The first paragraph talks about nothing in particular here.",
                "The second one mentions Paris and then some more words.",
                "A third one is about Barack Obama visiting the city."]
  text = "\n\n".join(paragraphs)
  backend = SpacyBackend(patterns=PATTERNS, max_length=60)
  assert len(split_for_length(text, 60)) == 3
  (spans,) = backend.annotate([text])
  assert [text[b:e] for b, e, _ in spans] == ["Paris", "Barack Obama"]
  assert spans[0][0] == text.index("Paris") and spans[1][0] == text.index("Barack")
  assert spans[0][0] > 60 and spans[1][0] > 120
  assert backend.stats["ner/split_texts"] == 1
  assert SpacyBackend(patterns=PATTERNS).annotate([text]) == [spans]


def test_split_for_length_properties():
  rng = random.Random(7)
  assert split_for_length("", 5) == []
  assert split_for_length("abc", 5) == [(0, "abc")]
  assert split_for_length("abcdefg", 3) == [(0, "abc"), (3, "def"), (6, "g")]
  assert split_for_length("ab cd\nef\n\ngh ij", 12) == [(0, "ab cd\nef\n\n"), (10, "gh ij")]
  with pytest.raises(ValueError):
    split_for_length("abc", 0)
  for _ in range(2000):
    text = "".join(rng.choice("ab c\n東🎉") for _ in range(rng.randrange(0, 80)))
    limit = rng.randrange(1, 30)
    pieces = split_for_length(text, limit)
    assert "".join(p for _, p in pieces) == text
    offset = 0
    for k, (start, piece) in enumerate(pieces):
      assert start == offset and 0 < len(piece) <= limit
      offset += len(piece)
      if k == len(pieces) - 1:
        continue
      window = text[start:start + limit]
      if "\n\n" in window:
        assert piece == window[:window.rindex("\n\n") + 2]
      elif "\n" in window:
        assert piece == window[:window.rindex("\n") + 1]
      elif any(ch.isspace() for ch in window):
        assert piece[-1].isspace() and not any(ch.isspace() for ch in window[len(piece):])
      else:
        assert piece == window
    assert offset == len(text)


def test_labels_filter():
  texts = ["Paris and Berlin and barack obama"]
  backend = SpacyBackend(patterns=PATTERNS, labels=frozenset({"CITY"}))
  backend.nlp.get_pipe("entity_ruler").add_patterns([{"label": "CITY", "pattern": "Berlin"}])
  assert backend.annotate(texts) == [[(10, 16, "CITY")]]
  everything = SpacyBackend(patterns=PATTERNS)
  everything.nlp.get_pipe("entity_ruler").add_patterns([{"label": "CITY", "pattern": "Berlin"}])
  assert everything.annotate(texts) == [[(0, 5, ENTITY_LABEL), (10, 16, "CITY"),
                                         (21, 33, ENTITY_LABEL)]]
  assert SpacyBackend(patterns=PATTERNS, labels=frozenset()).annotate(texts) == [[]]


def test_stats_counters():
  backend = SpacyBackend(patterns=PATTERNS, max_length=20)
  texts = ["Paris is nice.\n\nParis again.", "", "barack obama"]
  got = backend.annotate(texts)
  assert got == [[(0, 5, ENTITY_LABEL), (16, 21, ENTITY_LABEL)], [], [(0, 12, ENTITY_LABEL)]]
  assert backend.stats == {"ner/texts": 3, "ner/split_texts": 1, "ner/mentions": 3,
                           "ner/characters": 40}
  backend.annotate(["paris"])
  assert backend.stats == {"ner/texts": 4, "ner/split_texts": 1, "ner/mentions": 4,
                           "ner/characters": 45}


def test_batch_equals_one_by_one():
  rng = random.Random(3)
  words = ["paris", "Paris", "barack", "Obama", "東京", "🎉", "the", "a", "city", ".", "\n\n"]
  texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
  batched = SpacyBackend(patterns=PATTERNS, max_length=100, batch_size=16)
  single = SpacyBackend(patterns=PATTERNS, max_length=100, batch_size=16)
  got = batched.annotate(texts)
  assert got == [single.annotate([t])[0] for t in texts]
  assert sum(map(len, got)) > 500 and batched.stats["ner/split_texts"] > 0
  assert batched.stats == single.stats
  for text, spans in zip(texts, got):
    assert spans == sorted(spans)
    assert all(e1 <= b2 for (_, e1, _), (b2, _, _) in zip(spans, spans[1:]))
    assert all(text[b:e].lower() in {"paris", "barack obama", "東京"} for b, e, _ in spans)


def test_backend_pickles_without_nlp():
  import pickle
  backend = SpacyBackend(patterns=PATTERNS)
  assert backend.annotate(["Paris"]) == [[(0, 5, ENTITY_LABEL)]]
  copy = pickle.loads(pickle.dumps(backend))
  assert copy._nlp is None and copy.annotate(["Paris"]) == [[(0, 5, ENTITY_LABEL)]]
  assert ner.SPACY_BLANK_PREFIX == "blank:"


def test_entity_offsets_equal_spacy_ents():
  # Adjacent entities (B B), multi-token ones, non-ASCII text before them: the token-array
  # reading must give what doc.ents gives.
  from pipelines.entities.ner import _entity_offsets
  nlp = ner.load_spacy("blank:en", ["New York", "Paris", "東京", "York"])
  text = "👩‍🔬 e\u0301 New York Paris, york; 東京 and new york. Nothing here."
  doc = nlp(text)
  assert _entity_offsets(doc) == [(e.start_char, e.end_char, e.label) for e in doc.ents]
  assert [text[b:e] for b, e, _ in _entity_offsets(doc)] == [
      "New York", "Paris", "york", "東京", "new york"]
  assert _entity_offsets(nlp("")) == [] and _entity_offsets(nlp("nothing")) == []


def test_entity_offsets_equal_spacy_ents_on_random_text():
  # Ends read from the next token's offset and the space after a token (not from each token's
  # length): entities at the very end (with and without a space after), before several
  # spaces, newlines, non-breaking spaces, emoji; patterns with inner or trailing whitespace
  # (whose entities can end in a whitespace token).
  from pipelines.entities.ner import _entity_arrays, _entity_offsets
  rng = random.Random(11)
  nlp = ner.load_spacy("blank:en", ["Paris", "New York", "東京", "york", "a  b", "x ", "q\n"])
  words = ["paris", "Paris", "New", "york", "東京", "a", "b", "x", "q", "🎉", "e\u0301", ".",
           "the"]
  seps = [" ", " ", " ", "  ", "\n", "\n\n", "\u00a0", "", "\t"]
  found = 0
  for _ in range(3000):
    text = "".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randrange(0, 12)))
    doc = nlp(text)
    want = [(e.start_char, e.end_char, e.label) for e in doc.ents]
    assert _entity_offsets(doc) == want, text
    assert all(text[b:e] == s.text for (b, e, _), s in zip(want, doc.ents))
    without = _entity_arrays(doc, types=False)
    assert (without is None) == (not want)
    if want:
      assert without == ([b for b, _, _ in want], [e for _, e, _ in want], None)
      found += len(want)
      assert all(type(v) is int for b, e, t in want for v in (b, e, t))
  assert found > 3000


def test_offsets_are_the_spans_without_labels():
  rng = random.Random(4)
  words = ["paris", "Paris", "barack", "Obama", "東京", "🎉", "the", "city", ".", "\n\n", "Berlin"]
  texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(300)]
  for labels in (None, frozenset({"CITY"}), frozenset()):
    spans_backend = SpacyBackend(patterns=PATTERNS, max_length=50, batch_size=8, labels=labels)
    offsets_backend = SpacyBackend(patterns=PATTERNS, max_length=50, batch_size=8, labels=labels)
    for backend in (spans_backend, offsets_backend):
      backend.nlp.get_pipe("entity_ruler").add_patterns([{"label": "CITY", "pattern": "Berlin"}])
    spans = spans_backend.annotate(texts)
    offsets = offsets_backend.offsets(texts)
    assert offsets == [([b for b, _, _ in s], [e for _, e, _ in s]) for s in spans]
    assert spans_backend.stats == offsets_backend.stats
    assert spans_backend.stats["ner/split_texts"] > 0
    if labels is None:
      assert {label for s in spans for _, _, label in s} == {ENTITY_LABEL, "CITY"}
    assert all(label in labels for s in spans for _, _, label in s) if labels is not None \
        else True
