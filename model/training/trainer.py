"""The training loop shared by pretraining and fine-tuning: steps, checkpoints, logs, evals.

* **Inputs** (:mod:`model.data.training_data`): the records dirs' parsed packs, or
  :class:`model.data.training_data.GeneratedPacks`; :func:`check_compatible` checks the model fits
  them.
* **Strategy** (:mod:`model.training.strategies`): ``cpu``, ``mirrored`` or ``tpu``.
* **Global batch**: one pack.  The host reads the next pack from a local ``tf.data`` iterator,
  splits it over the replicas (:func:`model.training.strategies.distribute_pack`) and hands replica
  ``r`` its rows; memories are all-gathered and losses normalised across replicas inside the model
  and losses, so R replicas compute what one device computes.
* **Loop**: ``steps_per_loop`` steps run inside one ``tf.function`` call (one host round trip).
  Gradients are summed over replicas, then clipped (:mod:`model.training.optimization`).
* **Objectives** (:mod:`model.training.objectives`: ``FinetuneObjective``, ``PretrainObjective``)
  choose the input features, the in-pipeline preprocessing (dynamic masking) and the losses /
  metrics of one step.
* **Checkpoints**: ``tf.train.CheckpointManager`` (``ckpt-<step>``, ``max_checkpoints`` kept)
  holding the model, the optimizer, the step, the early-stopping state and the input iterator
  (tf.data iterator checkpointing: shuffle buffers, the epoch position and the masking
  counter), so a killed run resumes at its last checkpoint and then reads exactly the batches
  the uninterrupted run would have read.  Every path goes through ``tf.io.gfile`` (local or
  ``gs://``); ``config.json`` sits beside the checkpoints.
* **Resume**: a run that finds a checkpoint in its model dir prints ``resuming from <ckpt> (step
  N of M)`` on stderr and reports ``resumed_from_step``.  The schedule-defining settings
  (:data:`SCHEDULE_FIELDS`) are compared with the ``train`` config that ``config.json`` holds
  (written at every start, so it is the schedule the checkpoint was trained with): a difference
  is a :class:`TrainingError` naming each setting's old and new value unless
  ``allow_schedule_change`` (then one ``warning:`` line, and the new schedule applies from the
  resumed step on, and is saved).  The Python API allows it by default; ``model.pretrain`` /
  ``model.finetune`` refuse unless ``--allow_schedule_change``.
* **Logs**: a Keras ``Progbar`` on an interactive terminal, else one JSON line per
  ``log_every`` steps; ``<model_dir>/metrics.json`` and the returned summary at the end.
  Besides, a time-based ``progress: step s/t, loss, steps/s, ETA`` line (:mod:`model.progress`)
  at least every 15 s on stdout, also while the model is built, the first step is compiled
  or the dev set is evaluated.
* **TensorBoard**: two runs under ``<model_dir>/tb``: ``train/`` (every loss head, learning
  rate, segments/s, memory no-op rate, MLM accuracy on all / entity tokens, every
  ``log_every`` steps) and ``eval/`` (every metric of every evaluation, at its step), with
  shared tags where a dev metric measures what a training scalar does (``loss/mlm``,
  ``mlm/accuracy``, ``memory/noop_rate``, ...) so both runs share a chart; dev-only metrics are
  ``eval/<name>`` (``eval/f1``, ``eval/em``, ``eval/rouge_l``, ...).  The last step of a run
  is always logged (also a run that stops early before its first ``log_every`` step).  A model dir of the older
  flat layout (event files directly in ``tb/``) has them moved into ``tb/train/`` when it
  resumes, so its training curves continue in one run.
* **Evaluation**: an optional ``evaluate(model) -> metrics`` callback every ``eval_every``
  steps (and at the end); with a ``best_metric`` the best model is kept in
  ``<model_dir>/best`` (config.json + checkpoint); only with a ``patience`` does training
  stop early, after ``patience`` evaluations without improvement: one ``stopped early at step
  S of T: no improvement of <metric> for N evaluations (best B at step S')`` line on stderr,
  and ``stopped_early`` / ``stop_reason`` / ``best_step`` in the summary.
* **Finished runs**: a run whose model dir already reached ``steps`` (or stopped early, and
  ``steps`` was not raised) trains no step: one ``<model_dir> already finished at step N
  (...)`` line on stderr, and the summary is the one of ``metrics.json`` with
  ``already_finished: true``.  An interrupted run (its last checkpoint before ``steps``)
  resumes.

Why this module is over 500 lines: one class, the loop of one run, whose checkpoints, resume,
evaluations and logs share that run's step, iterator and early-stopping state.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import keras
import tensorflow as tf

from model.network import book_memory
from model import configs as configs_lib
from model.training import losses as losses_lib
from model.training import optimization
from model import progress as progress_lib
from model.network import readtwice
from model.training import strategies
from model.training.objectives import Objective
from model.data.training_data import (GeneratedPacks, TrainingError, read_manifests,
                                 records_dataset)
from schemas import safe_json


# The TrainConfig fields that define the learning-rate schedule and the update rule: a resumed
# run that changes one of them trains on with another schedule than its checkpoint's.
SCHEDULE_FIELDS = ("steps", "warmup_steps", "learning_rate", "end_learning_rate_fraction",
                   "optimizer")
TB_DIR = "tb"
METRICS_FILE = "metrics.json"


@dataclasses.dataclass
class EvalSpec:
  """Periodic evaluation: ``fn(model) -> metrics`` every ``every`` steps and at the end.

  ``best_metric`` (a key of the metrics, higher is better) keeps the best model in
  ``<model_dir>/best``; ``patience`` evaluations without improvement stop training early.
  """
  fn: Callable[[keras.Model], Dict[str, float]]
  every: int
  best_metric: Optional[str] = None
  patience: Optional[int] = None


def _fingerprint(pack: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """int64 scalar: a fingerprint of the pack's (possibly masked) token ids, for logs."""
  ids = tf.reshape(tf.cast(pack["token_ids"], tf.int64), [1, -1])
  return tf.bitcast(tf.fingerprint(ids)[0], tf.int64)


