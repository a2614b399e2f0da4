r"""NarrativeQA (official layout: qaps.csv, documents.csv, summaries, stories) -> packed ReadTwice
TFRecords, one document per question, answers labelled by an extractive ROUGE-L oracle.

Each story is read and cleaned once, on a worker, then becomes one Document per question, all
holding the same text object: the annotation stage, the oracle (its word index) and the
tokenizer each work once per story (``annotate/texts``, ``answers/stories``,
``segment/texts_tokenised``), while every question is counted as an input record.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines import cli, keys
from pipelines.beam import annotate, read
from pipelines.beam.annotate import AnnotateDocuments, AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents import DocumentsToRecords
from pipelines.beam.oracle_labels import LabelWithOracle
from pipelines.beam.parse import failure
from pipelines.beam.read import INPUT_COUNT
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import BadInput
from pipelines.errors import UserError
from pipelines.readers import narrativeqa as reader
from pipelines.text.oracle import OracleConfig

PROG = "python -m pipelines.narrativeqa"
EXAMPLE = r"""  python -m pipelines.narrativeqa --input narrativeqa/qaps.csv --split test \
    --output_dir /tmp/nqa_test --context story --stories_dir narrativeqa/tmp
  (--context summary reads the summaries instead; documents.csv,
   third_party/wikipedia/summaries.csv and tmp/<document_id>.content are found beside qaps.csv
   unless --documents, --summaries, --stories_dir say otherwise)"""
NAMESPACE = "readtwice.narrativeqa"
QUESTIONS = "questions"


@dataclasses.dataclass(frozen=True)
class NarrativeQAOptions:
  split: str = "test"
  context: str = "story"
  documents: Optional[str] = None  # default: documents.csv beside --input
  summaries: Optional[str] = None  # default: third_party/wikipedia/summaries.csv beside it
  stories_dir: Optional[str] = None  # default: tmp/ beside it
  oracle: OracleConfig = OracleConfig()
  annotation: AnnotationConfig = AnnotationConfig()

  def __post_init__(self):
    if self.split not in reader.SPLITS:
      raise ValueError(f"--split must be one of {reader.SPLITS}, got {self.split!r}")
    if self.context not in reader.CONTEXTS:
      raise ValueError(f"--context must be one of {reader.CONTEXTS}, got {self.context!r}")

  def paths(self, qaps: str) -> Dict[str, str]:
    """documents, summaries and stories_dir for the ``qaps.csv`` at ``qaps``."""
    root = FileSystems.split(qaps)[0]
    return {"documents": self.documents or FileSystems.join(root, "documents.csv"),
            "summaries": self.summaries or FileSystems.join(
                root, "third_party", "wikipedia", "summaries.csv"),
            "stories_dir": self.stories_dir or FileSystems.join(root, "tmp")}

  def describe(self) -> Dict[str, Any]:
    d = {"split": self.split, "context": self.context, "documents": self.documents,
         "summaries": self.summaries, "stories_dir": self.stories_dir,
         "oracle": dataclasses.asdict(self.oracle)}
    d.update(self.annotation.describe())
    return d

  @property
  def dry_run_file(self) -> Optional[str]:
    return self.annotation.dry_run_file


def add_flags(group) -> None:
  d = NarrativeQAOptions()
  group.add_argument("--split", default=d.split, choices=reader.SPLITS,
                     help="questions and stories of this set (default: %(default)s)")
  group.add_argument("--context", default=d.context, choices=reader.CONTEXTS,
                     help="what the questions are read with: the whole story, or its "
                          "Wikipedia summary (default: %(default)s)")
  group.add_argument("--documents", default=None,
                     help="documents.csv (default: beside --input)")
  group.add_argument("--summaries", default=None,
                     help="summaries.csv (default: third_party/wikipedia/summaries.csv beside "
                          "--input)")
  group.add_argument("--stories_dir", default=None,
                     help="folder of <document_id>.content stories (default: tmp/ beside "
                          "--input)")
  o = d.oracle
  group.add_argument("--oracle_min_score", type=float, default=o.min_score,
                     help="smallest ROUGE-L F1 of an answer span (default: %(default)s)")
  group.add_argument("--oracle_relative", type=float, default=o.relative,
                     help="keep spans scoring at least this share of the question's best "
                          "(default: %(default)s)")
  group.add_argument("--oracle_max_spans", type=int, default=o.max_spans,
                     help="answer spans per question at most (default: %(default)s)")
  annotate.add_flags(group)


def options_from_args(args) -> NarrativeQAOptions:
  return NarrativeQAOptions(
      split=args.split, context=args.context, documents=args.documents,
      summaries=args.summaries, stories_dir=args.stories_dir,
      oracle=OracleConfig(min_score=args.oracle_min_score, relative=args.oracle_relative,
                          max_spans=args.oracle_max_spans),
      annotation=annotate.config_from_args(args))


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
        read.raise_if_truncated(raw)
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


class _ReadQuestionsFn(beam.DoFn):
  """qaps.csv -> (story id, (source id, row)) for the split's rows; dead letters, counts."""

  def __init__(self, split: str):
    self._split = split

  def process(self, path: str):
    records = other = dead = uncertain = 0
    for line, row in read_csv(path, reader.QUESTION_COLUMNS, truncated_is_bad_input=True):
      source_id = f"{path}:{line}"
      if isinstance(row, BadInput):
        dead += 1
        uncertain += row.reason == "invalid_compression"  # held an unknown number of rows
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure("read", source_id, row))
      elif row["set"] != self._split:
        other += 1
      else:
        records += 1
        yield row["document_id"], (source_id, row)
    yield beam.pvalue.TaggedOutput(INPUT_COUNT, records + dead)
    yield beam.pvalue.TaggedOutput(STATS, {"read/records": records,
                                           "read/other_split_rows": other,
                                           "read/uncertain_regions": uncertain})


