r"""Segment windows before/after the issue-8 fix: overlap, edges inside characters, speed.

  python -m benchmarks.segment_windows [--repeats 9] [--calls 200] [--old_ref 925c659]

Runs the new code (this tree) against the old code (``pipelines/text/segmenter.py`` and
``tokenizer.py`` as of ``--old_ref``, read with ``git show`` into temporary modules; nothing in
the tree is changed; no network):

* long unbroken "words" (random alphanumeric, 100 characters, ~8.4k BPE tokens) at
  ``--seq_length 256``, ``--overlap 128`` with a question of >= 64 tokens (189 context tokens per
  segment): segments, the ideal count ``ceil((n - overlap) / (budget - overlap))`` and the
  min/median/max tokens shared by consecutive segments;
* Japanese-like text without spaces (~3k characters, ~5k tokens) at seq_length 256 and 512:
  window edges that fall inside a multi-byte character (decoding either side gives U+FFFD);
* ``segment_document`` time on English-like text of ~5k tokens (the synthetic HotpotQA
  paragraphs of ``pipelines.datasets.hotpotqa.fake_input``), old and new interleaved, ``--repeats``
  times ``--calls`` calls each; min/median/max ms per call.  ``word_starts`` likewise.

The last line is a JSON object: the new/old ratio of the median ``segment_document`` time.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from pipelines.text import segmenter as new_seg  # pylint: disable=g-import-not-at-top
from pipelines.text import tokenizer as new_tok  # pylint: disable=g-import-not-at-top
from synthetic.text import cjk_text, unbroken_words  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OLD_REF = "925c659bc95a4169aa004dc8531cb9eb4227d244"  # main before the fix (issue 8)


def load_old(ref: str, tmp: str):
  """(old segmenter module, old tokenizer module) as of git ``ref``, or None if unavailable."""
  mods = []
  for name in ("segmenter", "tokenizer"):
    try:
      src = subprocess.run(["git", "show", f"{ref}:pipelines/text/{name}.py"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
      print(f"old code unavailable ({e}); measuring the new code only")
      return None
    path = os.path.join(tmp, f"old_{name}.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write(src)
    spec = importlib.util.spec_from_file_location(f"old_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    mods.append(mod)
  return tuple(mods)


def english_text(tok, target_tokens: int) -> str:
  from pipelines.datasets.hotpotqa import fake_input as synthetic_hotpotqa  # pylint: disable=g-import-not-at-top
  paragraphs = []
  for q in synthetic_hotpotqa.make_questions(50, seed=0):
    for title, sentences in q["context"]:
      paragraphs.append(title + ". " + "".join(sentences))
      text = "\n\n".join(paragraphs)
      if len(paragraphs) % 4 == 0 and len(tok.encode(text)) >= target_tokens:
        return text
  return "\n\n".join(paragraphs)


def encodings(tok, text: str, old_tok):
  """(new Encoded, old Encoded): same tokens, word starts by each version's rule."""
  enc = tok.encode(text)
  if old_tok is None:
    return enc, None
  old_ws = old_tok.word_starts(text, enc.begins)
  return enc, new_tok.Encoded(enc.ids, enc.begins, enc.ends, old_ws)


def windows_of(seg, enc, question, special, seq_length):
  cfg = seg.SegmenterConfig(seq_length=seq_length, overlap=128,
                            max_segments_per_document=1_000_000)
  subs, stats = seg.segment_document("d", "q", enc, question, special, cfg)
  assert len(subs) == 1
  return subs[0].windows.astype(np.int64), stats


def spread(values):
  return (min(values), statistics.median(values), max(values))


