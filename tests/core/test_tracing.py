"""The kit's operations as OpenTelemetry spans, the SDK's tracing on for the kit's own clients only,
and copies as new sends linked to their original (issue 60, points 1 and 2), on the real SDK and the
emulator, the spans in memory (the plugin's ``servicebus_spans``). What reached the broker is read
back with the SDK's own client, as its bytes: each trace-context key counted where it is encoded.
Without OpenTelemetry: tests/core/test_tracing_absent.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage

from sbnotebook import core
from sbnotebook.core.sdk.encoded import encoded
from sbnotebook.core.tracing import ORIGINAL_TRACEPARENT
from sbnotebook.emulator import Emulator
from sbnotebook.testing.spans import Spans, recording
from tests.helpers import QuickCloseClient
from tests.required import require_module

require_module("opentelemetry.sdk.trace")

DLQ = "q/$deadletterqueue"

BROKER = "ServiceBus.broker."  # the in-process emulator's spans reach the same provider


def _key(name: str) -> bytes:
    """An application property's key as the SDK encodes it: an AMQP str8 (0xa1, its length, UTF-8)."""
    return b"\xa1" + bytes([len(name)]) + name.encode()


def keys_on_the_wire(raw: bytes, name: str) -> int:
    """How often ``name`` is a key of the encoded message (a map of two same keys holds it twice)."""
    return raw.count(_key(name))


def peeked_raw(conn_str: str, entity: str) -> list[tuple[Any, bytes]]:
    """Every message of ``entity``, peeked with the SDK's own client, with its encoded bytes."""
    with QuickCloseClient.from_connection_string(conn_str) as client:
        queue, _, sub = entity.partition("/")
        with client.get_queue_receiver(queue, sub_queue="deadletter" if sub else None) as receiver:
            found = receiver.peek_messages(max_message_count=50)
    out = []
    for msg in found:
        raw = encoded(msg)
        assert raw is not None, "the kit keeps the bytes of what the SDK peeks once a kit connection exists"
        out.append((msg, raw))
    return out


def text(props: dict[Any, Any], key: str) -> str | None:
    value = props.get(key.encode(), props.get(key))
    return value.decode() if isinstance(value, bytes) else value


def links(span: Any) -> dict[str, tuple[int, int]]:
    """A span's links by their ``sbnotebook.link`` (``original``, ``operation``): (trace id, span id)."""
    return {
        str((x.attributes or {}).get("sbnotebook.link")): (x.context.trace_id, x.context.span_id) for x in span.links
    }


def span_id_of(traceparent: str) -> tuple[int, int]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def test_the_wire_count_sees_a_key_written_twice(emulator: Emulator) -> None:
    """The check below can fail: a message whose map holds ``traceparent`` under a text and a byte-string
    key (what a copy held before issue 60, with the SDK's tracing on) counts two on the wire."""
    conn = emulator.connection_string
    with QuickCloseClient.from_connection_string(conn) as client, client.get_queue_sender("q") as sender:
        twice = ServiceBusMessage("x", application_properties={"traceparent": "a", b"traceparent": "b"})  # type: ignore[dict-item]
        sender.send_messages(twice)
    core.connect(conn)  # the kit's connection keeps the bytes of what is peeked
    ((_, raw),) = peeked_raw(conn, "q")
    assert keys_on_the_wire(raw, "traceparent") == 2
    assert keys_on_the_wire(raw, ORIGINAL_TRACEPARENT) == 0  # the longer key is not counted as "traceparent"


def test_each_operation_is_a_span_with_entity_namespace_count_and_outcome(
    emulator: Emulator, servicebus_spans: Spans
) -> None:
    conn = core.connect(emulator.connection_string)
    core.send("q", ["a", "b", "c"], connection=conn).raise_for_failures()
    assert len(core.peek("q", connection=conn).records) == 3
    with core.receive("q", max_messages=3, wait_seconds=5, connection=conn) as batch:
        assert len(batch) == 3
        batch.complete().raise_for_failures()
    kit = [s for s in servicebus_spans if not s.name.startswith(BROKER)]  # the emulator's own: tests/emulator/journey
    names = [s.name for s in kit]
    assert names == ["sbnotebook.send", "sbnotebook.peek", "sbnotebook.receive", "sbnotebook.settle"]
    host = conn.fully_qualified_namespace.rsplit(":", 1)[0]
    for span in kit:
        attrs = span.attributes
        assert attrs["messaging.system"] == "servicebus"
        assert attrs["az.namespace"] == "Microsoft.ServiceBus"
        assert attrs["messaging.destination.name"] == "q"
        assert attrs["server.address"] == attrs["net.peer.name"] == host
        assert attrs["messaging.batch.message_count"] == 3
        assert span.kind.name == "CLIENT"
    send, _, _, settle = kit
    assert (send.attributes["messaging.operation.type"], send.attributes["sbnotebook.outcome"]) == ("send", "ok")
    assert settle.attributes["sbnotebook.settlement"] == "complete"
    assert settle.attributes["sbnotebook.tally"] == "3 completed"
    # Without trace=True the SDK traces nothing: only the kit's spans.
    assert not [n for n in names if n.startswith("ServiceBus.")]