class Trainer:
  """Runs ``train_config.steps`` steps of ``objective`` on ``records_dirs`` (see module docstring).

  Args:
    objective: a :class:`model.training.objectives.Objective` (what is learned: fine-tuning's span
      loss or pre-training's masked LM; not a QA task of :mod:`model.tasks`).
    records_dirs: pipeline output dirs (their manifests must agree; see
      :func:`model.data.training_data.read_manifests`), or a
      :class:`model.data.training_data.GeneratedPacks`.
    model_dir: checkpoints, ``config.json``, ``tb/``, ``metrics.json`` (any gfile path).
    model_config, train_config: the configs (saved to ``config.json``).
    strategy: a ``tf.distribute`` strategy (default: the one-device default strategy).
    init_fn: ``fn(model)`` called once on a fresh run (not on resume), e.g. to load pretrained
      or RoBERTa weights.
    evaluation: optional :class:`EvalSpec`.
    log_fn: called with each logged metrics dict (default: Progbar on a terminal, else one
      JSON line on stdout).
    log_batches: add the fingerprints of each logged loop's packs to the log dicts.
    allow_schedule_change: on resume, train on with a changed schedule (a warning) instead of
      raising :class:`TrainingError` (see the module docstring).
    memory_scope: ``"sub_document"`` (the paper) or ``"book"``: every segment reads the
      memories of its whole book, the other packs' ones from a store refilled from the current
      weights every ``book_memory_refresh`` steps, without gradient
      (:class:`model.network.book_memory.TrainingBookMemory`; not on TPUs).
    sparse_mlm: the masked-LM head on the masked slots that count only (dynamic shapes,
      :class:`model.network.readtwice.ReadTwiceModel`'s ``sparse_mlm``); None: unless the step is
      XLA-compiled (``jit_compile`` or a TPU), as the entity-only memory reads.
  """

  def __init__(self, objective: Objective, records_dirs: Union[Sequence[str], GeneratedPacks],
               model_dir: str,
               model_config: configs_lib.ModelConfig, train_config: configs_lib.TrainConfig,
               strategy: Optional[tf.distribute.Strategy] = None,
               init_fn: Optional[Callable[[keras.Model], object]] = None,
               evaluation: Optional[EvalSpec] = None,
               log_fn: Optional[Callable[[Dict], None]] = None,
               log_batches: bool = False, allow_schedule_change: bool = True,
               memory_scope: str = "sub_document", book_memory_refresh: int = 100,
               sparse_mlm: Optional[bool] = None):
    self.objective = objective
    self.generated = records_dirs if isinstance(records_dirs, GeneratedPacks) else None
    self.records_dirs = [] if self.generated else list(records_dirs)
    self.model_dir = model_dir
    self.mc = model_config
    self.tc = train_config
    self.strategy = strategy or tf.distribute.get_strategy()
    self.init_fn = init_fn
    self.evaluation = evaluation
    self.log_fn = log_fn
    self.log_batches = log_batches
    self.allow_schedule_change = allow_schedule_change
    if memory_scope not in configs_lib.MEMORY_SCOPES:
      raise ValueError(f"memory_scope must be one of {configs_lib.MEMORY_SCOPES}, got "
                       f"{memory_scope!r}")
    self.memory_scope = memory_scope
    self.book_memory_refresh = book_memory_refresh
    self.book_memory = None
    self.sparse_mlm = sparse_mlm
    self.manifests = ([self.generated.manifest()] if self.generated
                      else read_manifests(self.records_dirs))
    cfg = self.manifests[0]["config"]
    self.seq_length = int(cfg["seq_length"])
    self.segments_per_pack = int(cfg["segments_per_pack"])
    check_compatible(model_config, self.manifests[0])
    r = self.strategy.num_replicas_in_sync
    if self.segments_per_pack % r:
      raise TrainingError(f"packs of {self.segments_per_pack} segments do not split over "
                          f"{r} replicas; write records with --segments_per_pack a multiple "
                          f"of {r}")

  # -- setup ---------------------------------------------------------------------------------

  def _build(self):
    """Builds the model, optimizer, data and checkpoint; a fresh run that fails to initialise
    (e.g. an unreadable ``--init_roberta`` checkpoint) leaves no model dir behind."""
    created = not tf.io.gfile.exists(self.model_dir)
    if not created:  # a run killed or out of disk while saving left a half-written checkpoint
      from model import faults  # pylint: disable=g-import-not-at-top
      faults.remove_checkpoint_temp(self.model_dir)
      self._check_schedule()
    tf.io.gfile.makedirs(self.model_dir)
    try:
      self._build_in_model_dir()
    except BaseException:
      if created:
        tf.io.gfile.rmtree(self.model_dir)
      raise
    configs_lib.save_configs(self.model_dir, self.mc, self.tc)
    from model import faults  # pylint: disable=g-import-not-at-top
    model_dir = self.model_dir
    faults.on_failure(lambda: faults.remove_checkpoint_temp(model_dir))

  def _check_schedule(self) -> None:
    """On resume, compares the schedule with the saved one (see the module docstring)."""
    if tf.train.latest_checkpoint(self.model_dir) is None:
      return
    try:
      saved = configs_lib.load_configs(self.model_dir)[1]
    except FileNotFoundError:
      return
    changes = schedule_changes(saved, self.tc) if saved is not None else []
    if not changes:
      return
    what = ", ".join(changes)
    if not self.allow_schedule_change:
      raise TrainingError(f"{self.model_dir} was trained with another schedule: {what}; resume "
                          "with the run's own flags, or give --allow_schedule_change to train "
                          "on with the new schedule")
    print(f"warning: resuming {self.model_dir} with a changed schedule: {what}; the new one "
          "applies from the resumed step on", file=sys.stderr, flush=True)

  def _build_in_model_dir(self):
    keras.utils.set_random_seed(self.tc.seed)
    # The data first: making it reads every shard's first record (another major schema
    # version is the user's error), which should not wait for the model's build.  (Seeded
    # explicitly: it draws nothing from the global seed that the model's initialisers use.)
    if self.memory_scope == "book" and self.mc.use_memory and not self.generated:
      self.objective.keep_keys = book_memory.BOOK_FEATURES
    if self.generated:
      ds = self.generated.dataset(shuffle=self.tc.shuffle, seed=self.tc.seed)
    else:
      ds = records_dataset(self.records_dirs, self.manifests, shuffle=self.tc.shuffle,
                           repeat=True, seed=self.tc.seed, max_mentions=self.objective.max_mentions)
    r = self.strategy.num_replicas_in_sync
    with self.strategy.scope():
      self.model = readtwice.build_model(self.mc, self.seq_length, self.segments_per_pack // r)
      # Entity-only memory reads on the mention tokens alone, unless the step is compiled by
      # XLA (jit_compile or a TPU), which needs static shapes.
      self.model.sparse_memory_queries = not (
          self.tc.jit_compile or isinstance(self.strategy, tf.distribute.TPUStrategy))
      # The MLM head over the masked slots that count (ReadTwiceModel.sparse_mlm): the same
      # rule unless the caller says.
      self.model.sparse_mlm = (self.model.sparse_memory_queries if self.sparse_mlm is None
                               else self.sparse_mlm)
      self.optimizer = optimization.make_optimizer(self.tc, self.model.trainable_variables)
      self.optimizer.build(self.model.trainable_variables)
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
      self.best = tf.Variable(-math.inf, dtype=tf.float64, trainable=False, name="best_metric")
      self.stale = tf.Variable(0, dtype=tf.int64, trainable=False, name="stale_evaluations")
    ds = self.objective.prepare(ds, self.tc.seed).prefetch(2)
    self.iterator = iter(ds)
    self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                          step=self.step, best_metric=self.best,
                                          stale_evaluations=self.stale, data=self.iterator)
    self.manager = tf.train.CheckpointManager(self.checkpoint, self.model_dir,
                                              max_to_keep=self.tc.max_checkpoints,
                                              checkpoint_name="ckpt")
    from model import faults  # pylint: disable=g-import-not-at-top
    # Called once a checkpoint's files are written, before the manager records it.
    self._save_options = tf.train.CheckpointOptions(
        experimental_write_callbacks=[lambda path: faults.fault_point("checkpoint", path)])
    self.resumed_from = self.manager.latest_checkpoint
    if self.resumed_from:
      self.checkpoint.restore(self.resumed_from).assert_existing_objects_matched()
      print(f"resuming from {self.resumed_from} (step {int(self.step.numpy())} of "
            f"{self.tc.steps})", file=sys.stderr, flush=True)
    elif self.init_fn is not None:
      self.init_fn(self.model)
    if self.memory_scope == "book" and self.mc.use_memory and not self.generated:
      if isinstance(self.strategy, tf.distribute.TPUStrategy):
        raise TrainingError("--memory_scope book trains on CPUs and GPUs, not TPUs (its "
                            "memory store is looked up on the host)")
      mentions = self.objective.max_mentions

      def packs():
        ds = records_dataset(self.records_dirs, self.manifests, shuffle=False, repeat=False,
                             seed=0, max_mentions=mentions)
        for f in ds:
          yield {k: v.numpy() for k, v in f.items()}

      self.book_memory = book_memory.TrainingBookMemory(
          packs, int(self.manifests[0]["config"]["max_segments_per_document"]),
          self.mc.hidden_size, self.book_memory_refresh)

  def _forward(self):
    if self.tc.jit_compile and self.strategy.num_replicas_in_sync > 1 and not isinstance(
        self.strategy, tf.distribute.TPUStrategy):
      return readtwice.compiled_halves(self.model)  # collectives stay outside XLA
    return self.model

  def _train_loop_fn(self):
    model, optimizer, objective, tc, strategy = (self.model, self.optimizer, self.objective,
                                                 self.tc, self.strategy)
    forward = self._forward()
    variables = model.trainable_variables

    def replica_step(features):
      with tf.GradientTape() as tape:
        outputs = forward(features, training=True)
        losses, stats = objective.step_metrics(outputs, features)
      grads = tape.gradient(losses["total"], variables)
      grads = optimization.sum_and_clip(grads, tc.clipnorm)
      # Heads the objective does not use (the MLM head when fine-tuning, the QA heads when
      # pretraining) have no gradient; they are left out rather than warned about.
      optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])
      return losses, stats

    # The model, the losses and the optimiser have no Python control flow on tensor values
    # (model/training/losses.py), so AutoGraph is kept to the loop below: converting them cost ~5 s
    # of every new process's first trace (a third of a tiny training run).
    if tc.jit_compile and strategy.num_replicas_in_sync == 1:
      replica_step = tf.function(replica_step, jit_compile=True, reduce_retracing=True,
                                 autograph=False)
    else:
      replica_step = tf.autograph.experimental.do_not_convert(replica_step)

    keys = objective.loss_keys + objective.stat_keys

    @tf.function
    def train_loop(iterator, n):
      sums = {k: tf.constant(0.0) for k in keys}
      prints = tf.TensorArray(tf.int64, size=n)
      for i in tf.range(n):
        pack = next(iterator)
        prints = prints.write(i, _fingerprint(pack))
        if self.book_memory is not None:
          pack = self.book_memory.add_external(pack)
        losses, stats = strategy.run(replica_step,
                                     args=(strategies.distribute_pack(strategy, pack),))
        losses = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                  for k, v in losses.items()}
        stats = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                 for k, v in stats.items()}
        values = dict(losses, **stats)
        sums = {k: sums[k] + tf.cast(values[k], tf.float32) for k in keys}
        self.step.assign_add(1)
      return {k: v / tf.cast(n, tf.float32) for k, v in sums.items()}, prints.stack()

    return train_loop

  # -- logging -------------------------------------------------------------------------------

  def _default_log_fn(self):
    if sys.stdout.isatty():
      bar = keras.utils.Progbar(self.tc.steps, stateful_metrics=["loss", "learning_rate",
                                                                  "segments_per_second"])

      def log(m):
        bar.update(m["step"], [(k, m[k]) for k in ("loss", "learning_rate",
                                                   "segments_per_second") if k in m])
      return log
    return lambda m: print(json.dumps(m), flush=True)

  def _learning_rate(self) -> float:
    lr = self.optimizer.learning_rate
    return float(lr.numpy()) if hasattr(lr, "numpy") else float(lr)

  # -- run -----------------------------------------------------------------------------------

  def _next_stop(self, step: int) -> int:
    """The next step at which the loop must return to the host."""
    marks = [self.tc.steps, step + self.tc.steps_per_loop]
    if self.book_memory is not None and self.book_memory.next_refresh(step) is not None:
      marks.append(self.book_memory.next_refresh(step))
    for every in (self.tc.checkpoint_every, self.tc.log_every,
                  self.evaluation.every if self.evaluation else None):
      if every:
        marks.append((step // every + 1) * every)
    return min(marks)

  def _writers(self):
    """The TensorBoard writers of ``tb/train`` and (with an evaluation) ``tb/eval``."""
    tb = os.path.join(self.model_dir, TB_DIR)
    move_flat_events(tb)
    train = tf.summary.create_file_writer(os.path.join(tb, "train"))
    ev = (tf.summary.create_file_writer(os.path.join(tb, "eval")) if self.evaluation
          else None)
    return train, ev

  def _evaluate(self, step: int, writer) -> Optional[Dict[str, float]]:
    ev = self.evaluation
    metrics = {k: float(v) for k, v in ev.fn(self.model).items()
               if isinstance(v, (int, float))}
    with writer.as_default(step=step):
      for k, v in metrics.items():
        tf.summary.scalar(_eval_summary_name(k), v)
    writer.flush()  # a dev point is worth seeing at once
    record = {"step": step, "eval": metrics}
    if ev.best_metric:
      if ev.best_metric not in metrics:
        raise TrainingError(f"evaluation has no metric {ev.best_metric!r} "
                            f"(has {sorted(metrics)})")
      value = metrics[ev.best_metric]
      if value > float(self.best.numpy()):
        self.best.assign(value)
        self.stale.assign(0)
        best_dir = os.path.join(self.model_dir, "best")
        tf.io.gfile.makedirs(best_dir)
        configs_lib.save_configs(best_dir, self.mc, self.tc)
        best = tf.train.CheckpointManager(tf.train.Checkpoint(model=self.model), best_dir,
                                          max_to_keep=1, checkpoint_name="ckpt")
        best.save(checkpoint_number=step)
        record["best"] = True
      else:
        self.stale.assign_add(1)
    return record

  def _best_step(self) -> Optional[int]:
    """The step of the model kept in ``<model_dir>/best`` (None: none kept)."""
    best_dir = os.path.join(self.model_dir, "best")
    if not tf.io.gfile.isdir(best_dir):
      return None
    return checkpoint_step(tf.train.latest_checkpoint(best_dir))

  def finished(self) -> Optional[Dict]:
    """The summary of a model dir that already finished, else None (see the module
    docstring); a finished run prints its one line on stderr."""
    if not tf.io.gfile.isdir(self.model_dir):
      return None
    latest = tf.train.latest_checkpoint(self.model_dir)
    step = checkpoint_step(latest)
    if step is None:
      return None
    saved = read_metrics(self.model_dir)
    if saved is not None and saved.get("steps") != step:
      saved = None  # written by an earlier part of the run, before it was resumed
    if step >= self.tc.steps:
      why = f"it trained all its {step} steps"
    elif saved and saved.get("stopped_early") and self.tc.steps <= int(
        saved.get("planned_steps") or self.tc.steps):
      why = f"it stopped early: {saved.get('stop_reason') or 'no improvement on dev'}"
    else:
      return None
    summary = dict(saved) if saved else {
        "summary": True, "task": self.objective.name, "steps": step, "checkpoint": latest,
        "model_dir": self.model_dir}
    summary.setdefault("losses", [])
    summary["already_finished"] = True
    print(f"{self.model_dir} already finished at step {step} ({why}); nothing to do: use a new "
          "--model_dir, or raise --steps to train on", file=sys.stderr, flush=True)
    return summary

  def run(self) -> Dict:
    """Trains (or resumes) to ``train_config.steps``; returns the summary (also written to
    ``<model_dir>/metrics.json``).  A finished model dir trains no step (:meth:`finished`)."""
    finished = self.finished()
    if finished is not None:
      return finished
    with progress_lib.Progress(self.tc.steps) as progress:
      return self._run(progress)

  def _write_scalars(self, writer, step: int, metrics: Mapping) -> None:
    with writer.as_default(step=step):
      for k, v in metrics.items():
        if isinstance(v, float) and k != "step":
          tf.summary.scalar(_summary_name(k), v)

  def _run(self, progress: progress_lib.Progress) -> Dict:
    from model import faults  # pylint: disable=g-import-not-at-top
    progress.set_phase("building the model, the optimizer and the input pipeline")
    self._build()
    faults.fault_point("build", self.model_dir)
    log = self.log_fn or self._default_log_fn()

    def show(record):
      with progress.lock:  # not interleaved with a progress line
        log(record)
      progress.output_shown()

    train_loop = self._train_loop_fn()
    writer, eval_writer = self._writers()
    tc = self.tc
    start_step = int(self.step.numpy())
    progress.done = start_step
    history, evaluations, stopped_early, stop_reason = [], [], False, None
    seconds = 0.0
    segments = 0
    warned_dropped = False
    try:
      while int(self.step.numpy()) < tc.steps:
        step = int(self.step.numpy())
        if self.book_memory is not None:
          progress.set_phase("refilling the book memory", announce=False)
        if self.book_memory is not None and self.book_memory.maybe_refresh(self.model, step):
          bm = self.book_memory
          print(f"book memory: {len(bm.store)} sub-documents of {len(bm.wanted)} books spanning "
                f"several packs, {bm.store.nbytes / 2**20:.1f} MB, refilled at step {step} "
                f"(every {bm.refresh} steps)", file=sys.stderr, flush=True)
        n = self._next_stop(step) - step
        first = not history
        progress.set_phase("compiling the first step" if first else
                           f"running step {step + 1}" if n == 1 else
                           f"running steps {step + 1}-{step + n}", announce=first)
        lr = self._learning_rate()
        t0 = time.perf_counter()
        means, prints = train_loop(self.iterator, tf.constant(n, tf.int32))
        faults.fault_point("train", self.model_dir)
        means = {k: float(v) for k, v in means.items()}
        dt = time.perf_counter() - t0
        seconds += dt
        segments += n * self.segments_per_pack
        step = int(self.step.numpy())
        metrics = {"step": step, "loss": means.pop("total"), "learning_rate": lr,
                   "segments_per_second": round(n * self.segments_per_pack / max(dt, 1e-9), 2)}
        metrics.update(means)
        if self.log_batches:
          metrics["batches"] = [format(int(x) & (2**64 - 1), "016x") for x in prints.numpy()]
        history.append(metrics)
        progress.update(step, metrics["loss"])
        if metrics.get("mentions_dropped", 0.0) > 0 and not warned_dropped:
          warned_dropped = True
          print(f"warning: {metrics['mentions_dropped']:g} entity mentions per pack (mean over "
                f"steps {step - n + 1}-{step}) did not fit max_memories={self.mc.max_memories} "
                "and have no memory; raise max_memories in the model config (--model_config) "
                "or write packs with fewer segments", file=sys.stderr, flush=True)
        logged = step % tc.log_every == 0 or step == tc.steps
        if logged:
          show(metrics)
          self._write_scalars(writer, step, metrics)
        ev = self.evaluation
        if ev and (step % ev.every == 0 or step == tc.steps):
          progress.set_phase("evaluating on the dev set", announce=False)
          record = self._evaluate(step, eval_writer)
          evaluations.append(record)
          show(record)
          if ev.patience is not None and int(self.stale.numpy()) >= ev.patience:
            stopped_early = True
            stop_reason = (f"no improvement of {ev.best_metric} for {ev.patience} evaluations "
                           f"(best {float(self.best.numpy()):.4g} at step {self._best_step()})")
        if stopped_early and not logged:  # the run's last step reaches TensorBoard too
          show(metrics)
          self._write_scalars(writer, step, metrics)
        if step % tc.checkpoint_every == 0 or step == tc.steps or stopped_early:
          progress.set_phase("saving a checkpoint", announce=False)
          writer.flush()  # what TensorBoard shows of a killed run reaches its last checkpoint
          self.manager.save(checkpoint_number=step, options=self._save_options)
        progress.set_phase(None)
        if stopped_early:
          break
    finally:
      for w in (writer, eval_writer):
        if w is not None:
          w.close()
    step = int(self.step.numpy())
    if stopped_early:
      print(f"stopped early at step {step} of {tc.steps}: {stop_reason}", file=sys.stderr,
            flush=True)
    has_best = bool(self.evaluation and self.evaluation.best_metric and evaluations)
    summary = {
        "summary": True, "task": self.objective.name, "steps": step, "planned_steps": tc.steps,
        "resumed_from_step": start_step if self.resumed_from else None,
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "losses": [h["loss"] for h in history],
        "last": history[-1] if history else None,
        "evaluations": evaluations, "stopped_early": stopped_early,
        "stopped_at_step": step if stopped_early else None, "stop_reason": stop_reason,
        "final_eval": evaluations[-1]["eval"] if evaluations else None,
        "best_metric": float(self.best.numpy()) if has_best else None,
        "best_step": self._best_step() if has_best else None,
        "checkpoint": self.manager.latest_checkpoint, "model_dir": self.model_dir,
        "replicas": self.strategy.num_replicas_in_sync,
        "seconds": round(seconds, 3),
        "segments_per_second": round(segments / seconds, 2) if seconds else None,
    }
    with tf.io.gfile.GFile(os.path.join(self.model_dir, METRICS_FILE), "w") as f:
      f.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def checkpoint_step(path: Optional[str]) -> Optional[int]:
  """The step of a ``.../ckpt-<step>`` checkpoint prefix (None: no checkpoint)."""
  if not path:
    return None
  _, _, number = os.path.basename(path).rpartition("-")
  return int(number) if number.isdigit() else None


def read_metrics(model_dir: str) -> Optional[Dict]:
  """``<model_dir>/metrics.json`` (the summary of the run's last finished invocation), or None
  when absent or unreadable."""
  path = os.path.join(model_dir, METRICS_FILE)
  try:
    with tf.io.gfile.GFile(path) as f:
      value = safe_json.loads(f.read(), path)
  except (tf.errors.NotFoundError, OSError, ValueError):  # also JsonTooDeepError
    return None
  return value if isinstance(value, dict) else None


def _summary_name(key: str) -> str:
  if key == "loss":
    return "loss/total"
  if key in losses_lib.LOSS_KEYS:
    return f"loss/{key}"
  if key.startswith("mlm_"):
    return f"mlm/{key[4:]}"
  if key.startswith("memory_"):
    return f"memory/{key[7:]}"
  return key


def _eval_summary_name(key: str) -> str:
  """The TensorBoard tag of an evaluation metric: the training scalar's tag where both measure
  the same thing (one chart, two runs), else ``eval/<key>``."""
  if key == "mlm_loss":
    return "loss/mlm"  # the training MLM loss: mean cross-entropy per masked token
  name = _summary_name(key)
  return name if name != key else f"eval/{key}"


def move_flat_events(tb_dir: str) -> None:
  """Moves event files written directly in ``tb_dir`` (the layout before ``train/`` and
  ``eval/``) into ``tb_dir/train`` so a resumed run's training curves stay one run."""
  if not tf.io.gfile.isdir(tb_dir):
    return
  for name in tf.io.gfile.listdir(tb_dir):
    if name.startswith("events.out.tfevents."):
      train_dir = os.path.join(tb_dir, "train")
      tf.io.gfile.makedirs(train_dir)
      tf.io.gfile.rename(os.path.join(tb_dir, name), os.path.join(train_dir, name))


def schedule_changes(old: configs_lib.TrainConfig, new: configs_lib.TrainConfig) -> List[str]:
  """``"<field> <old> -> <new>"`` for every :data:`SCHEDULE_FIELDS` field that differs."""
  return [f"{name} {getattr(old, name)} -> {getattr(new, name)}" for name in SCHEDULE_FIELDS
          if getattr(old, name) != getattr(new, name)]


def check_compatible(mc: configs_lib.ModelConfig, manifest: Mapping) -> None:
  """TrainingError unless the model's position table and vocabulary fit the records."""
  seq_length = int(manifest["config"]["seq_length"])
  vocab = int(manifest["tokenizer"]["vocab_size"])
  if mc.max_seq_length < seq_length:
    raise TrainingError(f"model max_seq_length {mc.max_seq_length} < records seq_length "
                        f"{seq_length}")
  if mc.vocab_size < vocab:
    raise TrainingError(f"model vocab_size {mc.vocab_size} < tokenizer vocab_size {vocab}")
