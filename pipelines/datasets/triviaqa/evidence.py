"""The evidence stage (TriviaQA): document plans -> Documents, reading the evidence files on the
workers.

Each :class:`pipelines.datasets.triviaqa.reader.Plan` names its evidence files relative to
``--evidence_dir`` (``wikipedia/<Filename>`` for EntityPages, ``web/<Filename>`` for
SearchResults, the official ``evidence/`` layout); they are read with
``apache_beam.io.filesystems.FileSystems`` (local or ``gs://``; a page whose text the datum
holds, as the Hub's Parquet rows do, is not read but encoded as UTF-8), decoded by
:func:`pipelines.datasets.triviaqa.reader.decode_evidence` (U+FFFD for bytes that are not UTF-8, BOM
dropped, CRLF / CR as LF) and the document is built by
:func:`pipelines.datasets.triviaqa.reader.build_document`.

* A file that is missing or may not be read (:func:`is_missing_file_error`: an ``OSError``, or
  Cloud Storage's not found / forbidden) is a dead letter (stage ``evidence``, reason
  ``missing_evidence``) when the document needs it: a question-document pair, or a Wikipedia
  per-question document all of whose pages are missing.  A per-question document that misses
  only some pages is built from the others, and the missing ones are counted
  (``evidence/missing_pages``).  Other storage errors are raised, so that Beam retries.
* A document whose evidence is blank is a dead letter with reason ``empty_evidence``.
* A ``Filename`` that :mod:`schemas.data_paths` refuses (absolute, leading outside
  ``<evidence_dir>/<origin>/`` directly or through a symlink, not a regular file, over
  ``--max_input_file_bytes``) makes its document a dead letter with the refusal's reason
  (``absolute_path``, ``path_outside_root``, ``not_a_regular_file``, ``file_too_large``,
  ``invalid_path``), whatever its other pages; counted in ``evidence/refused_pages``.

The source id of these dead letters names the input record, the question and the files:
``<path>#<index>/<QuestionId>--<Filename>`` (files joined by ``|`` when several are missing);
they also carry ``question_id``, ``document_id`` and ``missing`` (the evidence paths).

Counters: ``evidence/input`` (plans), ``evidence/output`` (documents), ``evidence/pages_read``,
``evidence/bytes``, ``evidence/missing_pages``, ``evidence/empty_pages``,
``evidence/invalid_utf8_pages``, ``evidence/bom_stripped``, ``evidence/newlines_normalised``.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas.data_paths import DataPathError, DataPathPolicy
from pipelines.beam import data_files
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.parse import failure
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import BadInput
from pipelines.datasets.triviaqa import reader

NAMESPACE = "readtwice.evidence"
STAGE = "evidence"


def evidence_path(evidence_dir: str, page: reader.Page) -> str:
  """Where ``page``'s file is: ``<evidence_dir>/<wikipedia|web>/<Filename>``."""
  return FileSystems.join(evidence_dir, page.origin, *page.filename.split("/"))


def read_bytes(path: str) -> bytes:
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    return f.read()


def is_missing_file_error(e: Exception) -> bool:
  """Whether ``e`` says the file is missing or may not be read: an ``OSError`` (local files:
  not found, a directory, no permission), or Google Cloud Storage's ``NotFound`` /
  ``Forbidden`` (HTTP 404 / 403; Beam's gs:// reader raises them as they are).  Anything else
  (e.g. a transient storage error) is not: it is raised, and Beam retries."""
  if isinstance(e, OSError):
    return True
  if type(e).__name__ in ("NotFound", "Forbidden"):
    return True
  return type(e).__module__.startswith("google.") and getattr(e, "code", None) in (403, 404)


def _dead_source_id(plan: reader.Plan, pages: List[reader.Page]) -> str:
  names = "|".join(p.filename for p in pages) if pages else ""
  return f"{plan.source_id}/{reader.document_id(plan.question.id, names)}"


