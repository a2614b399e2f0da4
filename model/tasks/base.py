"""What a QA task is to the model: :class:`Task`, and the registry the task modules add to.

A task (seqio's ``Task`` in spirit, without the data pipeline: the pipelines write the records)
gathers everything that differs between datasets once the model has read the packs:

* how the decoder's answers become the official prediction object, and how it is keyed
  (:meth:`Task.predictions`; :class:`model.inference.decoding.Decoder` is task-agnostic);
* the official metrics -- a module of :mod:`model.evaluation`, the port of the dataset's
  official script, with ``check_predictions``, ``check_gold`` and ``evaluate`` -- and how the
  gold file is read (:meth:`Task.load_gold`);
* ``model.evaluate``'s task-specific flags (:class:`Flag`) and its warning about gold entries
  without a prediction (:meth:`Task.missing_warning`);
* the dev metric that picks ``model.finetune``'s best checkpoint and the evaluation options used
  during fine-tuning (:attr:`Task.best_metric`, :attr:`Task.dev_options`, and the options the
  dev records imply, :meth:`Task.records_options`: NarrativeQA's split);
* whether answers can be keyed per (question, document) (:attr:`Task.per_document`) and
  whether a records dir is (:meth:`Task.records_per_document`).

Each task is one module of :mod:`model.tasks` defining one instance, registered with
:func:`register` on import; :mod:`model.tasks` looks them up by name.  Pure Python: no
TensorFlow, no NumPy (``model.evaluate`` imports the registry).
"""

from __future__ import annotations

import abc
import dataclasses
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

from model.evaluation import common
from schemas import cli

if TYPE_CHECKING:
  from model.inference.decoding import Decoder

# Flag kinds: a flag taking a value, a store_true switch, an absl-style --x / --nox pair.
FLAG_KINDS = ("value", "switch", "bool")


@dataclasses.dataclass(frozen=True)
class Flag:
  """A task-specific flag of ``model.evaluate``: ``--<dest>`` passes ``dest=<value>`` to the
  task's ``evaluate``; left out, the task's default applies (every flag defaults to None)."""
  dest: str
  help: str
  kind: str = "value"
  choices: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    if self.kind not in FLAG_KINDS:
      raise ValueError(f"Flag kind must be one of {FLAG_KINDS}, got {self.kind!r}")

  @property
  def display(self) -> str:
    """How error messages name the flag: ``--per_document``, ``--(no)meteor``."""
    return f"--(no){self.dest}" if self.kind == "bool" else f"--{self.dest}"

  def add_to(self, parser: cli.Parser) -> None:
    if self.kind == "bool":
      cli.bool_flag(parser, self.dest, None, self.help)
    elif self.kind == "switch":
      parser.add_argument(f"--{self.dest}", action="store_true", default=None, help=self.help)
    else:
      parser.add_argument(f"--{self.dest}", choices=self.choices, default=None, help=self.help)


