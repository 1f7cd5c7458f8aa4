"""Packing messages into batches with one encoding each (``core/sdk/messages.py`` ``add_to_batch``).

The SDK's ``ServiceBusMessageBatch.add_message`` encodes every message twice (to measure it, then
to add it). ``add_to_batch`` repeats its steps with one encoding; these tests check that the batch
it builds is the SDK's, byte for byte, and fail when an installed SDK changes the steps repeated."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import textwrap
from typing import Any

import pytest
from azure.core.settings import settings
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus._common.tracing import trace_message
from azure.servicebus._pyamqp import _encode as pyamqp_encode
from azure.servicebus._pyamqp import utils as pyamqp_utils
from azure.servicebus._pyamqp.message import BatchMessage
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from sbnotebook import core
from sbnotebook.core.sdk import messages as sdk_messages
from sbnotebook.core.sdk.messages import (
    BATCH_ADD_SOURCE,
    BATCH_ENCODE_SOURCE,
    TRACE_SOURCE,
    add_to_batch,
    envelope_growth,
)
from sbnotebook.emulator import Emulator
from tests.core.sdk.test_batch_envelope import encoded_size


def _statements(fn: Any) -> tuple[str, ...]:
    """The function's lines, stripped, without blank lines, whole-line comments or its docstring."""
    body = textwrap.dedent(inspect.getsource(fn))
    doc = inspect.getdoc(fn)
    lines = [line.strip() for line in body.splitlines()]
    if doc:
        start = next(i for i, line in enumerate(lines) if line.startswith(('"""', "'''")))
        end = next(i for i in range(start, len(lines)) if lines[i].endswith(('"""', "'''")) and i > start)
        del lines[start : end + 1]
    return tuple(line for line in lines if line and not line.startswith("#"))


def test_the_steps_add_to_batch_repeats_are_the_installed_sdks() -> None:
    assert _statements(ServiceBusMessageBatch._add) == BATCH_ADD_SOURCE
    for name, statements in BATCH_ENCODE_SOURCE.items():
        assert _statements(getattr(pyamqp_utils, name))[1:] == statements, f"pyamqp utils.{name} changed"


def test_the_tracing_check_add_to_batch_skips_is_the_installed_sdks() -> None:
    lines = [line.strip() for line in inspect.getsource(trace_message).splitlines()]
    start = lines.index(TRACE_SOURCE[0])
    assert tuple(lines[start : start + len(TRACE_SOURCE)]) == TRACE_SOURCE


def _messages(received: Any) -> list[Any]:
    big = ServiceBusMessage(
        b"x" * 1024,
        message_id="m-1",
        session_id="s-1",
        partition_key="s-1",
        subject="order",
        content_type="application/json",
        correlation_id="c",
        reply_to="r",
        to="t",
        application_properties={"n": 1, "f": 2.5, "b": True, "s": "text", "d": dt.datetime(2026, 1, 2, tzinfo=dt.UTC)},
    )
    return [
        big,
        ServiceBusMessage("small", message_id="s"),  # encodes under 256 bytes: the smaller overhead
        AmqpAnnotatedMessage(value_body={"k": [1, 2]}, properties={"message_id": "v"}),
        AmqpAnnotatedMessage(sequence_body=[[1, "a"]]),
        {"body": "from a mapping", "message_id": "map"},
        received,  # a received message sent again: the SDK strips what the broker set
    ]


def _received(emulator: Emulator) -> Any:
    core.send(
        "q",
        [{"body": "was received", "message_id": "rx", "application_properties": {"a": 1}}],
        connection=emulator.connection_string,
    )
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("q") as receiver:
            (msg,) = receiver.peek_messages(max_message_count=1)
            return msg


def _batch(size: int = 1024 * 1024) -> ServiceBusMessageBatch:
    return ServiceBusMessageBatch(max_size_in_bytes=size, amqp_transport=PyamqpTransport)


def test_a_batch_built_with_one_encoding_is_the_sdks_byte_for_byte(emulator: Emulator) -> None:
    received = _received(emulator)
    msg0 = _messages(received)[0]
    theirs, ours = _batch(), _batch()
    for msg in _messages(received):
        theirs.add_message(msg)
    untraced = _batch()  # tracing=False: what core.send does when no tracer is configured (none is here)
    for msg in _messages(received):
        add_to_batch(ours, msg)
        add_to_batch(untraced, msg, tracing=False)
    for mine in (ours, untraced):
        assert len(mine) == len(theirs) == 6
        # Counted whole: the SDK leaves out the envelope's copy of the first message's ids.
        assert mine.size_in_bytes == encoded_size(mine) == theirs.size_in_bytes + envelope_growth(_batch(), msg0)
        assert [bytes(b) for b in mine._message[5]] == [bytes(b) for b in theirs._message[5]]
        assert mine._message[:5] == theirs._message[:5]  # the envelope: the first message's id and session
        assert [m.message_id for m in mine._messages] == [m.message_id for m in theirs._messages]


