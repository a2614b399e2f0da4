"""Reading source files without Beam: opening (and decompressing) them, and their JSON items.

* :mod:`pipelines.sources.byte_stream`: a file by path (local or ``gs://``, decompressed by its
  extension) as byte chunks, with the errors of a damaged compressed file told apart from
  storage errors.
* :mod:`pipelines.sources.json_items`: the records of a JSON list / object / JSON-lines file
  given as byte chunks, read in one pass by tolerant readers (damage costs only what it
  touches; what is recovered and what not is listed there):
  :mod:`~pipelines.sources.json_events` (what a reader yields),
  :mod:`~pipelines.sources.json_list_recovery` (a JSON list, damaged or not) and
  :mod:`~pipelines.sources.json_lines` (JSON lines).

The Beam stage over them is :mod:`pipelines.beam.read`.
"""