class _ReadEvidenceFn(beam.DoFn):

  def __init__(self, evidence_dir: str, policy: DataPathPolicy = DataPathPolicy()):
    super().__init__()
    self._dir = evidence_dir
    self._policy = policy

  def setup(self):
    self._read = Metrics.counter(NAMESPACE, "pages_read")
    self._missing = Metrics.counter(NAMESPACE, "missing_pages")
    self._bytes = Metrics.counter(NAMESPACE, "bytes")

  def start_bundle(self):
    self._stats = BundleStats()

  def _read_page(self, page: reader.Page) -> Tuple[Optional[str], str, str]:
    """``(text or None, path, error)``; raises DataPathError for a Filename that
    :mod:`schemas.data_paths` refuses (outside ``<evidence_dir>/<origin>``, not a regular file,
    too large)."""
    path = page.relative_path if page.text is not None else evidence_path(self._dir, page)
    try:
      if page.text is None:
        _, data = data_files.read_data_file(
            self._policy, FileSystems.join(self._dir, page.origin), page.filename,
            "evidence Filename")
      else:
        data = page.text.encode("utf-8")
    except DataPathError:
      self._stats.count("evidence/refused_pages")
      raise
    except Exception as e:  # pylint: disable=broad-except
      if not is_missing_file_error(e):
        raise
      self._missing.inc()
      self._stats.count("evidence/missing_pages")
      return None, path, f"{type(e).__name__}: {str(e)[:300]}"
    self._read.inc()
    self._bytes.inc(len(data))
    self._stats.count("evidence/pages_read")
    self._stats.count("evidence/bytes", len(data))
    text, stats = reader.decode_evidence(data)
    self._stats.update(stats, prefix="evidence/")
    if not text.strip():
      self._stats.count("evidence/empty_pages")
    return text, path, ""

  def process(self, plan: reader.Plan):
    self._stats.count("evidence/input")
    texts, missing, paths, errors = [], [], [], []
    extra = {"question_id": plan.question.id, "document_id": plan.document_id}
    for page in plan.pages:
      try:
        text, path, error = self._read_page(page)
      except DataPathError as e:  # a hostile name: the whole document, not just the page
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
            STAGE, e.reason, _dead_source_id(plan, [page]),
            f"document {plan.document_id!r}: {e}", **extra))
        return
      texts.append(text)
      if text is None:
        missing.append(page)
        paths.append(path)
        errors.append(error)
    if missing and len(missing) == len(plan.pages):
      what = ("its evidence file is" if len(missing) == 1
              else f"all {len(missing)} of its evidence files are")
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
          STAGE, "missing_evidence", _dead_source_id(plan, missing),
          f"document {plan.document_id!r}: {what} missing or unreadable: "
          + "; ".join(f"{p} ({e})" for p, e in zip(paths, errors)),
          missing=paths, **extra))
      return
    try:
      doc = reader.build_document(plan, texts)
    except BadInput as e:
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
          STAGE, e.reason, _dead_source_id(plan, list(plan.pages)), e.detail, **extra))
      return
    except Exception as e:  # pylint: disable=broad-except
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, failure(STAGE, plan.source_id, e))
      return
    self._stats.count("evidence/output")
    yield doc

  def finish_bundle(self):
    yield from self._stats.emit()


class ReadEvidence(beam.PTransform):
  """Plans -> Documents with their evidence texts (see the module docstring).

  Outputs: main (``documents``: Document), ``dead_letter`` (stage ``evidence``), ``stats``.
  ``reshuffle``: spread the plans over workers first (distributed runners: the plans of one
  question file come from one worker, and reading evidence is most of the I/O).
  """

  def __init__(self, evidence_dir: str, reshuffle: bool = False,
               policy: DataPathPolicy = DataPathPolicy()):
    super().__init__()
    self._fn = _ReadEvidenceFn(evidence_dir, policy)
    self._reshuffle = reshuffle

  def expand(self, plans: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
    if self._reshuffle:
      plans = plans | "ReshufflePlans" >> beam.Reshuffle()
    return plans | "ReadEvidence" >> beam.ParDo(self._fn).with_outputs(
        DEAD_LETTER, STATS, main="documents")
