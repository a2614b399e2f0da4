r"""Records inspector: renders packed ReadTwice TFRecords back to readable text or HTML.

  python -m pipelines.inspector --records_dir /tmp/hotpot_records \
    [--html out.html] [--max_records K] [--max_segments S] \
    [--vocab_file vocab.json --merges_file merges.txt]

``--records_dir`` is a job's ``--output_dir``: the shards read are those its ``manifest.json``
lists (``shards[].path``), never a glob, so a leftover or foreign file beside them is not read.
A directory without ``COMPLETED`` (a failed or running job) or without a manifest (its
``records-*.tfrecord[.gz]`` files are then read) gets one warning line on stderr.

For every record (one pack of N segments x L tokens, see ``schemas/records.py``) it shows the pack
id and, segment by segment (padding segments are skipped and counted), the labels
(``document_id``, ``question_id``, sub-document, segment position, question length, answer type,
supporting flag) and the tokens decoded back to text: the question prefix as ``[Q: ...]``, answer
spans as ``⟦ANS#k ...⟧`` (``k`` = index of the span in the pack's answer lists) and entity
mentions as ``⟦ENT id title ...⟧`` (the title from the entity vocabulary beside the records, or
in the ``--entities_dir`` the job annotated with, when it is there).  Each answer span is also
listed with its token range and decoded text.  Text is decoded one contiguous run of tokens at a time (never token by token), so
characters split over several byte-level tokens render correctly.

``N``, ``L`` and the tokenizer come from ``manifest.json`` next to the records when present; the
tokenizer built here must have the manifest's fingerprint.  Without a manifest, N is
``len(segment_mask)`` and L is ``len(token_ids) / N``.  Every record's ``schema_version`` is
checked (``schemas.records.SchemaVersionError`` on another major version).

Gzip-compressed records (``--compression gzip``: ``records-*.tfrecord.gz``) are read as they are:
the compression is the manifest's ``config.compression`` when the directory has a manifest that
states it, else decided per file (``.gz`` name, or the gzip magic bytes).

TensorFlow-free: files are read with Beam's ``FileSystems`` (so ``gs://`` works) through
:mod:`schemas.records_dir` and parsed with ``schemas.example_proto``.  One job per module:

* :mod:`pipelines.inspector.record_io`: a records dir (or record files) to decoded records;
* :mod:`pipelines.inspector.decoder`: the records' tokenizer, checked against the manifest;
* :mod:`pipelines.inspector.layout`: one record as a renderable pack, and the summary counts;
* :mod:`pipelines.inspector.text_view` / :mod:`pipelines.inspector.html_view`: the renderers;
* :mod:`pipelines.inspector.cli`: the command (``python -m pipelines.inspector``).

From Python: ``record_io.load_records``, ``text_view.render_text``, ``html_view.render_html``.
"""


from pipelines.inspector.cli import main  # noqa: E402,F401  (python -m / readtwice inspect)
