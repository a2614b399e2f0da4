"""The annotation stage: Document -> Document with entity mentions (NER, then entity linking).

  Document --(batches of --annotate_batch_size)--> NER backend (--ner spacy: spaCy, with an
  EntityRuler of the most linked aliases when the model is blank; --ner cloud: Cloud Natural
  Language analyzeEntities, see ``pipelines.entities.cloud_nl``) --> mention spans
  --> entity ids: the Wikipedia page Cloud NL names (through the vocabulary of
  --entities_dir), else the linker (--linker alias: commonness over the Wikipedia job's alias
  table)

Cloud NL costs money: ``--dry_run`` runs only the reading, parsing and a plan of the requests
(cache hits, billable units, cost at ``--price_per_1000_units``), written to
``annotation_plan.json`` (:mod:`pipelines.beam.annotation_plan`) and printed, without calling the API or writing
records.  ``--max_api_units N``: a first pass plans every document's units; documents are
admitted in the order of a hash of their source id while the sum stays within N (the same on
one machine or on many workers); the others that need a call become dead letters with reason
``budget``.  Every run counts ``annotate/billable_units``, ``annotate/api_calls``,
``annotate/api_retries``, ``annotate/cache_hits`` ... in the manifest's ``stages``.

Heavy state (the spaCy pipeline, the alias table) is built once per worker process
(``apache_beam.utils.shared.Shared``).  Mentions a document already has (e.g. Wikipedia links)
are kept; NER spans overlapping them are dropped.  A mention whose text is the title of one of
its document's paragraphs (HotpotQA's titles are Wikipedia titles), or that title without its
"(qualifier)", gets that entity's id when the vocabulary has it (``annotate/linked_by_title``).  A document that fails is a dead letter
(stage ``annotate``).  Counters: ``annotate/input``, ``annotate/output``, ``annotate/mentions``,
``annotate/linked``, ``annotate/words``, ``annotate/busy_ms`` (the stage's own wall time),
``annotate/cpu_ms`` (the CPU time of the thread running it: without the waits for the GIL
while stages fused with it run, and without API waits) and the
``mentions_per_document`` distribution.  With ``--ner none`` the
stage is not in the pipeline at all.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import itertools
import re
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from pipelines.beam import annotation_plan
from pipelines.beam.annotation_config import AnnotationConfig
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.parse import failure
from pipelines.beam.stats import STATS, BundleStats, SumStats
from pipelines.document import Document, Mention
from pipelines.entities import tables
from pipelines.entities.cloud_nl import Failure
from pipelines.errors import UserError
from pipelines.text import wiki_titles, wikitext

NAMESPACE = "readtwice.annotate"
_MAX_MEMO = 1_000_000  # surface forms whose entity id a worker remembers


class _Annotators:
  """The per-process NER backend and linker (held through ``Shared``)."""

  def __init__(self, config: AnnotationConfig):
    from pipelines.entities import linker as linker_lib  # pylint: disable=g-import-not-at-top
    from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
    self.linker = None
    self.normalize = linker_lib.normalize
    self.title_ids: Dict[str, int] = {}  # entity title -> id, for titles a source knows
    patterns: List[str] = []
    self.cloud = config.ner == "cloud"
    if config.entities_dir:
      vocabulary = tables.read_vocabulary(config.entities_dir)
      self.title_ids = dict(zip(vocabulary.column("title").to_pylist(),
                                vocabulary.column("entity_id").to_pylist()))
      uses_ruler = (not self.cloud and config.spacy_model.startswith(ner.SPACY_BLANK_PREFIX)
                    and config.ruler_patterns)
      if config.linker == "alias" or uses_ruler:
        # Read once: the linker and the ruler patterns both come from the alias table.
        aliases = tables.read_aliases(config.entities_dir)
        if config.linker == "alias":
          self.linker = linker_lib.AliasLinker(
              aliases, linker_lib.LinkerConfig(min_count=config.linker_min_count,
                                               min_probability=config.linker_min_probability))
        if uses_ruler:
          patterns = most_linked_aliases(aliases, config.ruler_patterns)
    if self.cloud:
      from pipelines.entities import cloud_nl  # pylint: disable=g-import-not-at-top
      cache = cloud_nl.ResultCache(config.cloud.cache_dir).load()
      self.backend = cloud_nl.CloudBackend(config.cloud, cache)
    else:
      self.backend = ner.SpacyBackend(config.spacy_model, patterns,
                                      batch_size=config.batch_size)
      self.backend.nlp  # pylint: disable=pointless-statement  # built now, not in a bundle
    # texts -> what each holds: Cloud NL's spans or Failures; spaCy's (begins, ends) lists (no
    # tuple and no label per span: the stage keeps neither).
    self.find = self.backend.annotate if self.cloud else self.backend.offsets
    self.links: Dict[str, int] = {}  # memo of link()
    self._titles: Dict[str, int] = {}
    self.outage = OutageDetector(config.nl_max_consecutive_failures if self.cloud else 0)
    # The alias table, the patterns and the spaCy vocabulary live as long as the worker: out
    # of the collector's sight, the many short-lived objects of each batch no longer make
    # every full collection walk them (a third of the stage's time on mention-dense text).
    gc.freeze()

  def title_id(self, title: Optional[str]) -> int:
    """The vocabulary id of a Wikipedia title as an API names it (0 when unknown), after
    MediaWiki title normalisation (first letter upper case, underscores)."""
    if not title or not self.title_ids:
      return 0
    entity_id = self._titles.get(title)
    if entity_id is None:
      normal = wiki_titles.normalize_title(title)
      entity_id = (self.title_ids.get(normal.text, 0)
                   if normal is not None and normal.namespace == 0 else 0)
      if len(self._titles) >= _MAX_MEMO:
        self._titles.clear()
      self._titles[title] = entity_id
    return entity_id

  def link(self, text: str) -> int:
    """The entity id of a mention's text (0 without a linker), memoised: the same surface
    forms come back again and again."""
    if self.linker is None:
      return 0
    entity_id = self.links.get(text)
    if entity_id is None:
      if len(self.links) >= _MAX_MEMO:
        self.links.clear()
      entity_id = self.links[text] = self.linker.link(text)
    return entity_id


def most_linked_aliases(table, limit: int) -> List[str]:
  """The ``limit`` aliases of an alias table (:func:`schemas.entities.read_aliases`) linked
  most often to an entity of the vocabulary, leaving out those shorter than 3 characters
  (2 when not ASCII: many Chinese and Japanese names have two characters) and English stop words (anchors such as "the" or "here" are links, but as patterns they would
  match everywhere)."""
  from spacy.lang.en.stop_words import STOP_WORDS  # pylint: disable=g-import-not-at-top
  totals: Dict[str, int] = {}
  for alias, entity_id, count in zip(table.column("alias").to_pylist(),
                                     table.column("entity_id").to_pylist(),
                                     table.column("count").to_pylist()):
    text = alias.strip()
    long_enough = len(text) >= 3 or (len(text) == 2 and not text.isascii())  # 東京, not "us"
    if entity_id and long_enough and text.lower() not in STOP_WORDS:
      totals[alias] = totals.get(alias, 0) + count
  return [a for a, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


# API errors (``Failure.message`` starts with the exception's class name) that mean the service
# is not answering, as opposed to a text it refused; 429s are a quota, not an outage.
_OUTAGE_ERRORS = ("ServiceUnavailable", "DeadlineExceeded", "InternalServerError",
                  "BadGateway", "GatewayTimeout", "Unknown", "RetryError")
_QUOTA_ERRORS = ("TooManyRequests", "ResourceExhausted")


def outage_evidence(found: Any) -> Optional[bool]:
  """What one text's annotation says about the service: True (it did not answer: UNAVAILABLE,
  deadlines, 5xx, connection errors, after the retries), False (it answered, also with a
  refusal), None (nothing: a budget refusal, a quota error, an error of the text itself)."""
  if isinstance(found, BaseException):
    return True if isinstance(found, (OSError, ConnectionError, TimeoutError)) else None
  if not isinstance(found, Failure):
    return False
  if found.reason == "api_unavailable":
    return None if any(e in found.message for e in _QUOTA_ERRORS) else True
  if found.reason == "api_error":
    return found.message.startswith(_OUTAGE_ERRORS)
  if found.reason == "api_rejected":
    return False
  return None


class OutageDetector:
  """Counts texts in a row whose annotation failed for want of the service (one per worker
  process, shared by its threads); :meth:`observe` raises a UserError, which stops the job, at
  ``limit`` of them (0: never)."""

  def __init__(self, limit: int):
    self.limit = limit
    self.consecutive = 0
    self._lock = threading.Lock()

  def observe(self, found: Any) -> None:
    if not self.limit:
      return
    evidence = outage_evidence(found)
    if evidence is None:
      return
    with self._lock:
      self.consecutive = self.consecutive + 1 if evidence else 0
      reached = self.consecutive >= self.limit
    if reached:
      if isinstance(found, BaseException):
        last = f"{type(found).__name__}: {found}"
      else:
        retried = re.match(r"(\d+) attempt\(s\), last: (.*)$", found.message, re.S)
        last = (f"{retried.group(2)} after {retried.group(1)} attempt(s)" if retried
                else found.message)
      raise UserError(f"Cloud Natural Language unreachable: {self.limit} consecutive requests "
                      f"failed (last: {last}); stopped (--nl_max_consecutive_failures)")


class _AnnotateFn(beam.DoFn):
  """A batch of Documents -> Documents with mentions (+ stats, dead letters)."""

  def __init__(self, config: AnnotationConfig, handle: shared.Shared):
    self._config = config
    self._handle = handle

  def setup(self):
    self._annotators = self._handle.acquire(lambda: _Annotators(self._config))
    self._mentions = Metrics.counter(NAMESPACE, "mentions")
    self._linked = Metrics.counter(NAMESPACE, "linked")

  def start_bundle(self):
    self._stats = BundleStats()
    self._last: Tuple[Optional[str], Any] = (None, None)  # the last text and its spans

  def process(self, batch: List[Document], budget: Optional[annotation_plan.Budget] = None):
    # The outputs are made before any is yielded, so that ``annotate/busy_ms`` (this stage's
    # own time, for benchmarks/ner_throughput.py) excludes the stages fused after it.
    start, cpu_start = time.perf_counter(), time.thread_time()
    self._stats.count("annotate/input", len(batch))
    out: List[Any] = []
    annotate = self._annotators.find
    # A text several documents read (NarrativeQA's questions of one story) is annotated once,
    # also when its documents straddle two batches (the last text is remembered).
    firsts: Dict[str, Document] = {}
    for d in batch:
      firsts.setdefault(d.text, d)
    texts = [t for t in firsts if t is not self._last[0]]
    if self._annotators.cloud:
      counts: Dict[str, int] = {}
      admit = (None if budget is None else
               [budget.admits(annotation_plan.budget_key(firsts[t])) for t in texts])
      annotate = functools.partial(annotate, admit=admit, stats=counts)
    outage = self._annotators.outage
    try:
      found_by_text = dict(zip(texts, annotate(texts)))
      if outage.limit:
        for t in texts:
          outage.observe(found_by_text[t])
      if self._last[0] in firsts:
        found_by_text[self._last[0]] = self._last[1]
      spans = [found_by_text[d.text] for d in batch]
    except UserError:
      raise  # e.g. refused credentials: every document would fail the same way
    except Exception:  # pylint: disable=broad-except  # find the document(s) that fail
      spans = []
      for doc in batch:
        try:
          spans.append(self._annotators.find([doc.text])[0])
          outage.observe(spans[-1])
        except UserError:
          raise
        except Exception as e:  # pylint: disable=broad-except
          outage.observe(e)
          spans.append(None)
          out.append(beam.pvalue.TaggedOutput(DEAD_LETTER, failure("annotate", doc.source_id,
                                                                   e)))
    if self._annotators.cloud:
      self._stats.update(counts, prefix="annotate/")
    self._stats.count("annotate/texts", len(texts))
    self._last = (batch[-1].text, spans[-1])
    self._counts = [0, 0, 0]  # documents, mentions, linked mentions: counted once a batch
    for doc, found in zip(batch, spans):
      if isinstance(found, Failure):  # the API rejected the text, or the budget is spent
        out.append(beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
            "annotate", found.reason, doc.source_id, found.message)))
      elif found is not None:
        out.append(self._annotate(doc, found))
    documents, mentions, linked = self._counts
    if documents:
      self._stats.count("annotate/output", documents)
      self._stats.count("annotate/mentions", mentions)
      self._stats.count("annotate/linked", linked)
      self._mentions.inc(mentions)
      self._linked.inc(linked)
    self._stats.count("annotate/busy_ms", int(round(1000 * (time.perf_counter() - start))))
    self._stats.count("annotate/cpu_ms", int(round(1000 * (time.thread_time() - cpu_start))))
    # Words of the documents, each distinct text split once (a story's questions share it).
    per_text = collections.Counter(d.text for d in batch)
    self._stats.count("annotate/words", sum(len(t.split()) * k for t, k in per_text.items()))
    yield from out

  def _annotate(self, doc: Document, found) -> Document:
    """``doc`` with the mentions of what the backend ``found`` in its text (spaCy: (begins,
    ends) lists; Cloud NL: spans); counts them in ``self._counts``."""
    annotators = self._annotators
    # Paragraph titles that are entity titles (HotpotQA's are Wikipedia titles): a mention
    # whose text is such a title is that entity, whatever the alias prior says.
    known = {}
    if annotators.title_ids:
      title_ids = annotators.title_ids
      for p in doc.paragraphs:
        entity_id = title_ids.get(p.title)
        if entity_id:
          known[annotators.normalize(p.title)] = entity_id
          known.setdefault(annotators.normalize(wikitext.without_qualifier(p.title)),
                           entity_id)
    text = doc.text
    if not (doc.mentions or known or annotators.cloud):  # the common case: lean, in C loops
      begins, ends = found
      surfaces = list(map(text.__getitem__, map(slice, begins, ends)))
      ids = list(map(annotators.links.get, surfaces))
      if None in ids:
        link = annotators.link
        ids = [link(t) if i is None else i for t, i in zip(surfaces, ids)]
      # Mention(begin, end, entity_id, ""): tuple.__new__ skips the NamedTuple's __new__.
      mentions = tuple(map(tuple.__new__, itertools.repeat(Mention),
                           zip(begins, ends, ids, itertools.repeat(""))))
      linked = len(ids) - ids.count(0)
    else:
      taken = [(m.begin, m.end) for m in doc.mentions]
      added = self._resolve(found if annotators.cloud else zip(*found), text, taken, known)
      linked = sum(1 for m in added if m.entity_id)
      mentions = (tuple(sorted(doc.mentions + tuple(added), key=lambda m: (m.begin, m.end)))
                  if doc.mentions else tuple(added))  # spaCy's entities come sorted
    counts = self._counts
    counts[0] += 1
    counts[1] += len(mentions) - len(doc.mentions)
    counts[2] += linked
    self._stats.observe("annotate/mentions_per_document", len(mentions) - len(doc.mentions))
    return dataclasses.replace(doc, mentions=mentions)

  def _resolve(self, found, text: str, taken, known) -> List[Mention]:
    """Mentions of the ``found`` spans (``(begin, end, ...)``) that overlap no ``taken`` one,
    with ids from the paragraph titles (``known``), else the Wikipedia page the backend names,
    else the linker."""
    annotators = self._annotators
    added = []
    for span in found:
      begin, end = span[0], span[1]
      if taken and any(b < end and begin < e for b, e in taken):
        continue
      surface = text[begin:end]
      entity_id = known.get(annotators.normalize(surface)) if known else None
      if entity_id:
        self._stats.count("annotate/linked_by_title")
      elif len(span) > 3 and span[3]:  # the Wikipedia page the NER backend names
        entity_id = annotators.title_id(span[3])
        if entity_id:
          self._stats.count("annotate/linked_by_api")
      added.append(Mention(begin, end, entity_id or annotators.link(surface)))
    return added

  def finish_bundle(self):
    if self._annotators.cloud and self._annotators.backend.cache is not None:
      self._annotators.backend.cache.flush()  # results paid for are on disk per bundle
    yield from self._stats.emit()

  def teardown(self):
    annotators = getattr(self, "_annotators", None)
    if annotators is not None and annotators.cloud and annotators.backend.cache is not None:
      annotators.backend.cache.flush()


class AnnotateDocuments(beam.PTransform):
  """Documents -> Documents with entity mentions; outputs ``dead_letter`` and ``stats``.

  ``dry_run`` (a Cloud NL dry run): use :meth:`plan` instead, which calls nothing."""

  def __init__(self, config: AnnotationConfig):
    super().__init__()
    self._config = config
    self._handle = shared.Shared()

  @property
  def dry_run(self) -> bool:
    return self._config.dry_run

  def _plan(self, docs: beam.PCollection):
    planned = docs | "Plan" >> beam.ParDo(annotation_plan.PlanFn(
        self._handle, functools.partial(_Annotators, self._config))).with_outputs(
        STATS, main="costs")
    budget = planned.costs | "Budget" >> beam.CombineGlobally(
        annotation_plan.BudgetCutoff(self._config.max_api_units or (1 << 62)))
    return budget, planned[STATS]

  def plan(self, docs: beam.PCollection) -> beam.PCollection:
    """Documents -> one dict: the requests, cache hits, billable units and cost of annotating
    them (:func:`pipelines.beam.annotation_plan.plan_report`)."""
    budget, stats = self._plan(docs)
    summed = stats | "SumPlanStats" >> beam.CombineGlobally(SumStats())
    return summed | "PlanReport" >> beam.Map(annotation_plan.plan_report, self._config,
                                             beam.pvalue.AsSingleton(budget))

  def write_plan(self, docs: beam.PCollection, input_count: beam.PCollection,
                 output_dir: str, release_claim: Optional[str] = None) -> beam.PCollection:
    """The dry run: :meth:`plan` of ``docs`` (with the job's ``input_count``, a PCollection of
    ints to sum) written to ``<output_dir>/annotation_plan.json``; outputs the report.
    ``release_claim``: the token of the output dir's claim, released then (``--nowait``)."""
    total = input_count | "SumInput" >> beam.CombineGlobally(sum)
    return self.plan(docs) | "WritePlan" >> beam.Map(annotation_plan.write_plan, output_dir,
                                                    beam.pvalue.AsSingleton(total),
                                                    release_claim)

  def expand(self, docs: beam.PCollection) -> Dict[str, beam.PCollection]:
    n = self._config.batch_size
    side = []
    stats = []
    if self._config.ner == "cloud" and self._config.max_api_units:
      budget, plan_stats = self._plan(docs)
      side.append(beam.pvalue.AsSingleton(budget))
      stats.append(plan_stats)
    out = (docs | "Batch" >> beam.BatchElements(min_batch_size=n, max_batch_size=n)
           | "Annotate" >> beam.ParDo(_AnnotateFn(self._config, self._handle),
                                      *side).with_outputs(DEAD_LETTER, STATS, main="documents"))
    stats.append(out[STATS])
    all_stats = (tuple(stats) | "FlattenAnnotateStats" >> beam.Flatten()) if len(stats) > 1 \
        else out[STATS]
    return {"documents": out.documents, DEAD_LETTER: out[DEAD_LETTER], STATS: all_stats}