def _fill(batch: ServiceBusMessageBatch, add: Any) -> int:
    for n in range(100):
        try:
            add(batch, ServiceBusMessage(b"y" * 700, message_id=f"m-{n}"))
        except MessageSizeExceededError:
            return n
    raise AssertionError("a batch of 3,000 bytes took 100 messages of 700")


def test_the_batches_core_send_makes_are_packed_with_one_encoding(emulator: Emulator) -> None:
    """The async sender's batches use the async transport: the same packing steps, so
    ``add_to_batch`` must take its own path for them, not the SDK's (two encodings)."""
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def made() -> ServiceBusMessageBatch:
        async with AsyncClient.from_connection_string(emulator.connection_string) as client:
            async with client.get_queue_sender("q") as sender:
                return await sender.create_message_batch()

    batch = asyncio.run(made())
    encodings = 0
    real = pyamqp_encode.encode_payload

    def counted(output: Any, message: Any) -> Any:
        nonlocal encodings
        encodings += not isinstance(message, BatchMessage)  # the envelope's (reserved once) is not a message's
        return real(output, message)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyamqp_encode, "encode_payload", counted)
        patch.setattr(pyamqp_utils, "encode_payload", counted)
        sdk_messages._batch_parts.cache_clear()  # imported again, with the counting encoder
        try:
            for n in range(3):
                add_to_batch(batch, ServiceBusMessage(f"m{n}"))
        finally:
            sdk_messages._batch_parts.cache_clear()
    assert len(batch) == 3
    assert encodings == 3  # the SDK's add_message encodes each message twice


def test_a_message_that_does_not_fit_is_refused_with_the_envelope_counted() -> None:
    """Refused where the SDK refuses it, or earlier: where the batch, envelope and all, would encode
    over the limit (tests/core/sdk/test_batch_envelope.py fills batches to that edge)."""
    theirs, ours = _batch(3000), _batch(3000)
    assert _fill(ours, add_to_batch) == _fill(theirs, ServiceBusMessageBatch.add_message) == 4
    assert ours.size_in_bytes == encoded_size(ours) <= 3000
    assert encoded_size(theirs) == encoded_size(ours) > theirs.size_in_bytes  # the same batch, counted short


def test_core_send_delivers_batches_packed_this_way(emulator: Emulator) -> None:
    bodies = [f"body {i}" * 40 for i in range(120)]  # several batches' worth of messages of 280 bytes
    conn = emulator.connection_string
    core.send("q", bodies, connection=conn).raise_for_failures()
    assert [r["body_text"] for r in core.peek("q", max_messages=200, connection=conn)] == bodies


class _Span:
    """A tracing plugin, as azure-core takes one (the part of ``AbstractSpan`` the SDK's send calls)."""

    def __init__(self, span: Any = None, name: str = "span", kind: Any = None, **kwargs: Any) -> None:
        self.name = name

    def __enter__(self) -> _Span:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def to_header(self) -> dict[str, str]:
        return {"traceparent": TRACEPARENT}

    def add_attribute(self, key: str, value: Any) -> None:
        pass


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_with_a_tracer_configured_every_message_core_send_packs_is_traced(emulator: Emulator) -> None:
    """core.send reads whether a tracer is configured once per batch, not per message: with one,
    each message still carries the trace context the SDK adds (its Diagnostic-Id property)."""
    conn = emulator.connection_string
    settings.tracing_implementation.set_value(_Span)
    try:
        core.send("q", [f"traced {i}" for i in range(5)], connection=conn).raise_for_failures()
    finally:
        settings.tracing_implementation.unset_value()
    core.send("q", ["not traced"], connection=conn).raise_for_failures()
    records = core.peek("q", max_messages=10, connection=conn)
    assert [(r["application_properties"] or {}).get("Diagnostic-Id") for r in records] == [TRACEPARENT] * 5 + [None]


def test_a_failed_settle_names_the_batch_as_its_lines_do(emulator: Emulator) -> None:
    """A batch of a named connection says NAME:ENTITY (prod:q) in its lines: a settle that fails
    said the bare entity in its reason (q alone reads as the default connection's). The receiver is
    shut under the batch, so the SDK itself refuses the settle; the message stays on the broker."""
    cs = emulator.connection_string
    core.send("q", ["a"], connection=cs).raise_for_failures()
    batch = core.receive("q", max_messages=1, wait_seconds=5, auto_renew=False, connection=cs)
    batch.label = "prod:q"
    batch.connection.run(batch._receiver.close())
    report = batch.complete()
    assert [o.outcome for o in report.outcomes] == ["failed"], report
    assert "(prod:q)" in (report.outcomes[0].error or ""), report.outcomes[0].error
    assert emulator.broker.counts("q")["active"] == 1  # its lock lapses or is given back: not completed
