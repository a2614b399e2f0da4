"""Training: the loop (:mod:`model.training.trainer`), objectives and losses, the optimizers,
the ``tf.distribute`` strategies and the libraries under the training commands."""
