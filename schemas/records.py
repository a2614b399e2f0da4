"""The TFRecord contract between the pipelines and the trainer.

One record is one *pack*: ``segments_per_pack`` (N) segments of ``seq_length`` (L) tokens that
hold whole (sub-)documents, padded with masked segments.  The trainer reads one pack as one
global batch, so every document's segments are in the same batch and memories can be gathered
across all of them (see ``pipelines/beam/packing.py`` for why packing lives in the pipeline).

Feature kinds:

* ``token``   -- int64, shape ``[N * L]`` in the record, ``[N, L]`` after parsing.
* ``segment`` -- one value per segment, shape ``[N]``.
* ``pack``    -- one value per record, shape ``[1]``.
* ``ragged``  -- variable-length int64 lists, one entry per span in the pack.  Spans are never
  capped, so nothing is dropped to fit a fixed shape; the trainer densifies them.

Every span (answer, entity mention) is ``(segment, begin, end)`` with ``begin``/``end`` *inclusive*
token indices into that segment (question prefix included in the indexing).

Sub-documents (a document longer than ``max_segments_per_document`` segments) are separate
documents for the model (their own ``document_index``, no shared memories), but their char
offsets still index the full source document's text, so predictions map back to it.

Pure Python: no TensorFlow, no Beam.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Mapping, Tuple

SCHEMA_NAME = "readtwice.segments"
# Major version changes break readers; minor versions only add features.
SCHEMA_VERSION = "1.0.0"

# Values of the ``answer_type`` segment feature (HotpotQA answer-type head).
ANSWER_TYPE_NONE = -1  # no question or unknown (e.g. test files without answers)
ANSWER_TYPE_SPAN = 0
ANSWER_TYPE_YES = 1
ANSWER_TYPE_NO = 2
ANSWER_TYPES = {"span": ANSWER_TYPE_SPAN, "yes": ANSWER_TYPE_YES, "no": ANSWER_TYPE_NO}

# Values of the ``token_kind`` token feature.
TOKEN_KIND_PAD = 0
TOKEN_KIND_SPECIAL = 1  # CLS / SEP
TOKEN_KIND_QUESTION = 2  # char offsets index the question text
TOKEN_KIND_CONTEXT = 3  # char offsets index the document text


class SchemaVersionError(ValueError):
  """Raised when records were written under an incompatible schema version."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  name: str
  kind: str  # token | segment | pack | ragged
  dtype: str  # int64 | bytes
  doc: str


