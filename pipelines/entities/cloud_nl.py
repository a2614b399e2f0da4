"""A Google Cloud Natural Language entity backend (``language_v1`` ``analyzeEntities``).

:class:`CloudBackend` turns texts into entity mention spans, with everything a paid,
rate-limited API needs:

* **Requests** are ``PLAIN_TEXT`` documents with ``encoding_type=UTF32``, so the API's
  ``begin_offset`` is a code-point offset, which is a Python ``str`` index.  A text longer than
  ``max_request_chars`` is split (:func:`pipelines.entities.ner.split_for_length`, on paragraph
  boundaries where possible) and the mentions of each piece are shifted back by its offset.
  ``max_request_chars`` is at most 250,000 so a request stays under the API's 1 MB limit even
  in 4-byte characters.
* **Billing**: one unit per started 1,000 characters of each request (:func:`units`).  Cached
  pieces cost nothing.
* **Rate limit**: :class:`RateLimiter`, requests evenly spaced at ``requests_per_minute``, shared
  by the backend's ``threads`` (one backend per worker process).
* **Retries** with exponential backoff and jitter on 429 (``RESOURCE_EXHAUSTED`` /
  ``TooManyRequests``), 503 (``UNAVAILABLE``) and deadlines (``DEADLINE_EXCEEDED``, also the
  client's own ``timeout_s``) only, at most ``max_attempts`` calls per piece.  A 400
  (``INVALID_ARGUMENT``: e.g. a language the API does not support) is never retried: the text
  fails with the API's message (:class:`Failure`, reason ``api_rejected``).  Retries used up:
  reason ``api_unavailable``; any other API error: ``api_error``.  Refused credentials or a
  disabled API (401/403) stop the job with a :class:`pipelines.errors.UserError`.
* **Cache**: :class:`ResultCache` (``schemas.nl_cache``) keyed by the text, the API version and
  the request options; a piece found there is never sent.
* **Budget**: ``annotate(..., admit=...)``: a text that is not admitted and would need a call
  fails with reason ``budget`` instead (the Beam stage decides which texts fit a
  ``--max_api_units``; see ``pipelines.beam.annotate``).

Entity ids: a mention's ``wikipedia_url`` becomes a Wikipedia title
(:func:`title_from_wikipedia_url`), which the caller maps through the entity vocabulary.  The
API's ``mid`` (a Knowledge Graph id) is kept in the cache; the vocabulary of the Wikipedia job
has no mids, so mids are not mapped.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import math
import random
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from schemas import nl_cache
from schemas.settings import setting
from pipelines.entities.ner import split_for_length
from pipelines.errors import UserError

LOGGER = logging.getLogger("pipelines")
API_VERSION = "language_v1"
UNIT_CHARACTERS = 1000
MAX_REQUEST_CHARS = 250_000  # 4 bytes per character at most: stays under the 1 MB limit
MENTION_TYPES = ("PROPER", "COMMON")

# (begin, end, entity type, Wikipedia title or None): offsets into the text given.
Span = Tuple[int, int, str, Optional[str]]


@dataclasses.dataclass(frozen=True)
class CloudConfig:
  """Settings of :class:`CloudBackend` (flags ``--nl_*`` of the jobs: each field's
  :func:`schemas.settings.setting`).

  ``endpoint``: ``host:port`` of the API (default: the public ``language.googleapis.com``);
  ``insecure_channel``: plaintext gRPC to ``endpoint`` (local emulators and fakes only).
  ``language``: an ISO-639-1 hint, ``""`` lets the API detect it.  ``mention_types``: which
  mentions become spans (``PROPER`` names; add ``COMMON`` for "the author"-style mentions).
  """
  cache_dir: Optional[str] = setting(
      None, help="--ner cloud: directory (local or gs://) of cached API results, shared by runs "
                 "and jobs (required with --ner cloud)")
  endpoint: Optional[str] = setting(
      None, help="--ner cloud: API host:port (default: the public endpoint)")
  insecure_channel: bool = setting(
      False, help="--ner cloud: plaintext gRPC to --nl_endpoint (local emulators and fakes)")
  requests_per_minute: float = setting(
      600.0, help="--ner cloud: requests per minute per worker process; the project's quota "
                  "divided by the workers (default: %(default)s)")
  threads: int = setting(
      8, help="--ner cloud: requests in flight per worker process (default: %(default)s)")
  timeout_s: float = setting(
      60.0, help="--ner cloud: deadline of one request (default: %(default)s)")
  max_attempts: int = setting(
      6, help="--ner cloud: calls per request at most (retries on 429, 503 and deadlines, with "
              "exponential backoff) (default: %(default)s)")
  initial_backoff_s: float = setting(
      1.0, help="--ner cloud: wait before the first retry, doubled for each next one, with "
                "jitter (default: %(default)s)")
  max_backoff_s: float = setting(
      32.0, help="--ner cloud: longest wait between retries (default: %(default)s)")
  max_request_chars: int = setting(
      100_000, help="--ner cloud: longer texts are split into requests of at most this many "
                    "characters (default: %(default)s)")
  mention_types: Tuple[str, ...] = setting(
      ("PROPER",), help="--ner cloud: mention types kept, from PROPER,COMMON (default: "
                        "%(default)s)",
      parse=lambda text: tuple(t.strip().upper() for t in text.split(",") if t.strip()),
      show=",".join)
  language: str = setting(
      "", help="--ner cloud: ISO-639-1 language hint (default: detected)")

  def __post_init__(self):
    def positive(name, value, kind=(int, float)):
      if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"--nl_{name} must be a number > 0, got {value!r}")

    positive("requests_per_minute", self.requests_per_minute)
    positive("threads", self.threads, int)
    positive("timeout_s", self.timeout_s)
    positive("max_attempts", self.max_attempts, int)
    positive("initial_backoff_s", self.initial_backoff_s)
    positive("max_backoff_s", self.max_backoff_s)
    positive("max_request_chars", self.max_request_chars, int)
    if self.max_request_chars > MAX_REQUEST_CHARS:
      raise ValueError(f"--nl_max_request_chars must be <= {MAX_REQUEST_CHARS} (the API takes "
                       f"at most 1 MB per request), got {self.max_request_chars}")
    bad = [t for t in self.mention_types if t not in MENTION_TYPES]
    if bad or not self.mention_types:
      raise ValueError(f"--nl_mention_types must be a comma-separated subset of "
                       f"{','.join(MENTION_TYPES)}, got {','.join(self.mention_types)!r}")
    if self.insecure_channel and not self.endpoint:
      raise ValueError("--nl_insecure_channel needs --nl_endpoint (a local emulator or fake)")

  @property
  def request_options(self) -> str:
    """The options that change the API's answer (part of the cache key)."""
    return nl_cache.canonical_options({"encoding_type": "UTF32", "language": self.language,
                                       "type": "PLAIN_TEXT"})


