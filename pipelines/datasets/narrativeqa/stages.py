"""The Beam stages that read NarrativeQA's CSV files and stories.

:func:`read_csv` reads a CSV file (local or gs://, decompressed by extension) row by row;
:class:`ReadQuestionsFn` turns ``qaps.csv`` into the split's questions keyed by story,
:func:`read_keyed` reads ``documents.csv`` / ``summaries.csv`` keyed by story, and
:class:`StoryFn` reads each story once and makes one Document per question, all holding the same
text object.  :class:`ReadHubQuestionsFn` reads the Hub's Parquet files (:mod:`.hub`) into the
same questions, story rows and summaries, the story's file bytes inside its row.
"""

from __future__ import annotations

import csv
import io
from typing import Dict, Iterable, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas.data_paths import DataPathError, DataPathPolicy
from pipelines import keys
from pipelines.beam import data_files
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.parse import failure
from pipelines.beam.read import INPUT_COUNT
from pipelines.beam.stats import STATS, BundleStats
from pipelines.datasets.narrativeqa import hub, reader
from pipelines.document import BadInput
from pipelines.errors import UserError
from pipelines.sources import byte_stream, parquet_rows

NAMESPACE = "readtwice.narrativeqa"
STORY, SUMMARY = "story", "summary"  # the Hub reader's story rows and summaries (by story)


class _RawReader(io.RawIOBase):
  """A readable raw stream over what ``FileSystems.open`` returns (Beam's ``CompressedFile``
  for ``.gz`` / ``.bz2`` lacks parts of the io interface ``TextIOWrapper`` needs)."""

  def __init__(self, f):
    super().__init__()
    self._f = f

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    data = self._f.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self) -> None:
    self._f.close()
    super().close()


def read_csv(path: str, columns: Sequence[str], truncated_is_bad_input: bool = False
             ) -> Iterable[Tuple[int, Dict[str, str]]]:
  """``(line, row)`` of a CSV file (local or gs://, decompressed by extension), checking that
  it has ``columns``; rows whose field count differs from the header are BadInput.  A file
  without those columns, unreadable or not CSV is a UserError (one line naming it).  A
  compressed file that ends inside its compressed stream (cut short) would read as if it
  ended there: it is a UserError too, or, with ``truncated_is_bad_input``, one last
  ``(line, BadInput("invalid_compression"))`` after the rows that could be read."""
  try:
    raw = FileSystems.open(path)
    with io.TextIOWrapper(io.BufferedReader(_RawReader(raw)), encoding="utf-8-sig",
                          errors="replace", newline="") as f:
      rows = csv.reader(f)
      header = next(rows, None)
      reader.check_columns(header, columns, path)
      for values in rows:
        if not values:  # the blank row a "\r\r\n" line end leaves in documents.csv
          continue
        if len(values) != len(header):
          yield rows.line_num, BadInput("bad_csv_row", f"{len(values)} fields, the header has "
                                                       f"{len(header)}")
          continue
        yield rows.line_num, dict(zip(header, values))
      try:
        byte_stream.raise_if_truncated(raw)
      except EOFError as e:
        if not truncated_is_bad_input:
          raise UserError(f"cannot read {path}: {e} (after line {rows.line_num}); the rows "
                          "after the cut are lost") from e
        yield rows.line_num + 1, BadInput(
            "invalid_compression", f"{e} after line {rows.line_num}: the rows that followed "
                                   "are lost, how many is unknown")
  except ValueError as e:  # not the file we expected (the message names it)
    raise UserError(str(e)) from e
  except (OSError, csv.Error) as e:
    raise UserError(f"cannot read {path}: {e}") from e


class ReadQuestionsFn(beam.DoFn):
  """qaps.csv -> (story id, (source id, row)) for the split's rows; dead letters, counts."""

  def __init__(self, split: str):
    self._split = split

  def process(self, path: str):
    records = other = dead = uncertain = 0
    other_sets: Dict[str, int] = {}
    for line, row in read_csv(path, reader.QUESTION_COLUMNS, truncated_is_bad_input=True):
      source_id = f"{path}:{line}"
      if isinstance(row, BadInput):
        dead += 1
        uncertain += row.reason == "invalid_compression"  # held an unknown number of rows
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("read", source_id, row))
      elif row["set"] != self._split:
        other += 1
        other_sets[row["set"]] = other_sets.get(row["set"], 0) + 1
      else:
        records += 1
        yield row["document_id"], (source_id, row)
    if not records and not dead:  # a wrong --split (or file), not an empty dataset
      raise UserError(no_questions_message(path, self._split, other_sets))
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, records + dead)
    yield beam.pvalue.TaggedOutput(STATS, {"read/records": records,
                                           "read/other_split_rows": other,
                                           "read/uncertain_regions": uncertain})


