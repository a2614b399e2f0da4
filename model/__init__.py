"""ReadTwice (Zemlyanskiy et al., NAACL 2021) in TensorFlow 2 / Keras 3.

Layering (Model Garden style):

* :mod:`model.configs`   -- frozen dataclass configs with JSON round trip (no TF import).
* :mod:`model.data.pack_reader`     -- tf.data reader for the ``schemas.records`` TFRecord contract.
* :mod:`model.network.layers`    -- transformer, memory extraction, memory attention.
* :mod:`model.network.readtwice` -- the ReadTwice Keras model (BERT_1 -> memories -> BERT_2 ->
heads).
* :mod:`model.training.losses`    -- OR-loss over documents, answer-type and supporting-fact losses.
* :mod:`model.training.trainer`   -- the training loop (checkpoints, resume, evaluation, logs).
* :mod:`model.inference.decoding`, :mod:`model.inference.predict_lib` -- span decoding to HotpotQA /
  TriviaQA / NarrativeQA predictions.
* Commands (``python -m model.<command>``): ``train``, ``pretrain``, ``finetune``, ``predict``,
  ``export``, ``evaluate``.  Each is a thin module -- its flags (:mod:`model.flags`) and usage
  checks, no TensorFlow import -- over its library ``model.<command>_lib`` (``evaluate`` is
  TF-free), so that ``--help`` and usage errors answer at once.

Importing this package does not import TensorFlow.
"""

from schemas import cli as _cli

# The first ``import tensorflow`` (by any model module) hides TensorFlow's start-up banners.
_cli.quiet_tensorflow_banners()

# ``python -m model.<command>``: Ctrl-C or SIGTERM while TensorFlow loads is one line (the
# command's own handlers, :mod:`model.faults`, take over when it runs); a library import keeps
# the caller's handlers.
if _cli.module_command("model") is not None:
  _cli.exit_quietly_on_stop_signals(_cli.module_command("model"))
