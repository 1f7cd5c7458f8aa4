"""The JSON lines export format, derived from the record schema (``core.records.FIELDS``).

One JSON object per message with every field in schema order: times as ISO strings, the body as
text in ``body`` (what ``core.send`` and ``%%sb_send`` send back), and binary bodies, which have no
text, as ``body_base64`` so they come back byte for byte.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.records import FIELDS

Record = dict[str, Any]


def to_json_record(record: Record) -> Record:
    """A record as a JSON-ready dict (see the module docstring)."""
    out: Record = {}
    for f in FIELDS:
        value = record.get(f.name)
        if f.kind == "binary":
            if record.get("body_text") is None:
                out["body_base64"] = base64.b64encode(bytes(value or b"")).decode()
            out[f.name] = record.get("body_text")
        elif f.kind == "timestamp" and value is not None:
            out[f.name] = value.isoformat()
        else:
            out[f.name] = value
    return out


def from_json_record(obj: Record) -> Record:
    """An exported object back as a record: bytes body, datetimes for the timestamp fields."""
    record: Record = {}
    for f in FIELDS:
        value = obj.get(f.name)
        if f.kind == "binary":
            encoded = obj.get("body_base64")
            text = obj.get("body_text", value)
            value = base64.b64decode(encoded) if isinstance(encoded, str) else (text or "").encode()
        elif f.kind == "timestamp" and isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        record[f.name] = value
    return record


def write_jsonl(records: Iterable[Record], path: str | Path) -> int:
    """Write records as JSON lines; returns how many."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(to_json_record(r), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> list[Record]:
    """Records from a JSON lines export (ready for ``core.send``)."""
    with Path(path).open(encoding="utf-8") as f:
        return [from_json_record(json.loads(line)) for line in f if line.strip()]
