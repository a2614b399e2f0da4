"""TF-free Beam pipelines that turn corpora into ReadTwice TFRecords."""

# The jobs (``python -m pipelines.<job>``): what the Dataflow deployment, its checks and the
# benchmarks iterate over.
JOBS = ("hotpotqa", "wikipedia", "books", "triviaqa", "narrativeqa")
