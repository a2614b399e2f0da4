"""The ``tf.distribute`` strategies a run trains under, and one pack handed to their replicas.

* ``cpu``: the default one-device strategy;
* ``mirrored``: every GPU, or every logical CPU when there is no GPU;
* ``tpu``: ``TPUClusterResolver`` + ``TPUStrategy`` (``--tpu local`` on a TPU VM, else the
  TPU's name).

The global batch is one pack: :func:`distribute_pack` splits it over the replicas
(:func:`model.training.replicas.split_pack`) and hands replica ``r`` its rows.
"""

from __future__ import annotations

import functools
from typing import Dict, Optional, Tuple

import tensorflow as tf

from model.training import replicas as replicas_lib
from model.configs import STRATEGIES  # declared TF-free, for the parsers



def make_strategy(name: str = "cpu", tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The ``tf.distribute`` strategy called ``name`` (see the module docstring)."""
  if name == "cpu":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return _mirrored(tuple(d.name for d in devices))
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError(f"strategy must be one of {STRATEGIES}, got {name!r}.")


@functools.lru_cache(maxsize=None)
def _mirrored(devices: Tuple[str, ...]) -> tf.distribute.MirroredStrategy:
  """One MirroredStrategy per device set and process: two instances number their collectives
  alike, so a second one's all-gathers would meet the first one's (shape mismatch aborts)."""
  return tf.distribute.MirroredStrategy(list(devices))


def distribute_pack(strategy: tf.distribute.Strategy, pack: Dict[str, tf.Tensor]):
  """Replica ``r``'s rows of ``pack`` as a distributed value (the pack itself on one)."""
  r = strategy.num_replicas_in_sync
  if r == 1:
    return pack
  parts = replicas_lib.split_pack(pack, r)
  return strategy.experimental_distribute_values_from_function(
      lambda ctx: parts[ctx.replica_id_in_sync_group])
