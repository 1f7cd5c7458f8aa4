"""The one "copy first, then complete" (core.copy_then_complete): a copy confirmed completes its
original; a copy not confirmed leaves the original locked, untouched; a copy sent for an original
that can no longer be completed is reported duplicated, never hidden."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

from sbnotebook import core
from sbnotebook.core.amqp_codec import read_message
from sbnotebook.core.operations.copies import DEAD_LETTER_PROPERTIES, ORIGINAL_ID, RESUBMIT_COUNT
from sbnotebook.core.operations.messages import name_id
from sbnotebook.core.sdk.encoded import encoded, keep_encoded
from sbnotebook.core.sdk.messages import WRAP_SOURCE, amqp_properties
from sbnotebook.emulator import Emulator
from tests.waiting import wait_until


def test_the_copy_is_sent_first_and_the_original_completed_second(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["a", "b"], connection=cs)
    with core.receive("q", max_messages=2, wait_seconds=5, connection=cs) as batch:
        copies = [(i, core.copy_message(m)) for i, m in enumerate(batch.messages)]
        report = core.copy_then_complete(batch, copies, "fwd-dst")
    assert [(o.outcome, o.index) for o in report] == [("completed", 0), ("completed", 1)]
    assert emulator.broker.counts("q")["active"] == 0
    moved = core.peek("fwd-dst", connection=cs).records
    assert sorted(r["body_text"] for r in moved) == ["a", "b"]
    assert all(r["application_properties"]["sbnotebook-resubmit-count"] == "1" for r in moved)


def test_a_copy_not_confirmed_leaves_its_original_where_it_was(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["too big a copy", "fine"], connection=cs)
    with core.receive("q", max_messages=2, wait_seconds=5, connection=cs) as batch:
        too_big = ServiceBusMessage(b"x" * (2 * 1024 * 1024))  # over the entity's message size limit
        copies = [(0, too_big), (1, core.copy_message(batch.messages[1]))]
        report = core.copy_then_complete(batch, copies, "fwd-dst")
        assert [(o.outcome, o.index) for o in report] == [("failed", 0), ("completed", 1)]
        assert batch.complete(0).outcomes[0].outcome == "completed"  # the original was still locked, not settled


def test_no_copy_sent_at_all_raises_and_touches_no_original(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["keep me"], connection=cs)
    with core.receive("q", max_messages=1, wait_seconds=5, connection=cs) as batch:
        with pytest.raises(core.EntityNotFoundError):
            core.copy_then_complete(batch, [(0, core.copy_message(batch.messages[0]))], "no-such-queue")
        assert batch.complete(0).outcomes[0].outcome == "completed"


def test_a_copy_sent_for_an_original_already_settled_is_reported_duplicated(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["twice"], connection=cs)
    with core.receive("q", max_messages=1, wait_seconds=5, connection=cs) as batch:
        batch.complete(0)
        report = core.copy_then_complete(batch, [(0, core.copy_message(batch.messages[0]))], "fwd-dst")
    (outcome,) = report
    assert outcome.outcome == "duplicated" and not report.ok
    assert [r["body_text"] for r in core.peek("fwd-dst", connection=cs).records] == ["twice"]


def test_no_copy_is_sent_for_an_original_whose_lock_has_lapsed(emulator: Emulator) -> None:
    """Its original comes back whatever is sent, so a copy would be a second one: the row is
    reported lock_lost, the target left empty, the original back in its queue."""
    cs = emulator.connection_string
    core.send("short", ["late"], connection=cs)  # a 1 s lock
    with core.receive("short", max_messages=1, wait_seconds=5, auto_renew=False, connection=cs) as batch:
        wait_until(lambda: batch.seconds_left()[0] == 0.0)  # lapsed by this machine's clock
        wait_until(lambda: emulator.broker.counts("short")["active"] == 1)  # and taken back by the broker
        report = core.copy_then_complete(batch, [(0, core.copy_message(batch.messages[0]))], "fwd-dst")
    assert [(o.outcome, o.index) for o in report] == [("lock_lost", 0)] and not report.ok
    assert emulator.broker.counts("fwd-dst")["active"] == 0
    assert emulator.broker.counts("short")["active"] == 1


def _reference_copy(msg: Any, new_id: str) -> ServiceBusMessage:
    """The copy as the public constructor makes it (what copy_message built before it skipped the
    property setters): the specification the faster copy must encode to, byte for byte."""
    props: dict[str, Any] = {}
    for key, value in (msg.application_properties or {}).items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name.lower() in DEAD_LETTER_PROPERTIES:
            continue
        props[name] = value.decode() if isinstance(value, bytes) else value
    props[RESUBMIT_COUNT] = int(props.get(RESUBMIT_COUNT, 0)) + 1
    props.setdefault(ORIGINAL_ID, str(msg.message_id))
    body = b"".join(bytes(b) for b in msg.body)  # a data body (values and sequences: checked on their own)
    return ServiceBusMessage(
        body,
        content_type=msg.content_type,
        subject=msg.subject,
        correlation_id=msg.correlation_id,
        session_id=msg.session_id,
        partition_key=msg.partition_key,
        to=msg.to,
        reply_to=msg.reply_to,
        reply_to_session_id=msg.reply_to_session_id,
        application_properties=props,
        message_id=new_id,
    )


def _encoded(message: ServiceBusMessage) -> bytes:
    out = bytearray()
    encode_payload(out, PyamqpTransport.to_outgoing_amqp_message(message.raw_amqp_message))
    return bytes(out)


def test_a_copy_encodes_as_the_public_constructor_would_make_it(emulator: Emulator) -> None:
    keep_encoded()  # as a kit connection does: the SDK's peeks below keep each message's bytes
    full = {
        "content_type": "application/json",
        "subject": "order",
        "correlation_id": "corr",
        "to": "there",
        "reply_to": "back",
        "reply_to_session_id": "rs",
        "application_properties": {
            "n": 7,
            "f": 1.5,
            "flag": True,
            "text": "t",
            "DeadLetterReason": "gone",
            "deadlettererrordescription": "dropped from the copy",
            RESUBMIT_COUNT: 2,
        },
    }
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(b"\x00\x01 bytes", message_id="full", **full),  # type: ignore[arg-type]
                    ServiceBusMessage("plain"),
                    AmqpAnnotatedMessage(value_body={"k": [1, 2]}, properties={"message_id": "value"}),
                    AmqpAnnotatedMessage(sequence_body=[[1, "a"]]),
                ]
            )
        with client.get_queue_sender("sq") as sender:
            sender.send_messages(ServiceBusMessage("in a session", session_id="s-1", partition_key="s-1", **full))  # type: ignore[arg-type]
        with client.get_queue_receiver("q") as receiver:
            received = receiver.peek_messages(max_message_count=10)
        with client.get_queue_receiver("sq", session_id="s-1") as receiver:
            received += receiver.peek_messages(max_message_count=10)
    assert len(received) == 5
    for msg in [*received, ServiceBusMessage("no properties"), ServiceBusMessage("some", subject="s", to="t")]:
        # What copy_message reads of the original at once: what the getters say, one by one.
        assert amqp_properties(msg) == {
            "message_id": msg.message_id,
            "content_type": msg.content_type,
            "subject": msg.subject,
            "correlation_id": msg.correlation_id,
            "group_id": msg.session_id,
            "to": msg.to,
            "reply_to": msg.reply_to,
            "reply_to_group_id": msg.reply_to_session_id,
        }
    for msg in received:
        for kept in (False, True):
            copy = core.copy_message(msg, keep_message_id=kept, source="q")
            assert isinstance(copy, ServiceBusMessage)
            if msg.body_type == AmqpMessageBodyType.DATA:
                assert _encoded(copy) == _encoded(_reference_copy(msg, str(copy.message_id)))
        assert copy.message_id == msg.message_id  # kept
    for msg in received[
        2:4
    ]:  # a value, a sequence: the same kind and content (tests/core/incidents/test_typed_copies.py)
        copy, original = read_message(_encoded(core.copy_message(msg))), read_message(encoded(msg) or b"")
        assert (copy.kind, copy.value, copy.sequence) == (original.kind, original.value, original.sequence)
        assert copy.kind in ("value", "sequence")
    full_copy = core.copy_message(received[0], source="q")
    assert full_copy.application_properties[RESUBMIT_COUNT] == 3
    assert "DeadLetterReason" not in full_copy.application_properties
    assert core.copy_message(received[4]).session_id == "s-1" and received[4].partition_key == "s-1"


def test_the_sdk_constructor_path_copies_rely_on_is_still_there() -> None:
    source = inspect.getsource(ServiceBusMessage.__init__)
    for line in WRAP_SOURCE:
        assert line in source, f"ServiceBusMessage.__init__ no longer has {line!r}: see sbnotebook/core/sdk/messages.py"


def test_copys_max_in_flight_bounds_its_sends_and_its_old_name_concurrency_sets_it(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """core.copy(max_in_flight=) bounds the sends in flight (the report's peak says how many were);
    its old name concurrency= (ignored before 0.2.0) sets it now, saying once what replaced it. With
    each reply 100 ms late the batches of a 300-message copy overlap (a page of 10 KB messages is ten
    batches, the second ready long before the first is answered): 4 allowed, more than one flies."""
    from sbnotebook.core import renames

    monkeypatch.setattr(renames, "WARNED", set())
    cs = emulator.connection_string
    core.send("q", [f"{i:04d}" + "x" * 10_000 for i in range(300)], connection=cs)
    emulator.latency_ms = 100
    try:
        wide = core.copy("q", "once", max_in_flight=4, resume=False, connection=cs)
        with pytest.warns(
            FutureWarning, match=r"core\.copy\(concurrency=\) is deprecated: use core\.copy\(max_in_flight=\)"
        ):
            narrow = core.copy("q", "once", concurrency=1, resume=False, connection=cs)
    finally:
        emulator.latency_ms = 0
    assert wide.ok and wide.count("sent") == 300 and wide.stats["peak_in_flight"] > 1, wide.stats
    assert narrow.ok and narrow.count("sent") == 300 and narrow.stats["peak_in_flight"] == 1, narrow.stats
    assert emulator.broker.counts("once")["active"] == 600 and emulator.broker.counts("q")["active"] == 300
    with pytest.raises(TypeError, match="not also concurrency="):
        core.copy("q", "once", concurrency=1, max_in_flight=2, connection=cs)


@pytest.mark.timeout(60)
def test_a_failure_in_the_copys_reader_fails_the_copy_instead_of_leaving_it_waiting(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader that peeks ahead hands pages to the sender through a queue: a failure outside the
    peek itself (here the translation of the broker's refusal, made to fail as a bug in it would)
    ended the reader with nothing in the queue, and the copy waited for a page for ever."""
    from sbnotebook.core.incidents.copy import read_ahead as copy_peeks

    def broken(*args: Any) -> None:
        raise RuntimeError("translating the refusal failed")

    monkeypatch.setattr(copy_peeks, "sessions_refused", broken)
    cs = emulator.connection_string
    core.send("sq", [{"body": "a", "session_id": "s1"}], connection=cs).raise_for_failures()
    with pytest.raises(core.SbError, match="translating the refusal failed"):
        core.copy("sq", "once", resume=False, connection=cs)
    assert emulator.broker.counts("once")["active"] == 0 and emulator.broker.counts("sq")["active"] == 1


def test_name_id_is_uuid5s_text() -> None:
    """The copies' and imports' name-based ids, made without ``uuid.UUID``, are ``uuid5``'s, for text
    of any length and letters (a wrong version or variant bit, or a digest cut short, would differ)."""
    namespace = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41")
    names = ["", "1", "orders/$deadletterqueue|42|m-1|0", "Ünïcødé|7", "x" * 1000, *map(str, range(200))]
    for name in names:
        assert name_id(namespace, name) == str(uuid.uuid5(namespace, name))
    assert name_id(uuid.uuid4(), "1") != name_id(namespace, "1")
    broken = name_id(namespace, "1").replace("-5", "-4", 1)  # the version nibble, changed: told apart
    assert broken != str(uuid.uuid5(namespace, "1"))
