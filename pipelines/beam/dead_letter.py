"""Dead-letter records: what failed, where, and why."""

from __future__ import annotations

import json
from typing import Any, Dict

from schemas.manifest import DEAD_LETTER_FIELDS  # noqa: F401  (documents the required keys)

DEAD_LETTER = "dead_letter"  # tag of the tagged output every stage uses
MAX_DETAIL = 2000


def dead_letter(stage: str, reason: str, source_id: str, detail: str = "",
                **extra: Any) -> Dict[str, Any]:
  record = {"stage": stage, "reason": reason, "source_id": source_id,
            "detail": str(detail)[:MAX_DETAIL]}
  record.update(extra)
  return record


def reason_key(record: Dict[str, Any]) -> str:
  return f"{record['stage']}/{record['reason']}"


def to_json_line(record: Dict[str, Any]) -> str:
  return json.dumps(record, sort_keys=True, ensure_ascii=False)
