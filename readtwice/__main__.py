"""``readtwice <command> ...``: one console command over every job and model command.

``readtwice hotpotqa --input ... --output_dir ...`` runs the dataset's pipeline (any dataset
registered in :mod:`pipelines.datasets`); ``readtwice finetune|pretrain|train|predict|evaluate|
export|roberta ...`` run the model commands, ``readtwice inspect ...`` the record inspector.  Each is
the same code as its ``python -m`` module (which keeps working), with the same flags, output
and exit codes; usage and error lines name the command as typed (``readtwice finetune:
error: ...``).  Only the chosen command's modules are imported: ``readtwice --help`` and the
pipelines never import TensorFlow.
"""

from __future__ import annotations

import importlib
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from schemas import cli as schema_cli

PROG = "readtwice"

# command -> (module with main(argv), one-line summary).  The pipelines' datasets come from
# their registry.
COMMANDS: Dict[str, Tuple[str, str]] = {
    "pretrain": ("model.pretrain", "pre-train on records: masked LM + coreference"),
    "finetune": ("model.finetune", "fine-tune on a QA task's records, dev evaluation, "
                                   "early stopping"),
    "train": ("model.train", "the demo's plain trainer"),
    "predict": ("model.predict", "predictions in the task's official format"),
    "evaluate": ("model.evaluate", "the official metrics of predictions against gold"),
    "export": ("model.export", "a SavedModel that serves without this repository"),
    "roberta": ("model.roberta", "initialise a model from a Hugging Face RoBERTa checkpoint"),
    "inspect": ("pipelines.inspector", "show the records of a pipeline output dir"),
}


def _datasets() -> Tuple[str, ...]:
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  return datasets.DATASETS


def usage() -> str:
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  specs = datasets.specs()
  width = max(len(n) for n in list(specs) + list(COMMANDS))
  lines: List[str] = [f"usage: {PROG} <command> [flags]   ({PROG} <command> --help: its flags, "
                      "with an example)", "",
                      "datasets -> records (Beam; locally or on Dataflow):"]
  lines += [f"  {name:<{width}}  {spec.summary}" for name, spec in specs.items()]
  lines += ["", "model and records:"]
  lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
  return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  try:
    return _main(argv)
  except BrokenPipeError:  # readtwice ... | head -1: quiet, exit 1 (the commands do the same)
    if not schema_cli.output_closed():
      raise
    return schema_cli.closed_pipe()


def _main(argv: Optional[Sequence[str]] = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if argv and argv[0] in ("-h", "--help"):
    print(usage(), flush=True)
    return 0
  name = argv[0] if argv else ""
  known = list(_datasets()) + list(COMMANDS)
  if not name or name.startswith("-"):
    print(f"{PROG}: error: the first argument is the command, one of {', '.join(known)}; see "
          f"{PROG} --help", file=sys.stderr)
    return schema_cli.EXIT_USAGE
  if name in COMMANDS:
    module = COMMANDS[name][0]
    schema_cli.show_as(module, f"{PROG} {name}")
    return importlib.import_module(module).main(argv[1:])
  if name in _datasets():
    from pipelines import runner  # pylint: disable=g-import-not-at-top
    schema_cli.show_as(f"pipelines {name}", f"{PROG} {name}")
    return runner.dataset_main(name, argv[1:])
  guess = schema_cli.closest(name, known)
  hint = f" (did you mean {guess}?)" if guess else ""
  print(f"{PROG}: error: unknown command {name!r}{hint}; see {PROG} --help", file=sys.stderr)
  return schema_cli.EXIT_USAGE


if __name__ == "__main__":
  sys.exit(main())
