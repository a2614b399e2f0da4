"""A memory corpus build: generates the biographies, writes the dumps and runs the real jobs
(``python -m pipelines wikipedia`` per split, and on the shared real samples ``python -m
pipelines wikipedia`` and ``python -m pipelines books`` when present) through
:mod:`synthetic.jobs`; reports what the records hold for the memory-use check."""

from __future__ import annotations

import collections
import glob
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from schemas import records_dir
from synthetic import jobs as harness
from synthetic.memory_corpus.corpus import SPLITS, generate_corpus, write_split

DEFAULT_SAMPLES = os.path.join(harness.ROOT, "..", "shared", "samples")


def _record_args(seq_length: int, segments_per_pack: int, overwrite: bool) -> List[str]:
  return ["--seq_length", str(seq_length), "--overlap", "0",
          "--max_segments_per_document", str(segments_per_pack),
          "--segments_per_pack", str(segments_per_pack),
          "--max_question_tokens", str(min(8, seq_length // 4))] + (
              ["--overwrite"] if overwrite else [])


def record_stats(out: str) -> Dict[str, Any]:
  """What the records hold for the memory check: mentions per document, entities recurring in
  several segments, the share of context tokens inside mentions, mentions per pack."""
  segs_of = collections.defaultdict(lambda: collections.defaultdict(set))  # doc -> id -> segs
  mentions_doc = collections.Counter()
  pair_count = collections.Counter()  # (doc, segment, entity) -> mentions
  context = mention_tokens = known = total = packs = 0
  max_per_pack = 0
  for r in records_dir.iter_packs(out):
    packs += 1
    n = len(r["segment_mask"])
    L = len(r["token_ids"]) // n
    kinds = r["token_kind"]
    context += sum(1 for k in kinds if k == 3)
    covered = set()
    max_per_pack = max(max_per_pack, len(r["mention_segment"]))
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc = (r["document_id"][s], r["sub_document_index"][s])
      seg = r["segment_index"][s]
      total += 1
      mentions_doc[doc] += 1
      covered.update(s * L + t for t in range(b, e + 1))
      if ent:
        known += 1
        segs_of[doc][ent].add(seg)
        pair_count[(doc, seg, ent)] += 1
    mention_tokens += len(covered)
  docs = len(mentions_doc)
  multi = sum(1 for d in segs_of.values() if any(len(s) >= 2 for s in d.values()))
  supported = repeat = 0
  for (doc, seg, ent), c in pair_count.items():
    if len(segs_of[doc][ent] - {seg}) > 0:
      supported += c
    if c > 1:
      repeat += c
  return {"packs": packs, "documents_with_mentions": docs, "mentions": total,
          "mentions_with_entity_id": known,
          "mentions_per_document": round(total / max(docs, 1), 2),
          "max_mentions_per_pack": max_per_pack,
          "mention_token_fraction": round(mention_tokens / max(context, 1), 4),
          "documents_with_entity_in_2plus_segments": round(multi / max(docs, 1), 4),
          "cross_segment_support": round(supported / max(known, 1), 4),
          "same_segment_repeat": round(repeat / max(known, 1), 4),
          "mean_segments_per_entity": round(
              sum(len(s) for d in segs_of.values() for s in d.values())
              / max(sum(len(d) for d in segs_of.values()), 1), 3)}


def split_stats(out: str) -> Dict[str, Any]:
  """Counts from a pipeline output dir's manifest plus :func:`record_stats`."""
  m = records_dir.read_manifest(out)
  c, seg = m["counts"], m["stages"]["segment"]
  spd = m["distributions"]["segments_per_document"]
  stats = {"output_dir": out, "counts": c,
           "reconciles": c["input"] == c["written"] + c["skipped"] + c["rejected"],
           "documents": c["written"], "segments": m["examples"]["segments"],
           "sub_documents": m["examples"]["sub_documents"],
           "segments_per_document": {k: spd[k] for k in ("min", "mean", "max")},
           "context_tokens": seg["context_tokens"], "mentions_parsed": m["stages"]["parse"].get(
               "mentions", 0), "mentions_placed": seg["mentions_labels"],
           "mentions_lost": seg["mentions_lost"], "mentions_cut": seg["mentions_cut"],
           "entity_vocabulary": m["stages"].get("entities", {}).get("vocabulary")}
  stats.update(record_stats(out))
  return stats


def _samples(samples_dir: Optional[str]) -> Tuple[List[str], List[str]]:
  if not samples_dir or not os.path.isdir(samples_dir):
    return [], []
  wiki = sorted(glob.glob(os.path.join(samples_dir, "wikipedia", "*.xml.bz2")))
  books = sorted(glob.glob(os.path.join(samples_dir, "books", "pg19", "*", "*.txt")))
  return wiki, books


def build(out_dir: str, seed: int = 0, train_docs: int = 600, heldout_docs: int = 100,
          seq_length: int = 128, segments_per_pack: int = 16, min_words: int = 450,
          max_words: int = 1100, include_samples: bool = True,
          samples_dir: Optional[str] = DEFAULT_SAMPLES, overwrite: bool = False,
          parallel: int = 2) -> Dict[str, Any]:
  """Generates the corpus, writes the dumps and runs the pipelines; returns (and writes to
  ``<out_dir>/corpus.json``) paths, counts and timings.

  ``out_dir`` gets ``dumps/``, ``train/``, ``heldout/`` and, when ``include_samples`` and the
  samples exist under ``samples_dir``, ``real_wikipedia/`` and ``real_books/``.  Segments of
  ``seq_length`` tokens without overlap, packs of ``segments_per_pack`` segments, documents of
  at most ``segments_per_pack`` segments (longer ones become sub-documents).  An ``out_dir``
  holding an earlier build is refused (FileExistsError, nothing written) unless ``overwrite``.  At most
  ``parallel`` pipeline processes run at once (the training one beside the others).  Raises
  RuntimeError (with the log's tail) when a pipeline fails.
  """
  t_start = time.perf_counter()
  earlier = [d for d in SPLITS + ("real_wikipedia", "real_books")
             if os.path.exists(records_dir.manifest_path(os.path.join(out_dir, d)))]
  if earlier and not overwrite:
    raise FileExistsError(f"{out_dir} holds an earlier build ({', '.join(earlier)}); pass "
                          "overwrite=True (--overwrite) to replace it")
  dumps = os.path.join(out_dir, "dumps")
  logs = os.path.join(out_dir, "logs")
  os.makedirs(dumps, exist_ok=True)
  os.makedirs(logs, exist_ok=True)
  corpus = generate_corpus(seed, train_docs, heldout_docs, min_words, max_words)
  paths = {}
  for split in SPLITS:
    paths[split] = os.path.join(dumps, f"memcorpus-{split}-pages-articles.xml.bz2")
    write_split(corpus[split], paths[split], os.path.join(dumps, f"cast-{split}.jsonl"))
  t_generated = time.perf_counter()
  rec = _record_args(seq_length, segments_per_pack, overwrite)
  wiki, books = _samples(samples_dir) if include_samples else ([], [])
  # The training job is the long one: it runs on one core, the rest one after another beside it.
  jobs = [harness.Job(split, "wikipedia",
               ["--input", paths[split], "--output_dir", os.path.join(out_dir, split)] + rec,
               os.path.join(logs, f"{split}.log")) for split in SPLITS]
  real: Dict[str, Any] = {"wikipedia": None, "books": None}
  real_wiki = os.path.join(out_dir, "real_wikipedia")
  if wiki:
    jobs.append(harness.Job("real_wikipedia", "wikipedia",
                     ["--input", ",".join(wiki), "--output_dir", real_wiki] + rec,
                     os.path.join(logs, "real_wikipedia.log"), after=["heldout"]))
  if books:
    ner = (["--ner", "spacy", "--linker", "alias", "--entities_dir", real_wiki,
            "--spacy_model", "blank:en", "--linker_min_count", "1"] if wiki else [])
    jobs.append(harness.Job("real_books", "books",
                     ["--input", ",".join(books), "--output_dir",
                      os.path.join(out_dir, "real_books")] + rec + ner,
                     os.path.join(logs, "real_books.log"),
                     after=["real_wikipedia"] if wiki else ["heldout"]))
  timings = {"generate_and_write_dumps": round(t_generated - t_start, 2)}
  t_jobs = time.perf_counter()
  timings.update(harness.run_jobs(jobs, parallel))
  timings["pipelines_wall"] = round(time.perf_counter() - t_jobs, 2)
  for name in ("wikipedia", "books"):
    out = os.path.join(out_dir, f"real_{name}")
    if (wiki if name == "wikipedia" else books):
      m = records_dir.read_manifest(out)
      real[name] = {"output_dir": out, "counts": m["counts"],
                    "segments": m["examples"]["segments"],
                    "mentions_placed": m["stages"]["segment"]["mentions_labels"]}
  splits = {}
  for split in SPLITS:
    s = split_stats(os.path.join(out_dir, split))
    s["dump"] = paths[split]
    s["dump_bytes"] = os.path.getsize(paths[split])
    s["cast"] = os.path.join(dumps, f"cast-{split}.jsonl")
    s["generated_documents"] = len(corpus[split])
    splits[split] = s
  titles = {k: {e.title for d in v for e in [d.subject] + d.cast} for k, v in corpus.items()}
  timings["total"] = round(time.perf_counter() - t_start, 2)
  result = {"out_dir": out_dir, "seed": seed,
            "config": {"train_docs": train_docs, "heldout_docs": heldout_docs,
                       "seq_length": seq_length, "segments_per_pack": segments_per_pack,
                       "overlap": 0, "min_words": min_words, "max_words": max_words},
            "splits": splits, "real": real,
            "shared_entity_titles": len(titles["train"] & titles["heldout"]),
            "timings_s": timings}
  with open(os.path.join(out_dir, "corpus.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  return result
