"""%sb_trace and core.journey: a poison message's journey from send to dead-letter to resubmit and
the copy's completion, in order, read from the original and from the copy; on Azure (no journey to
read) what the message itself carries."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core.operations import journey as journeys
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import magic_fails
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded
MAX_DELIVERY_COUNT = 10  # queue q's (the emulator's default)


def _poison(client: ServiceBusClient, message_id: str) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage('{"order": 1}', message_id=message_id))
    with client.get_queue_receiver("q") as r:
        for _ in range(MAX_DELIVERY_COUNT):
            (msg,) = r.receive_messages(max_message_count=1, max_wait_time=30)
            r.abandon_message(msg)


def poison_resubmit_complete(ip: Any, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch) -> Any:
    """poison-1 abandoned to its MaxDeliveryCount, resubmitted with %sb_resubmit, its copy completed:
    the copy as received."""
    _poison(client, "poison-1")
    answer(monkeypatch, "resubmit")
    line(ip, "sb_resubmit q/$DeadLetterQueue")
    with client.get_queue_receiver("q") as r:
        (copy,) = r.receive_messages(max_message_count=1, max_wait_time=30)
        r.complete_message(copy)
    return copy


def _events(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    counts = [None if pd.isna(c) else int(c) for c in frame["delivery_count"]]
    return list(zip(frame["event"], frame["entity"], counts, frame["reason"].fillna(""), strict=True))


@pytest.mark.servicebus_clock("manual")
def test_a_poison_messages_journey_from_send_to_resubmit_from_either_end(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    copy = poison_resubmit_complete(ip, client, monkeypatch)
    capsys.readouterr()
    frame = line(ip, "sb_trace q --message-id poison-1")
    assert "the journey's timeline: 27 events" in capsys.readouterr().out
    assert [t.name for t in frame.attrs["timeline"].data][:3] == ["accepted", "delivered", "abandoned"]
    expected: list[tuple[str, str, int | None, str]] = [("accepted", "q", None, "")]
    for n in range(1, MAX_DELIVERY_COUNT + 1):
        expected += [("delivered", "q", n, ""), ("abandoned", "q", n, "")]
    expected += [
        ("dead_lettered", "q", MAX_DELIVERY_COUNT, "MaxDeliveryCountExceeded"),
        ("delivered", "q/$DeadLetterQueue", MAX_DELIVERY_COUNT + 1, ""),  # the kit's resubmit takes it
        ("accepted", "q", None, ""),  # its copy
        ("completed", "q/$DeadLetterQueue", MAX_DELIVERY_COUNT + 1, ""),  # copy first, then complete
        ("delivered", "q", 1, ""),
        ("completed", "q", 1, ""),
    ]
    assert _events(frame) == expected
    assert list(frame["time"]) == sorted(frame["time"])
    copies = frame[frame["message_id"] == copy.message_id]
    assert list(copies["event"]) == ["accepted", "delivered", "completed"]
    assert set(copies["original_message_id"]) == {"poison-1"}
    assert frame["operation"].iloc[-4] == journeys.COPY_SENT.format(original="poison-1")
    assert frame["operation"].iloc[-3] == journeys.COMPLETED_AFTER_COPY
    # The same journey from the copy's end, and from the original's sequence number in the DLQ
    assert _events(line(ip, f"sb_trace q --message-id {copy.message_id}")) == expected
    seq = int(frame["sequence_number"].iloc[0])
    assert _events(line(ip, f"sb_trace q/$DeadLetterQueue --sequence-number {seq}")) == expected
    # ...and a message that was never poisoned has another journey (the check can fail)
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage("fine", message_id="fine-1"))
    assert _events(line(ip, "sb_trace q --message-id fine-1")) == [("accepted", "q", None, "")]


def test_sb_trace_names_one_message(ip: Any, sb: SbMagics) -> None:
    assert "one of the arguments" in magic_fails(ip, "sb_trace q")
    assert "not allowed with" in magic_fails(ip, "sb_trace q --message-id a --sequence-number 1")
    assert "trace id" in magic_fails(ip, "sb_trace q --trace-id nothex")
    with pytest.raises(core.InvalidInputError):
        core.journey("q", connection=sb.conn())


def test_nothing_noted_says_so(ip: Any, sb: SbMagics, capsys: Any) -> None:
    frame = line(ip, "sb_trace q --message-id never-sent")
    assert frame.empty and list(frame.columns) == list(journeys.COLUMNS)
    assert "noted nothing of this message in q" in capsys.readouterr().out


def test_on_azure_the_rows_are_what_the_message_carries(emulator: Emulator, client: ServiceBusClient) -> None:
    """Service Bus has no journey to read: the message found by peeking tells when it was enqueued,
    its deliveries so far and why it was dead-lettered (run here against the emulator's messages)."""
    with client.get_queue_sender("once") as s:
        s.send_messages(ServiceBusMessage("x", message_id="az-1", application_properties={"traceparent": TRACE}))
    with client.get_queue_receiver("once") as r:
        (msg,) = r.receive_messages(max_message_count=1, max_wait_time=30)
        r.abandon_message(msg)
    conn = core.connect(emulator.connection_string)
    for ask in ({"message_id": "az-1"}, {"trace_id": TRACE.split("-")[1]}, {"sequence_number": msg.sequence_number}):
        found = journeys._from_message(conn, core.EntityPath.parse("once"), **{**NONE, **ask})
        assert found.source == "message" and found.notes[0] == journeys.ON_AZURE
        assert [(r["event"], r["entity"], r["delivery_count"], r["reason"]) for r in found.rows] == [
            ("enqueued", "once/$deadletterqueue", None, None),
            ("delivered", "once/$deadletterqueue", 1, None),
            ("dead_lettered", "once/$deadletterqueue", 1, "MaxDeliveryCountExceeded"),
        ]
        assert found.rows[0]["traceparent"] == TRACE
    missing = journeys._from_message(conn, core.EntityPath.parse("once"), **{**NONE, "message_id": "nobody"})
    assert missing.rows == [] and "No such message" in missing.notes[-1]


TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
NONE: dict[str, Any] = {"message_id": None, "sequence_number": None, "trace_id": None}
