"""Deterministic synthetic texts that stress segmentation: long unbroken "words" and text
without spaces.  Used by the segmenter tests and ``benchmarks/segment_windows.py``."""

from __future__ import annotations

import random
import string
from typing import Optional

_KANJI = ("日本東京都大阪府山川田中人国年月時間学生先会社私今上下前後本出入見行来食書話語読聞"
          "手足目口耳心体気天雨花海空電車道駅店家族友名")
_KANA = ("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわ"
         "をんがぎぐげござじずぜぞだでどばびぶべぼ")
_KATAKANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"


def unbroken_words(num_words: int, length: int, seed: int = 0) -> str:
  """Random alphanumeric "words" (identifiers, hashes): ~0.75 BPE tokens per character."""
  rng = random.Random(seed)
  chars = string.ascii_letters + string.digits
  return " ".join("".join(rng.choice(chars) for _ in range(length)) for _ in range(num_words))


def cjk_text(num_chars: int = 3000, seed: int = 0, sentence: Optional[str] = None,
             sentence_at: int = 400) -> str:
  """Japanese-like text without spaces: runs of kanji, hiragana and katakana, and 。.

  ``sentence`` (if given) is inserted as the ``sentence_at``-th run, e.g. a known answer.
  """
  rng = random.Random(seed)
  parts, size = [], 0
  while size < num_chars:
    r = rng.random()
    pool = _KANJI if r < 0.45 else _KANA if r < 0.85 else _KATAKANA
    parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 4))))
    if rng.random() < 0.08:
      parts.append("。")
    if sentence is not None and len(parts) == sentence_at:
      parts.append(sentence)
    size += len(parts[-1])
  return "".join(parts)
