"""The Cloud Natural Language backend against a fake ``language_v1`` gRPC server on loopback:
offsets, retries (only 429 / 503 / deadlines), the rate limit, the 400 dead letter, the cache
(a second run makes no call), the dry run and the --max_api_units budget, in the backend and
through the HotpotQA and books jobs."""

import json
import os

import pytest

from schemas import manifest as manifest_schema
from schemas import nl_cache
from pipelines import runner
from pipelines.entities import cloud_nl
from pipelines.entities.cloud_nl import CloudBackend, CloudConfig, Failure, RateLimiter
from pipelines.errors import UserError
from tests.pipelines.fake_language import FakeLanguageServer, KnownEntity
from tests.pipelines.helpers import hotpot_record, record_mentions, write_json
from tests.pipelines.datasets.wikipedia.test_dataset import SMALL

WIKI = "https://en.wikipedia.org/wiki/"
ENTITIES = [
    KnownEntity("Paris", "LOCATION", WIKI + "Paris", "/m/05qtj"),
    KnownEntity("France", "LOCATION", WIKI + "France", "/m/0f8l9c"),
    KnownEntity("Seine", "LOCATION", WIKI + "Seine"),
    KnownEntity("Barack Obama", "PERSON", WIKI + "Barack_Obama", "/m/02mjmr"),
    KnownEntity("Tokyo", "LOCATION", WIKI + "Tokyo", aliases=("東京",)),
    KnownEntity("Zoë Ångström", "PERSON"),  # no Wikipedia page
    KnownEntity("Eiffel Tower", "LOCATION", WIKI + "Eiffel_Tower"),
]


def _config(tmp_path, **kw):
  kw.setdefault("cache_dir", str(tmp_path / "cache"))
  kw.setdefault("requests_per_minute", 60_000)
  kw.setdefault("initial_backoff_s", 0.01)
  kw.setdefault("max_backoff_s", 0.05)
  kw.setdefault("timeout_s", 5.0)
  return CloudConfig(**kw)


def _backend(server, config, cache=True):
  from google.cloud import language_v1
  from google.cloud.language_v1.services.language_service.transports import (
      LanguageServiceGrpcTransport)
  import grpc
  client = language_v1.LanguageServiceClient(transport=LanguageServiceGrpcTransport(
      channel=grpc.insecure_channel(server.endpoint)))
  store = cloud_nl.ResultCache(config.cache_dir).load() if cache else None
  return CloudBackend(config, store, client=client)


def test_offsets_are_code_points_for_any_text(tmp_path):
  # Emoji (a ZWJ sequence of 3 code points), a combining accent, CJK and precomposed letters
  # before and between the names: UTF-8 byte or UTF-16 offsets would all land elsewhere.
  text = ("👩‍🔬 Cafe\u0301 talk: Zoë Ångström met Barack Obama in 東京, then Paris.\n\n"
          "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 France.")
  with FakeLanguageServer(ENTITIES) as server:
    backend = _backend(server, _config(tmp_path))
    stats = {}
    [spans] = backend.annotate([text], stats=stats)
  got = [(text[b:e], label, title) for b, e, label, title in spans]
  assert got == [("Zoë Ångström", "PERSON", None), ("Barack Obama", "PERSON", "Barack Obama"),
                 ("東京", "LOCATION", "Tokyo"), ("Paris", "LOCATION", "Paris"),
                 ("France", "LOCATION", "France")]
  assert stats["api_calls"] == 1 and stats["billable_units"] == 1
  assert stats["api_characters"] == len(text) and "offset_mismatches" not in stats


def test_retries_only_429_503_and_deadlines_and_dead_letters_the_400(tmp_path):
  faults = {"[busy]": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"], "[slow]": ["SLOW"],
            "[bad]": ["INVALID_ARGUMENT"], "[broken]": ["INTERNAL"]}
  texts = ["Paris [busy]", "France [slow]", "Seine [bad]", "Paris is fine.", "Tokyo [broken]"]
  with FakeLanguageServer(ENTITIES, faults, slow_s=1.5) as server:
    backend = _backend(server, _config(tmp_path, timeout_s=0.5))
    stats = {}
    result = backend.annotate(texts, stats=stats)
    calls = server.texts_called()
  assert calls == {"Paris [busy]": 3, "France [slow]": 2, "Seine [bad]": 1,
                   "Paris is fine.": 1, "Tokyo [broken]": 1}
  assert [r[0][3] for r in (result[0], result[1], result[3])] == ["Paris", "France", "Paris"]
  assert result[2] == Failure("api_rejected", "InvalidArgument: The language xx is not "
                                              "supported for entity analysis.")
  assert isinstance(result[4], Failure) and result[4].reason == "api_error"
  assert stats["api_calls"] == 8 and stats["api_retries"] == 3 and stats["failures"] == 2
  assert stats["billable_units"] == 3  # only answered requests are billed


