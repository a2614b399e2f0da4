"""A long-range QA build: generates the documents, writes the files and runs the real jobs on
them (``python -m pipelines wikipedia`` for the entity vocabulary, ``python -m pipelines
hotpotqa`` with spaCy + alias linking per split) through :mod:`synthetic.jobs`, checks their
manifests and records (read with :mod:`schemas.records_dir`), and reports; :func:`main` is
``python -m synthetic.long_range_qa``."""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from typing import Any, Dict, Optional, Sequence, Union

import synthetic.long_range_qa
from schemas import records_dir
from synthetic import jobs as harness
from synthetic.long_range_qa.chance import chance_level
from synthetic.long_range_qa.documents import SPLITS, LongRangeDoc, Params
from synthetic.long_range_qa.files import write
from synthetic.long_range_qa.generate import generate


def record_stats(out: str, docs: Sequence[LongRangeDoc], entities_dir: str) -> Dict[str, Any]:
  """What the records of ``out`` hold for ``docs``: per fact, whether each of its two names is
  a mention with that name's entity id in the fact's segment; answer labels per segment;
  mentions that are not a fact's name."""
  from schemas import documents as documents_schema  # pylint: disable=g-import-not-at-top
  from schemas import entities as entities_schema  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  vocab = entities_schema.titles_by_id(tables.read_vocabulary(entities_dir))
  texts = {k: v["text"] for k, v in documents_schema.load(out).items()}
  found = collections.defaultdict(set)  # doc -> {(segment, surface, title)}
  answers = collections.defaultdict(set)  # doc -> segments
  segments = collections.Counter()
  mentions = linked = 0
  per_sub = int(records_dir.read_manifest(out)["config"]["max_segments_per_document"])
  for r in records_dir.iter_packs(out):
    n = len(r["segment_mask"])
    L = len(r["token_ids"]) // n
    # A segment's position in its whole document (sub-document k starts at k * per_sub).
    position = [int(r["sub_document_index"][s]) * per_sub + int(r["segment_index"][s])
                for s in range(n)]
    for s in range(n):
      if r["segment_mask"][s]:
        segments[r["document_id"][s].decode()] += 1
    for s, b, e, ent in zip(r["mention_segment"], r["mention_begin"], r["mention_end"],
                            r["mention_entity_id"]):
      doc = r["document_id"][s].decode()
      surface = texts[doc][r["char_begin"][s * L + b]:r["char_end"][s * L + e]]
      found[doc].add((position[s], surface, vocab.get(ent)))
      mentions += 1
      linked += bool(ent)
    for s in r["answer_segment"]:
      answers[r["document_id"][s].decode()].add(position[s])
  expected = hit = target_hit = target_expected = answers_ok = 0
  extra = 0
  by_distance = collections.defaultdict(lambda: [0, 0])
  for d in docs:
    want = set()
    for f in d.facts:
      for name in f.names(d.triples):
        want.add((f.segment, name, name))
        expected += 1
        ok = (f.segment, name, name) in found[d.id]
        hit += ok
        if f.triple == 0:
          target_expected += 1
          target_hit += ok
    extra += len(found[d.id] - want)
    good = answers[d.id] == {d.birth_segment}
    answers_ok += good
    by_distance[d.distance][0] += 1
    by_distance[d.distance][1] += good
  return {"documents": len(segments), "segments": sum(segments.values()),
          "segments_per_document": sorted(set(segments.values())),
          "mentions": mentions, "mentions_with_entity_id": linked,
          "fact_name_mentions_expected": expected, "fact_name_mentions_linked": hit,
          "fact_name_mentions_linked_fraction": round(hit / max(expected, 1), 4),
          "target_fact_mentions_linked_fraction": round(target_hit / max(target_expected, 1), 4),
          "other_mentions": extra,
          "answers_in_intended_segment_only": answers_ok,
          "answers_in_intended_segment_only_fraction": round(answers_ok / max(len(docs), 1), 4),
          "documents_by_distance": {str(k): v[0] for k, v in sorted(by_distance.items())}}