FEATURES: Tuple[FeatureSpec, ...] = (
    # --- pack level -------------------------------------------------------------------------
    FeatureSpec("schema_version", "pack", "bytes", "SCHEMA_VERSION of the writer."),
    FeatureSpec("pack_id", "pack", "bytes", "Stable id: '<shard>-<index in shard>'."),
    # --- token level [N, L] -----------------------------------------------------------------
    FeatureSpec("token_ids", "token", "int64", "Vocabulary ids; PAD id in padding."),
    FeatureSpec("input_mask", "token", "int64", "1 for real tokens, 0 for padding."),
    FeatureSpec("word_start", "token", "int64",
                "1 where a token starts a word, 0 for continuations, special and padding."),
    FeatureSpec("token_kind", "token", "int64", "TOKEN_KIND_* (pad/special/question/context)."),
    FeatureSpec("char_begin", "token", "int64",
                "Start char offset (code points) in the question or document text; -1 if none."),
    FeatureSpec("char_end", "token", "int64", "Exclusive end char offset; -1 if none."),
    # --- segment level [N] ------------------------------------------------------------------
    FeatureSpec("segment_mask", "segment", "int64", "1 for real segments, 0 for padding."),
    FeatureSpec("document_index", "segment", "int64",
                "Index of the (sub-)document within the pack, -1 for padding segments; "
                "segments with equal values share memories."),
    FeatureSpec("document_id", "segment", "bytes", "Source document id ('' for padding)."),
    FeatureSpec("question_id", "segment", "bytes", "Question id for QA ('' otherwise)."),
    FeatureSpec("sub_document_index", "segment", "int64",
                "Which explicit sub-document of a long document (0-based)."),
    FeatureSpec("num_sub_documents", "segment", "int64", "Sub-documents the document has."),
    FeatureSpec("segment_index", "segment", "int64",
                "Position of the segment in its sub-document (0-based)."),
    FeatureSpec("num_segments", "segment", "int64", "Segments in this sub-document."),
    FeatureSpec("question_length", "segment", "int64",
                "Length of the question prefix '[CLS] q [SEP]' (1 = just CLS, no question)."),
    FeatureSpec("context_char_begin", "segment", "int64",
                "Char offset of the first context token in the document text."),
    FeatureSpec("context_char_end", "segment", "int64",
                "Exclusive char offset of the last context token."),
    FeatureSpec("answer_type", "segment", "int64", "ANSWER_TYPE_* of the question."),
    FeatureSpec("supporting", "segment", "int64",
                "1 if the segment holds context of a supporting paragraph, else 0 (-1 unknown)."),
    # --- spans (ragged) ---------------------------------------------------------------------
    FeatureSpec("answer_segment", "ragged", "int64", "Segment index in the pack of an answer span."),
    FeatureSpec("answer_begin", "ragged", "int64", "First token of the answer span (inclusive)."),
    FeatureSpec("answer_end", "ragged", "int64", "Last token of the answer span (inclusive)."),
    FeatureSpec("mention_segment", "ragged", "int64", "Segment index of an entity mention."),
    FeatureSpec("mention_begin", "ragged", "int64", "First token of the mention (inclusive)."),
    FeatureSpec("mention_end", "ragged", "int64", "Last token of the mention (inclusive)."),
    FeatureSpec("mention_entity_id", "ragged", "int64", "Entity id of the mention (0 = unknown)."),
)

FEATURES_BY_NAME: Dict[str, FeatureSpec] = {f.name: f for f in FEATURES}


def features_of_kind(kind: str) -> Tuple[FeatureSpec, ...]:
  return tuple(f for f in FEATURES if f.kind == kind)


def major_version(version: str) -> int:
  try:
    return int(str(version).split(".")[0])
  except ValueError as e:
    raise SchemaVersionError(f"Malformed schema version {version!r}.") from e


def check_version(version: str | bytes, where: str = "records") -> None:
  """Raises SchemaVersionError unless ``version`` has this reader's major version."""
  if isinstance(version, bytes):
    version = version.decode("utf-8", "replace")
  if major_version(version) != major_version(SCHEMA_VERSION):
    raise SchemaVersionError(
        f"{where} were written with schema version {version!r}, but this reader understands "
        f"{SCHEMA_NAME} {major_version(SCHEMA_VERSION)}.x (current {SCHEMA_VERSION}). "
        "Re-run the pipeline with this release, or use the release that wrote them.")


def expected_lengths(segments_per_pack: int, seq_length: int) -> Dict[str, int | None]:
  """Flat length of each feature in a record; None for ragged features."""
  sizes = {"token": segments_per_pack * seq_length, "segment": segments_per_pack, "pack": 1,
           "ragged": None}
  return {f.name: sizes[f.kind] for f in FEATURES}


def validate_record(features: Mapping[str, Iterable], segments_per_pack: int,
                    seq_length: int) -> None:
  """Checks a decoded record (name -> list of values) against the spec; raises ValueError."""
  if "schema_version" in features:
    check_version(list(features["schema_version"])[0])
  lengths = expected_lengths(segments_per_pack, seq_length)
  missing = sorted(set(lengths) - set(features))
  if missing:
    raise ValueError(f"Record lacks features {missing}.")
  ragged = {}
  for name, want in lengths.items():
    got = len(list(features[name]))
    if want is None:
      ragged.setdefault(name.split("_")[0], set()).add(got)
    elif got != want:
      raise ValueError(f"Feature {name!r} has {got} values, expected {want}.")
  for group, counts in ragged.items():
    if len(counts) != 1:
      raise ValueError(f"Ragged {group}_* features differ in length: {sorted(counts)}.")
