"""TF-free Beam pipelines that turn corpora into ReadTwice TFRecords."""
