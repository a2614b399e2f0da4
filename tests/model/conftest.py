"""Splits the CPU into 2 logical devices so multi-replica memory gathering can be tested."""

import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
try:
  tf.config.set_logical_device_configuration(
      _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
except RuntimeError:  # already initialised
  pass