def test_retries_give_up_after_max_attempts(tmp_path):
  with FakeLanguageServer(ENTITIES, {"Paris": ["ALWAYS_UNAVAILABLE"]}) as server:
    backend = _backend(server, _config(tmp_path, max_attempts=3))
    [result] = backend.annotate(["Paris again"])
    assert server.texts_called() == {"Paris again": 3}
  assert result.reason == "api_unavailable" and "3 attempt(s)" in result.message


def test_refused_credentials_stop_the_job(tmp_path):
  with FakeLanguageServer(ENTITIES, {"Paris": ["ALWAYS_PERMISSION_DENIED"]}) as server:
    backend = _backend(server, _config(tmp_path))
    with pytest.raises(UserError, match="refused the request"):
      backend.annotate(["Paris"])
    assert server.texts_called() == {"Paris": 1}


class _Clock:

  def __init__(self):
    self.now = 100.0
    self.sleeps = []

  def __call__(self):
    return self.now

  def sleep(self, seconds):
    self.sleeps.append(seconds)


def test_rate_limiter_spaces_acquisitions():
  clock = _Clock()
  limiter = RateLimiter(120, clock=clock, sleep=clock.sleep)  # one per 0.5 s
  waits = [limiter.acquire() for _ in range(4)]
  assert waits == [0.0, 0.5, 1.0, 1.5] and clock.sleeps == [0.5, 1.0, 1.5]
  clock.now += 10  # idle time is not saved up into a burst
  assert limiter.acquire() == 0.0 and limiter.acquire() == 0.5


def test_rate_limit_holds_across_threads(tmp_path):
  texts = [f"Paris number {i}" for i in range(12)]
  with FakeLanguageServer(ENTITIES) as server:
    backend = _backend(server, _config(tmp_path, requests_per_minute=1200, threads=8))
    backend.annotate(texts)
    times = sorted(t for t, _, _ in server.calls)
  assert len(times) == 12
  interval = 60 / 1200
  # Slots are 50 ms apart; arrival jitter may move a call later, never two slots earlier.
  for i in range(len(times)):
    for j in range(i + 1, len(times)):
      assert times[j] - times[i] >= (j - i - 1) * interval


def test_long_texts_are_split_and_offsets_shifted(tmp_path):
  paragraphs = [f"Paragraph {i} names Paris and France." for i in range(6)]
  text = "\n\n".join(paragraphs)
  with FakeLanguageServer(ENTITIES) as server:
    backend = _backend(server, _config(tmp_path, max_request_chars=80))
    stats = {}
    [spans] = backend.annotate([text], stats=stats)
    sent = list(server.texts_called())
  assert all(len(t) <= 80 for t in sent) and "".join(
      p for _, p in backend.pieces(text)) == text and len(sent) == 3  # 2 paragraphs each
  assert [text[b:e] for b, e, _, _ in spans] == ["Paris", "France"] * 6
  assert stats["requests"] == 3
  assert stats["billable_units"] == 3 and stats["api_characters"] == len(text)


def test_second_run_is_all_cache_hits(tmp_path):
  texts = ["Paris and the Seine.", "Barack Obama in 東京."]
  with FakeLanguageServer(ENTITIES) as server:
    first = _backend(server, _config(tmp_path))
    one = first.annotate(texts)
    assert first.cache.flush() == 2
    assert len(server.calls) == 2
    again = _backend(server, _config(tmp_path))  # a new process: reads the cache files
    stats = {}
    two = again.annotate(texts, stats=stats)
    assert len(server.calls) == 2  # no new call
  assert one == two
  assert stats == {"requests": 2, "cache_hits": 2}
  # COMMON mentions are in the cache too: a run that keeps them needs no call either.
  with FakeLanguageServer(ENTITIES) as server:
    common = _backend(server, _config(tmp_path, mention_types=("PROPER", "COMMON")))
    common.annotate(["Paris and the Seine."])
    assert server.calls == []
  # A different request option (language hint) is another cache key.
  assert common.key("x") != _backend(server, _config(tmp_path, language="fr")).key("x")


