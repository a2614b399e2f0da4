r"""TriviaQA (rc; Wikipedia and web question files, with their evidence) -> packed ReadTwice
TFRecords.

Reads the official question files (``qa/wikipedia-*.json``, ``qa/web-*.json``: ``{"Data":
[...], ...}``, streamed) and the evidence files they name under --evidence_dir (the official
``evidence/`` folder: ``wikipedia/<Filename>``, ``web/<Filename>``; read on the workers).  A
Wikipedia question is one document (its entity pages as paragraphs, id ``QuestionId``), or
with --per_document one per page; a web question is one document per page (EntityPages and
SearchResults), id ``QuestionId--Filename``: the keys of the official evaluation.  Every
occurrence of every answer alias (after the official normalisation) is labelled.  Writes
``records-*.tfrecord``, ``documents/``, ``dead_letter/``, ``skipped/``, ``manifest.json``, the
stats report (``stats.json``, ``stats.png``: :mod:`pipelines.beam.report`) and ``COMPLETED``
under --output_dir.  Parquet files of the Hugging Face Hub
(``mandarjoshi/trivia_qa``, config ``rc``) hold the evidence texts: with them no --evidence_dir
is needed (:mod:`pipelines.datasets.triviaqa.hub`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Dict, List, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas import cli
from schemas import settings
from schemas.settings import setting
from pipelines.beam import inputs, read, read_parquet
from pipelines.beam import report as report_lib
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.config import RecordsConfig
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.documents_to_records import to_records
from pipelines.beam.parse import ParseRecords
from pipelines.beam.stats import STATS
from pipelines.beam.label_answers import LabelAnswers
from pipelines.datasets import DatasetSpec
from pipelines.datasets.triviaqa import hub, reader
from pipelines.datasets.triviaqa.answers import find_alias_spans
from pipelines.datasets.triviaqa.evidence import ReadEvidence
from pipelines.datasets.triviaqa import cost, fake_input

EXAMPLE = r"""  python -m pipelines triviaqa \
    --input 'triviaqa-rc/qa/wikipedia-dev.json' --evidence_dir triviaqa-rc/evidence \
    --output_dir /tmp/triviaqa_records --seq_length 512 --overlap 128
  (web: --input 'triviaqa-rc/qa/web-dev.json'; Wikipedia scored per document: add
   --per_document; on Dataflow add: --runner DataflowRunner --project P --region R
   --temp_location gs://B/tmp --setup_file ./setup.py, and use gs:// paths)"""
LIST_KEY = "Data"  # the official question files: {"Data": [...], "Domain": ..., ...}


@dataclasses.dataclass(frozen=True)
class TriviaQAOptions:
  """The TriviaQA job's own settings (each field a flag, its help beside it:
  :func:`schemas.settings.setting`; the annotation's in their place)."""
  evidence_dir: str = setting(  # "" only when every input is a Hub Parquet file
      "", show=lambda path: path or None, io=cli.READS,
      help="TriviaQA's evidence/ folder (wikipedia/ and web/ under it; local or gs://); "
           "required unless every --input is a Hugging Face Hub Parquet file (config rc), whose "
           "rows hold the evidence texts")
  per_document: bool = setting(
      False, help="Wikipedia questions: one document per (question, page), id "
                  "QuestionId--Filename, as the per-document evaluation keys; web questions are "
                  "always per page")
  annotation: AnnotationConfig = setting(AnnotationConfig())

  @property
  def dry_run_file(self) -> Optional[str]:
    return self.annotation.dry_run_file

  def describe(self) -> Dict[str, Any]:
    d = {"evidence_dir": self.evidence_dir, "per_document": self.per_document}
    d.update(self.annotation.describe())
    return d


def check_evidence_dir(path: str) -> None:
  """Raises ValueError (one line) unless ``path`` looks like TriviaQA's ``evidence/`` folder:
  a directory with ``wikipedia/`` or ``web/`` (for ``gs://`` and other remote paths: any file
  under one of them)."""
  if not path:
    raise ValueError("--evidence_dir is required: the evidence/ folder of TriviaQA rc (with "
                     "wikipedia/ and web/)")
  subdirs = (reader.WIKIPEDIA, reader.WEB)
  if "://" not in path:
    if not os.path.isdir(path):
      raise ValueError(f"--evidence_dir {path!r} is not a directory")
    if not any(os.path.isdir(os.path.join(path, d)) for d in subdirs):
      hint = (f"; did you mean {os.path.join(path, 'evidence')!r}?"
              if os.path.isdir(os.path.join(path, "evidence")) else "")
      raise ValueError(f"--evidence_dir {path!r} has neither wikipedia/ nor web/ (expected the "
                       f"evidence/ folder of TriviaQA rc){hint}")
    return
  try:
    found = any(r.metadata_list for r in FileSystems.match(
        [FileSystems.join(path, d, "**") for d in subdirs], limits=[1, 1]))
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"--evidence_dir {path!r} cannot be listed: {type(e).__name__}: "
                     f"{str(e)[:200]}") from e
  if not found:
    raise ValueError(f"--evidence_dir {path!r} holds no file under wikipedia/ or web/ "
                     f"(expected the evidence/ folder of TriviaQA rc)")