def test_a_failed_operation_is_a_failed_span(emulator: Emulator, servicebus_spans: Spans) -> None:
    with pytest.raises(core.EntityNotFoundError):
        core.peek("no-such-queue", connection=emulator.connection_string)
    (span,) = servicebus_spans.find("sbnotebook.peek")
    assert span.attributes["sbnotebook.outcome"] == "failed"
    assert span.attributes["error.type"] == "EntityNotFoundError"
    assert span.status.status_code.name == "ERROR"


def test_trace_true_puts_the_sdks_spans_under_the_kits_and_only_for_its_clients(
    emulator: Emulator, servicebus_spans: Spans
) -> None:
    conn_str = emulator.connection_string
    conn = core.connect(conn_str, trace=True)
    core.send("q", ["traced"], connection=conn).raise_for_failures()
    (kit,) = servicebus_spans.find("sbnotebook.send")
    sdk = [s for s in servicebus_spans if s.name.startswith("ServiceBus.") and not s.name.startswith(BROKER)]
    assert {s.name for s in sdk} == {"ServiceBus.message", "ServiceBus.send"}
    for span in sdk:  # one trace: the SDK's spans are children of the kit's
        assert span.context.trace_id == kit.context.trace_id
        assert span.parent is not None and span.parent.span_id == kit.context.span_id
    ((msg, raw),) = peeked_raw(conn_str, "q")
    props = msg.application_properties
    (message_span,) = servicebus_spans.find("ServiceBus.message")
    assert span_id_of(text(props, "traceparent") or "") == (message_span.context.trace_id, message_span.context.span_id)
    assert text(props, "Diagnostic-Id") == text(props, "traceparent")
    assert keys_on_the_wire(raw, "traceparent") == keys_on_the_wire(raw, "Diagnostic-Id") == 1

    # The user's own SDK client in the same process: not traced (the switch is the kit's clients' only).
    servicebus_spans.clear()
    with QuickCloseClient.from_connection_string(conn_str) as client, client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("mine"))
    assert [n for n in servicebus_spans.names() if not n.startswith(BROKER)] == []
    mine = [m for m, _ in peeked_raw(conn_str, "q") if str(m) == "mine"]
    assert len(mine) == 1 and not mine[0].application_properties
    # Turned off again: the kit's send is a span, the SDK's are gone.
    core.connect(conn_str, trace=False)
    core.send("q", ["untraced"], connection=conn).raise_for_failures()
    assert [n for n in servicebus_spans.names() if not n.startswith(BROKER)] == ["sbnotebook.send"]


def _dead_letter_one(conn: core.LiveConnection) -> tuple[str, str]:
    """A message sent with the SDK's tracing on, dead-lettered: its message id and traceparent."""
    core.send("q", ["poison"], connection=conn).raise_for_failures()
    with core.receive("q", max_messages=1, wait_seconds=5, connection=conn) as batch:
        batch.dead_letter(reason="bad").raise_for_failures()
        msg = batch.messages[0]
    return str(msg.message_id), text(msg.application_properties, "traceparent") or ""


def _check_copy(
    conn_str: str, entity: str, spans: Spans, operation: str, original: str, original_id: str | None
) -> None:
    """The copy in ``entity``: one traceparent and one Diagnostic-Id, equal, of its own
    ``sbnotebook.message`` span (a child of the original's context, in its trace, linked to it and to
    the ``operation`` span, which it names); the original's context in ``sbnotebook-original-traceparent``."""
    copies = [(m, raw) for m, raw in peeked_raw(conn_str, entity) if str(m) == "poison"]
    assert len(copies) == 1
    msg, raw = copies[0]
    props = msg.application_properties
    assert keys_on_the_wire(raw, "traceparent") == keys_on_the_wire(raw, "Diagnostic-Id") == 1
    mine = text(props, "traceparent")
    assert mine is not None and mine == text(props, "Diagnostic-Id") and mine != original
    assert text(props, ORIGINAL_TRACEPARENT) == original
    if original_id is not None:  # an import gives a fresh id and records no original id (as before)
        assert text(props, "sbnotebook-original-message-id") == original_id
    (made,) = spans.find("sbnotebook.message", message_id=str(msg.message_id))
    assert span_id_of(mine) == (made.context.trace_id, made.context.span_id)
    (op,) = spans.find(f"sbnotebook.{operation}")
    assert made.parent is not None and (made.context.trace_id, made.parent.span_id) == span_id_of(original)
    # linked to the operation, an import's too (its copies are made inside the send it runs)
    assert links(made) == {"original": span_id_of(original), "operation": (op.context.trace_id, op.context.span_id)}
    assert made.attributes["sbnotebook.operation"] == operation
    assert spans.find(trace_id=made.context.trace_id)  # filterable by trace id, as an int
    assert spans.find(trace_id=f"{made.context.trace_id:032x}") == spans.find(trace_id=made.context.trace_id)


