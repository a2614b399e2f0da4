"""Reading source files without Beam: opening (and decompressing) them, and their JSON items.

* :mod:`pipelines.sources.byte_stream`: a file by path (local or ``gs://``, decompressed by its
  extension) as byte chunks that can be read again, with the errors of a damaged compressed
  file told apart from storage errors.
* :mod:`pipelines.sources.json_items`: the records of a JSON list / object / JSON-lines file
  given as byte chunks (``ijson`` for whole files, the tolerant readers for damaged ones):
  :mod:`~pipelines.sources.json_events` (what a reader yields),
  :mod:`~pipelines.sources.json_list_recovery` (a damaged JSON list) and
  :mod:`~pipelines.sources.json_lines` (JSON lines).

The Beam stage over them is :mod:`pipelines.beam.read`.
"""
