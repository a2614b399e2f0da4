"""``--estimate``'s annotation (``--ner``): spaCy's CPU, or Cloud NL's requests, units and
price."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional

from pipelines.errors import UserError
from pipelines.estimate.costs import (ANNOTATION, CHARS_PER_WORD, CLOUD_NL_PRICE_SOURCE,
                                      DEFAULT_WORDS_PER_MB, MB, MODEL_LOAD_CPU_S,
                                      MODEL_WORDS_PER_CPU_S, dataset_cost)
from pipelines.estimate.sizing import Work

def _annotation_config(options: Any) -> Any:
  """The job's :class:`pipelines.beam.annotation_config.AnnotationConfig` (None: the job has none)."""
  if options is not None and hasattr(options, "ner") and hasattr(options, "spacy_model"):
    return options
  return getattr(options, "annotation", None)


def _alias_rows(entities_dir: str) -> int:
  """Rows of a Wikipedia job's alias table (the Parquet footers: nothing else is read)."""
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  from pipelines.entities import tables  # pylint: disable=g-import-not-at-top
  try:
    paths = tables.alias_paths(entities_dir)
  except FileNotFoundError as e:
    raise UserError(f"--entities_dir {entities_dir}: {e} (the output dir of python -m "
                    f"pipelines wikipedia holds them)") from None
  rows = 0
  for path in paths:
    try:
      with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        rows += pq.ParquetFile(f).metadata.num_rows
    except Exception as e:  # pylint: disable=broad-except
      raise UserError(f"--entities_dir: {path} is not a readable Parquet alias file "
                      f"({type(e).__name__}); rerun python -m pipelines wikipedia") from None
  return rows


def annotation_estimate(job: str, work: Work, options: Any, local: bool = True
                        ) -> Optional[Dict[str, Any]]:
  """What ``--ner`` adds (None without it): words and texts annotated, the per-process start
  (spaCy, the alias table, the EntityRuler's patterns) and per-word CPU seconds, or with
  ``--ner cloud`` the requests, billable units and their price (before cache hits).  ``local``:
  the run would be on this machine, so a ``--spacy_model`` not installed here is an error (a
  Dataflow worker's container may hold it: a note then)."""
  config = _annotation_config(options)
  ner = getattr(config, "ner", None) or "none"
  if ner == "none":
    return None
  mb = work.work_bytes / MB
  cost = dataset_cost(job)
  measured = cost is not None and cost.words_per_mb is not None
  words_per_mb = cost.words_per_mb if measured else DEFAULT_WORDS_PER_MB
  words = mb * words_per_mb
  out: Dict[str, Any] = {
      "ner": ner, "words": round(words), "words_per_mb": words_per_mb,
      "words_from": ("work MB x words per MB measured on the real-format samples"
                     + ("" if measured else " (median of the datasets)"))}
  uses_table = bool(config.entities_dir) and ner == "spacy" and (
      config.linker == "alias" or (config.spacy_model.startswith("blank:")
                                   and config.ruler_patterns))
  rows = _alias_rows(config.entities_dir) if config.entities_dir and (
      uses_table or config.linker == "alias") else 0
  if ner == "spacy":
    blank = config.spacy_model.startswith("blank:")
    if not blank and not os.path.isdir(config.spacy_model):
      import importlib.util  # pylint: disable=g-import-not-at-top
      try:
        installed = importlib.util.find_spec(config.spacy_model) is not None
      except (ImportError, ValueError):
        installed = False
      missing = (f"--spacy_model {config.spacy_model!r} is not installed: spaCy models are "
                 f"installed as Python packages (e.g. pip install en-core-web-sm); use "
                 f"blank:<lang> for a blank pipeline")
      if not installed and local:  # the run would fail to load it: say so now
        raise UserError(missing)
      if not installed:
        work.notes.append(missing.replace(" is not installed", " is not installed here (the "
                                          "workers' container must hold it)"))
    patterns = min(rows, config.ruler_patterns) if blank else 0
    start = (ANNOTATION["start_cpu_s"] + (0.0 if blank else MODEL_LOAD_CPU_S)
             + rows * ANNOTATION["cpu_s_per_alias_row"]
             + patterns * ANNOTATION["cpu_s_per_pattern"])
    per_word = (ANNOTATION["cpu_s_per_word"] + patterns / 1000
                * ANNOTATION["cpu_s_per_word_per_1k_patterns"])
    if not blank:
      per_word += 1.0 / MODEL_WORDS_PER_CPU_S
    out.update(spacy_model=config.spacy_model, linker=config.linker, alias_rows=rows,
               patterns=patterns, start_cpu_s=start, cpu_s_per_word=per_word,
               cpu_s=start + per_word * words,
               measured=(f"{ANNOTATION['command']}, {ANNOTATION['date']}" if blank else
                         f"{config.spacy_model}: ~{MODEL_WORDS_PER_CPU_S:,.0f} words per CPU s "
                         f"(en-core-web-sm's full pipeline on this machine kind; not measured "
                         f"by the benchmark), {MODEL_LOAD_CPU_S:g} CPU s to load (assumed)"))
    return out
  # --ner cloud: requests of at most --nl_max_request_chars characters, one per text at least.
  cloud = config.cloud
  characters = words * CHARS_PER_WORD
  counted = cost.cloud_texts(work) if cost is not None and cost.cloud_texts else None
  if counted is not None:
    texts, texts_from, share = counted
    characters *= share
  else:
    texts = mb * (cost.texts_per_mb if cost is not None else 143.0)
    texts_from = "per MB of work, as measured on the HotpotQA sample"
  requests = max(texts, characters / cloud.max_request_chars) if characters else 0.0
  units = characters / 1000 + requests / 2  # each request's last unit half used, on average
  price = config.price_per_1000_units
  out.update(characters=round(characters), texts=round(texts), texts_from=texts_from,
             requests=math.ceil(requests), units=math.ceil(units),
             price_per_1000_units=price, usd=units / 1000 * price,
             requests_per_minute=cloud.requests_per_minute,
             rate_limited_s=requests * 60 / cloud.requests_per_minute,
             start_cpu_s=rows * ANNOTATION["cpu_s_per_alias_row"], cpu_s_per_word=0.0,
             cpu_s=rows * ANNOTATION["cpu_s_per_alias_row"], alias_rows=rows,
             price_source=CLOUD_NL_PRICE_SOURCE,
             note=("before cache hits (--nl_cache_dir): --dry_run reads every text and plans "
                   "the exact requests, units and cost"))
  return out