def units(characters: int) -> int:
  """Billable units of one request of ``characters`` code points (one per started 1,000)."""
  return math.ceil(characters / UNIT_CHARACTERS)


def title_from_wikipedia_url(url: str) -> Optional[str]:
  """``https://en.wikipedia.org/wiki/Barack_Obama`` -> ``Barack Obama`` (None if not a
  ``/wiki/`` URL)."""
  _, sep, rest = (url or "").partition("/wiki/")
  if not sep or not rest:
    return None
  title = urllib.parse.unquote(rest.partition("#")[0]).replace("_", " ").strip()
  return title or None


class RateLimiter:
  """At most ``per_minute`` acquisitions per minute, evenly spaced, across threads: each
  :meth:`acquire` takes the next free slot (``60 / per_minute`` seconds after the previous
  one) and sleeps until it comes.  ``clock`` and ``sleep`` are injectable for tests."""

  def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep):
    self.interval = 60.0 / per_minute
    self._clock = clock
    self._sleep = sleep
    self._lock = threading.Lock()
    self._next: Optional[float] = None

  def acquire(self) -> float:
    """Waits for a slot; returns the seconds waited."""
    with self._lock:
      now = self._clock()
      slot = now if self._next is None or self._next < now else self._next
      self._next = slot + self.interval
    wait = slot - now
    if wait > 0:
      self._sleep(wait)
    return wait