def no_questions_message(path: str, split: str, other_sets: Dict[str, int]) -> str:
  """The one line of a qaps.csv without a question of --split ``split``."""
  if not other_sets:
    return (f"{path} holds no question (only its header line): --input names NarrativeQA's "
            "qaps.csv (document_id,set,question,answer1,answer2,...)")
  sets = ", ".join(f"{name!r} {n}" for name, n in sorted(other_sets.items(),
                                                          key=lambda kv: (-kv[1], kv[0])))
  return (f"{path} holds no question of --split {split} (its set column: {sets}): pass the "
          f"--split of your questions, or fix the set column of their rows (train, valid or "
          f"test)")


# A row of documents.csv / summaries.csv for another split than --split: (story id, this), so
# that a question whose story is listed under another split can say so.
OTHER_SPLIT = "_other_split"


def _in_split(value) -> bool:
  return not (isinstance(value, dict) and OTHER_SPLIT in value)


def read_keyed(path: str, columns: Sequence[str], split: str, value: str):
  """(story id, row or row[value]) of a documents.csv / summaries.csv for the split; a row of
  another split is ``(story id, {OTHER_SPLIT: its set})``."""
  for _, row in read_csv(path, columns):
    if isinstance(row, BadInput):
      continue
    if row["set"] == split:
      yield row["document_id"], (row[value] if value else row)
    else:
      yield row["document_id"], {OTHER_SPLIT: row["set"]}


class StoryFn(beam.DoFn):
  """(story id, {"questions": [(source id, row)], "story": [row], "summary": [text]}) ->
  one Document per question, all with the story's text object; a story that cannot be read
  is one dead letter per question (stage ``parse``), as is a story file that
:mod:`schemas.data_paths` refuses (an id that leads outside --stories_dir, a file that is not
regular or is over --max_input_file_bytes: reason ``path_outside_root``, ...)."""

  def __init__(self, context: str, stories_dir: str,
               policy: DataPathPolicy = DataPathPolicy()):
    self._context = context
    self._stories_dir = stories_dir
    self._policy = policy

  def setup(self):
    self._stories = Metrics.counter(NAMESPACE, "stories")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, element):
    document_id, joined = element
    rows = sorted(joined["questions"], key=lambda q: keys.split_source_id(q[0]))
    if not rows:
      if any(_in_split(v) for tag in (STORY, SUMMARY) for v in joined.get(tag) or ()):
        self._stats.count("parse/stories_without_questions")
      return
    self._stats.count("parse/input", len(rows))
    questions = []
    for k, (source_id, row) in enumerate(rows):
      try:
        questions.append((source_id, reader.make_question(row, document_id, k)))
      except BadInput as e:
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("parse", source_id, e))
    if not questions:
      return
    try:
      text, paragraphs, stats = self._text(document_id, joined, rows[0][1].get("set", ""))
    except Exception as e:  # pylint: disable=broad-except  # every question, one reason
      for source_id, _ in questions:
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("parse", source_id, e))
      return
    self._stories.inc()
    self._stats.count("parse/stories")
    self._stats.update(stats, prefix="parse/")
    self._stats.observe("parse/story_characters", len(text))
    self._stats.count("parse/output", len(questions))
    yield from reader.question_documents(document_id, text, paragraphs, questions)

  def _text(self, document_id: str, joined, split: str):
    if self._context == "summary":
      summaries = [v for v in joined.get("summary") or () if _in_split(v)]
      if not summaries:
        _raise_if_other_split(document_id, joined.get("summary"), split, "summaries.csv")
        raise BadInput("missing_summary", f"summaries.csv has no summary of {document_id}")
      text, paragraphs = reader.summary_text(summaries[0])
      return text, paragraphs, {}
    stories = [v for v in joined.get("story") or () if _in_split(v)]
    if not stories:
      _raise_if_other_split(document_id, joined.get("story"), split, "documents.csv")
      raise BadInput("unknown_document", f"documents.csv has no row for {document_id}, which "
                                         f"qaps.csv names: add the story's row (the official "
                                         f"documents.csv has every story)")
    row = stories[0]
    if "content" in row:  # a Hub row: the story file's bytes are inside it
      return reader.story_text(row["content"], row.get("kind", ""), row["story_start"],
                               row["story_end"])
    name = f"{document_id}.content"  # the id comes from the data: kept under --stories_dir
    try:
      _, data = data_files.read_data_file(self._policy, self._stories_dir, name,
                                          "document_id's story", decompress=True)
    except DataPathError as e:
      raise BadInput(e.reason, str(e)) from e
    except FileNotFoundError as e:
      path = FileSystems.join(self._stories_dir, name)
      raise BadInput("missing_story_file", f"{path} does not exist") from e
    try:
      return reader.story_text(data, row.get("kind", ""), row["story_start"], row["story_end"])
    except BadInput as e:
      if e.reason not in ("missing_story_start", "missing_story_end"):
        raise
      path = FileSystems.join(self._stories_dir, name)
      marker, where = (("story_start", "from story_start on") if e.reason == "missing_story_start"
                       else ("story_end", "up to story_end"))
      raise BadInput(e.reason, (
          f"{path}: {e.detail} ({marker} of its documents.csv row): the file is not the whole "
          f"story documents.csv describes (an excerpt, or another edition); put the story "
          f"that download_stories.sh fetches there (its text {where}), or correct the row's "
          f"{marker}")) from e

  def finish_bundle(self):
    yield from self._stats.emit()