def test_budget_refuses_calls_but_not_cache_hits(tmp_path):
  with FakeLanguageServer(ENTITIES) as server:
    backend = _backend(server, _config(tmp_path))
    backend.annotate(["Paris."])
    result = backend.annotate(["Paris.", "France."], admit=[False, False])
    assert len(server.calls) == 1
  assert result[0] == [(0, 5, "LOCATION", "Paris")]
  assert result[1].reason == "budget"


def test_plan_counts_units_and_cache_hits(tmp_path):
  with FakeLanguageServer(ENTITIES) as server:
    backend = _backend(server, _config(tmp_path, max_request_chars=1500))
    backend.annotate(["Paris."])
    assert backend.plan("Paris.") == cloud_nl.Plan(1, 1, 0, 6)
    long = "word " * 500  # 2,500 characters: pieces of 1,500 and 1,000 -> 2 + 1 units
    assert backend.plan(long) == cloud_nl.Plan(2, 0, 3, 2500)
    assert len(server.calls) == 1


def test_helpers():
  assert [cloud_nl.units(n) for n in (1, 999, 1000, 1001, 2500)] == [1, 1, 1, 2, 3]
  assert cloud_nl.title_from_wikipedia_url(WIKI + "Caf%C3%A9_de_Flore#History") == (
      "Café de Flore")
  assert cloud_nl.title_from_wikipedia_url("https://example.com/x") is None
  with pytest.raises(ValueError, match="--nl_max_request_chars"):
    CloudConfig(max_request_chars=300_000)
  with pytest.raises(ValueError, match="--nl_mention_types"):
    CloudConfig(mention_types=("NAMED",))


def test_cache_files_are_checked(tmp_path):
  row = {"key": "k", "api_version": "language_v1", "options": "{}", "characters": 3,
         "language": "en", "created_at": "2026-01-01T00:00:00+00:00",
         "mentions": [{"begin": 0, "end": 3, "mention_type": "PROPER", "name": "Foo",
                       "entity_type": "PERSON", "wikipedia_url": "", "mid": "",
                       "salience": 1.0}]}
  table = nl_cache.read_part(nl_cache.part_bytes([row]))
  assert table.to_pylist()[0]["mentions"][0]["name"] == "Foo"
  with pytest.raises(ValueError, match="not a Parquet file"):
    nl_cache.read_part(b"nope", "x.parquet")


# The jobs, through the fake server.

def _flags(server, tmp_path, entities_dir, *extra):
  return ["--ner", "cloud", "--nl_endpoint", server.endpoint, "--nl_insecure_channel",
          "--nl_cache_dir", str(tmp_path / "cache"), "--entities_dir", entities_dir,
          "--nl_initial_backoff_s", "0.01", "--nl_requests_per_minute", "60000",
          "--max_error_fraction", "1",  # failed requests are dead letters here, on purpose
          *extra] + SMALL


def _manifest(out):
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    return manifest_schema.loads(f.read())


def _dead_letters(out):
  lines = []
  for name in sorted(os.listdir(os.path.join(out, "dead_letter"))):
    with open(os.path.join(out, "dead_letter", name), encoding="utf-8") as f:
      lines += [json.loads(line) for line in f if line.strip()]
  return lines


HOTPOT = [
    hotpot_record("q1", "Which river flows through Paris?", "Seine",
                  [["Rivers", ["The Seine flows through Paris [busy].", " It ends in France."]]]),
    hotpot_record("q2", "Where did Barack Obama go?", "Tokyo",
                  [["Trips", ["Barack Obama flew to 東京 and to Paris."]]]),
    hotpot_record("q3", "Which tower?", "Eiffel Tower",
                  [["Towers", ["The Eiffel Tower is in Paris [bad]."]]]),
]


