"""The files of a long-range QA build: the official HotpotQA JSON per split, the per-document
metadata, the chance level and the MediaWiki dump with one page per entity."""

from __future__ import annotations

import json
import os
import random
from typing import Dict, Iterable, Sequence

from pipelines.datasets.wikipedia import fake_input as synth
from synthetic.long_range_qa.chance import chance_report
from synthetic.long_range_qa.documents import SPLITS, LongRangeDoc, Params
from synthetic.long_range_qa.names import Filler

DUMP_NAME = "lrqawiki-20240101-pages-articles.xml.bz2"


def wiki_pages(docs: Iterable[LongRangeDoc], rng: random.Random, filler: Filler):
  """One page per entity: its name in bold, its kind, a filler sentence and links to every
  other entity of its document by name, in random order (no relation is stated)."""
  for d in docs:
    entities = [(n, kind) for t in d.triples for n, kind in zip(t, ("novel", "writer", "town"))]
    for name, kind in entities:
      others = [n for n, _ in entities if n != name]
      rng.shuffle(others)
      links = ", ".join(f"[[{n}]]" for n in others[:-1]) + f" and [[{others[-1]}]]"
      words = filler.words_(rng, rng.randint(6, 12))
      text = (f"'''{name}''' is a {kind}. {' '.join([words[0].capitalize()] + words[1:])}."
              f"\n\nRelated entries: {links}.\n")
      yield synth.PageSpec(name, text)


def write(out_dir: str, train: Sequence[LongRangeDoc], dev: Sequence[LongRangeDoc],
          params: Params = Params(), seed: int = 0) -> Dict[str, str]:
  """Writes ``train.json``, ``dev.json`` (official HotpotQA layout), ``docs-<split>.jsonl``,
  ``chance.json`` and ``wiki/<dump>`` (one page per entity of both splits); returns the paths."""
  os.makedirs(os.path.join(out_dir, "wiki"), exist_ok=True)
  paths = {}
  for split, docs in zip(SPLITS, (train, dev)):
    paths[split] = os.path.join(out_dir, f"{split}.json")
    with open(paths[split], "w", encoding="utf-8") as f:
      json.dump([d.record for d in docs], f, ensure_ascii=False)
    paths[f"docs_{split}"] = os.path.join(out_dir, f"docs-{split}.jsonl")
    with open(paths[f"docs_{split}"], "w", encoding="utf-8") as f:
      for d in docs:
        f.write(json.dumps(d.meta(), ensure_ascii=False, sort_keys=True) + "\n")
  paths["chance"] = os.path.join(out_dir, "chance.json")
  chance = {split: chance_report(docs) for split, docs in zip(SPLITS, (train, dev)) if docs}
  chance["params"] = params.describe()
  with open(paths["chance"], "w", encoding="utf-8") as f:
    json.dump(chance, f, indent=1, sort_keys=True)
  paths["dump"] = os.path.join(out_dir, "wiki", DUMP_NAME)
  synth.write_dump(wiki_pages(list(train) + list(dev), random.Random(f"wiki:{seed}"),
                              Filler()), paths["dump"])
  return paths