def test_a_resubmitted_copy_is_a_new_send_linked_to_its_original(emulator: Emulator, servicebus_spans: Spans) -> None:
    conn_str = emulator.connection_string
    conn = core.connect(conn_str, trace=True)
    original_id, original = _dead_letter_one(conn)
    servicebus_spans.clear()
    core.resubmit(DLQ, connection=conn).raise_for_failures()
    _check_copy(conn_str, "q", servicebus_spans, "resubmit", original, original_id)
    (op,) = servicebus_spans.find("sbnotebook.resubmit")
    assert op.attributes["messaging.destination.name"] == "q"
    assert op.attributes["sbnotebook.source.name"] == DLQ
    assert op.attributes["sbnotebook.tally"] == "1 resubmitted"


def test_a_copied_message_is_a_new_send_linked_to_its_original(emulator: Emulator, servicebus_spans: Spans) -> None:
    conn_str = emulator.connection_string
    conn = core.connect(conn_str, trace=True)
    original_id, original = _dead_letter_one(conn)
    servicebus_spans.clear()
    core.copy(DLQ, "short", connection=conn).raise_for_failures()
    _check_copy(conn_str, "short", servicebus_spans, "copy", original, original_id)


def test_an_imported_message_is_a_new_send_linked_to_its_original(
    emulator: Emulator, servicebus_spans: Spans, tmp_path: Path
) -> None:
    conn_str = emulator.connection_string
    conn = core.connect(conn_str, trace=True)
    _, original = _dead_letter_one(conn)
    export = tmp_path / "dlq.jsonl"
    assert core.export_jsonl(DLQ, export, connection=conn) == 1
    line = json.loads(export.read_text(encoding="utf-8"))
    assert line["application_properties"]["traceparent"] == original  # exported as it was
    servicebus_spans.clear()
    core.import_jsonl("short", export, connection=conn).raise_for_failures()
    _check_copy(conn_str, "short", servicebus_spans, "import", original, None)


def test_a_copy_gets_a_context_only_while_a_tracer_records(emulator: Emulator) -> None:
    """The session's provider records only inside ``recording()`` (the fixture): outside it the kit's
    spans are sampled out, and a copy carries no context of its own, nor its original's."""
    conn_str = emulator.connection_string
    original = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with QuickCloseClient.from_connection_string(conn_str) as client, client.get_queue_sender("q") as sender:
        props = {"traceparent": original, "Diagnostic-Id": original, "tracestate": "k=v"}
        sender.send_messages([ServiceBusMessage("poison", application_properties=props) for _ in range(2)])  # type: ignore[arg-type]
    core.resubmit("q", target="short", max_messages=1, connection=conn_str).raise_for_failures()
    with recording() as spans:
        core.resubmit("q", target="short", max_messages=1, connection=conn_str).raise_for_failures()
    (made,) = spans.find("sbnotebook.message")
    copies = peeked_raw(conn_str, "short")
    assert len(copies) == 2
    (untraced, _), (traced, _) = copies
    assert text(untraced.application_properties, "traceparent") is None
    assert text(traced.application_properties, "traceparent") == text(traced.application_properties, "Diagnostic-Id")
    assert span_id_of(text(traced.application_properties, "traceparent") or "")[1] == made.context.span_id
    for msg in (untraced, traced):
        assert text(msg.application_properties, ORIGINAL_TRACEPARENT) == original
        assert text(msg.application_properties, "tracestate") is None


def test_a_copy_of_a_message_without_a_context_is_a_child_of_the_operation(
    emulator: Emulator, servicebus_spans: Spans
) -> None:
    """No original context to continue: the copy's span is a child of the current span (the resubmit's),
    linked to it only; its context is still its own. The original that carries one (above) is not."""
    conn_str = emulator.connection_string
    with QuickCloseClient.from_connection_string(conn_str) as client, client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("plain"))  # the test's client: the SDK's tracing off
    servicebus_spans.clear()
    core.resubmit("q", target="short", connection=conn_str).raise_for_failures()
    (op,) = servicebus_spans.find("sbnotebook.resubmit")
    (made,) = servicebus_spans.find("sbnotebook.message")
    ((copy, _),) = peeked_raw(conn_str, "short")
    assert text(copy.application_properties, ORIGINAL_TRACEPARENT) is None
    assert span_id_of(text(copy.application_properties, "traceparent") or "") == (
        made.context.trace_id,
        made.context.span_id,
    )
    assert made.parent is not None and made.parent.span_id == op.context.span_id
    assert made.context.trace_id == op.context.trace_id
    assert links(made) == {"operation": (op.context.trace_id, op.context.span_id)}


def test_a_copy_asks_for_a_span_only_of_a_provider_that_may_record() -> None:
    """With OpenTelemetry's stand-ins (its proxy while no provider is set, its no-op one) a copy's
    span could only be a non-recording one: ``renew_context`` makes none. A provider of the SDK may record."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from sbnotebook.core.tracing import provides_spans

    assert not provides_spans(trace.ProxyTracerProvider())
    assert not provides_spans(trace.NoOpTracerProvider())
    assert provides_spans(TracerProvider())
