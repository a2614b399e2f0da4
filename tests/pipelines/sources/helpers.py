"""Sample JSON items and files, and event helpers, shared by the reader and read-stage tests."""

from __future__ import annotations

import json
from typing import Any, List, Tuple

from pipelines.sources.json_events import Event, Item, Unreadable
from pipelines.sources.json_items import read_json_stream

ITEMS = [{"_id": k, "v": i, "s": f"text {k}"} for i, k in enumerate("abcde")]
GOOD = [json.dumps(x) for x in ITEMS]


def json_list(parts: List[str], sep: str = ", ") -> str:
  return "[" + sep.join(parts) + "]"


def obj_file(items_text: List[str], before: str = "",
             after: str = ', "Domain": "Web", "Split": "dev", "Version": 1.0') -> str:
  """``{<before>"Data": [<items>]<after>}`` (items as raw text, joined like json_list)."""
  return "{" + before + '"Data": ' + json_list(items_text) + after + "}"


def split(data: bytes, chunk_size: int) -> List[bytes]:
  return [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]


def events(data: bytes, chunk_size: int = 5, path: str = "f") -> List[Event]:
  return list(read_json_stream(split(data, chunk_size), path, chunk_size))


def events_key(data: bytes, chunk_size: int = 5, key: str = "Data") -> List[Event]:
  return list(read_json_stream(split(data, chunk_size), "f", chunk_size, list_key=key))


def summary(evs: List[Event]) -> List[Tuple[Any, ...]]:
  """Events as comparable tuples without the free-text detail."""
  out = []
  for e in evs:
    if isinstance(e, Item):
      out.append(("item", e.source_id, e.value))
    elif isinstance(e, Unreadable):
      out.append((e.reason, e.source_id, e.uncertain))
    else:
      out.append(("repaired", e.source_id))
  return out
