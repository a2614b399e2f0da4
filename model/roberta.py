"""``python -m model.roberta``: initialise a ReadTwice model's embeddings and BERT_1 (and the
MLM head) from a Hugging Face RoBERTa checkpoint, without torch, and save it.

Writes ``config.json``, ``model_config.json`` and a ``ckpt-0`` checkpoint that ``model.train``
resumes from and ``tf.train.Checkpoint(model=...)`` restores::

  python -m model.roberta --hf_dir DIR --model_dir OUT [--preset base] [--vocab_file V.json]
      [--same_vocab] [--num_layers_first N]

The checkpoint's files are read by :mod:`model.roberta_import.checkpoint` (a damaged or hostile file
is one error line, exit status 1); how its config, vocabulary and weights map onto our model
is :mod:`model.roberta_import.mapping`.
"""

from __future__ import annotations

import json
import posixpath
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from model import configs as configs_lib
from schemas import cli

# TensorFlow and the checkpoint modules (which import it) load after the flags parse, so that
# --help and a usage error answer at once, as with the other model commands.

EXAMPLE = ("python -m model.roberta --hf_dir /tmp/roberta-base --model_dir /tmp/readtwice_init "
           "--preset readtwice_e")


def build_parser() -> cli.Parser:
  p = cli.Parser(
      "model.roberta",
      "Build a ReadTwice model whose embeddings and BERT_1 (and MLM head) come "
      "from a Hugging Face RoBERTa checkpoint; write config.json and a checkpoint.", EXAMPLE)
  p.add_argument("--hf_dir", required=True, io=cli.READS,
                 help="HF checkpoint dir: config.json, model.safetensors or pytorch_model.bin, "
                      "vocab.json (local or gs://)")
  p.add_argument("--model_dir", required=True, io=cli.WRITES, help="output dir (local)")
  p.add_argument("--preset", default="base", choices=sorted(configs_lib.PRESETS),
                 help="memory / BERT_2 / head settings; the encoder shape comes from the "
                      "checkpoint")
  p.add_argument("--vocab_file", default=None, io=cli.READS,
                 help="our tokenizer's vocab.json if the pipeline ran with --vocab_file "
                      "(default: the packaged GPT-2 vocabulary)")
  cli.bool_flag(p, "same_vocab", False,
                "our token ids are the checkpoint's (no vocab.json remapping)")
  p.add_argument("--num_layers_first", type=int, default=None,
                 help="BERT_1 layers (default: the checkpoint's); fewer keeps the first ones")
  return p


def _our_tokens(args, hf_config: Mapping[str, Any]) -> Tuple[Optional[List[str]], int]:
  """``(our tokens or None, vocab_size)`` for the CLI's vocabulary flags."""
  from model.roberta_import import checkpoint as roberta_checkpoint  # pylint: disable=g-import-not-at-top
  from model.roberta_import import mapping as roberta_mapping  # pylint: disable=g-import-not-at-top
  if args.same_vocab:
    return None, int(hf_config.get("vocab_size", 0))
  if args.vocab_file:
    tokens = roberta_mapping.tokens_from_vocab_json(
        roberta_checkpoint.read_json_object(args.vocab_file, "--vocab_file"))
  else:
    tokens = roberta_mapping.default_tokens()
  return tokens, len(tokens)


def convert(args) -> Dict[str, Any]:
  """The CLI's work: build, initialise, save; returns the report (plus output paths)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.network import readtwice  # pylint: disable=g-import-not-at-top
  from model.roberta_import import checkpoint as roberta_checkpoint  # pylint: disable=g-import-not-at-top
  from model.roberta_import import mapping as roberta_mapping  # pylint: disable=g-import-not-at-top

  hf_config = roberta_checkpoint.read_hf_config(args.hf_dir)
  tokens, vocab_size = _our_tokens(args, hf_config)
  overrides = dict(vocab_size=vocab_size)
  if args.num_layers_first is not None:
    overrides["num_layers_first"] = args.num_layers_first
  base = configs_lib.preset(args.preset)
  config = roberta_mapping.config_from_hf(hf_config, base, **overrides)
  if config.num_layers_first != base.num_layers_first:
    print(f"note: preset {args.preset} has num_layers_first={base.num_layers_first}; using "
          f"{config.num_layers_first} (pass --num_layers_first to choose)", file=sys.stderr)
  # Before building a model:
  roberta_mapping.check_compatible(hf_config, config, truncate_layers=True)
  model = readtwice.build_model(config)
  report = roberta_mapping.initialize_from_roberta(model, args.hf_dir, tokens,
                                                   same_vocab=args.same_vocab,
                                                   truncate_layers=True)
  report["config"] = configs_lib.save_configs(args.model_dir, config)
  flat = posixpath.join(args.model_dir, "model_config.json")  # for model.train --model_config
  with tf.io.gfile.GFile(flat, "w") as f:
    f.write(config.to_json() + "\n")
  report["model_config"] = flat
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), args.model_dir,
                                       max_to_keep=1, checkpoint_name="ckpt")
  report["checkpoint"] = manager.save(checkpoint_number=0)
  return report


def main(argv: Optional[Iterable[str]] = None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if "://" in args.model_dir:
    p.error("--model_dir must be local (config.json is written with plain file I/O)")
  if args.num_layers_first is not None and args.num_layers_first < 1:
    p.error("--num_layers_first must be >= 1")
  if args.same_vocab and args.vocab_file:
    p.error("--same_vocab and --vocab_file exclude each other")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model.roberta_import import checkpoint as roberta_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    report = convert(args)
  except roberta_checkpoint.CheckpointError as e:
    # One line, no usage: the files are at fault, not the flags.
    print(f"{p.prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 1
  except (OSError, ValueError, tf.errors.OpError) as e:
    p.error(" ".join(str(e).split()))
  print(json.dumps(report), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