@dataclasses.dataclass(frozen=True, eq=False)  # one instance per task: identity is equality
class Task(abc.ABC):
  """One QA task (subclassed once per task module; instances are registered by name).

  Attributes:
    name: Registry key: ``--task`` of the CLIs, the ``task`` (or ``job``) of a records manifest.
    metrics: The :mod:`model.evaluation` module of the official metrics (``check_predictions``,
      ``check_gold``, ``evaluate``).
    gold_help: What the gold file is, for ``--help``.
    best_metric: The dev metric (higher is better) that selects fine-tuning's best checkpoint.
    flags: ``model.evaluate``'s flags of this task.
    dev_options: ``evaluate`` keyword options of the dev evaluation during fine-tuning.
    per_document: Whether predictions can be keyed per (question, document) pair.
    unavailable_errors: Exceptions of ``evaluate`` that mean a metric cannot run here (a
      missing tool), reported as one line like a bad input.
  """
  name: str
  metrics: ModuleType
  gold_help: str
  best_metric: str = "f1"
  flags: Tuple[Flag, ...] = ()
  dev_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  per_document: bool = False
  unavailable_errors: Tuple[type, ...] = ()

  # --- predictions -------------------------------------------------------------------------

  @abc.abstractmethod
  def build_predictions(self, decoder: Decoder, per_document: bool) -> Dict:
    """The official prediction object of the decoder's questions (``per_document`` is only
    ever True for a task with :attr:`per_document`)."""

  def predictions(self, decoder: Decoder, per_document: bool = False) -> Dict:
    """The official prediction object; ValueError for ``per_document`` where it does not
    apply."""
    if per_document and not self.per_document:
      raise ValueError(f"per_document does not apply to task {self.name!r} (only to "
                       f"{', '.join(t.name for t in _REGISTRY.values() if t.per_document)})")
    return self.build_predictions(decoder, per_document)

  def count(self, predictions: Mapping) -> int:
    """How many questions (or keys) a prediction object answers."""
    return len(predictions)

  def records_per_document(self, manifest: Mapping, documents: Mapping[str, Mapping]) -> bool:
    """Whether a records dir's official keys are per (question, document) pair."""
    del manifest, documents
    return False

  def score_options(self, predictions: Mapping) -> Dict[str, Any]:
    """``evaluate`` options that go with a prediction object (e.g. how it is keyed)."""
    del predictions
    return {}

  def records_options(self, manifest: Mapping, records_dir: str = "the records dir"
                      ) -> Dict[str, Any]:
    """``evaluate`` options that a records dir implies when its predictions are scored against
    the official gold file (NarrativeQA: the pipeline's ``--split``, so that questions of other
    sets do not count as missing): what ``model.evaluate``'s flags must say for that file.
    ValueError (one line naming ``records_dir``) where the manifest lacks what is needed."""
    del manifest, records_dir
    return {}

  def empty_predictions(self) -> Dict:
    """A prediction object that answers nothing (checks a gold file before any prediction)."""
    return {}

  # --- gold and metrics --------------------------------------------------------------------

  def load_gold(self, path: str) -> Any:
    """The gold file, parsed (a JSON file by default).

    Raises:
      common.InputError: A JSON file that cannot be read or parsed (the message is complete).
      OSError: The file cannot be read (other formats).
      ValueError: The file is malformed (other formats).
    """
    return common.load_json(path, "gold")

  def check_predictions(self, predictions: Any, source: str = "predictions") -> None:
    """ValueError unless ``predictions`` has the task's prediction format."""
    self.metrics.check_predictions(predictions, source)

  def check_gold(self, gold: Any, source: str = "gold") -> None:
    """ValueError unless ``gold`` (as :meth:`load_gold` returns it) can be scored."""
    self.metrics.check_gold(gold, source)

  def evaluate(self, predictions: Any, gold: Any, **options: Any) -> Dict[str, Any]:
    """The official metrics and the counts (``n_gold``, ``n_missing``..., ``n_ignored``)."""
    return self.metrics.evaluate(predictions, gold, **options)

  def missing_warning(self, metrics: Mapping[str, Any]) -> Optional[str]:
    """The warning about gold entries without a prediction (None if there are none); says
    what the task's metrics do with them."""
    missing = metrics.get("n_missing", 0)
    if not missing:
      return None
    return f"warning: {missing} of {metrics.get('n_gold')} gold entries have no prediction"


# name -> task, in registration order (the order of the imports in model/tasks/__init__.py).
_REGISTRY: Dict[str, Task] = {}


def register(task: Task) -> Task:
  """Adds ``task`` to the registry (a name is registered once); returns it."""
  if task.name in _REGISTRY:
    raise ValueError(f"task {task.name!r} is registered twice")
  _REGISTRY[task.name] = task
  return task


def registered() -> Iterator[Task]:
  """The registered tasks, in registration order."""
  return iter(tuple(_REGISTRY.values()))


def lookup(name: str) -> Optional[Task]:
  """The task registered as ``name``, or None (:func:`model.tasks.get` raises instead)."""
  return _REGISTRY.get(name)


def per_document_answers(decoder: Decoder,
                         conflict: Callable[[str, str, str], str]) -> Dict[str, str]:
  """``{document_id: answer}``: one answer per document a question was read with (reduced over
  the document's segments and sub-documents).  A document id read with two questions raises
  ValueError with ``conflict(document_id, first_question, second_question)``."""
  out: Dict[str, str] = {}
  owner: Dict[str, str] = {}
  for qid in decoder.question_ids():
    for doc_id, answer in decoder.document_answers(qid).items():
      if owner.setdefault(doc_id, qid) != qid:
        raise ValueError(conflict(doc_id, owner[doc_id], qid))
      out[doc_id] = answer
  return out
