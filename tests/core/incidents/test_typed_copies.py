"""A copy is the same message: body kind and content, every application property with its AMQP type,
through ``core.copy``, ``core.resubmit`` and ``export_jsonl`` + ``import_jsonl`` (issue 55, Why 4).

The source messages are sent by the SDK with typed values, as .NET and JMS senders write them (a
``long`` 5, a ``binary`` that happens to be text, a ``timestamp``, a map or sequence body); what
arrives is read independently of the kit and of the SDK's decoding: the emulator's stored bytes,
decoded by proton, each value with its proton type. On the kit before this: value bodies arrived as
data bodies of JSON text, a ``long`` 5 as an ``int``, a timestamp as a ``long``, binary as a string,
and an import sent every property as a string."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.management import ServiceBusAdministrationClient
from proton import Data

from sbnotebook import core
from sbnotebook.emulator import Emulator

STAMP = 1767225600123  # 2026-01-01T00:00:00.123Z in milliseconds
ID = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41")


def _typed(kind: str, value: Any) -> dict[str, Any]:
    return {TYPE: getattr(AMQPTypes, kind), VALUE: value}


def _properties(n: int) -> dict[str, Any]:
    """Properties of every type, as a .NET sender writes them (``long`` for C# ``long``, even small)."""
    return {
        "n": _typed("int", 3),
        "big": _typed("long", 5),
        "ratio": _typed("double", 2.5),
        "urgent": _typed("boolean", True),
        "region": _typed("string", "eu"),
        "at": _typed("timestamp", STAMP),
        "ref": _typed("uuid", ID),
        "blob": _typed("binary", b"\x00\xff"),
        "text-blob": _typed("binary", b"abc"),  # binary that reads as text: still binary
        "color": _typed("string", "red"),
        "size": _typed("int", 5 + n),  # the topic's SQL filter (size > 3) reads it as a number
    }


def _messages() -> list[Any]:
    value = {"a": _typed("long", 1), "b": [_typed("int", 1), "x"], "c": {"nested": True}}
    return [
        ServiceBusMessage(b"\x01data body", subject="s", application_properties=_properties(0)),
        AmqpAnnotatedMessage(value_body=value, application_properties=_properties(1), properties={"subject": "v"}),
        AmqpAnnotatedMessage(
            sequence_body=[[_typed("int", 1), "a"], [_typed("long", 2)]], application_properties=_properties(2)
        ),
        AmqpAnnotatedMessage(value_body="text as an AMQP value", application_properties=_properties(3)),
    ]


def _send_every_kind(client: ServiceBusClient, entity: str = "q") -> None:
    with client.get_queue_sender(entity) as sender:
        sender.send_messages(_messages())


def _shape(value: Any) -> Any:
    """A proton value with its type, all the way down (proton's int32 equals the int 3)."""
    if isinstance(value, dict):
        return ("map", sorted((repr(_shape(k)), _shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", [_shape(v) for v in value])
    if isinstance(value, memoryview):
        value = bytes(value)
    return (type(value).__name__, value)


def stored(emulator: Emulator, entity: str) -> list[dict[str, Any]]:
    """Each message the broker holds in ``entity``: body sections and application properties as proton
    decodes the stored bytes (not the kit, not the SDK)."""
    broker = emulator.broker
    out = []
    for msg in broker.peek(broker.resolve_source(entity), 1, 1000):
        props = msg.changed_properties if msg.changed_properties is not None else msg.data.sent_properties()
        raw, sections = msg.data.raw_body, []
        while raw:
            d = Data()
            used = d.decode(raw)
            described = d.get_object()
            sections.append((int(described.descriptor), _shape(described.value)))
            raw = raw[used:]
        out.append({"body": sections, "properties": {str(k): _shape(v) for k, v in props.items()}})
    return out


KIT = {"sbnotebook-original-message-id", "sbnotebook-resubmit-count", "DeadLetterReason", "DeadLetterErrorDescription"}


def _without_kit(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "properties": {k: v for k, v in m["properties"].items() if k not in KIT}} for m in messages]


def test_the_sdk_lines_that_keep_encoded_bytes_are_the_installed_sdks() -> None:
    import importlib
    import inspect

    from sbnotebook.core.sdk.encoded import DECODE_CALLS

    for name, lines in DECODE_CALLS.items():
        source = [line.strip() for line in inspect.getsource(importlib.import_module(name)).splitlines()]
        for line in lines:
            assert line in source, f"{name} no longer has {line!r}: update sbnotebook/core/sdk/encoded.py"


def test_a_copy_is_the_same_message(emulator: Emulator, client: ServiceBusClient) -> None:
    _send_every_kind(client)
    report = core.copy("q", "dl-target", connection=emulator.connection_string)
    assert report.count("sent") == 4
    source = stored(emulator, "q")
    assert source[1]["body"][0][0] == 0x77 and source[2]["body"][0][0] == 0x76  # a value, a sequence
    assert source[0]["properties"]["big"] == ("int", 5) and source[0]["properties"]["n"] == ("int32", 3)
    assert _without_kit(stored(emulator, "dl-target")) == source


def test_a_resubmission_is_the_same_message(emulator: Emulator, client: ServiceBusClient) -> None:
    _send_every_kind(client)
    source = stored(emulator, "q")
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        for msg in receiver.receive_messages(max_message_count=4, max_wait_time=5):
            receiver.dead_letter_message(msg, reason="r", error_description="d")
    assert len(stored(emulator, "q/$deadletterqueue")) == 4
    report = core.resubmit("q/$deadletterqueue", target="dl-target", connection=emulator.connection_string)
    assert report.count("resubmitted") == 4
    assert _without_kit(stored(emulator, "dl-target")) == source


def test_an_export_and_import_is_the_same_message(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient, tmp_path: Path
) -> None:
    _send_every_kind(client)
    path = tmp_path / "q.jsonl"
    conn = emulator.connection_string
    assert core.export_jsonl("q", path, connection=conn) == 4
    assert core.import_jsonl("dl-target", path, connection=conn).count("sent") == 4
    assert _without_kit(stored(emulator, "dl-target")) == stored(emulator, "q")
    # Into a topic: the subscription whose SQL filter reads `size > 3` as a number takes every one.
    assert core.import_jsonl("t", path, connection=conn).count("sent") == 4
    assert admin.get_subscription_runtime_properties("t", "sql").active_message_count == 4


def test_the_export_file_records_kinds_and_types_in_readable_json(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    _send_every_kind(client)
    path = tmp_path / "q.jsonl"
    core.export_jsonl("q", path, connection=emulator.connection_string)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    first, value = lines[0], lines[1]
    assert first["application_properties"]["n"] == 3 and first["application_property_types"]["n"] == "int"
    assert first["application_property_types"]["big"] == "long" and first["application_properties"]["urgent"] is True
    assert first["application_properties"]["at"] == "2026-01-01T00:00:00.123+00:00"
    assert first["application_property_types"]["text-blob"] == "binary"
    assert first["application_properties"]["ref"] == str(ID) and first["body_kind"] == "data"
    assert value["body_kind"] == "value" and json.loads(value["body_text"]) == {
        "a": 1,
        "b": [1, "x"],
        "c": {"nested": True},
    }
    assert value["body_amqp"]["map"][0] == [{"string": "a"}, {"long": 1}]
    assert lines[2]["body_kind"] == "sequence" and lines[2]["body_amqp"][1] == [{"long": 2}]


def test_a_file_without_types_is_sent_as_it_says(emulator: Emulator, tmp_path: Path) -> None:
    """A line another tool wrote (no ``application_property_types``): strings stay strings, and
    ``decode_properties`` reads JSON numbers and booleans in them, as before."""
    path = tmp_path / "other.jsonl"
    line = {"body": "hello", "application_properties": {"n": "3", "ok": "true", "name": "x"}}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    conn = emulator.connection_string
    core.import_jsonl("q", path, connection=conn)
    core.import_jsonl("dl-target", path, decode_properties=True, connection=conn)
    assert stored(emulator, "q")[0]["properties"] == {"n": ("str", "3"), "ok": ("str", "true"), "name": ("str", "x")}
    assert stored(emulator, "dl-target")[0]["properties"] == {
        "n": ("int32", 3),
        "ok": ("bool", True),
        "name": ("str", "x"),
    }


@pytest.mark.parametrize(
    "when", [dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 1, 0, 0, 0, 123000, dt.UTC)]
)
def test_a_timestamp_reads_back_to_the_millisecond(when: dt.datetime) -> None:
    from sbnotebook.core.amqp_codec import Typed, form, from_form

    ms = (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    assert from_form("timestamp", form(Typed("timestamp", ms))).value == ms


def _every_type() -> list[Any]:
    from sbnotebook.core.amqp_codec import Typed

    s = Typed("string", "k")
    return [
        Typed("null", None),
        Typed("boolean", False),
        *(Typed(kind, 7) for kind in ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long")),
        Typed("long", -(2**40)),
        Typed("ulong", 2**63),
        Typed("float", 0.5),
        Typed("double", -1e300),
        Typed("double", float("inf")),
        Typed("timestamp", STAMP),
        Typed("uuid", ID),
        Typed("binary", b"\x00" * 300),  # past 255 bytes: the wide encoding
        Typed("string", "é" * 200),
        Typed("symbol", "com.microsoft:timespan"),
        Typed("list", [s, Typed("int", 1), Typed("list", [])]),
        Typed("map", [(s, Typed("map", [(Typed("long", 1), s)]))]),
        Typed("array", [Typed("int", 1), Typed("int", 300)]),
        Typed("array", [s, s]),
        Typed("described", (Typed("symbol", "com.microsoft:timespan"), Typed("long", 10_000_000))),
    ]


def test_every_amqp_type_is_read_and_written_back_with_its_type() -> None:
    """The kit's reader (amqp_codec) against the SDK's encoder given typed values (sdk.encoded), and
    the export's JSON form: each value comes back with its type."""
    from azure.servicebus._pyamqp._encode import encode_value

    from sbnotebook.core.amqp_codec import Typed, decode, from_json, to_json
    from sbnotebook.core.sdk.encoded import Unsupported, sdk_value

    for typed in _every_type():
        out = bytearray()
        encode_value(out, sdk_value(typed))
        back, end = decode(bytes(out))
        assert (back, end) == (typed, len(out)), typed
        assert from_json(json.loads(json.dumps(to_json(typed)))) == typed, typed
    for unwritable in (Typed("char", "x"), Typed("decimal64", b"\x00" * 8), Typed("array", [])):
        with pytest.raises(Unsupported):
            sdk_value(unwritable)
    nan = from_json(json.loads(json.dumps(to_json(Typed("double", float("nan"))))))
    assert nan.type == "double" and nan.value != nan.value


def test_a_message_the_sdk_cannot_send_with_its_types_is_reported_not_changed(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A value body that is a long (the SDK's encoder writes a Python int as an AMQP int): the copy
    of that one fails with the reason; the others are copied, the source is untouched."""
    from proton import Message

    from sbnotebook.emulator.amqp.codec import decode_transfer

    with client.get_queue_sender("q") as sender:
        sender.send_messages(AmqpAnnotatedMessage(value_body={"ok": True}))
    # The SDK cannot send a long value body either: written as a .NET sender would, by proton.
    emulator.broker.send("q", decode_transfer(Message(body=5, inferred=False).encode()))
    assert stored(emulator, "q")[1]["body"] == [(0x77, ("int", 5))]  # proton's long is Python's int
    report = core.copy("q", "dl-target", connection=emulator.connection_string)
    assert report.count("sent") == 1 and report.count("failed") == 1
    (failure,) = report.failures
    assert "value body of type long" in (failure.error or "")
    assert len(stored(emulator, "dl-target")) == 1 and len(stored(emulator, "q")) == 2


def test_an_edited_resubmission_keeps_the_body_kind_and_the_types_it_did_not_edit(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    _send_every_kind(client)
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        for msg in receiver.receive_messages(max_message_count=4, max_wait_time=5):
            receiver.dead_letter_message(msg, reason="r")

    def edit(record: dict[str, Any]) -> dict[str, Any]:
        return {**record, "subject": "fixed", "application_properties": {**record["application_properties"], "x": "1"}}

    source = stored(emulator, "q/$deadletterqueue")
    core.resubmit("q/$deadletterqueue", target="dl-target", edit=edit, connection=emulator.connection_string)
    copies = stored(emulator, "dl-target")
    assert [c["body"] for c in copies] == [s["body"] for s in source]
    for copy, original in zip(copies, _without_kit(source), strict=True):
        assert copy["properties"].pop("x") == ("str", "1")
        assert {k: v for k, v in copy["properties"].items() if k not in KIT} == original["properties"]


def _ids(emulator: Emulator, entity: str) -> list[tuple[Any, Any]]:
    """Each stored message's message id and correlation id, with their types, as proton decodes the
    properties section the broker keeps as sent (not the kit, not the SDK)."""
    broker = emulator.broker
    out = []
    for msg in broker.peek(broker.resolve_source(entity), 1, 1000):
        d = Data()
        d.decode(msg.data.raw_properties)
        fields = d.get_object().value
        out.append(tuple(_shape(fields[i]) if i < len(fields) and fields[i] is not None else None for i in (0, 5)))
    return out


def _send_every_id(client: ServiceBusClient) -> None:
    """Message ids and correlation ids of each type AMQP allows: ulong, uuid, binary (one that reads
    as text too), string; sent through the SDK's raw AMQP message."""
    ids = [(ID, 7), (12345, b"\x00\x01"), (b"binary-id", "text"), ("text-id", ID)]
    with client.get_queue_sender("q") as sender:
        sender.send_messages(
            [AmqpAnnotatedMessage(data_body=b"x", properties={"message_id": m, "correlation_id": c}) for m, c in ids]
        )


def test_message_ids_keep_their_types_through_copy_resubmit_and_export_import(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    """A ulong, uuid or binary message id (or correlation id) stays one in a copy that keeps ids,
    a resubmission and an export + import; a copy with fresh ids keeps the correlation ids' types.
    Before, each came out a string (the SDK reads a binary id as text, the kit wrote str(id))."""
    _send_every_id(client)
    conn = emulator.connection_string
    source = _ids(emulator, "q")
    assert [m for m, _ in source] == [("UUID", ID), ("ulong", 12345), ("bytes", b"binary-id"), ("str", "text-id")]
    assert [c for _, c in source] == [("ulong", 7), ("bytes", b"\x00\x01"), ("str", "text"), ("UUID", ID)]
    assert core.copy("q", "dl-target", keep_message_id=True, connection=conn).count("sent") == 4
    assert _ids(emulator, "dl-target") == source
    core.purge("dl-target", connection=conn)
    assert core.copy("q", "dl-target", resume=False, connection=conn).count("sent") == 4
    fresh = _ids(emulator, "dl-target")
    assert [c for _, c in fresh] == [c for _, c in source] and all(m[0] == "str" for m, _ in fresh)
    # each copy names its original's id as it was (a binary id was the text "b'binary-id'")
    originals = [m["properties"]["sbnotebook-original-message-id"] for m in stored(emulator, "dl-target")]
    assert originals == [("UUID", ID), ("ulong", 12345), ("bytes", b"binary-id"), ("str", "text-id")]
    core.purge("dl-target", connection=conn)
    path = tmp_path / "ids.jsonl"
    assert core.export_jsonl("q", path, connection=conn) == 4
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line.get("message_id_type") for line in lines] == ["uuid", "ulong", "binary", None]
    assert lines[1]["message_id"] == 12345 and lines[3]["correlation_id_type"] == "uuid"
    assert core.import_jsonl("dl-target", path, keep_message_id=True, connection=conn).count("sent") == 4
    assert _ids(emulator, "dl-target") == source
    core.purge("dl-target", connection=conn)
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        for msg in receiver.receive_messages(max_message_count=4, max_wait_time=5):
            receiver.dead_letter_message(msg, reason="r")
    report = core.resubmit("q/$deadletterqueue", target="dl-target", keep_message_id=True, connection=conn)
    assert report.count("resubmitted") == 4
    assert _ids(emulator, "dl-target") == source
    with client.get_queue_receiver("dl-target", max_wait_time=5) as receiver:  # once more, with an edit
        for msg in receiver.receive_messages(max_message_count=4, max_wait_time=5):
            receiver.dead_letter_message(msg, reason="r")

    def edit(record: dict[str, Any]) -> dict[str, Any]:
        return {**record, "subject": "fixed"}

    report = core.resubmit("dl-target/$deadletterqueue", target="q", edit=edit, keep_message_id=True, connection=conn)
    assert report.count("resubmitted") == 4 and _ids(emulator, "q") == source