class ResultCache:
  """Cached ``analyzeEntities`` results (``schemas.nl_cache``) in ``directory`` (local or any
  Beam filesystem, e.g. ``gs://``).

  :meth:`load` reads every part once (keys in a dict, rows kept as Arrow tables); :meth:`put`
  buffers new results (thread-safe) and :meth:`flush` writes them as one new part (also done
  when ``flush_rows`` results are buffered), so a result paid for is on disk before long.
  """

  def __init__(self, directory: str, flush_rows: int = 2000):
    self.directory = directory
    self.flush_rows = flush_rows
    self._lock = threading.Lock()
    self._index: Dict[str, Tuple[int, int]] = {}  # key -> (table, row)
    self._tables: List[Any] = []
    self._new: Dict[str, Dict[str, Any]] = {}  # buffered, not yet written
    self._fresh: Dict[str, List[Dict[str, Any]]] = {}  # written by this process
    self.loaded_rows = 0
    self.written_rows = 0

  def load(self) -> "ResultCache":
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    pattern = FileSystems.join(self.directory, f"{nl_cache.PART_PREFIX}*{nl_cache.PART_SUFFIX}")
    paths = sorted(m.path for r in FileSystems.match([pattern]) for m in r.metadata_list)
    for path in paths:
      with FileSystems.open(path) as f:
        table = nl_cache.read_part(f.read(), path)
      t = len(self._tables)
      self._tables.append(table.select(["mentions"]))
      for row, key in enumerate(table.column("key").to_pylist()):
        self._index.setdefault(key, (t, row))
      self.loaded_rows += table.num_rows
    LOGGER.info("Cloud NL cache %s: %d result(s) in %d file(s)", self.directory,
                len(self._index), len(paths))
    return self

  def __contains__(self, key: str) -> bool:
    return key in self._index or key in self._new or key in self._fresh

  def get(self, key: str) -> Optional[List[Dict[str, Any]]]:
    """The cached mentions of ``key`` (:data:`schemas.nl_cache.MENTION_TYPE` dicts) or None."""
    hit = self._index.get(key)
    if hit is not None:
      t, row = hit
      return self._tables[t].column("mentions")[row].as_py()
    with self._lock:
      new = self._new.get(key)
      return new["mentions"] if new is not None else self._fresh.get(key)

  def put(self, key: str, characters: int, language: str, options: str,
          mentions: List[Dict[str, Any]]) -> None:
    row = {"key": key, "api_version": API_VERSION, "options": options,
           "characters": characters, "language": language,
           "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
               timespec="seconds"), "mentions": mentions}
    with self._lock:
      self._new[key] = row
      full = len(self._new) >= self.flush_rows
    if full:
      self.flush()

  def flush(self) -> int:
    """Writes the buffered results as one new part; returns how many."""
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
    from pipelines.atomic_files import write_atomically  # pylint: disable=g-import-not-at-top
    with self._lock:
      rows, self._new = list(self._new.values()), {}
    if not rows:
      return 0
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    path = FileSystems.join(self.directory, f"{nl_cache.PART_PREFIX}{stamp}-"
                                            f"{uuid.uuid4().hex[:12]}{nl_cache.PART_SUFFIX}")
    try:
      write_atomically(path, [nl_cache.part_bytes(rows)])
    except Exception:
      with self._lock:  # keep them for the next flush
        for row in rows:
          self._new.setdefault(row["key"], row)
      raise
    with self._lock:
      for row in rows:
        self._fresh[row["key"]] = row["mentions"]
      self.written_rows += len(rows)
    return len(rows)


@dataclasses.dataclass(frozen=True)
class Failure:
  """Why a text got no annotation: ``reason`` (``api_rejected``, ``api_unavailable``,
  ``api_error``, ``budget``) and the API's message."""
  reason: str
  message: str


@dataclasses.dataclass(frozen=True)
class Plan:
  """What annotating one text would cost: ``requests`` (pieces), ``cached`` (of them in the
  cache), ``units`` (billable units of the others) and ``characters`` (of the text)."""
  requests: int
  cached: int
  units: int
  characters: int


def _errors():
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
  retryable = (exceptions.TooManyRequests, exceptions.ResourceExhausted,
               exceptions.ServiceUnavailable, exceptions.DeadlineExceeded)
  fatal = (exceptions.Unauthenticated, exceptions.PermissionDenied, exceptions.Unauthorized,
           exceptions.Forbidden)
  return exceptions, retryable, fatal