def _raise_if_other_split(document_id: str, values, split: str, table: str) -> None:
  """BadInput ``document_in_other_split`` when ``table`` lists the story under another set
  than its questions' (a split mismatch between qaps.csv and documents.csv)."""
  others = sorted({v[OTHER_SPLIT] for v in values or () if not _in_split(v)})
  if others:
    raise BadInput("document_in_other_split", (
        f"{table} lists {document_id} in set {', '.join(others)}, but qaps.csv asks its "
        f"questions in set {split} (--split {split}): make the set column of the story's "
        f"{table} row and of its qaps.csv rows agree"))


class ReadHubQuestionsFn(beam.DoFn):
  """A Hub Parquet file (:mod:`.hub`) -> the outputs of :class:`ReadQuestionsFn` (questions
  keyed by story; dead letters, input count, stats), plus each story's ``documents.csv`` row
  (tag ``story``, with its file's bytes as ``content``) and summary (tag ``summary``), once per
  story and file.  Rows are read a few at a time (they hold whole stories)."""

  def __init__(self, split: str, batch_size: int = 8):
    self._split = split
    self._batch_size = batch_size

  def process(self, path: str):
    records = dead = 0
    stories = set()
    stats = {"read/records": 0, "read/other_split_rows": 0, "read/uncertain_regions": 0}
    try:
      rows = parquet_rows.iter_rows(path, hub.REQUIRED, hub.COLUMNS, self._batch_size)
      for index, row in enumerate(rows):
        source_id = f"{path}#{index}"
        try:
          question = hub.question_row(row, self._split)
        except (KeyError, TypeError, AttributeError) as e:
          dead += 1
          yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
              "read", "invalid_row", source_id, f"{type(e).__name__}: {e}"))
          continue
        records += 1
        document_id = question["document_id"]
        if document_id not in stories:
          stories.add(document_id)
          yield beam.pvalue.TaggedOutput(STORY, (document_id, hub.story_row(row, self._split)))
          yield beam.pvalue.TaggedOutput(SUMMARY, (document_id, hub.summary(row)))
        yield document_id, (source_id, question)
    except parquet_rows.ParquetError as e:
      dead += 1
      stats["read/uncertain_regions"] += 1
      stats[f"read/{e.reason}"] = 1
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter("read", e.reason, path, e.detail))
    stats["read/records"] = records
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, records + dead)
    yield beam.pvalue.TaggedOutput(STATS, stats)