def _check_manifest(out: str, docs: int, split_expected: bool = False) -> Dict[str, Any]:
  m = records_dir.read_manifest(out)
  c = m["counts"]
  seg = m["stages"].get("segment", {})
  problems = []
  if c.get("input") != docs or c.get("written") != docs:
    problems.append(f"input {c.get('input')}, written {c.get('written')} of {docs}")
  for key in ("rejected", "skipped"):
    if c.get(key):
      problems.append(f"{key} {c[key]}")
  for key in ("answer_spans_cut", "answer_spans_lost", "mentions_cut", "mentions_lost",
              "questions_truncated", "documents_split"):
    if key == "documents_split" and split_expected:
      if seg.get(key) != docs:
        problems.append(f"segment/{key} {seg.get(key)}, not every one of {docs} documents")
    elif seg.get(key):
      problems.append(f"segment/{key} {seg[key]}")
  if problems:
    raise RuntimeError(f"{out}: unexpected manifest counts: {'; '.join(problems)}")
  return {"counts": c, "segments": m["examples"]["segments"],
          "annotate": {k: v for k, v in m["stages"].get("annotate", {}).items()
                       if k in ("input", "output", "mentions", "linked")}}


def build(out_dir: str, train_docs: Union[int, Sequence[LongRangeDoc]] = 600,
          dev_docs: Union[int, Sequence[LongRangeDoc]] = 150, seed: int = 0,
          params: Params = Params(), segments_per_pack: Optional[int] = None,
          parallel: int = 2, overwrite: bool = False) -> Dict[str, Any]:
  """Generates (``train_docs`` / ``dev_docs``: counts, or documents already generated) with
  seeds ``seed`` (train) and ``seed + 1`` (dev), writes the files (:func:`write`) and runs the
  real jobs as subprocesses: ``python -m pipelines wikipedia`` on the dump (-> ``entities/``),
  then ``python -m pipelines hotpotqa`` on each split with the annotation flags
  (-> ``records_<split>/``), at most ``parallel`` at once.  Checks the manifests (every
  document written, nothing rejected, cut or truncated) and the records (:func:`record_stats`);
  returns (and writes to ``build.json``) paths, stats and timings.  An ``out_dir`` holding an
  earlier build is refused unless ``overwrite``."""
  t0 = time.perf_counter()
  if os.path.exists(os.path.join(out_dir, "build.json")) and not overwrite:
    raise FileExistsError(f"{out_dir} holds an earlier build; pass overwrite=True "
                          "(--overwrite) to replace it")
  os.makedirs(out_dir, exist_ok=True)
  logs = os.path.join(out_dir, "logs")
  os.makedirs(logs, exist_ok=True)
  train = (generate("train", train_docs, seed, params) if isinstance(train_docs, int)
           else list(train_docs))
  dev = (generate("dev", dev_docs, seed + 1, params) if isinstance(dev_docs, int)
         else list(dev_docs))
  t_gen = time.perf_counter()
  paths = write(out_dir, train, dev, params, seed)
  t_write = time.perf_counter()
  pack = segments_per_pack or params.segments
  ents = os.path.join(out_dir, "entities")
  timings = {"generate": round(t_gen - t0, 2), "write": round(t_write - t_gen, 2)}
  timings.update(harness.run_jobs([harness.Job("wikipedia", "wikipedia", [
      "--input", paths["dump"], "--output_dir", ents,
      "--seq_length", str(params.seq_length), "--overlap", "0", "--overwrite"],
      os.path.join(logs, "wikipedia.log"))], 1))
  names = sum(len(d.names) for d in train + dev)
  ann = ["--ner", "spacy", "--spacy_model", "blank:en", "--linker", "alias",
         "--entities_dir", ents, "--linker_min_count", "1",
         "--ruler_patterns", str(max(100_000, 2 * names))]
  jobs = []
  for split, docs in zip(SPLITS, (train, dev)):
    paths[f"records_{split}"] = os.path.join(out_dir, f"records_{split}")
    if docs:
      jobs.append(harness.Job(f"hotpotqa_{split}", "hotpotqa", [
          "--input", paths[split], "--output_dir",
          paths[f"records_{split}"], "--seq_length", str(params.seq_length),
          "--overlap", str(params.overlap), "--max_question_tokens",
          str(params.max_question_tokens), "--segments_per_pack", str(pack),
          "--max_segments_per_document", str(params.sub_document_segments or pack), *ann,
          "--overwrite"],
          os.path.join(logs, f"hotpotqa_{split}.log")))
  t_jobs = time.perf_counter()
  timings.update(harness.run_jobs(jobs, max(1, parallel)))
  timings["hotpotqa_wall"] = round(time.perf_counter() - t_jobs, 2)
  paths["entities"] = ents
  splits = {}
  for split, docs in zip(SPLITS, (train, dev)):
    if not docs:
      continue
    s = _check_manifest(paths[f"records_{split}"], len(docs),
                        split_expected=bool(params.sub_document_segments))
    s.update(record_stats(paths[f"records_{split}"], docs, ents))
    s["chance"] = chance_level(docs)
    splits[split] = s
  wiki = records_dir.read_manifest(ents)
  timings["total"] = round(time.perf_counter() - t0, 2)
  result = {"out_dir": out_dir, "seed": seed, "params": params.describe(),
            "segments_per_pack": pack, "paths": paths, "splits": splits,
            "entity_vocabulary": wiki["stages"].get("entities", {}).get("vocabulary"),
            "names": names,
            "shared_names": len({n for d in train for n in d.names}
                                & {n for d in dev for n in d.names}),
            "timings_s": timings}
  with open(os.path.join(out_dir, "build.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  return result


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(prog="python -m synthetic.long_range_qa",
                              description=synthetic.long_range_qa.__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  d = Params()
  p.add_argument("--out_dir", required=True)
  p.add_argument("--train_docs", type=int, default=600)
  p.add_argument("--dev_docs", type=int, default=150)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--segments", type=int, default=d.segments)
  p.add_argument("--distances", default=",".join(map(str, d.distances)),
                 help="comma-separated distances between the target's two facts")
  p.add_argument("--distractors", type=int, default=d.distractors)
  p.add_argument("--seq_length", type=int, default=d.seq_length)
  p.add_argument("--overlap", type=int, default=d.overlap)
  p.add_argument("--max_question_tokens", type=int, default=d.max_question_tokens)
  p.add_argument("--max_facts_per_segment", type=int, default=d.max_facts_per_segment)
  p.add_argument("--segments_per_pack", type=int, default=0,
                 help="segments per record (and per document at most); 0: --segments")
  p.add_argument("--sub_document_segments", type=int, default=0,
                 help="split each document into sub-documents of this many segments, with "
                      "every triple's two facts in different sub-documents (0: off)")
  p.add_argument("--parallel", type=int, default=2, help="HotpotQA jobs at once")
  p.add_argument("--overwrite", action="store_true")
  a = p.parse_args(argv)
  try:
    params = Params(segments=a.segments,
                    distances=tuple(int(x) for x in a.distances.split(",") if x.strip()),
                    distractors=a.distractors, seq_length=a.seq_length, overlap=a.overlap,
                    max_question_tokens=a.max_question_tokens,
                    max_facts_per_segment=a.max_facts_per_segment,
                    sub_document_segments=a.sub_document_segments)
    r = build(a.out_dir, a.train_docs, a.dev_docs, a.seed, params,
              segments_per_pack=a.segments_per_pack or None, parallel=a.parallel,
              overwrite=a.overwrite)
  except (ValueError, RuntimeError, FileExistsError) as e:
    print(f"long_range_qa: error: {e}", file=sys.stderr)
    return 1
  for split, s in r["splits"].items():
    print(f"{split:5s} {s['documents']:5d} docs  {s['segments']:6d} segments  "
          f"{s['mentions']:6d} mentions  fact names linked "
          f"{100 * s['fact_name_mentions_linked_fraction']:.1f}%  answers in the intended "
          f"segment only {100 * s['answers_in_intended_segment_only_fraction']:.1f}%  chance "
          f"EM {s['chance']['em']:.4f} F1 {s['chance']['f1']:.4f}")
  print("timings (s): " + ", ".join(f"{k} {v}" for k, v in r["timings_s"].items()))
  summary = {"metric": "long_range_qa_build_seconds", "value": r["timings_s"]["total"],
             "unit": "s", "out_dir": r["out_dir"], "shared_names": r["shared_names"],
             **{f"{k}_{f}": r["splits"][k][f] for k in r["splits"]
                for f in ("documents", "segments", "mentions",
                          "fact_name_mentions_linked_fraction",
                          "answers_in_intended_segment_only_fraction")},
             **{f"{k}_chance_{m}": round(r["splits"][k]["chance"][m], 4) for k in r["splits"]
                for m in ("em", "f1")}}
  print(json.dumps(summary, sort_keys=True))
  return 0


if __name__ == "__main__":
  sys.exit(main())