def make_client(config: CloudConfig):
  """A ``LanguageServiceClient`` for ``config``: application default credentials against the
  public API, or plaintext gRPC to ``endpoint`` with ``insecure_channel``."""
  from google.cloud import language_v1  # pylint: disable=g-import-not-at-top
  if config.insecure_channel:
    import grpc  # pylint: disable=g-import-not-at-top
    from google.cloud.language_v1.services.language_service.transports import (  # pylint: disable=g-import-not-at-top
        LanguageServiceGrpcTransport)
    channel = grpc.insecure_channel(config.endpoint)
    return language_v1.LanguageServiceClient(
        transport=LanguageServiceGrpcTransport(channel=channel))
  options = {"api_endpoint": config.endpoint} if config.endpoint else None
  try:
    return language_v1.LanguageServiceClient(client_options=options)
  except Exception as e:  # google.auth.exceptions.DefaultCredentialsError and the like
    raise UserError(f"--ner cloud cannot create a Cloud Natural Language client: {e} (set up "
                    f"application default credentials, e.g. gcloud auth "
                    f"application-default login)") from None


class CloudBackend:
  """Entity spans of texts from Cloud Natural Language (see the module docstring).

  ``client``: a ``LanguageServiceClient`` (built from ``config`` on first use when None);
  ``sleep`` and ``rng`` (for backoff) are injectable for tests.  The client, the thread pool
  and the rate limiter are made lazily and not pickled.
  """

  def __init__(self, config: CloudConfig, cache: Optional[ResultCache] = None, client=None,
               sleep: Callable[[float], None] = time.sleep,
               rng: Optional[random.Random] = None):
    self.config = config
    self.cache = cache
    self._client = client
    self._sleep = sleep
    self._rng = rng or random.Random()
    self._options = config.request_options
    self._lock = threading.Lock()
    self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
    self.limiter = RateLimiter(config.requests_per_minute, sleep=sleep)

  @property
  def client(self):
    with self._lock:
      if self._client is None:
        self._client = make_client(self.config)
      return self._client

  def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
    with self._lock:
      if self._pool is None:
        self._pool = concurrent.futures.ThreadPoolExecutor(self.config.threads,
                                                           thread_name_prefix="cloud-nl")
      return self._pool

  def close(self) -> None:
    with self._lock:
      pool, self._pool = self._pool, None
    if pool is not None:
      pool.shutdown(wait=True)

  def key(self, piece: str) -> str:
    return nl_cache.cache_key(API_VERSION, self._options, piece)

  def pieces(self, text: str) -> List[Tuple[int, str]]:
    return split_for_length(text, self.config.max_request_chars)

  def plan(self, text: str) -> Plan:
    """What :meth:`annotate` would send for ``text`` (no call is made)."""
    requests = cached = cost = 0
    for _, piece in self.pieces(text):
      requests += 1
      if self.cache is not None and self.key(piece) in self.cache:
        cached += 1
      else:
        cost += units(len(piece))
    return Plan(requests, cached, cost, len(text))

  def annotate(self, texts: Sequence[str], admit: Optional[Sequence[bool]] = None,
               stats: Optional[Dict[str, int]] = None) -> List[Any]:
    """Per text: its sorted, non-overlapping :data:`Span` list, or a :class:`Failure`.

    ``admit[i]`` False: text ``i`` may only use the cache (a piece that would need a call
    makes it fail with reason ``budget``).  Counts into ``stats`` (``requests`` (pieces),
    ``cache_hits``, ``api_calls``, ``api_retries``, ``failures`` (texts), ``billable_units``,
    ``api_characters`` (sent), ``rate_limit_wait_ms``, ``offset_mismatches``).
    """
    stats = stats if stats is not None else {}
    counts: Dict[str, int] = {}
    jobs = []  # (text index, offset, piece, cached mentions or future)
    for i, text in enumerate(texts):
      for offset, piece in self.pieces(text):
        key = self.key(piece)
        counts["requests"] = counts.get("requests", 0) + 1
        found = self.cache.get(key) if self.cache is not None else None
        if found is not None:
          counts["cache_hits"] = counts.get("cache_hits", 0) + 1
          jobs.append((i, offset, piece, found))
        elif admit is not None and not admit[i]:
          jobs.append((i, offset, piece, Failure("budget", "--max_api_units: the budget does "
                                                           "not cover this text")))
        else:
          jobs.append((i, offset, piece, self._executor().submit(self._call, piece, key)))
    results: List[Any] = [[] for _ in texts]
    for i, offset, piece, job in jobs:
      if isinstance(job, concurrent.futures.Future):
        job, call_counts = job.result()
        for k, v in call_counts.items():
          counts[k] = counts.get(k, 0) + v
      if isinstance(job, Failure):
        if not isinstance(results[i], Failure):
          results[i] = job
        continue
      if isinstance(results[i], Failure):
        continue
      for m in job:
        if m["mention_type"] not in self.config.mention_types:
          continue
        begin, end = m["begin"], m["end"]
        if not 0 <= begin < end <= len(piece):  # a cache file from elsewhere
          counts["offset_mismatches"] = counts.get("offset_mismatches", 0) + 1
          continue
        results[i].append((offset + begin, offset + end, m["entity_type"],
                           title_from_wikipedia_url(m["wikipedia_url"])))
    for i, spans in enumerate(results):
      if not isinstance(spans, Failure):
        results[i] = _non_overlapping(spans)
    failures = sum(1 for r in results if isinstance(r, Failure))
    if failures:
      counts["failures"] = counts.get("failures", 0) + failures
    for k, v in counts.items():
      stats[k] = stats.get(k, 0) + v
    return results

  def _call(self, piece: str, key: str) -> Tuple[Any, Dict[str, int]]:
    """One piece through the API (with retries): (mentions or Failure, counts)."""
    from google.cloud import language_v1  # pylint: disable=g-import-not-at-top
    exceptions, retryable, fatal = _errors()
    counts = {"api_calls": 0, "api_retries": 0, "rate_limit_wait_ms": 0}
    cfg = self.config
    document = language_v1.Document(content=piece, type_=language_v1.Document.Type.PLAIN_TEXT,
                                     language=cfg.language)
    request = language_v1.AnalyzeEntitiesRequest(document=document,
                                                  encoding_type=language_v1.EncodingType.UTF32)
    last = ""
    for attempt in range(cfg.max_attempts):
      if attempt:
        counts["api_retries"] += 1
        delay = min(cfg.max_backoff_s, cfg.initial_backoff_s * 2 ** (attempt - 1))
        self._sleep(delay * (0.5 + 0.5 * self._rng.random()))  # "equal jitter"
      counts["rate_limit_wait_ms"] += int(1000 * self.limiter.acquire())
      counts["api_calls"] += 1
      try:
        response = self.client.analyze_entities(request=request, timeout=cfg.timeout_s,
                                                retry=None)
      except retryable as e:
        last = f"{type(e).__name__}: {e.message if hasattr(e, 'message') else e}"
        continue
      except fatal as e:
        raise UserError(f"Cloud Natural Language refused the request ({type(e).__name__}: "
                        f"{getattr(e, 'message', e)}): check the credentials and that the API "
                        f"is enabled for the project") from None
      except exceptions.BadRequest as e:
        return Failure("api_rejected", f"{type(e).__name__}: {e.message}"), counts
      except exceptions.GoogleAPICallError as e:
        return Failure("api_error", f"{type(e).__name__}: {e.message}"), counts
      counts["billable_units"] = units(len(piece))
      counts["api_characters"] = len(piece)
      mentions, mismatches = _mentions(response, piece)
      if mismatches:
        counts["offset_mismatches"] = mismatches
      if self.cache is not None:
        self.cache.put(key, len(piece), response.language, self._options, mentions)
      return mentions, counts
    return Failure("api_unavailable", f"{cfg.max_attempts} attempt(s), last: {last}"), counts