@pytest.mark.slow
def test_hotpotqa_job_annotates_through_the_api_and_never_pays_twice(tmp_path, entities_dir):
  path = write_json(tmp_path / "h.json", HOTPOT)
  faults = {"[busy]": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"], "[bad]": ["ALWAYS_INVALID_ARGUMENT"]}
  with FakeLanguageServer(ENTITIES, faults) as server:
    out = str(tmp_path / "out")
    assert runner.dataset_main("hotpotqa", ["--input", path, "--output_dir", out]
                               + _flags(server, tmp_path, entities_dir)) == 0
    first_calls = len(server.calls)
    out2 = str(tmp_path / "out2")
    assert runner.dataset_main("hotpotqa", ["--input", path, "--output_dir", out2]
                               + _flags(server, tmp_path, entities_dir)) == 0
    second_calls = len(server.calls) - first_calls
  # Paris, France and Seine are in the vocabulary of the tiny Wikipedia (Eiffel Tower only
  # as a link inside a File: caption, Barack Obama and Tokyo not at all): their ids come
  # from the API's wikipedia_url.
  assert sorted(set(record_mentions(out, entities_dir))) == [("Barack Obama", None), ("France", "France"),
                                        ("Paris", "Paris"), ("Seine", "Seine"), ("東京", None)]
  [dead] = _dead_letters(out)
  assert (dead["stage"], dead["reason"]) == ("annotate", "api_rejected")
  assert dead["source_id"].endswith("h.json#2")  # q3
  assert "not supported" in dead["detail"]
  m = _manifest(out)
  stage = m["stages"]["annotate"]
  assert (stage["input"], stage["output"], stage["rejected:api_rejected"]) == (3, 2, 1)
  assert stage["api_calls"] == 5 and stage["api_retries"] == 2 and stage["billable_units"] == 2
  assert stage["linked_by_api"] == 4 and first_calls == 5
  assert m["config"]["ner"] == "cloud" and m["config"]["cloud"]["endpoint"] == server.endpoint
  # The second run pays nothing: every answered text is cached; the rejected one is not (it
  # was never billed) and is asked again.
  assert second_calls == 1
  stage2 = _manifest(out2)["stages"]["annotate"]
  assert stage2["cache_hits"] == 2 and stage2.get("billable_units", 0) == 0
  assert sorted(set(record_mentions(out2, entities_dir))) == sorted(set(record_mentions(out, entities_dir)))


@pytest.mark.slow
def test_dry_run_and_budget(tmp_path, entities_dir, capsys):
  src = tmp_path / "books"
  src.mkdir()
  for i in range(6):  # 6 books of ~1,200 characters: 2 units each
    (src / f"b{i}.txt").write_text(f"Book {i}. " + "Paris is by the Seine in France. " * 36)
  flags = ["--input", str(src / "*.txt"), "--output_dir", str(tmp_path / "out")]
  with FakeLanguageServer(ENTITIES) as server:
    assert runner.dataset_main("books", flags + _flags(server, tmp_path, entities_dir, "--dry_run",
                                                       "--price_per_1000_units", "1.5")) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert server.calls == []
    assert not os.path.exists(tmp_path / "out" / "manifest.json")
    assert plan["billable_units"] == 12 and plan["cache_hits"] == 0 and plan["requests"] == 6
    assert plan["documents"] == 6 and plan["input"] == 6
    assert plan["estimated_cost"] == pytest.approx(12 / 1000 * 1.5)
    assert json.load(open(tmp_path / "out" / "annotation_plan.json")) == plan
    # A budget of 7 units admits 3 books (6 units); the other 3 are dead letters.
    assert runner.dataset_main("books", flags + _flags(server, tmp_path, entities_dir,
                                                       "--max_api_units", "7")) == 0
    assert len(server.calls) == 3
  m = _manifest(str(tmp_path / "out"))
  stage = m["stages"]["annotate"]
  assert stage["billable_units"] == 6 <= 7 and stage["rejected:budget"] == 3
  assert stage["planned_units"] == 12 and stage["planned_documents_calling"] == 6
  assert m["counts"]["written"] == 3 and m["counts"]["rejected"] == 3
  assert {d["reason"] for d in _dead_letters(str(tmp_path / "out"))} == {"budget"}


def test_cloud_flags_are_checked(tmp_path, capsys):
  path = write_json(tmp_path / "h.json", HOTPOT[:1])
  base = ["--input", path, "--output_dir", str(tmp_path / "o")]
  for flags, message in [(["--ner", "cloud"], "--ner cloud needs --nl_cache_dir"),
                         (["--dry_run"], "--dry_run and --max_api_units are for --ner cloud"),
                         (["--ner", "cloud", "--nl_cache_dir", "c", "--nl_threads", "0"],
                          "--nl_threads must be a number > 0"),
                         (["--ner", "cloud", "--nl_cache_dir", "c", "--nl_insecure_channel"],
                          "--nl_insecure_channel needs --nl_endpoint")]:
    with pytest.raises(SystemExit) as e:
      runner.dataset_main("hotpotqa", base + flags)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
  assert not os.path.exists(tmp_path / "o")
