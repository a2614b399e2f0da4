"""The settings of the annotation stage (:mod:`pipelines.beam.annotate`): which NER and linker
run, with what tables and limits, and the Cloud Natural Language client's settings
(:class:`pipelines.entities.cloud_nl.CloudConfig`).  Each field is a flag of the jobs that
annotate, declared once with its help (:func:`schemas.settings.setting`); :func:`add_flags`
adds them to a job's parser and :func:`config_from_args` reads them back."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional

from schemas import cli
from schemas import entities as entities_schema
from schemas import settings
from schemas.settings import setting
from pipelines.beam import annotation_plan
from pipelines.entities import tables
from pipelines.entities.cloud_nl import CloudConfig

NER_CHOICES = ("none", "spacy", "cloud")
LINKER_CHOICES = ("none", "alias")


@dataclasses.dataclass(frozen=True)
class AnnotationConfig:
  """What ``--ner`` / ``--linker`` add to a job's documents, and how: each field is a flag of
  the job (:func:`add_flags`, its help beside it: :func:`schemas.settings.setting`)."""
  ner: str = setting(
      "none", choices=NER_CHOICES,
      help="entity mentions: spacy (offline: a blank model with an EntityRuler of the most "
           "linked aliases of --entities_dir) or cloud (Cloud Natural Language analyzeEntities, "
           "billed) (default: %(default)s)")
  spacy_model: str = setting(
      "blank:en", help="blank:<lang> or an installed spaCy model package name (default: "
                       "%(default)s)")
  linker: str = setting(
      "none", choices=LINKER_CHOICES,
      help="entity ids for the mentions: alias (commonness over the alias table of "
           "--entities_dir) (default: %(default)s)")
  entities_dir: Optional[str] = setting(
      None, io=cli.READS,
      help="output dir of python -m pipelines wikipedia (entity vocabulary and alias table)")
  linker_min_count: int = setting(
      2, help="links an (alias, entity) pair needs (default: %(default)s)")
  linker_min_probability: float = setting(
      0.5, help="smallest p(entity | alias) to link (default: %(default)s)")
  ruler_patterns: int = setting(
      100_000, help="most linked aliases used as EntityRuler patterns (default: %(default)s)")
  batch_size: int = setting(
      64, flag="annotate_batch_size",
      help="documents per nlp.pipe call or per batch of API requests (default: %(default)s)")
  cloud: CloudConfig = setting(CloudConfig(), prefix="nl_")
  dry_run: bool = setting(
      False, help="--ner cloud: only plan the API requests (units, cache hits, cost) and write "
                  f"{annotation_plan.PLAN_FILE}; no call, no records")
  max_api_units: int = setting(
      0, help="--ner cloud: billable units this run may spend; documents beyond become dead "
              "letters with reason budget (default: 0, no limit)")
  price_per_1000_units: float = setting(
      1.0, help="--ner cloud: price of 1,000 units for the cost estimate (check the current "
                "price list) (default: %(default)s)")
  # An outage, not bad texts: this many in a row failing for want of the service.
  nl_max_consecutive_failures: int = setting(
      20, help="--ner cloud: stop the job (exit 1) when this many texts in a row fail for want "
               "of the service (UNAVAILABLE, deadlines, 5xx or connection errors, after the "
               "retries): an outage, not bad texts; 0 never stops (default: %(default)s)")

  def __post_init__(self):
    if self.ner not in NER_CHOICES:
      raise ValueError(f"--ner must be one of {NER_CHOICES}, got {self.ner!r}")
    if self.linker not in LINKER_CHOICES:
      raise ValueError(f"--linker must be one of {LINKER_CHOICES}, got {self.linker!r}")
    if self.linker == "alias" and self.ner == "none":
      raise ValueError("--linker alias links the mentions --ner finds: give --ner spacy too")
    if self.linker == "alias" and not self.entities_dir:
      raise ValueError("--linker alias needs --entities_dir (a Wikipedia job's output dir)")
    if self.entities_dir and not tables.has_entities(self.entities_dir):
      raise ValueError(f"--entities_dir {self.entities_dir!r} has no "
                       f"{entities_schema.ENTITIES_DIR}/{entities_schema.VOCABULARY_FILE} "
                       f"(run python -m pipelines wikipedia)")
    if self.batch_size < 1:
      raise ValueError(f"--annotate_batch_size must be >= 1, got {self.batch_size}")
    if self.ruler_patterns < 0:
      raise ValueError(f"--ruler_patterns must be >= 0, got {self.ruler_patterns}")
    if self.ner == "cloud" and not self.cloud.cache_dir:
      raise ValueError("--ner cloud needs --nl_cache_dir (where API results are kept, so that "
                       "re-runs and other jobs never pay for the same text twice)")
    if self.ner != "cloud" and (self.dry_run or self.max_api_units):
      raise ValueError("--dry_run and --max_api_units are for --ner cloud")
    if self.max_api_units < 0:
      raise ValueError(f"--max_api_units must be >= 0 (0: no limit), got {self.max_api_units}")
    if self.price_per_1000_units < 0:
      raise ValueError(f"--price_per_1000_units must be >= 0, got {self.price_per_1000_units}")
    n = self.nl_max_consecutive_failures
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
      raise ValueError(f"--nl_max_consecutive_failures must be an integer >= 0 (0: never "
                       f"stop), got {n!r}")

  @property
  def enabled(self) -> bool:
    return self.ner != "none"

  @property
  def dry_run_file(self) -> Optional[str]:
    """What a dry run writes under the output dir instead of records (None: not a dry run)."""
    return annotation_plan.PLAN_FILE if self.dry_run else None

  def describe(self) -> Dict[str, Any]:
    """The manifest's config entries: ``annotate_batch_size`` (the job's own ``batch_size``
    is the tokeniser's); ``cloud`` and ``nl_max_consecutive_failures`` with ``--ner cloud``."""
    d = dataclasses.asdict(self)
    d["annotate_batch_size"] = d.pop("batch_size")
    if self.ner != "cloud":
      del d["cloud"]
      del d["nl_max_consecutive_failures"]
    return d


def add_flags(group) -> None:
  """The annotation flags of a job (every setting of :class:`AnnotationConfig`)."""
  settings.add_flags(group, AnnotationConfig)


def config_from_args(args) -> AnnotationConfig:
  """The :class:`AnnotationConfig` of the parsed annotation flags (a ValueError names the
  flag)."""
  return settings.from_args(AnnotationConfig, args)
