"""Label completeness of QA inputs: a question without an answer is only valid in a test file.

HotpotQA, TriviaQA and NarrativeQA ship test files without answers; their questions are
written unlabelled.  In a file where other questions do have answers, a question without one is
a broken record (it would silently train as "no answer here"): it is dead-lettered as
``labels/missing_answer``.  The decision is per input file, and the manifest's ``labels`` says
which case applied to each file (``labelled``: every question has answers; ``unlabelled``: none
has, a test file; ``mixed``: some questions were rejected).  Documents without a question
(pretraining text) pass unchanged.

It runs on the segmented documents' :class:`~pipelines.beam.spill.Entry` (``labelled`` is None
without a question, else whether the question has an answer), after segmentation: the
per-file decision needs every document of a file, and only the small entries wait for it.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipelines import keys
from pipelines.beam.dead_letter import DEAD_LETTER, dead_letter
from pipelines.beam.spill import Entry
from pipelines.beam.stats import STATS, BundleStats

LABELS = "labels"


def source_file(source_id: str) -> str:
  """The input file of a source id (``path#index`` or ``path:line``)."""
  return keys.split_source_id(source_id)[0]


def _file_label_counts(entry: Entry) -> Iterable[Tuple[Tuple[str, bool], int]]:
  if entry.labelled is not None:
    yield (source_file(entry.source_id), entry.labelled), 1


def file_modes(counts: List[Tuple[Tuple[str, bool], int]]) -> Dict[str, Dict]:
  """``{file: {"mode": labelled|unlabelled|mixed, "labelled": n, "unlabelled": n}}``."""
  out: Dict[str, Dict] = {}
  for (path, labelled), n in counts:
    entry = out.setdefault(path, {"labelled": 0, "unlabelled": 0})
    entry["labelled" if labelled else "unlabelled"] += n
  for entry in out.values():
    entry["mode"] = ("unlabelled" if not entry["labelled"] else
                     "labelled" if not entry["unlabelled"] else "mixed")
  return dict(sorted(out.items()))


class _CheckFn(beam.DoFn):

  def setup(self):
    self._rejected = Metrics.counter("readtwice.labels", "missing_answer")

  def start_bundle(self):
    self._stats = BundleStats()

  def process(self, entry: Entry, modes: Dict[str, Dict]):
    self._stats.count("labels/input")
    if entry.labelled is False:
      path = source_file(entry.source_id)
      mode = modes.get(path, {})
      if mode.get("labelled"):
        self._rejected.inc()
        yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
            "labels", "missing_answer", entry.source_id,
            f"question {entry.question_id!r}"
            # A question read as several documents (TriviaQA web: one per page) dead-letters
            # each of them: the document id keeps their lines apart.
            + (f" (document {entry.id!r})" if entry.id != entry.question_id else "")
            + f" has no answer, but {mode['labelled']} questions "
            f"of {path} have one (only test files without any answers may be unlabelled)"))
        return
    self._stats.count("labels/output")
    yield entry

  def finish_bundle(self):
    yield from self._stats.emit()


class CheckLabels(beam.PTransform):
  """Entries -> the same entries minus unlabelled questions of labelled files.

  Outputs: main (Entry), ``dead_letter``, ``stats`` and ``labels`` (one dict
  ``{file: {"mode", "labelled", "unlabelled"}}`` for the manifest).
  """

  def expand(self, docs: beam.PCollection) -> Dict[str, beam.PCollection]:
    counts = (docs | "FileLabelCounts" >> beam.FlatMap(_file_label_counts)
              | "SumPerFile" >> beam.CombinePerKey(sum))
    modes = counts | "Modes" >> beam.combiners.ToList() | "ToModes" >> beam.Map(file_modes)
    checked = docs | "Check" >> beam.ParDo(_CheckFn(), beam.pvalue.AsSingleton(modes)
                                          ).with_outputs(DEAD_LETTER, STATS, main="documents")
    return {"documents": checked.documents, DEAD_LETTER: checked[DEAD_LETTER],
            STATS: checked[STATS], LABELS: modes}