def _mentions(response, piece: str) -> Tuple[List[Dict[str, Any]], int]:
  """The response's mentions as :data:`schemas.nl_cache.MENTION_TYPE` dicts (``begin`` and
  ``end`` from the UTF-32 ``begin_offset`` and the content's length), and how many were
  dropped because ``piece[begin:end]`` is not their content."""
  out = []
  mismatches = 0
  for entity in response.entities:
    meta = entity.metadata
    for m in entity.mentions:
      begin = m.text.begin_offset
      if begin < 0 or not m.text.content or piece[begin:begin + len(m.text.content)] != (
          m.text.content):
        mismatches += 1
        continue
      out.append({"begin": begin, "end": begin + len(m.text.content),
                  "mention_type": type(m).Type(m.type_).name,
                  "name": entity.name, "entity_type": type(entity).Type(entity.type_).name,
                  "wikipedia_url": meta.get("wikipedia_url", ""), "mid": meta.get("mid", ""),
                  "salience": float(entity.salience)})
  return out, mismatches


def _non_overlapping(spans: List[Span]) -> List[Span]:
  """Sorted by position; of overlapping spans the one that starts first (longest on ties)
  stays."""
  spans.sort(key=lambda s: (s[0], -s[1]))
  out: List[Span] = []
  for s in spans:
    if not out or s[0] >= out[-1][1]:
      out.append(s)
  return out
