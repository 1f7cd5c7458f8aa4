"""Stored messages and entity definitions <-> database rows, with nothing that can run code.

Scalars go to JSON; maps whose values carry AMQP types (annotations, application
properties) go to AMQP-encoded bytes, decoded by proton's type-system decoder, so
every value keeps its AMQP type across a restart. No pickle: a data directory from
someone else can hold wrong data, never code.
"""

from __future__ import annotations

import dataclasses
import json
import json.scanner
from datetime import datetime
from typing import Any

from proton import Data

from ..broker.model import MessageData, MessageState, StoredMessage
from ..broker.values import NO_ENTRIES, copy_value
from ..security.sas import Policy, rights_of
from ..topology import EntityProperties, RuleConfig

MessageRow = tuple[str, bytes, bytes, bytes, bytes, bytes, bytes, bytes]


class RowError(ValueError):
    """A stored row does not decode: the data directory is damaged or not ours."""


def encode_map(value: dict[Any, Any]) -> bytes:
    if not value:
        return b""
    d = Data()
    d.put_object(value)
    return bytes(d.encode())


def decode_map(raw: bytes) -> dict[Any, Any]:
    if not raw:
        return NO_ENTRIES
    d = Data()
    d.decode(raw)
    value = d.get_object()
    if not isinstance(value, dict):
        raise RowError("a stored map is not an AMQP map")
    return {copy_value(k): copy_value(v) for k, v in value.items()}


_DATA_SCALARS = (
    "size",
    "durable",
    "priority",
    "message_id",
    "correlation_id",
    "subject",
    "content_type",
    "to",
    "reply_to",
    "reply_to_session_id",
    "session_id",
    "partition_key",
    "ttl",
    "scheduled_enqueue_time",
)


def message_row(msg: StoredMessage) -> MessageRow:
    """(meta JSON, raw properties, raw application properties, raw body, raw delivery annotations,
    annotations, sender's application properties, current application properties)."""
    data = msg.data
    meta = {name: getattr(data, name) for name in _DATA_SCALARS}
    meta.update(
        enqueued=msg.enqueued_time,
        state=int(msg.state),
        count=msg.delivery_count,
        expires=msg.expires_at,
        dl_source=msg.dead_letter_source,
        eseq=msg.enqueue_sequence_number,
        changed=msg.changed_properties is not None,
    )
    return (
        json.dumps(meta),
        data.raw_properties,
        data.raw_application_properties,
        data.raw_body,
        data.raw_delivery_annotations,
        encode_map(data.annotations),
        b"",  # the sender's map: kept encoded in the raw application-properties column
        encode_map(msg.changed_properties) if msg.changed_properties is not None else b"",
    )


_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # loads minus 2 frames
_STATES = tuple(MessageState)


def _meta(text: str) -> dict[str, Any]:
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        raise ValueError("the metadata is not JSON") from None
    if end != len(text) or not isinstance(value, dict):
        raise ValueError("the metadata is not one JSON object")
    return value


def message_from_row(seq: int, row: tuple[Any, ...]) -> StoredMessage:
    meta_text, raw_props, raw_app, raw_body, raw_da, annotations, data_app, app = row
    try:
        meta = _meta(meta_text)
        if "changed" in meta:  # this version: the sender's map is the raw section, decoded when read
            changed = decode_map(bytes(app)) if meta["changed"] else None
            sent = None
        else:  # older rows: both maps encoded; equal ones mean unchanged
            sent = decode_map(bytes(data_app))
            changed = None if app == data_app else decode_map(bytes(app))
        data = MessageData(
            raw_properties=bytes(raw_props),
            raw_body=bytes(raw_body),
            raw_application_properties=bytes(raw_app),
            raw_delivery_annotations=bytes(raw_da),
            annotations=decode_map(bytes(annotations)),
            application_properties=sent,
            **{name: meta[name] for name in _DATA_SCALARS},
        )
        return StoredMessage(
            data=data,
            sequence_number=seq,
            enqueued_time=float(meta["enqueued"]),
            state=_STATES[meta["state"]],
            delivery_count=int(meta["count"]),
            changed_properties=None if changed is None else dict(changed),
            expires_at=meta["expires"],
            dead_letter_source=meta["dl_source"],
            enqueue_sequence_number=int(meta["eseq"]),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RowError(f"stored message {seq} does not decode: {exc}") from None


# ------------------------------------------------------------------ entities


def entity_doc(
    kind: str,
    name: str,
    props: EntityProperties,
    *,
    topic: str | None = None,
    rules: Any = None,
    created_at: datetime | None = None,
) -> str:
    """An entity's definition as JSON: kind, name, properties (and a subscription's topic and rules),
    and when it was created (a restart keeps the administration API's CreatedAt)."""
    fields = {f.name: getattr(props, f.name) for f in dataclasses.fields(props) if f.name != "policies"}
    doc: dict[str, Any] = {"kind": kind, "name": name, "properties": fields}
    # the keys too: the data directory is the namespace's own store, as Azure's is
    doc["policies"] = [_policy_doc(p) for p in props.policies]
    if created_at is not None:
        doc["created_at"] = created_at.isoformat()
    if topic is not None:
        doc["topic"] = topic
    if rules is not None:
        doc["rules"] = [dataclasses.asdict(r) for r in rules]
    return json.dumps(doc)


def parse_entity_doc(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
        fields = {f.name for f in dataclasses.fields(EntityProperties)}
        doc["properties"] = EntityProperties(**{k: v for k, v in doc["properties"].items() if k in fields})
        if "policies" in doc:  # else written before policies were journaled: the entity keeps its own
            doc["properties"].policies = tuple(_policy_from(p, doc["name"]) for p in doc["policies"])
        if "rules" in doc:
            doc["rules"] = [RuleConfig(**r) for r in doc["rules"]]
        if doc["kind"] not in ("queue", "topic", "subscription") or not isinstance(doc["name"], str):
            raise ValueError("unknown entity kind")
        if "created_at" in doc:  # journals written before it have none: the entity is as new at start-up
            doc["created_at"] = datetime.fromisoformat(doc["created_at"])
        return dict(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise RowError(f"a stored entity does not decode: {exc}") from None


def _policy_doc(policy: Policy) -> dict[str, Any]:
    return {
        "name": policy.name,
        "primary_key": policy.primary_key,
        "secondary_key": policy.secondary_key,
        "rights": list(policy.rights_listed),
        "created_at": policy.created_at.isoformat() if policy.created_at else None,
        "modified_at": policy.modified_at.isoformat() if policy.modified_at else None,
    }


def _policy_from(doc: dict[str, Any], entity: str) -> Policy:
    def when(key: str) -> datetime | None:
        return datetime.fromisoformat(doc[key]) if doc.get(key) else None

    listed = tuple(str(r) for r in doc["rights"])
    return Policy(
        str(doc["name"]),
        str(doc["primary_key"]),
        str(doc["secondary_key"]),
        rights_of(listed),
        entity,
        listed=listed,
        created_at=when("created_at"),
        modified_at=when("modified_at"),
    )
