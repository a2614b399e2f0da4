"""Exports a trained ReadTwice model as a TensorFlow SavedModel that serves without this
repository.

``tf.saved_model.load(E).signatures["serving_default"](**pack)`` runs it in any process that has
TensorFlow (tested in one that cannot import this repository: ``tests/model/inference/test_export.py``).

CLI::

  python -m model.export --model_dir M --output_dir E \
      [--records_dir D | --segments_per_pack N [--seq_length L]] [--checkpoint C] \
      [--max_answer_tokens 30] [--overwrite]

The model is rebuilt from ``M/config.json`` and restored from the latest checkpoint of ``M``
(or ``--checkpoint``); every model variable must be in it.  The signature takes one pack with
a static geometry: ``segments_per_pack`` N and ``seq_length`` L are the records' (from
``--records_dir``'s manifest), else ``--segments_per_pack`` and ``--seq_length`` (default: the
model's ``max_seq_length``).

``serving_default`` -- inputs, named and typed as one pack parsed by :mod:`model.data.pack_reader`:

* ``token_ids``, ``input_mask``, ``token_kind``: int32 ``[N, L]``;
* ``segment_mask``, ``document_index``, ``segment_index``: int32 ``[N]``;
* entity memories only (``memory_source="entity"``): ``mentions_segment``,
  ``mentions_begin``, ``mentions_end``, ``mentions_entity_id``, ``mentions_mask``: int32
  ``[K]``, K = the model's ``max_memories`` (``parse_pack(max_mentions=K)``).

Outputs:

* ``begin_logits``, ``end_logits``: float32 ``[N, L]`` (non-context tokens at
  ``model.network.readtwice.NEG_LOGIT``); ``answer_type_logits`` float32 ``[N, 3]`` (span / yes /
  no);
  ``supporting_logits`` float32 ``[N]`` -- the Keras model's outputs.
* ``best_span_begin``, ``best_span_end`` int32 ``[N]``, ``best_span_score`` float32 ``[N]``:
  each segment's best token span (inclusive), decoded in the graph (:func:`best_spans`): the
  context-token pair with ``begin <= end < begin + max_answer_tokens`` of the highest
  ``begin logit + end logit``, over all context tokens (``model.inference.spans.best_span`` with
  ``top_k`` = L, before word snapping: snapping needs the document text, which the signature
  does not see).  A segment without context tokens gives ``-1, -1, -inf``.

Beside the SavedModel the output dir holds ``config.json`` (the model dir's, verbatim) and
``export.json``: the input and output specs, N, L, ``max_answer_tokens``, a summary of the model
config, the source checkpoint, and the TensorFlow / Keras versions that wrote it.  The last
stdout line is a JSON summary.  Python API: :func:`model.inference.export_lib.export`.  Paths may be
any ``tf.io.gfile`` path; an existing ``--output_dir`` is refused unless ``--overwrite``, which
replaces only an earlier export (a directory holding ``export.json``, not a symlink); one that would
hold, be or lie inside the model dir is refused always.

This module is the command (its flags, then :mod:`model.inference.export_lib`): its ``--help`` and
usage errors answer before TensorFlow loads.
"""

from __future__ import annotations

import sys

from model import configs as configs_lib
from model import faults
from model import flags
from schemas import cli

EXAMPLE = ("python -m model.export --model_dir /tmp/model/best --output_dir /tmp/exported "
           "--records_dir /tmp/hotpot_dev_records")


def build_parser() -> cli.Parser:
  p = cli.Parser("model.export", __doc__.split("\n\n")[0].replace("\n", " "), EXAMPLE)
  p.add_argument("--model_dir", required=True, io=cli.READS,
                 help="a model.finetune / model.train model dir (config.json + checkpoints)")
  p.add_argument("--output_dir", required=True, io=cli.WRITES,
                 help="where the SavedModel, config.json and export.json go")
  p.add_argument("--checkpoint", default=None, io=cli.READS,
                 help="checkpoint prefix to export (default: the latest in --model_dir)")
  p.add_argument("--records_dir", default=None, io=cli.READS,
                 help="records the model will serve: the signature takes packs of their "
                      "seq_length x segments_per_pack")
  p.add_argument("--seq_length", type=int, default=None,
                 help="tokens per segment L (default: the records', else the model's "
                      "max_seq_length)")
  p.add_argument("--segments_per_pack", type=int, default=None,
                 help="segments per pack N (default: the records')")
  p.add_argument("--max_answer_tokens", type=int, default=configs_lib.DEFAULT_MAX_ANSWER_TOKENS,
                 help="longest decoded span, in tokens")
  cli.bool_flag(p, "overwrite", False, "replace an existing --output_dir")
  return p


@faults.command("model.export")
def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  for name in ("seq_length", "segments_per_pack", "max_answer_tokens"):
    value = getattr(args, name)
    if value is not None and value < 1:
      p.error(f"--{name} must be >= 1, got {value}")
  problem = flags.unusable_records(args.records_dir)
  if problem:
    return flags.fail(p.prog, problem)
  with faults.starting():
    from model.inference import export_lib  # pylint: disable=g-import-not-at-top  (TensorFlow)
  return export_lib.run(p.prog, args)


if __name__ == "__main__":
  sys.exit(main())
