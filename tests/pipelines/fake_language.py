"""A fake Cloud Natural Language ``language_v1`` gRPC server on loopback, for tests.

It answers ``AnalyzeEntities`` like the real API: one ``Entity`` per known name found in the
text (every occurrence a ``PROPER`` mention; a lower-case occurrence a ``COMMON`` one), with
``metadata`` ``wikipedia_url`` and ``mid`` when the entity has them, salience by frequency, and
``begin_offset`` in the unit of the request's ``encoding_type`` (code points for UTF32, bytes
for UTF8, UTF-16 code units for UTF16).  A text over 1,000,000 bytes is a 400, as the API.

Faults, to test a client: a text containing one of :attr:`FakeLanguageServer.faults`' markers
gets the next status of that marker's list (``"RESOURCE_EXHAUSTED"`` (429),
``"UNAVAILABLE"`` (503), ``"INVALID_ARGUMENT"`` (400), ``"SLOW"``: answer after ``slow_s``
seconds, past a short client deadline), then normal answers once the list is used up; a
marker with ``"ALWAYS_<STATUS>"`` fails every time.  Every call is logged (time, text, status).
"""

from __future__ import annotations

import collections
import concurrent.futures
import re
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import grpc
from google.cloud import language_v1

SERVICE = "google.cloud.language.v1.LanguageService"
BYTES_LIMIT = 1_000_000


class KnownEntity:

  def __init__(self, name: str, entity_type: str = "OTHER", wikipedia_url: str = "",
               mid: str = "", aliases: Sequence[str] = ()):
    self.name = name
    self.entity_type = entity_type
    self.wikipedia_url = wikipedia_url
    self.mid = mid
    self.surfaces = (name,) + tuple(aliases)


def _offset(text: str, index: int, encoding: int) -> int:
  if encoding == language_v1.EncodingType.UTF8:
    return len(text[:index].encode("utf-8"))
  if encoding == language_v1.EncodingType.UTF16:
    return len(text[:index].encode("utf-16-le")) // 2
  return index  # UTF32 (and NONE, for which the real API gives -1; unused here)


class FakeLanguageServer:
  """``with FakeLanguageServer(entities) as server:`` -> ``server.endpoint`` (host:port)."""

  def __init__(self, entities: Sequence[KnownEntity], faults: Optional[Dict[str, List[str]]] = None,
               slow_s: float = 1.0):
    self.entities = list(entities)
    self.faults = {k: list(v) for k, v in (faults or {}).items()}
    self.slow_s = slow_s
    self.calls: List[Tuple[float, str, str]] = []  # (monotonic time, text, status)
    self._lock = threading.Lock()
    self._server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "AnalyzeEntities": grpc.unary_unary_rpc_method_handler(
            self._analyze_entities,
            request_deserializer=language_v1.AnalyzeEntitiesRequest.deserialize,
            response_serializer=language_v1.AnalyzeEntitiesResponse.serialize)})
    self._server.add_generic_rpc_handlers((handler,))
    self.port = self._server.add_insecure_port("127.0.0.1:0")
    self.endpoint = f"127.0.0.1:{self.port}"

  def __enter__(self) -> "FakeLanguageServer":
    self._server.start()
    return self

  def __exit__(self, *exc):
    self._server.stop(grace=None)

  def statuses(self) -> collections.Counter:
    with self._lock:
      return collections.Counter(status for _, _, status in self.calls)

  def texts_called(self) -> collections.Counter:
    with self._lock:
      return collections.Counter(text for _, text, _ in self.calls)

  def _fault(self, text: str) -> Optional[str]:
    with self._lock:
      for marker, statuses in self.faults.items():
        if marker in text and statuses:
          if statuses[0].startswith("ALWAYS_"):
            return statuses[0][len("ALWAYS_"):]
          return statuses.pop(0)
    return None

  def _analyze_entities(self, request, context):
    text = request.document.content
    fault = self._fault(text)
    if fault is None and len(text.encode("utf-8")) > BYTES_LIMIT:
      fault = "TOO_LARGE"
    with self._lock:
      self.calls.append((time.monotonic(), text, fault or "OK"))
    if fault == "SLOW":
      time.sleep(self.slow_s)
    elif fault == "TOO_LARGE":
      context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                    "Request payload size exceeds the limit: 1000000 bytes.")
    elif fault == "INVALID_ARGUMENT":
      context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                    "The language xx is not supported for entity analysis.")
    elif fault is not None:
      context.abort(getattr(grpc.StatusCode, fault), f"fake {fault}")
    return self.respond(text, request.encoding_type)

  def respond(self, text: str, encoding: int) -> language_v1.AnalyzeEntitiesResponse:
    entities = []
    for known in self.entities:
      mentions = []
      for surface in known.surfaces:
        for m in re.finditer(r"(?<!\w)" + re.escape(surface) + r"(?!\w)", text, re.IGNORECASE):
          proper = not m.group(0).islower()  # "paris": COMMON; "Paris", "東京": PROPER
          mentions.append(language_v1.EntityMention(
              text=language_v1.TextSpan(content=m.group(0),
                                        begin_offset=_offset(text, m.start(), encoding)),
              type_=(language_v1.EntityMention.Type.PROPER if proper
                     else language_v1.EntityMention.Type.COMMON)))
      if mentions:
        metadata = {k: v for k, v in (("wikipedia_url", known.wikipedia_url),
                                      ("mid", known.mid)) if v}
        entities.append(language_v1.Entity(
            name=known.name, type_=getattr(language_v1.Entity.Type, known.entity_type),
            metadata=metadata, mentions=mentions, salience=float(len(mentions))))
    total = sum(e.salience for e in entities) or 1.0
    for e in entities:
      e.salience = e.salience / total
    entities.sort(key=lambda e: -e.salience)
    return language_v1.AnalyzeEntitiesResponse(entities=entities, language="en")
