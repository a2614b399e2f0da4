"""Generated data for tests, benchmarks and the demo, deterministic for a seed.

Generators: :mod:`.text` (text that stresses segmentation), :mod:`.ladder_tasks` (token-level
packs of the memory ladder), :mod:`.long_range_qa` (questions only another segment can answer),
:mod:`.memory_corpus` (biographies whose entities recur across segments).  :mod:`.jobs` is the
one harness that runs the project's real jobs on generated input and reads their output.  Each
dataset's own generated input in its official layout (HotpotQA questions, Wikipedia dumps,
books, ...) is its folder's ``fake_input.py`` (``pipelines/datasets/<name>/``), on the shared
prose of :mod:`pipelines.fake_data.prose`.
"""
