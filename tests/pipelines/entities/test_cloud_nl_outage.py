"""A Cloud Natural Language outage stops the job with one line (it used to dead-letter every
document for 80 s and "succeed" with nothing written), against the fake ``language_v1`` server
answering UNAVAILABLE, and against a port nobody listens on."""

import os
import socket
import subprocess
import sys

import pytest

from pipelines.beam import annotate
from pipelines.beam import annotation_config
from pipelines.entities.cloud_nl import Failure
from pipelines.errors import UserError
from tests.pipelines.fake_language import FakeLanguageServer, KnownEntity
from tests.pipelines.helpers import hotpot_record, write_json
from tests import REPO_ROOT

REPO = str(REPO_ROOT)
PROG = "python -m pipelines hotpotqa"
SMALL = ["--seq_length", "48", "--overlap", "8", "--max_segments_per_document", "6",
         "--segments_per_pack", "8", "--max_question_tokens", "12"]
ENTITIES = [KnownEntity("Paris", "LOCATION", "https://en.wikipedia.org/wiki/Paris")]


def _input(tmp_path, n):
  return write_json(tmp_path / "in.json", [
      hotpot_record(f"q{i}", "Which city is it?", "Paris",
                    [[f"Page {i}", [f"Paris is the city number {i}.", " It is in France."]]])
      for i in range(n)])


def _run(tmp_path, src, endpoint, *extra):
  return subprocess.run(
      [sys.executable, "-m", "pipelines", "hotpotqa", "--input", src,
       "--output_dir", str(tmp_path / "out"), "--ner", "cloud",
       "--nl_cache_dir", str(tmp_path / "cache"), "--nl_endpoint", endpoint,
       "--nl_insecure_channel", "--nl_initial_backoff_s", "0.01", "--nl_max_backoff_s", "0.02",
       "--nl_max_attempts", "2", "--nl_requests_per_minute", "60000", "--nl_timeout_s", "5",
       *SMALL, *extra],
      cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True,
      timeout=300)


def _error_line(stderr):
  assert "Traceback" not in stderr, stderr
  lines = [l for l in stderr.splitlines() if l.startswith(f"{PROG}: error: ")]
  assert len(lines) == 1, stderr
  return lines[0]


def _leftovers(out):
  return [os.path.join(r, n) for r, ds, fs in os.walk(out) for n in fs + ds
          if ".tmp" in n or n == ".claim.json"]


@pytest.mark.slow
def test_unavailable_service_stops_the_job_after_n_consecutive_failures(tmp_path):
  src = _input(tmp_path, 40)
  with FakeLanguageServer(ENTITIES, {"Paris": ["ALWAYS_UNAVAILABLE"]}) as server:
    proc = _run(tmp_path, src, server.endpoint, "--nl_max_consecutive_failures", "5",
                "--annotate_batch_size", "4")
    called = server.texts_called()
  assert proc.returncode == 1, proc.stderr
  assert _error_line(proc.stderr) == (
      f"{PROG}: error: Cloud Natural Language unreachable: 5 consecutive requests failed "
      "(last: ServiceUnavailable: fake UNAVAILABLE after 2 attempt(s)); stopped "
      "(--nl_max_consecutive_failures)")
  assert len(called) < 40  # stopped, not every document tried
  out = tmp_path / "out"
  assert not (out / "COMPLETED").exists() and not _leftovers(out)


@pytest.mark.slow
def test_a_refused_connection_stops_the_job(tmp_path):
  with socket.socket() as s:  # a free port, closed again: nothing listens there
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  proc = _run(tmp_path, _input(tmp_path, 30), f"127.0.0.1:{port}",
              "--nl_max_consecutive_failures", "3", "--annotate_batch_size", "2")
  assert proc.returncode == 1, proc.stderr
  line = _error_line(proc.stderr)
  assert "error: Cloud Natural Language unreachable: 3 consecutive requests failed (last: " \
         "ServiceUnavailable" in line and line.endswith("; stopped (--nl_max_consecutive_failures)")
  assert not _leftovers(tmp_path / "out")


@pytest.mark.slow
def test_a_short_outage_below_the_limit_is_an_empty_run(tmp_path):
  with FakeLanguageServer(ENTITIES, {"Paris": ["ALWAYS_UNAVAILABLE"]}) as server:
    proc = _run(tmp_path, _input(tmp_path, 3), server.endpoint)
  assert proc.returncode == 1, proc.stderr
  out = tmp_path / "out"
  assert _error_line(proc.stderr) == (
      f"{PROG}: error: no document was written: 3 input records rejected (api_unavailable 3); "
      f"see {out}/dead_letter/; the job is not COMPLETED (--allow_empty accepts an empty "
      "output)")
  assert (out / "manifest.json").exists() and not (out / "COMPLETED").exists()


def test_outage_detector_counts_only_service_failures_in_a_row():
  detector = annotate.OutageDetector(3)
  down = Failure("api_unavailable", "2 attempt(s), last: ServiceUnavailable: down")
  for found in (down, down, [(0, 5, "LOCATION", None)], down, down,
                Failure("budget", "no"), Failure("api_unavailable",
                                                 "6 attempt(s), last: TooManyRequests: quota"),
                Failure("api_rejected", "INVALID_ARGUMENT"), down, down):
    detector.observe(found)  # a success or a refusal resets; budget and 429s do not count
  assert detector.consecutive == 2
  with pytest.raises(UserError, match=r"unreachable: 3 consecutive requests failed \(last: "
                                      r"InternalServerError: 500 boom\)"):
    detector.observe(Failure("api_error", "InternalServerError: 500 boom"))
  connection = annotate.OutageDetector(2)
  connection.observe(ConnectionRefusedError("refused"))
  with pytest.raises(UserError, match="ConnectionRefusedError: refused"):
    connection.observe(ConnectionRefusedError("refused"))
  never = annotate.OutageDetector(0)
  for _ in range(50):
    never.observe(down)


def test_the_limit_is_a_checked_flag():
  with pytest.raises(ValueError, match="--nl_max_consecutive_failures must be an integer >= 0"):
    annotation_config.AnnotationConfig(nl_max_consecutive_failures=-1)
  d = annotation_config.AnnotationConfig(ner="cloud", cloud=annotation_config.CloudConfig(cache_dir="c"))
  assert d.describe()["nl_max_consecutive_failures"] == 20
  assert "nl_max_consecutive_failures" not in annotation_config.AnnotationConfig().describe()
