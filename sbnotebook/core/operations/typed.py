"""A message's body and application properties as they are sent again, each with its AMQP type.

Read from a received message (its encoded bytes: ``sdk.encoded``, ``amqp_codec``) or from an export
line (``application_property_types``, ``body_kind``, ``body_amqp``: core/files/jsonl.py), and
handed to the SDK as typed values, so a copy, a resubmission or an import is the same message: a
value body stays a value, a sequence a sequence, a ``long`` a ``long``, a binary property binary.

What the SDK cannot send with its type (``sdk.encoded.Unsupported``) makes the message
:class:`Unsendable`: the send reports it failed with the reason, and the original stays where it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..amqp_codec import Typed, TypedMessage, from_form, from_json, read_message
from ..sdk.encoded import Unsupported, encoded, sdk_value, value_body

log = logging.getLogger("sbnotebook.copy")


@dataclass(frozen=True)
class Unsendable:
    """In place of a message that cannot be sent as it is (``to_message`` refuses it with ``reason``)."""

    message_id: str | None
    reason: str


_said: set[str] = set()


def typed_content(msg: Any) -> TypedMessage | None:
    """The body and application properties of a received or peeked message, with their types; None
    when its encoded bytes were not kept (decoded before the kit's connection was made), said once."""
    raw = encoded(msg)
    if raw is None:
        if "untyped" not in _said:
            _said.add("untyped")
            log.warning(
                "a message's encoded bytes were not kept (it was not received on a kit connection): its copy "
                "has the SDK's decoded values, whose AMQP types may differ (int for long, text for binary)"
            )
        return None
    return read_message(raw)


def body_arguments(typed: TypedMessage) -> dict[str, Any]:
    """``AmqpAnnotatedMessage`` keyword arguments for the body, of its kind (``Unsupported``: none)."""
    if typed.kind == "value" and typed.value is not None:
        return {"value_body": value_body(typed.value)}
    if typed.kind == "sequence":
        return {"sequence_body": [[sdk_value(v) for v in section] for section in typed.sequence]}
    return {"data_body": typed.data or [b""]}


def typed_properties(properties: Mapping[str, Typed]) -> dict[str, Any]:
    """Application properties as the SDK's encoder takes them, each with its type (``Unsupported``)."""
    return {name: sdk_value(t) for name, t in properties.items()}


def export_properties(record: Mapping[str, Any]) -> dict[str, Typed] | None:
    """The typed application properties of an export line (a record read back), or None when the
    line has no types (written before types were recorded, or by another tool)."""
    types = record.get("application_property_types")
    if not isinstance(types, dict):
        return None
    values = record.get("application_properties") or {}
    return {str(k): from_form(str(kind), values.get(k)) for k, kind in types.items()}


def export_body(record: Mapping[str, Any]) -> TypedMessage | None:
    """The typed body of an export line whose body is an AMQP value or sequence; None for data."""
    kind, amqp = record.get("body_kind"), record.get("body_amqp")
    if kind == "value" and amqp is not None:
        return TypedMessage(kind="value", value=from_json(amqp))
    if kind == "sequence" and isinstance(amqp, list):
        return TypedMessage(kind="sequence", sequence=[[from_json(n) for n in section] for section in amqp])
    return None


# The types an AMQP message id may have, and the Python value the SDK's encoder writes with each
# (pyamqp's ``encode_message_id``: int as ulong, UUID as uuid, bytes as binary, str as string).
ID_TYPES = ("ulong", "uuid", "binary", "string")


def id_values(ids: Mapping[str, Typed]) -> dict[str, Any]:
    """A message's ``message_id`` / ``correlation_id`` (``TypedMessage.ids``) as the SDK sends each
    with the same type; an id of a type a message id cannot have is left out (the SDK's value stays)."""
    return {name: t.value for name, t in ids.items() if t.type in ID_TYPES}


def export_ids(record: Mapping[str, Any]) -> dict[str, Any]:
    """The ids of an export line whose types it recorded (``message_id_type``, ``correlation_id_type``:
    written when not a string), as the SDK sends each with that type."""
    typed = {}
    for name in ("message_id", "correlation_id"):
        kind, value = record.get(f"{name}_type"), record.get(name)
        if kind in ID_TYPES and value is not None:
            typed[name] = from_form(str(kind), value)
    return id_values(typed)


def unsendable(msg_id: str | None, exc: Unsupported) -> Unsendable:
    return Unsendable(msg_id, f"Not sent: it holds {exc}, which would change what the message is.")
