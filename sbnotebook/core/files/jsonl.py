"""The JSON lines export format, derived from the record schema (``core.records.FIELDS``).

One JSON object per message with every field in schema order: times as ISO strings, the body as
text in ``body`` (what ``core.send`` and ``%%sb_send`` send back), and binary bodies, which have no
text, as ``body_base64`` so they come back byte for byte. What a message is, kinds and types, is
written too (``amqp_codec``'s JSON forms), so an import sends the same message:

- ``application_properties``: each value in its JSON form (a number, ``true``, text, base64 for
  binary, ISO 8601 for a timestamp), and ``application_property_types`` its AMQP type (``int``,
  ``long``, ``double``, ``boolean``, ``string``, ``timestamp``, ``uuid``, ``binary``, ...);
- ``body_kind``: ``data``, ``value`` or ``sequence``; a value or sequence body's typed content in
  ``body_amqp`` (``body`` holds it as readable JSON text, as ``body_text`` does);
- ``message_id_type`` / ``correlation_id_type``: for an id that is not a string (AMQP message ids
  may be a ``ulong``, ``uuid`` or ``binary``), its type, and the id in its JSON form (a number, the
  uuid's text, base64), so an import that keeps message ids sends the same id.

Lines without types (written before types were recorded, or by another tool) hold properties as
strings: they are sent as strings, or with ``import_jsonl(decode_properties=True)`` JSON numbers and
booleans as numbers and booleans. Exporting and importing whole entities with it:
core/files/exporting.py and core/files/importing.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..amqp_codec import TypedMessage, form, to_json
from ..errors import InvalidInputError
from ..tracing import ORIGINAL_TRACEPARENT, original_context, renew_context
from ..views.records import FIELDS

Record = dict[str, Any]
# Beside the record's fields (``message_id_type`` and ``correlation_id_type`` only for an id that is not a string).
TYPED_KEYS = ("application_property_types", "body_kind", "body_amqp", "message_id_type", "correlation_id_type")


def to_json_record(record: Record, typed: TypedMessage | None = None) -> Record:
    """A record as a JSON-ready dict (see the module docstring), with ``typed``, the message's body
    and properties with their types (``operations.typed.typed_content``), when known."""
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
    if typed is not None:
        out.update(typed_fields(typed))
    return out


def typed_fields(typed: TypedMessage) -> Record:
    """The export line's kinds and types (see the module docstring)."""
    out: Record = {
        "application_properties": {k: form(t) for k, t in typed.properties.items()},
        "application_property_types": {k: t.type for k, t in typed.properties.items()},
        "body_kind": typed.kind,
    }
    if typed.kind == "value" and typed.value is not None:
        out["body_amqp"] = to_json(typed.value)
    elif typed.kind == "sequence":
        out["body_amqp"] = [[to_json(v) for v in section] for section in typed.sequence]
    for name, t in typed.ids.items():
        if t.type != "string":  # a ulong, uuid or binary id: its JSON form and its type
            out[name], out[f"{name}_type"] = form(t), t.type
    return out


def from_json_record(obj: Record) -> Record:
    """An exported object back as a record: bytes body, datetimes for the timestamp fields, and the
    kinds and types the line records (what ``core.send`` sends it with again)."""
    record: Record = {key: obj[key] for key in TYPED_KEYS if key in obj}
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
    dead-letter reason and description dropped (as a resubmit drops them). ``decode_properties``
    applies to lines without types (see the module docstring): a typed line's types win."""
    from ..operations.copies import DEAD_LETTER_PROPERTIES

    out = dict(record)
    for key in ("application_properties", "application_property_types"):
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    out.setdefault("application_properties", {})
    out["application_properties"] = out["application_properties"] or {}
    if not keep_message_id:
        out["message_id"] = message_id or str(uuid.uuid4())
        out.pop("message_id_type", None)  # the fresh id is a string
    when = out.get("scheduled_enqueue_time")
    if when is not None and when <= (now or dt.datetime.now(dt.UTC)):
        out["scheduled_enqueue_time"] = None
    if decode_properties and "application_property_types" not in out:
        out["application_properties"] = {k: decode_property(v) for k, v in out["application_properties"].items()}
    _renew_context(out)
    return out


def _renew_context(out: Record) -> None:
    """An imported message is a new send (``core/tracing.py``): the exported context dropped from its
    properties and their types, kept in ``sbnotebook-original-traceparent`` (a string), a fresh one given."""
    props = dict(out["application_properties"])
    renew_context(props, original_context(props), out.get("message_id"))
    out["application_properties"] = props
    types = out.get("application_property_types")
    if isinstance(types, dict):
        kept = {k: t for k, t in types.items() if k in props}
        if ORIGINAL_TRACEPARENT in props:
            kept.setdefault(ORIGINAL_TRACEPARENT, "string")
        out["application_property_types"] = kept


def count_jsonl(path: str | Path) -> int:
    """How many messages a JSON lines export holds, every line checked (nothing is sent from a
    file with a bad line)."""
    return sum(1 for _ in iter_jsonl(path))
