"""What ``--estimate`` knows of the hotpotqa job (its spec's ``cost``,
:class:`pipelines.estimate.costs.DatasetCost`): its CPU cost as ``python -m benchmarks.job_cost
--reps 3`` measured it (2026-11-30, idle machine; the benchmark prints this entry); its words per MB
of work (the sample, --ner spacy) and its Cloud NL texts per MB (one per question: the sample's 20
in 0.14 MB)."""

from __future__ import annotations

from pipelines.estimate.costs import COMMAND, MACHINE, Cost, DatasetCost

COST = DatasetCost(
    measured=Cost(fixed_cpu_s=3.31, cpu_s_per_mb=0.4414,
                  slope_spread=(0.3947, 0.4414, 0.4469), cpu_per_wall=1.36,
                  measured_on="0.09 MB work (0.09 MB stored) and "
                              "17.37 MB work (17.37 MB stored), 3 reps",
                  date="2026-11-30", machine=MACHINE, command=COMMAND),
    work="question files, uncompressed (Parquet: uncompressed row groups)",
    words_per_mb=149_000,
    texts_per_mb=143.0)
