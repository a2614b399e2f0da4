"""Paths named by data stay inside the data (schemas.data_paths), for every reader of such paths.

One job run per dataset that reads files named by its data (jsonl_qa ``context_file``,
NarrativeQA story ids, TriviaQA evidence ``Filename``), each with good entries and escaping ones
(``..``, absolute, a symlink out, a file over ``--max_input_file_bytes``): the job completes, each
escaping entry is one dead letter with its reason and source id, the outside file's text is in
no output, and the counts reconcile.  Then the opt-in (``--allow_read_root``) reads it, the
estimate counts refused names without sizing them, and a records dir's manifest cannot make a
reader read another dir's shards.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from schemas import manifest as manifest_schema
from schemas import records, records_dir
from pipelines import runner
from pipelines.beam.inputs import describe_inputs
from pipelines import estimate
from schemas.data_paths import DataPathPolicy
from tests.pipelines.datasets.narrativeqa.test_dataset import BOOK, _csv
from tests.pipelines.datasets.triviaqa.test_dataset import (PARIS_ANSWER, WEB_PARIS, result,
                                                            write_question_file)

SMALL = ["--seq_length", "64", "--overlap", "8", "--max_segments_per_document", "4",
         "--segments_per_pack", "8", "--max_question_tokens", "12", "--log_level", "WARNING",
         "--max_error_fraction", "1"]  # the hostile records are most of each input, on purpose
SECRET = "SECRET-OUTSIDE-TEXT"


def _outside(base) -> str:
  """A folder beside the data holding a file the data must not read."""
  outside = base / "outside"
  outside.mkdir()
  (outside / "secret.txt").write_text(f"Paris {SECRET} Paris.\n")
  (outside / "outside_story.content").write_text(
      BOOK.replace("Old Mr. Ashby kept bees", f"Old Mr. Ashby kept {SECRET}"))
  return str(outside)


def _dead(out):
  found = []
  for path in sorted(glob.glob(os.path.join(out, "dead_letter", "*.jsonl"))):
    with open(path, encoding="utf-8") as f:
      found += [json.loads(line) for line in f if line.strip()]
  return sorted((d["stage"], d["reason"], d["source_id"]) for d in found)


def _manifest(out):
  with open(os.path.join(out, manifest_schema.MANIFEST_FILE), encoding="utf-8") as f:
    return manifest_schema.loads(f.read())  # validates: the counts reconcile


def _outputs_hold(out: str, text: str) -> bool:
  needle = text.encode()
  for path in glob.glob(os.path.join(out, "**"), recursive=True):
    if os.path.isfile(path):
      with open(path, "rb") as f:
        if needle in f.read():
          return True
  return False


# ------------------------------------------------------------------------------ jsonl_qa


@pytest.fixture(scope="module")
def jsonl_data(tmp_path_factory):
  base = tmp_path_factory.mktemp("jsonl_escapes")
  outside = _outside(base)
  data = base / "data"
  (data / "books").mkdir(parents=True)
  (data / "books" / "mill.txt").write_text("The mill in Paris was built by Jonas Hale.\n")
  (data / "link.txt").symlink_to(os.path.join(outside, "secret.txt"))
  with open(data / "big.txt", "wb") as f:
    f.truncate(1 << 30)  # sparse: refused from its size, never read
  lines = [
      {"id": "q1", "question": "Where?", "context": "The mill is in Paris.", "answers": ["Paris"]},
      {"id": "q2", "question": "Where?", "context_file": "books/mill.txt", "answers": ["Paris"]},
      {"id": "q3", "question": "Where?", "context_file": "../outside/secret.txt",
       "answers": ["Paris"]},
      {"id": "q4", "question": "Where?", "context_file": os.path.join(outside, "secret.txt"),
       "answers": ["Paris"]},
      {"id": "q5", "question": "Where?", "context_file": "link.txt", "answers": ["Paris"]},
      {"id": "q6", "question": "Where?", "context_file": "big.txt", "answers": ["Paris"]},
  ]
  path = data / "qa.jsonl"
  path.write_text("".join(json.dumps(x) + "\n" for x in lines))
  return str(path), outside


def _run_jsonl(path, out, *flags):
  return runner.dataset_main("jsonl_qa", ["--input", path, "--output_dir", out,
                                          "--max_input_file_bytes", "1000000"] + SMALL
                             + list(flags))


@pytest.mark.slow
def test_jsonl_qa_context_files_outside_the_data_are_dead_letters(jsonl_data, tmp_path):
  path, outside = jsonl_data
  out = str(tmp_path / "out")
  assert _run_jsonl(path, out) == 0
  m = _manifest(out)
  assert m["counts"] == {"input": 6, "written": 2, "skipped": 0, "rejected": 4}
  assert _dead(out) == [("parse", "absolute_path", f"{path}:4"),
                        ("parse", "file_too_large", f"{path}:6"),
                        ("parse", "path_outside_root", f"{path}:3"),
                        ("parse", "path_outside_root", f"{path}:5")]
  assert not _outputs_hold(out, SECRET)
  # The opt-in root reads them (the sparse file stays over the cap).
  opted = str(tmp_path / "opted")
  assert _run_jsonl(path, opted, "--allow_read_root", outside) == 0
  m = _manifest(opted)
  assert m["counts"] == {"input": 6, "written": 5, "skipped": 0, "rejected": 1}
  assert [d[1] for d in _dead(opted)] == ["file_too_large"]
  assert _outputs_hold(opted, SECRET)
  assert m["config"]["allow_read_roots"] == [outside]  # recorded: the run read outside data


def test_the_estimate_counts_refused_context_files_unread(jsonl_data):
  path, outside = jsonl_data
  work = estimate.measure("jsonl_qa", describe_inputs(path), None,
                          DataPathPolicy(max_file_bytes=1_000_000))
  side = work.side["context_files"]
  assert side["files"] == 1 and side["bytes"] == len("The mill in Paris was built by Jonas "
                                                     "Hale.\n")  # the 1 GB file is not counted
  assert work.notes == ["4 context_file references refused, not read (dead letters in a run: "
                        "absolute_path 1, file_too_large 1, path_outside_root 2)"]
  opted = estimate.measure("jsonl_qa", describe_inputs(path), None,
                           DataPathPolicy((outside,), max_file_bytes=1_000_000))
  assert opted.side["context_files"]["files"] == 2  # mill.txt and secret.txt (three names)
  assert opted.side["context_files"]["references"] == 4


def test_the_gold_reader_of_extractive_qa_keeps_context_files_inside(tmp_path):
  from model.tasks import extractive_qa  # pylint: disable=g-import-not-at-top  # TF-free
  outside = _outside(tmp_path)
  data = tmp_path / "gold"
  data.mkdir()
  (data / "c.txt").write_text("The mill is in Paris.")
  gold = data / "gold.jsonl"
  span = [{"start": 15, "end": 20}]  # no text: the context is read
  gold.write_text(json.dumps({"id": "a", "question": "?", "context_file": "c.txt",
                              "answers": span}) + "\n")
  assert extractive_qa.read_gold(str(gold)) == {"a": ["Paris"]}
  for name, reason in (("../outside/secret.txt", "leads outside"),
                       (os.path.join(outside, "secret.txt"), "absolute path outside")):
    gold.write_text(json.dumps({"id": "a", "question": "?", "context_file": name,
                                "answers": span}) + "\n")
    with pytest.raises(ValueError, match=f"line 1: context_file .*{reason}"):
      extractive_qa.read_gold(str(gold))


# ------------------------------------------------------------------------------ NarrativeQA


@pytest.mark.slow
def test_narrativeqa_story_ids_outside_the_stories_dir_are_dead_letters(tmp_path):
  outside = _outside(tmp_path)
  root = tmp_path / "nqa"
  (root / "tmp").mkdir(parents=True)
  (root / "tmp" / "book1.content").write_text(BOOK)
  (root / "tmp" / "linked.content").symlink_to(os.path.join(outside, "outside_story.content"))
  header = ["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url",
            "wiki_title", "story_word_count", "story_start", "story_end"]
  ids = ["book1", "../../outside/outside_story", "linked"]
  _csv(root / "documents.csv", header,
       [[i, "test", "gutenberg", "u", "1", "w", "B", "50", "Produced by Someone", "THE END ."]
        for i in ids])
  _csv(root / "qaps.csv", ["document_id", "set", "question", "answer1", "answer2",
                           "question_tokenized", "answer1_tokenized", "answer2_tokenized"],
       [[i, "test", "What did Mr. Ashby keep?", "bees", "bees", "", "", ""] for i in ids],
       line_end="\n")
  qaps, out = str(root / "qaps.csv"), str(tmp_path / "out")
  assert runner.dataset_main("narrativeqa", ["--input", qaps, "--output_dir", out, "--split",
                                             "test"] + SMALL) == 0
  assert _manifest(out)["counts"] == {"input": 3, "written": 1, "skipped": 0, "rejected": 2}
  assert _dead(out) == [("parse", "path_outside_root", f"{qaps}:3"),
                        ("parse", "path_outside_root", f"{qaps}:4")]
  assert not _outputs_hold(out, SECRET)


# ------------------------------------------------------------------------------ TriviaQA


@pytest.mark.slow
def test_triviaqa_evidence_outside_the_evidence_dir_is_a_dead_letter(tmp_path):
  outside = _outside(tmp_path)
  evidence = tmp_path / "evidence"
  (evidence / "web" / "1").mkdir(parents=True)
  (evidence / "web" / "1" / "1_1.txt").write_text(WEB_PARIS)
  (evidence / "web" / "1" / "link.txt").symlink_to(os.path.join(outside, "secret.txt"))
  (evidence / "secret_beside.txt").write_text(f"Paris {SECRET}\n")  # in evidence/, not web/
  (tmp_path / "qa").mkdir()
  names = ["1/1_1.txt", "../../outside/secret.txt", os.path.join(outside, "secret.txt"),
           "1/link.txt", "../secret_beside.txt"]
  web = write_question_file(tmp_path / "qa" / "web-dev.json", [
      {"Answer": PARIS_ANSWER, "EntityPages": [], "Question": "Which city?",
       "QuestionId": "q1", "SearchResults": [result(n, i) for i, n in enumerate(names)]}],
      "Web", "dev")
  out = str(tmp_path / "out")
  assert runner.dataset_main("triviaqa", ["--input", web, "--evidence_dir", str(evidence),
                                          "--output_dir", out] + SMALL) == 0
  m = _manifest(out)
  assert m["counts"] == {"input": 5, "written": 1, "skipped": 0, "rejected": 4}
  assert _dead(out) == sorted([
      ("evidence", "path_outside_root", f"{web}#0/q1--../../outside/secret.txt"),
      ("evidence", "absolute_path", f"{web}#0/q1--{names[2]}"),
      ("evidence", "path_outside_root", f"{web}#0/q1--1/link.txt"),
      ("evidence", "path_outside_root", f"{web}#0/q1--../secret_beside.txt")])
  assert m["stages"]["evidence"]["refused_pages"] == 4
  assert not _outputs_hold(out, SECRET)


# ------------------------------------------------------------------------------ records dirs


def _records_dir(path, shard_name: str) -> str:
  os.makedirs(path)
  manifest = {"schema_version": records.SCHEMA_VERSION, "job": "hotpotqa",
              "counts": {"input": 1, "written": 1, "skipped": 0, "rejected": 0},
              "tokenizer": {}, "config": {}, "examples": {"packs": 1},
              "shards": [{"path": shard_name, "records": 1}]}
  with open(os.path.join(path, manifest_schema.MANIFEST_FILE), "w") as f:
    f.write(manifest_schema.dumps(manifest))
  open(os.path.join(path, manifest_schema.COMPLETED_FILE), "w").close()
  return str(path)


def test_a_manifest_cannot_name_another_dirs_shards(tmp_path):
  other = tmp_path / "other"
  other.mkdir()
  (other / "records-00000-of-00001.tfrecord").write_bytes(b"not ours")
  for name in ("../other/records-00000-of-00001.tfrecord",
               str(other / "records-00000-of-00001.tfrecord"), "sub/records-0.tfrecord",
               "manifest.json", ".."):
    d = _records_dir(tmp_path / f"d{abs(hash(name))}", name)
    with pytest.raises(manifest_schema.ManifestError) as e:
      records_dir.read_manifest(d)
    message = str(e.value)
    assert "\n" not in message and os.path.join(d, "manifest.json") in message
    assert repr(name) in message
  # A listed shard that is a symlink out of the dir, or a FIFO, is refused too.
  d = _records_dir(tmp_path / "link", "records-00000-of-00001.tfrecord")
  os.symlink(other / "records-00000-of-00001.tfrecord",
             os.path.join(d, "records-00000-of-00001.tfrecord"))
  with pytest.raises(manifest_schema.ManifestError, match="leads outside .* through a symlink"):
    records_dir.shard_paths(d, records_dir.load_manifest(d))
  d = _records_dir(tmp_path / "fifo", "records-00000-of-00001.tfrecord")
  os.mkfifo(os.path.join(d, "records-00000-of-00001.tfrecord"))
  with pytest.raises(manifest_schema.ManifestError, match="not a regular file"):
    records_dir.read_manifest(d)  # without blocking on the FIFO
  # A plain shard name in the dir is what is read.
  d = _records_dir(tmp_path / "ok", "records-00000-of-00001.tfrecord.gz")
  assert records_dir.shard_paths(d, records_dir.load_manifest(d)) == [
      os.path.join(d, "records-00000-of-00001.tfrecord.gz")]


def test_the_flags_thread_the_policy_into_the_config(tmp_path, capsys):
  from pipelines import flags  # pylint: disable=g-import-not-at-top
  a, b = tmp_path / "a", tmp_path / "b"
  a.mkdir()
  b.mkdir()
  parser = flags.new_parser("python -m pipelines x", "d", "e")
  base = ["--input", "in.json", "--output_dir", str(tmp_path / "out")]
  args, _ = flags.parse(parser, base + ["--allow_read_root", str(a), "--allow_read_root",
                                        str(b), "--max_input_file_bytes", "123"])
  config = flags.records_config(parser, args)
  assert config.data_paths == DataPathPolicy((str(a), str(b)), 123)  # both kept, in order
  assert config.describe()["allow_read_roots"] == [str(a), str(b)]
  assert "allow_read_roots" not in flags.records_config(
      parser, flags.parse(parser, base)[0]).describe()  # the default is not recorded
  assert "repeatable" in parser.format_help()
  for bad, said in ((["--allow_read_root", str(tmp_path / "nope")], "is not a directory"),
                    (["--max_input_file_bytes", "0"], "must be an integer >= 1")):
    with pytest.raises(SystemExit) as e:
      flags.records_config(parser, flags.parse(parser, base + bad)[0])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and said in err, err
