"""What the model reads: the pipeline's pack TFRecords as tensors, a run's training data
(records dirs or generated packs) and the masked-LM input masking."""