def add_flags(group) -> None:
  """The job's own flags: every setting of :class:`TriviaQAOptions`."""
  settings.add_flags(group, TriviaQAOptions)


def _hub_only(pattern: str) -> bool:
  """Whether every input of ``pattern`` is a Parquet file (False if it matches nothing)."""
  try:
    return read_parquet.all_parquet(inputs.match_inputs(pattern))
  except Exception:  # pylint: disable=broad-except  # the job then says what is wrong
    return False


def check_evidence_dir_for(path: str, pattern: str) -> None:
  """:func:`check_evidence_dir`, unless ``path`` is empty and every input of ``pattern`` is a
  Hub Parquet file (whose rows hold the evidence texts)."""
  if path or not _hub_only(pattern):
    check_evidence_dir(path or "")


def options_from_args(args) -> TriviaQAOptions:
  check_evidence_dir_for(args.evidence_dir, getattr(args, "input", "") or "")
  return settings.from_args(TriviaQAOptions, args)


def build(p: beam.Pipeline, paths: List[str], output_dir: str, config: RecordsConfig,
          header: Dict, reshuffle: bool = False,
          options: TriviaQAOptions = TriviaQAOptions()) -> beam.PCollection:
  """Adds the TriviaQA job to ``p``; returns the PCollection holding the manifest.

  ``reshuffle``: spread the document plans over workers before the evidence is read (for
  distributed runners, where one worker reads a whole question file).
  """
  if options.evidence_dir or not read_parquet.all_parquet(paths):
    check_evidence_dir(options.evidence_dir)
  raw = p | "ReadJson" >> read_parquet.ReadRecords(
      paths, hub.SCHEMA, list_key=LIST_KEY, split_bytes=config.json_split_bytes,
      expand=functools.partial(reader.split_question, per_document=options.per_document))
  parsed = raw[read.RECORDS] | "ParseTriviaQA" >> ParseRecords(
      functools.partial(reader.parse_record, per_document=options.per_document),
      "readtwice.triviaqa")
  docs = parsed.documents | "Evidence" >> ReadEvidence(options.evidence_dir, reshuffle,
                                                         config.data_paths)
  return to_records(docs.documents,
                    dead_letters=(raw[DEAD_LETTER], parsed[DEAD_LETTER], docs[DEAD_LETTER]),
                    stats=(raw[read.STATS], parsed[STATS], docs[STATS]),
                    input_count=raw[read.INPUT_COUNT], output_dir=output_dir, config=config,
                    header=header, labeller=LabelAnswers(find_alias_spans),
                    annotation=options.annotation)


spec = DatasetSpec(
    name="triviaqa", description=__doc__.split("\n\n")[0], example=EXAMPLE, build=build,
    add_flags=add_flags, options_from_args=options_from_args, outputs=report_lib.OUTPUTS,
    cost=cost.COST, fake_input=fake_input.write)
