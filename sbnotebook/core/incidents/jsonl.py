"""The JSON lines export format, derived from the record schema (``core.records.FIELDS``).

One JSON object per message with every field in schema order: times as ISO strings, the body as
text in ``body`` (what ``core.send`` and ``%%sb_send`` send back), and binary bodies, which have no
text, as ``body_base64`` so they come back byte for byte. Application properties are the record's
map of strings (non-string values JSON-encoded); ``import_jsonl(decode_properties=True)`` turns
JSON numbers and booleans back into numbers and booleans. Exporting and importing whole entities
with it: core/incidents/exporting.py and core/incidents/importing.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..views.records import FIELDS

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


def iter_jsonl(path: str | Path) -> Iterator[Record]:
    """Records from a JSON lines export, one at a time; a line that is not a JSON object fails
    with its number."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"Line {number} of {path} is not valid JSON ({exc.msg}).") from None
            if not isinstance(obj, dict):
                raise InvalidInputError(f"Line {number} of {path} is not a JSON object (an exported message).")
            yield from_json_record(obj)


def read_jsonl(path: str | Path) -> list[Record]:
    """Records from a JSON lines export (ready for ``core.send``)."""
    return list(iter_jsonl(path))


def decode_property(value: Any) -> Any:
    """An exported property value back to its type where the export JSON-encoded it: numbers,
    booleans, and binary values (``{"$binary": hex}``); anything else stays the string it is."""
    if not isinstance(value, str):
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, bool | int | float):
        return decoded
    if isinstance(decoded, dict) and set(decoded) == {"$binary"}:
        return bytes.fromhex(decoded["$binary"])
    return value


def sendable(
    record: Record,
    *,
    keep_message_id: bool,
    decode_properties: bool,
    now: dt.datetime | None = None,
    message_id: str | None = None,
) -> Record:
    """An imported record as it is sent: a fresh message id (``message_id``, else a random one)
    unless ``keep_message_id``; a scheduled time
    only when it is still ahead (it is kept on messages that were scheduled once); the broker's
    dead-letter reason and description dropped (as a resubmit drops them)."""
    from .copies import DEAD_LETTER_PROPERTIES

    out = dict(record)
    props = out.get("application_properties") or {}
    out["application_properties"] = {k: v for k, v in props.items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    if not keep_message_id:
        out["message_id"] = message_id or str(uuid.uuid4())
    when = out.get("scheduled_enqueue_time")
    if when is not None and when <= (now or dt.datetime.now(dt.UTC)):
        out["scheduled_enqueue_time"] = None
    if decode_properties:
        out["application_properties"] = {k: decode_property(v) for k, v in out["application_properties"].items()}
    return out


def count_jsonl(path: str | Path) -> int:
    """How many messages a JSON lines export holds, every line checked (nothing is sent from a
    file with a bad line)."""
    return sum(1 for _ in iter_jsonl(path))