def _read_keyed(path: str, columns: Sequence[str], split: str, value: str):
  """(story id, row or row[value]) of a documents.csv / summaries.csv for the split."""
  for _, row in read_csv(path, columns):
    if not isinstance(row, BadInput) and row["set"] == split:
      yield row["document_id"], (row[value] if value else row)


class _StoryFn(beam.DoFn):
  """(story id, {"questions": [(source id, row)], "story": [row], "summary": [text]}) ->
  one Document per question, all with the story's text object; a story that cannot be read
  is one dead letter per question (stage ``parse``)."""

  def __init__(self, context: str, stories_dir: str):
    self._context = context
    self._stories_dir = stories_dir

  def setup(self):
    self._stories = Metrics.counter(NAMESPACE, "stories")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, element):
    document_id, joined = element
    rows = sorted(joined["questions"], key=lambda q: keys.split_source_id(q[0]))
    if not rows:
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
      text, paragraphs, stats = self._text(document_id, joined)
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

  def _text(self, document_id: str, joined):
    if self._context == "summary":
      summaries = joined.get("summary") or []
      if not summaries:
        raise BadInput("missing_summary", f"summaries.csv has no summary of {document_id}")
      text, paragraphs = reader.summary_text(summaries[0])
      return text, paragraphs, {}
    stories = joined.get("story") or []
    if not stories:
      raise BadInput("unknown_document", f"documents.csv has no row for {document_id} in "
                                         f"this split")
    row = stories[0]
    path = FileSystems.join(self._stories_dir, f"{document_id}.content")
    try:
      with FileSystems.open(path) as f:
        data = f.read()
    except (OSError, IOError) as e:
      if FileSystems.exists(path):
        raise  # a storage error: let the runner retry
      raise BadInput("missing_story_file", f"{path} does not exist") from e
    return reader.story_text(data, row.get("kind", ""), row["story_start"], row["story_end"])

  def finish_bundle(self):
    yield from self._stats.emit()


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: NarrativeQAOptions = NarrativeQAOptions()) -> beam.PCollection:
  """Adds the NarrativeQA job to ``p``; returns the PCollection holding the manifest."""
  if len(paths) != 1:
    raise FileNotFoundError(f"--input names one qaps.csv, but matches {len(paths)} files")
  where = options.paths(paths[0])
  needed = where["summaries"] if options.context == "summary" else where["documents"]
  if not FileSystems.exists(needed):
    raise FileNotFoundError(f"{needed} does not exist (see --documents, --summaries)")
  if options.context == "story":  # a folder: on gs:// only its objects exist, so look for one
    stories = FileSystems.join(where["stories_dir"], "*.content")
    if not FileSystems.match([stories], limits=[1])[0].metadata_list:
      raise FileNotFoundError(f"{where['stories_dir']} does not exist or holds no "
                              f"<document_id>.content story (see --stories_dir)")
  questions = (p | "QuestionFiles" >> beam.Create(paths)
               | "ReadQuestions" >> beam.ParDo(_ReadQuestionsFn(options.split)).with_outputs(
                   DEAD_LETTER, INPUT_COUNT, STATS, main=QUESTIONS))
  joined_inputs = {"questions": questions[QUESTIONS]}
  if options.context == "summary":
    joined_inputs["summary"] = (p | "SummaryFile" >> beam.Create([where["summaries"]])
                                | "ReadSummaries" >> beam.FlatMap(
                                    _read_keyed, reader.SUMMARY_COLUMNS, options.split,
                                    "summary"))
  else:
    joined_inputs["story"] = (p | "DocumentsFile" >> beam.Create([where["documents"]])
                              | "ReadDocuments" >> beam.FlatMap(
                                  _read_keyed, reader.DOCUMENT_COLUMNS, options.split, ""))
  joined = joined_inputs | "JoinQuestionsToStories" >> beam.CoGroupByKey()
  if reshuffle:
    joined = joined | "SpreadStories" >> beam.Reshuffle()
  parsed = joined | "ReadStories" >> beam.ParDo(
      _StoryFn(options.context, where["stories_dir"])).with_outputs(
          DEAD_LETTER, STATS, main="documents")
  dead = ((questions[DEAD_LETTER], parsed[DEAD_LETTER])
          | "FlattenReadParseDead" >> beam.Flatten())
  stats = (questions[STATS], parsed[STATS]) | "FlattenReadParseStats" >> beam.Flatten()
  return {"documents": parsed.documents, "dead_letters": dead, "stats": stats,
          "input_count": questions[INPUT_COUNT]} | "ToRecords" >> DocumentsToRecords(
              output_dir, config, header, reshuffle=False,  # stories are spread, not copies
              labeller=LabelWithOracle(options.oracle),
              annotator=(AnnotateDocuments(options.annotation) if options.annotation.enabled
                         else None))


def run(input_pattern: str, output_dir: str, config: RecordsConfig,
        options: NarrativeQAOptions = NarrativeQAOptions(),
        beam_args: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict:
  """Runs the job to completion; returns the manifest (see :func:`pipelines.cli.run_job`)."""
  return cli.run_job("narrativeqa", build, input_pattern, output_dir, config, beam_args,
                     overwrite, options)


def main(argv: Optional[Sequence[str]] = None) -> int:
  return cli.job_main(PROG, __doc__.split("\n\n")[0], EXAMPLE, "narrativeqa", build, argv,
                      add_flags=add_flags, job_options=options_from_args)


if __name__ == "__main__":
  sys.exit(main())
