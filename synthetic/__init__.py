"""Generated data for tests, benchmarks and the demo, deterministic for a seed.

Generators: :mod:`.hotpotqa` (HotpotQA-format questions), :mod:`.wikipedia` (MediaWiki dumps),
:mod:`.text` (text that stresses segmentation), :mod:`.ladder_tasks` (token-level packs of the
memory ladder), :mod:`.long_range_qa` (questions only another segment can answer),
:mod:`.memory_corpus` (biographies whose entities recur across segments), :mod:`.job_inputs`
(every job's input in its official layout, for the throughput benchmarks).  :mod:`.jobs` is
the one harness that runs the project's real jobs on generated input and reads their output.
"""
