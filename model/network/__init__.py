"""The network: the ReadTwice model (:mod:`model.network.readtwice`), its Keras layers
(:mod:`model.network.layers`), the memory table's fields and whole-book memory."""
