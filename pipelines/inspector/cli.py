"""The inspector's command: ``python -m pipelines.inspector --records_dir D [--html P]``.

Flags, usage errors (exit 2) and one-line input errors (exit 1) follow :mod:`schemas.cli`; see
:mod:`pipelines.inspector` for what is rendered.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from pipelines.inspector import record_io
from pipelines.inspector.decoder import build_tokenizer
from pipelines.inspector.inspect_error import InspectError
from pipelines.inspector.html_view import render_html
from pipelines.inspector.text_view import render_text
from schemas import manifest as manifest_schema
from schemas import records as records_schema
from schemas import tfrecord_io


EXAMPLE = ("python -m pipelines.inspector --records_dir /tmp/hotpot_records --html page.html "
           "--max_records 2")


def new_parser():
  from schemas import cli as schema_cli  # pylint: disable=g-import-not-at-top
  parser = schema_cli.Parser(
      "pipelines.inspector",
      "Render packed ReadTwice TFRecords (plain or gzip .tfrecord.gz) back to text (stdout) or "
      "HTML.", EXAMPLE)
  parser.add_argument("--records_dir", required=True, io=schema_cli.READS,
                      help="a job's --output_dir (local or gs://): the shards its manifest.json "
                           "lists are read (.tfrecord or gzip .tfrecord.gz), and the manifest "
                           "supplies N, L, the tokenizer and the compression")
  parser.add_argument("--html", default=None, io=schema_cli.WRITES,
                      help="write a self-contained HTML page here instead of text to stdout")
  parser.add_argument("--max_records", type=int, default=None,
                      help="render at most this many records (default: all)")
  parser.add_argument("--max_segments", type=int, default=None,
                      help="render at most this many real segments per record (default: all)")
  parser.add_argument("--vocab_file", default=None, io=schema_cli.READS,
                      help="byte-level BPE vocab.json the records were written with "
                           "(default: packaged GPT-2 BPE, if the manifest says gpt2)")
  parser.add_argument("--merges_file", default=None, io=schema_cli.READS,
                      help="merges.txt that goes with --vocab_file")
  return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  return new_parser().parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """CLI entry point; returns the exit status (2: bad flags; 1: unusable input, one line)."""
  from schemas import cli as schema_cli  # pylint: disable=g-import-not-at-top
  parser = new_parser()
  args = parser.parse_args(argv)
  for name in ("max_records", "max_segments"):
    value = getattr(args, name)
    if value is not None and value < 1:
      parser.error(f"--{name} must be >= 1, got {value}")

  def body() -> int:
    paths, manifest, warnings = record_io.records_dir_paths(args.records_dir)
    for warning in warnings:
      print(f"{parser.prog}: warning: {warning}", file=sys.stderr, flush=True)
    tokenizer = build_tokenizer(manifest, args.vocab_file, args.merges_file)
    recs = record_io.load_records(paths, args.max_records, manifest)
    if args.html:
      page = render_html(recs, tokenizer, manifest, args.max_segments, paths)
      from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
      with FileSystems.create(args.html) as f:
        f.write(page.encode("utf-8"))
      print(f"wrote {args.html}: {len(recs)} records from {len(paths)} files", file=sys.stderr)
    else:
      sys.stdout.write(render_text(recs, tokenizer, manifest, args.max_segments, paths))
    return 0

  return schema_cli.run_command(
      parser.prog, body,
      user_errors=(InspectError, records_schema.SchemaVersionError,
                   manifest_schema.ManifestError, tfrecord_io.CorruptRecordError, ValueError,
                   OSError))