def main() -> None:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.segment_windows",
                               description=__doc__.split("\n")[0])
  ap.add_argument("--repeats", type=int, default=9, help="timing repetitions (>= 7)")
  ap.add_argument("--calls", type=int, default=200, help="calls per timing repetition")
  ap.add_argument("--english_tokens", type=int, default=5000)
  ap.add_argument("--old_ref", default=OLD_REF, help="git revision of the old code")
  args = ap.parse_args()

  tok = new_tok.Tokenizer()
  special = tok.special_ids
  with tempfile.TemporaryDirectory() as tmp:
    old = load_old(args.old_ref, tmp)
  versions = [("new", new_seg, 0)] + ([("old", old[0], 1)] if old else [])
  old_tok = old[1] if old else None

  # (a) long unbroken words at seq_length 256 with a full question.
  text = unbroken_words(110, 100)
  encs = encodings(tok, text, old_tok)
  question = tok.encode("what " * 80)
  n = len(encs[0])
  budget = 256 - (64 + 2) - 1
  ideal = math.ceil((n - 128) / (budget - 128))
  long_words = {}
  for name, seg, k in versions:
    w, stats = windows_of(seg, encs[k], question, special, 256)
    shared = w[:-1, 1] - w[1:, 0]
    res = {"segments": len(w), "ideal": ideal, "shared_min_median_max": spread(shared.tolist()),
           "shared_below_overlap": int((shared < 128).sum()),
           "ends_not_advancing": int((np.diff(w[:, 1]) <= 0).sum()),
           "hard_cuts": stats["hard_cuts"], "char_boundary_cuts": stats["char_boundary_cuts"]}
    long_words[name] = res
    print(f"long words, seq_length 256, {n} tokens, budget {budget}: {name}: {res}")

  # (b) CJK text without spaces: window edges inside a character.
  text = cjk_text()
  encs = encodings(tok, text, old_tok)
  ids = encs[0].ids
  cjk = {}
  for seq_length, q in ((256, None), (512, tok.encode("富士山はどこですか"))):
    for name, seg, k in versions:
      w, stats = windows_of(seg, encs[k], q, special, seq_length)
      edges = sorted({x for x in w.ravel().tolist() if 0 < x < len(ids)})
      inside = sum("\ufffd" in tok.decode(ids[:x]) + tok.decode(ids[x:]) for x in edges)
      cjk[(seq_length, name)] = inside
      print(f"CJK, {len(text)} chars, {len(ids)} tokens, seq_length {seq_length}: {name}: "
            f"{len(w)} segments, {inside} of {len(edges)} window edges inside a character")

  # (c) segment_document and word_starts time on English-like text, interleaved.
  text = english_text(tok, args.english_tokens)
  encs = encodings(tok, text, old_tok)
  question = tok.encode("Which town is the birthplace of the painter who founded the archive?")
  cfg = {name: seg.SegmenterConfig() for name, seg, _ in versions}
  times = collections.defaultdict(list)
  ws_times = collections.defaultdict(list)
  for name, seg, k in versions:  # warm up
    seg.segment_document("d", "q", encs[k], question, special, cfg[name])
  for _ in range(args.repeats):
    for name, seg, k in versions:
      t0 = time.perf_counter()
      for _ in range(args.calls):
        seg.segment_document("d", "q", encs[k], question, special, cfg[name])
      times[name].append((time.perf_counter() - t0) / args.calls * 1e3)
      t0 = time.perf_counter()
      for _ in range(args.calls):
        if name == "new":
          new_tok.word_starts(text, encs[0].begins, encs[0].ends)
        else:
          old_tok.word_starts(text, encs[0].begins)
      ws_times[name].append((time.perf_counter() - t0) / args.calls * 1e3)
  segs = {name: windows_of(seg, encs[k], question, special, 512)[0].shape[0]
          for name, seg, k in versions}
  budget = 512 - (len(question) + 2) - 1
  ideal = math.ceil((len(encs[0]) - 128) / (budget - 128))
  for name, _, _ in versions:
    lo, med, hi = spread(times[name])
    wlo, wmed, whi = spread(ws_times[name])
    print(f"English, {len(encs[0])} tokens, seq_length 512: {name}: {segs[name]} segments "
          f"(ideal {ideal}); segment_document ms/call min {lo:.3f} median {med:.3f} max {hi:.3f} "
          f"({args.repeats} x {args.calls} calls); word_starts ms/call min {wlo:.3f} "
          f"median {wmed:.3f} max {whi:.3f}")
  t0 = time.perf_counter()
  for _ in range(5):
    tok.encode(text)
  print(f"for scale: tokenizing that text takes {(time.perf_counter() - t0) / 5 * 1e3:.2f} ms")
  if old:
    ratio = statistics.median(times["new"]) / statistics.median(times["old"])
    ratios = [a / b for a, b in zip(times["new"], times["old"])]
    print("per-repetition new/old ratio min {:.3f} median {:.3f} max {:.3f}".format(
        *spread(ratios)))
  else:
    ratio = None
  # Headline: window edges that cut a multi-byte character in CJK text (the defect; must be
  # 0).  The time ratio is reported beside it (no target: ~9 us per 5k-token document, under
  # 0.2% of tokenising the same text).
  print(json.dumps({
      "metric": "cjk_window_edges_inside_a_character", "value": cjk[(256, "new")],
      "target": 0, "unit": "edges",
      "segment_document_time_ratio_new_vs_old": ratio and round(ratio, 3),
      "long_words_segments_new_old_ideal": [long_words["new"]["segments"],
                                            long_words.get("old", {}).get("segments"),
                                            long_words["new"]["ideal"]],
      "long_words_shared_min_new_old": [long_words["new"]["shared_min_median_max"][0],
                                        long_words.get("old", {}).get(
                                            "shared_min_median_max", [None])[0]],
      "cjk_edges_inside_char_new_old_seq256": [cjk[(256, "new")], cjk.get((256, "old"))]}))


if __name__ == "__main__":
  main()
