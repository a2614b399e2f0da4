"""The realistic text of ``benchmarks/ner_throughput.py``: its mention density, and a carrier
text in which no ruler pattern matches."""

import pytest

from benchmarks import ner_throughput
from pipelines.entities import ner

# Aliases as a generated world's most linked ones come: names, and anchors of plain words
# ("of the", "Was") that the carrier text must not contain.
PATTERNS = ["Kalo Mire River", "Battle of Palvol", "Nesfas", "of the", "Was", "Tinfon Ruspir",
            "HMS Singir Nasros", "the lo", "Zerman Farbis Prize"]


@pytest.mark.slow  # 2.4-3.6 s: builds and counts a realistic corpus (over the 2 s of a fast test)
def test_realistic_texts_have_their_density_and_the_counts_asked():
  counts = [8000, 500, 1, 40]
  texts = ner_throughput.realistic_texts(counts, PATTERNS, mention_every=10, seed=3)
  assert texts == ner_throughput.realistic_texts(counts, PATTERNS, mention_every=10, seed=3)
  # The words asked for, or up to two more when a name of three words ends the text.
  assert all(c <= len(t.split()) <= c + 2 for c, t in zip(counts, texts))
  nlp = ner.load_spacy("blank:en", PATTERNS)
  words = sum(len(t.split()) for t in texts)
  mentions = sum(len(d.ents) for d in nlp.pipe(texts))
  assert 9.3 < words / mentions < 10.6  # one mention every 10 words
  # Prose: sentences of ~21 words, paragraphs, capitals and full stops.
  big = texts[0]
  assert big.count("\n\n") >= 10 and 10 < len(big.split()) / big.count(".") < 40


def test_the_carrier_text_matches_no_pattern():
  texts = ner_throughput.realistic_texts([5000], PATTERNS, mention_every=10**9, seed=1)
  assert not list(ner.load_spacy("blank:en", PATTERNS)(texts[0]).ents)
  banned = {w for p in PATTERNS for w in p.lower().split()}
  import spacy  # pylint: disable=g-import-not-at-top  (2.5 s: only where used)
  tokens = {t.lower_ for t in spacy.blank("en")(texts[0]) if t.is_alpha}
  assert not tokens & banned and "that" in tokens  # English function words, but no "the"
