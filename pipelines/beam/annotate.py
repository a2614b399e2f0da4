"""The annotation stage: Document -> Document with entity mentions (NER, then entity linking).

  Document --(batches of --annotate_batch_size)--> NER backend (--ner spacy: spaCy, with an
  EntityRuler of the most linked aliases when the model is blank) --> mention spans
  --> linker (--linker alias: commonness over the Wikipedia job's alias table) --> entity ids

Heavy state (the spaCy pipeline, the alias table) is built once per worker process
(``apache_beam.utils.shared.Shared``).  Mentions a document already has (e.g. Wikipedia links)
are kept; NER spans overlapping them are dropped.  A mention whose text is the title of one of
its document's paragraphs (HotpotQA's titles are Wikipedia titles), or that title without its
"(qualifier)", gets that entity's id when the vocabulary has it (``annotate/linked_by_title``).  A document that fails is a dead letter
(stage ``annotate``).  Counters: ``annotate/input``, ``annotate/output``, ``annotate/mentions``,
``annotate/linked``, ``annotate/words``, ``annotate/busy_ms`` (the stage's own time) and the
``mentions_per_document`` distribution.  With ``--ner none`` the
stage is not in the pipeline at all.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Dict, List, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from schemas import entities as entities_schema
from pipelines.beam.dead_letter import DEAD_LETTER
from pipelines.beam.parse import failure
from pipelines.beam.stats import STATS, BundleStats
from pipelines.document import Document, Mention
from pipelines.text import wikitext

NAMESPACE = "readtwice.annotate"
NER_CHOICES = ("none", "spacy")
LINKER_CHOICES = ("none", "alias")
_MAX_MEMO = 1_000_000  # surface forms whose entity id a worker remembers


@dataclasses.dataclass(frozen=True)
class AnnotationConfig:
  ner: str = "none"
  spacy_model: str = "blank:en"
  linker: str = "none"
  entities_dir: Optional[str] = None  # a Wikipedia job's output dir (its entities/)
  linker_min_count: int = 2
  linker_min_probability: float = 0.5
  ruler_patterns: int = 100_000  # most linked aliases, as EntityRuler patterns
  batch_size: int = 64

  def __post_init__(self):
    if self.ner not in NER_CHOICES:
      raise ValueError(f"--ner must be one of {NER_CHOICES}, got {self.ner!r}")
    if self.linker not in LINKER_CHOICES:
      raise ValueError(f"--linker must be one of {LINKER_CHOICES}, got {self.linker!r}")
    if self.linker == "alias" and self.ner == "none":
      raise ValueError("--linker alias links the mentions --ner finds: give --ner spacy too")
    if self.linker == "alias" and not self.entities_dir:
      raise ValueError("--linker alias needs --entities_dir (a Wikipedia job's output dir)")
    if self.entities_dir and not os.path.isdir(os.path.join(self.entities_dir,
                                                            entities_schema.ENTITIES_DIR)):
      raise ValueError(f"--entities_dir {self.entities_dir!r} has no "
                       f"{entities_schema.ENTITIES_DIR}/ (run python -m pipelines.wikipedia)")
    if self.batch_size < 1:
      raise ValueError(f"--annotate_batch_size must be >= 1, got {self.batch_size}")
    if self.ruler_patterns < 0:
      raise ValueError(f"--ruler_patterns must be >= 0, got {self.ruler_patterns}")

  @property
  def enabled(self) -> bool:
    return self.ner != "none"

  def describe(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def add_flags(group) -> None:
  """The annotation flags of a job."""
  d = AnnotationConfig()
  group.add_argument("--ner", default=d.ner, choices=NER_CHOICES,
                     help="entity mentions: spacy (offline: a blank model with an EntityRuler "
                          "of the most linked aliases of --entities_dir) (default: %(default)s)")
  group.add_argument("--spacy_model", default=d.spacy_model,
                     help="blank:<lang> or an installed spaCy model package name "
                          "(default: %(default)s)")
  group.add_argument("--linker", default=d.linker, choices=LINKER_CHOICES,
                     help="entity ids for the mentions: alias (commonness over the alias table "
                          "of --entities_dir) (default: %(default)s)")
  group.add_argument("--entities_dir", default=None,
                     help="output dir of python -m pipelines.wikipedia (entity vocabulary and "
                          "alias table)")
  group.add_argument("--linker_min_count", type=int, default=d.linker_min_count,
                     help="links an (alias, entity) pair needs (default: %(default)s)")
  group.add_argument("--linker_min_probability", type=float, default=d.linker_min_probability,
                     help="smallest p(entity | alias) to link (default: %(default)s)")
  group.add_argument("--ruler_patterns", type=int, default=d.ruler_patterns,
                     help="most linked aliases used as EntityRuler patterns (default: "
                          "%(default)s)")
  group.add_argument("--annotate_batch_size", type=int, default=d.batch_size,
                     help="documents per nlp.pipe call (default: %(default)s)")


def config_from_args(args) -> AnnotationConfig:
  return AnnotationConfig(ner=args.ner, spacy_model=args.spacy_model, linker=args.linker,
                          entities_dir=args.entities_dir, linker_min_count=args.linker_min_count,
                          linker_min_probability=args.linker_min_probability,
                          ruler_patterns=args.ruler_patterns, batch_size=args.annotate_batch_size)


class _Annotators:
  """The per-process NER backend and linker (held through ``Shared``)."""

  def __init__(self, config: AnnotationConfig):
    from pipelines.entities import linker as linker_lib  # pylint: disable=g-import-not-at-top
    from pipelines.entities import ner  # pylint: disable=g-import-not-at-top
    self.linker = None
    self.normalize = linker_lib.normalize
    self.title_ids: Dict[str, int] = {}  # entity title -> id, for titles a source knows
    patterns: List[str] = []
    if config.entities_dir:
      entities = os.path.join(config.entities_dir, entities_schema.ENTITIES_DIR)
      # Read once: the linker and the ruler patterns both come from the alias table.
      aliases = entities_schema.read_aliases(entities_schema.alias_paths(entities))
      if config.linker == "alias":
        self.linker = linker_lib.AliasLinker(
            aliases, linker_lib.LinkerConfig(min_count=config.linker_min_count,
                                             min_probability=config.linker_min_probability))
        vocabulary = entities_schema.read_vocabulary(
            os.path.join(entities, entities_schema.VOCABULARY_FILE))
        self.title_ids = dict(zip(vocabulary.column("title").to_pylist(),
                                  vocabulary.column("entity_id").to_pylist()))
      if config.spacy_model.startswith(ner.SPACY_BLANK_PREFIX) and config.ruler_patterns:
        patterns = most_linked_aliases(aliases, config.ruler_patterns)
    self.backend = ner.SpacyBackend(config.spacy_model, patterns,
                                    batch_size=config.batch_size)
    self.backend.nlp  # pylint: disable=pointless-statement  # built now, not in the 1st bundle
    self._links: Dict[str, int] = {}

  def link(self, text: str) -> int:
    """The entity id of a mention's text (0 without a linker), memoised: the same surface
    forms come back again and again."""
    if self.linker is None:
      return 0
    entity_id = self._links.get(text)
    if entity_id is None:
      if len(self._links) >= _MAX_MEMO:
        self._links.clear()
      entity_id = self._links[text] = self.linker.link(text)
    return entity_id


def most_linked_aliases(table, limit: int) -> List[str]:
  """The ``limit`` aliases of an alias table (:func:`schemas.entities.read_aliases`) linked
  most often to an entity of the vocabulary, leaving out those shorter than 3 characters and
  English stop words (anchors such as "the" or "here" are links, but as patterns they would
  match everywhere)."""
  from spacy.lang.en.stop_words import STOP_WORDS  # pylint: disable=g-import-not-at-top
  totals: Dict[str, int] = {}
  for alias, entity_id, count in zip(table.column("alias").to_pylist(),
                                     table.column("entity_id").to_pylist(),
                                     table.column("count").to_pylist()):
    text = alias.strip()
    if entity_id and len(text) >= 3 and text.lower() not in STOP_WORDS:
      totals[alias] = totals.get(alias, 0) + count
  return [a for a, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


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

  def process(self, batch: List[Document]):
    # The outputs are made before any is yielded, so that ``annotate/busy_ms`` (this stage's
    # own time, for benchmarks/ner_throughput.py) excludes the stages fused after it.
    start = time.perf_counter()
    self._stats.count("annotate/input", len(batch))
    out: List[Any] = []
    try:
      spans = self._annotators.backend.annotate([d.text for d in batch])
    except Exception:  # pylint: disable=broad-except  # find the document(s) that fail
      spans = []
      for doc in batch:
        try:
          spans.append(self._annotators.backend.annotate([doc.text])[0])
        except Exception as e:  # pylint: disable=broad-except
          spans.append(None)
          out.append(beam.pvalue.TaggedOutput(DEAD_LETTER, failure("annotate", doc.source_id,
                                                                   e)))
    out += [self._annotate(doc, found) for doc, found in zip(batch, spans) if found is not None]
    self._stats.count("annotate/busy_ms", int(round(1000 * (time.perf_counter() - start))))
    self._stats.count("annotate/words", sum(len(d.text.split()) for d in batch))
    yield from out

  def _annotate(self, doc: Document, found) -> Document:
    taken = [(m.begin, m.end) for m in doc.mentions]
    annotators = self._annotators
    link = annotators.link
    # Paragraph titles that are entity titles (HotpotQA's are Wikipedia titles): a mention
    # whose text is such a title is that entity, whatever the alias prior says.
    known = {}
    if annotators.title_ids:
      for p in doc.paragraphs:
        entity_id = annotators.title_ids.get(p.title)
        if entity_id:
          known[annotators.normalize(p.title)] = entity_id
          known.setdefault(annotators.normalize(wikitext.without_qualifier(p.title)),
                           entity_id)
    text = doc.text
    added = []
    for begin, end, _ in found:
      if taken and any(b < end and begin < e for b, e in taken):
        continue
      surface = text[begin:end]
      entity_id = known.get(annotators.normalize(surface)) if known else None
      if entity_id:
        self._stats.count("annotate/linked_by_title")
      added.append(Mention(begin, end, entity_id or link(surface)))
    linked = sum(1 for m in added if m.entity_id)
    self._stats.count("annotate/output")
    self._stats.count("annotate/mentions", len(added))
    self._stats.count("annotate/linked", linked)
    self._stats.observe("annotate/mentions_per_document", len(added))
    self._mentions.inc(len(added))
    self._linked.inc(linked)
    mentions = (tuple(sorted(doc.mentions + tuple(added), key=lambda m: (m.begin, m.end)))
                if doc.mentions else tuple(added))  # spaCy's entities come sorted
    return dataclasses.replace(doc, mentions=mentions)

  def finish_bundle(self):
    yield from self._stats.emit()


class AnnotateDocuments(beam.PTransform):
  """Documents -> Documents with entity mentions; outputs ``dead_letter`` and ``stats``."""

  def __init__(self, config: AnnotationConfig):
    super().__init__()
    self._config = config
    self._handle = shared.Shared()

  def expand(self, docs: beam.PCollection) -> Dict[str, beam.PCollection]:
    n = self._config.batch_size
    out = (docs | "Batch" >> beam.BatchElements(min_batch_size=n, max_batch_size=n)
           | "Annotate" >> beam.ParDo(_AnnotateFn(self._config, self._handle)).with_outputs(
               DEAD_LETTER, STATS, main="documents"))
    return {"documents": out.documents, DEAD_LETTER: out[DEAD_LETTER], STATS: out[STATS]}
