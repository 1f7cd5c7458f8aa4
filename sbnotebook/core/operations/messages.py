"""What a caller hands to ``send``, as SDK messages: str and bytes bodies, records (the schema's
fields applied), JSON values, DataFrames row by row; consumed lazily."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import InvalidInputError
from ..sdk.api import AmqpAnnotatedMessage, ServiceBusMessage
from ..sdk.encoded import Unsupported
from ..sdk.messages import as_service_bus_message
from ..times import parse_time
from ..views.records import RECORD_KIND, SENDABLE_FIELDS
from .typed import (
    Unsendable,
    body_arguments,
    export_body,
    export_ids,
    export_properties,
    typed_properties,
    unsendable,
)


def name_id(namespace: uuid.UUID, name: str) -> str:
    """``str(uuid.uuid5(namespace, name))``, the text of a name-based id (a copy's, an import's), without
    ``uuid.UUID`` (most of what ``uuid5`` costs), once per copied message. tests/core/operations/test_copies.py
    checks the two agree."""
    digest = bytearray(hashlib.sha1(namespace.bytes + name.encode(), usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def to_message(item: Any) -> Any:
    """Anything a user may hand us -> a ServiceBusMessage.

    str/bytes become the body; a dict with a ``body`` key is a record (the schema's fields
    are applied); any other dict, list or number is sent as JSON.
    """
    if isinstance(item, (ServiceBusMessage, AmqpAnnotatedMessage)):
        return item
    if isinstance(item, Unsendable):
        raise InvalidInputError(item.reason)
    if isinstance(item, (str, bytes, bytearray)):
        return ServiceBusMessage(bytes(item) if isinstance(item, bytearray) else item)
    if isinstance(item, dict):
        if "body" in item or "body_base64" in item:
            return _from_record(item)
        return ServiceBusMessage(_json(item), content_type="application/json")
    if item is None:
        raise InvalidInputError("Cannot send None: give a body (str, bytes), a record or a JSON value.")
    return ServiceBusMessage(_json(item), content_type="application/json")


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"Cannot encode {type(value).__name__} as JSON: {exc}") from None


# The record's sendable string fields (the rest are applied one by one below).
_RECORD_KEYS = tuple(f for f in SENDABLE_FIELDS if RECORD_KIND[f] == "string")


def _from_record(record: dict[str, Any]) -> Any:
    typed = export_body(record)
    try:
        props = _properties(record)
        if typed is not None:  # an export's value or sequence body: sent as that kind again
            return _typed_message(record, body_arguments(typed), props)
    except Unsupported as exc:
        raise InvalidInputError(unsendable(record.get("message_id"), exc).reason) from None
    body = record.get("body")
    if body is None or (isinstance(body, float) and body != body):  # NaN from pandas
        text = record.get("body_text")
        encoded = record.get("body_base64")  # binary bodies in JSON exports
        if isinstance(encoded, str):
            body = base64.b64decode(encoded)
        elif text is None or (isinstance(text, float) and text != text):
            raise InvalidInputError("A record needs a body (bytes or str).")
        else:
            body = text
    if not isinstance(body, (str, bytes, bytearray, memoryview)):
        body = _json(body)
    kwargs: dict[str, Any] = {}
    for key in _RECORD_KEYS:
        value = record.get(key)
        if value is not None and value == value:  # skip None and NaN
            kwargs[key] = str(value)
    ttl = record.get("time_to_live")
    if ttl is not None and ttl == ttl:
        kwargs["time_to_live"] = ttl if isinstance(ttl, dt.timedelta) else dt.timedelta(seconds=float(ttl))
    scheduled = record.get("scheduled_enqueue_time")
    if scheduled is not None and scheduled == scheduled:
        kwargs["scheduled_enqueue_time_utc"] = as_datetime(scheduled)
    if props:
        kwargs["application_properties"] = props
    kwargs.update(export_ids(record))  # an id an export recorded as a ulong, uuid or binary
    return ServiceBusMessage(bytes(body) if isinstance(body, (bytearray, memoryview)) else body, **kwargs)


def _properties(record: dict[str, Any]) -> dict[Any, Any]:
    """A record's application properties as sent: with the types an export recorded, else as given."""
    typed = export_properties(record)
    props = record.get("application_properties")
    # Byte-string keys are kept as they are: a copy's trace context, written as the SDK writes its own
    # (core/tracing.py renew_context), so the SDK's setdefault finds it.
    context = {k: v for k, v in props.items() if isinstance(k, bytes)} if isinstance(props, dict) else {}
    if typed is not None:
        return {**typed_properties(typed), **context}
    return {k if isinstance(k, bytes) else str(k): v for k, v in props.items()} if isinstance(props, dict) else {}


def _typed_message(record: dict[str, Any], body: dict[str, Any], props: dict[str, Any]) -> Any:
    """A record whose body is an AMQP value or sequence: its fields set on a message of that body."""
    message = as_service_bus_message(AmqpAnnotatedMessage(**body))
    for key in _RECORD_KEYS:
        value = record.get(key)
        if value is not None and value == value:
            setattr(message, key, str(value))
    ttl = record.get("time_to_live")
    if ttl is not None and ttl == ttl:
        message.time_to_live = ttl if isinstance(ttl, dt.timedelta) else dt.timedelta(seconds=float(ttl))
    scheduled = record.get("scheduled_enqueue_time")
    if scheduled is not None and scheduled == scheduled:
        message.scheduled_enqueue_time_utc = as_datetime(scheduled)
    if props:
        message.application_properties = props
    for key, value in export_ids(record).items():
        setattr(message, key, value)
    return message


def as_datetime(value: Any, name: str = "scheduled_enqueue_time") -> dt.datetime:
    """When a message is scheduled for: a time pointing into the future in the kit's grammar (a
    datetime, ISO 8601 text, ``+2h``: ``times.parse_time``) or a pandas Timestamp; aware, in UTC."""
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    return parse_time(value, future=True, name=name)


def iter_input(messages: Any) -> Iterator[Any]:
    """Lazily yield items from lists, generators, pandas DataFrames or a single item."""
    if hasattr(messages, "to_dict") and hasattr(messages, "columns"):  # a DataFrame, row by row
        columns = list(messages.columns)
        for row in messages.itertuples(index=False, name=None):
            yield dict(zip(columns, row, strict=True))
        return
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
        yield messages
        return
    yield from messages


def message_id(msg: Any) -> str | None:
    """A message's id as text (None when it has none)."""
    mid = getattr(msg, "message_id", None)
    return str(mid) if mid is not None else None
