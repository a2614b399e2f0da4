"""The experiments: the memory studies, which answer questions about the model (does the
memory carry information across segments, on which tasks, with which readers) rather than hold a
performance target.  They run through the same harness as the benchmarks
(``python -m benchmarks <experiment>``, filed under their own subject in ``--list``)."""
