r"""NarrativeQA (official layout: qaps.csv, documents.csv, summaries, stories) -> packed ReadTwice
TFRecords, one document per question, answers labelled by an extractive ROUGE-L oracle.

Each story is read and cleaned once, on a worker, then becomes one Document per question, all
holding the same text object: the annotation stage, the oracle (its word index) and the
tokenizer each work once per story (``annotate/texts``, ``answers/stories``,
``segment/texts_tokenised``), while every question is counted as an input record.  Besides the
records, ``documents/``, ``dead_letter/``, ``skipped/`` and ``manifest.json`` it writes the stats
report (``stats.json``, ``stats.png``: :mod:`pipelines.beam.report`; with the oracle's ROUGE-L
scores of the chosen spans).

Parquet files of the Hugging Face Hub (``deepmind/narrativeqa``: one row per question, the story
inside) are read instead of the CSV layout when every --input is one; their rows are taken as
questions of --split, which a file named ``train-*`` / ``validation-*`` / ``test-*`` must match
(:mod:`pipelines.datasets.narrativeqa.hub`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import cli
from schemas import settings
from schemas.settings import setting
from pipelines.beam import read_parquet
from pipelines.beam import report as report_lib
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.oracle_labels import LabelWithOracle
from pipelines.beam.read import INPUT_COUNT
from pipelines.beam.stats import STATS
from pipelines.datasets import DatasetSpec
from pipelines.datasets.narrativeqa import hub, reader, stages
from pipelines.errors import UserError
from pipelines.text.oracle import OracleConfig
from pipelines.datasets.narrativeqa import cost, fake_input

EXAMPLE = r"""  python -m pipelines narrativeqa --input narrativeqa/qaps.csv --split test \
    --output_dir /tmp/nqa_test --context story --stories_dir narrativeqa/tmp
  (--context summary reads the summaries instead; documents.csv,
   third_party/wikipedia/summaries.csv and tmp/<document_id>.content are found beside qaps.csv
   unless --documents, --summaries, --stories_dir say otherwise)"""
QUESTIONS = "questions"


@dataclasses.dataclass(frozen=True)
class NarrativeQAOptions:
  """The NarrativeQA job's own settings (each field a flag, its help beside it:
  :func:`schemas.settings.setting`; the oracle's as ``--oracle_*``, the annotation's in their
  place)."""
  split: str = setting("test", choices=reader.SPLITS,
                       help="questions and stories of this set (default: %(default)s)")
  context: str = setting(
      "story", choices=reader.CONTEXTS,
      help="what the questions are read with: the whole story, or its Wikipedia summary "
           "(default: %(default)s)")
  documents: Optional[str] = setting(  # default: documents.csv beside --input
      None, io=cli.READS, help="documents.csv (default: beside --input)")
  summaries: Optional[str] = setting(  # default: third_party/wikipedia/summaries.csv beside it
      None, io=cli.READS,
      help="summaries.csv (default: third_party/wikipedia/summaries.csv beside --input)")
  stories_dir: Optional[str] = setting(  # default: tmp/ beside it
      None, io=cli.READS,
      help="folder of <document_id>.content stories (default: tmp/ beside --input)")
  oracle: OracleConfig = setting(OracleConfig(), prefix="oracle_")
  annotation: AnnotationConfig = setting(AnnotationConfig())

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
  """The job's own flags: every setting of :class:`NarrativeQAOptions`."""
  settings.add_flags(group, NarrativeQAOptions)


def options_from_args(args) -> NarrativeQAOptions:
  return settings.from_args(NarrativeQAOptions, args)


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: NarrativeQAOptions = NarrativeQAOptions()) -> beam.PCollection:
  """Adds the NarrativeQA job to ``p``; returns the PCollection holding the manifest."""
  if read_parquet.all_parquet(paths):
    questions, joined_inputs = _hub_inputs(p, paths, options)
    return _from_questions(questions, joined_inputs, output_dir, config, header, reshuffle,
                           options, stories_dir="")
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
               | "ReadQuestions" >> beam.ParDo(stages.ReadQuestionsFn(options.split)).with_outputs(
                   DEAD_LETTER, INPUT_COUNT, STATS, main=QUESTIONS))
  joined_inputs = {}
  if options.context == "summary":
    joined_inputs["summary"] = (p | "SummaryFile" >> beam.Create([where["summaries"]])
                                | "ReadSummaries" >> beam.FlatMap(
                                    stages.read_keyed, reader.SUMMARY_COLUMNS, options.split,
                                    "summary"))
  else:
    joined_inputs["story"] = (p | "DocumentsFile" >> beam.Create([where["documents"]])
                              | "ReadDocuments" >> beam.FlatMap(
                                  stages.read_keyed, reader.DOCUMENT_COLUMNS, options.split, ""))
  return _from_questions(questions, joined_inputs, output_dir, config, header, reshuffle,
                         options, where["stories_dir"])


def _hub_inputs(p: beam.Pipeline, paths: List[str], options: NarrativeQAOptions):
  """The questions and the stories (or summaries) of the Hub's Parquet files (:mod:`.hub`);
  a UserError if a file's name says another split than --split."""
  for path in paths:
    split = hub.split_of_file(path)
    if split is not None and split != options.split:
      raise UserError(f"--split {options.split}, but {path} is a {split} file of the Hugging "
                      f"Face Hub (its rows are all of one split)")
  questions = (p | "QuestionFiles" >> beam.Create(paths)
               | "ReadQuestions" >> beam.ParDo(stages.ReadHubQuestionsFn(options.split))
               .with_outputs(DEAD_LETTER, INPUT_COUNT, STATS, stages.STORY, stages.SUMMARY,
                             main=QUESTIONS))
  tag = stages.SUMMARY if options.context == "summary" else stages.STORY
  return questions, {tag: questions[tag]}


def _from_questions(questions, joined_inputs: Dict, output_dir: str,
                    config: RecordsConfig, header: Dict, reshuffle: bool,
                    options: NarrativeQAOptions, stories_dir: str) -> beam.PCollection:
  """The rest of the job: questions joined to their stories -> Documents -> records."""
  joined_inputs = {"questions": questions[QUESTIONS], **joined_inputs}
  joined = joined_inputs | "JoinQuestionsToStories" >> beam.CoGroupByKey()
  if reshuffle:
    joined = joined | "SpreadStories" >> beam.Reshuffle()
  parsed = joined | "ReadStories" >> beam.ParDo(
      stages.StoryFn(options.context, stories_dir, config.data_paths)).with_outputs(
          DEAD_LETTER, STATS, main="documents")
  return to_records(parsed.documents,  # (no reshuffle: stories are spread, not copies)
                    dead_letters=(questions[DEAD_LETTER], parsed[DEAD_LETTER]),
                    stats=(questions[STATS], parsed[STATS]),
                    input_count=questions[INPUT_COUNT], output_dir=output_dir, config=config,
                    header=header, labeller=LabelWithOracle(options.oracle),
                    annotation=options.annotation)


spec = DatasetSpec(
    name="narrativeqa", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=add_flags, options_from_args=options_from_args, outputs=report_lib.OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
