"""What the tests of time windows share (issue 53): groups of messages sent in one batch each (a
batch's messages share one enqueued time, so each group's first time is a boundary shared by ten
messages), and the broker's state read independently, with the SDK's own peek."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's (the kernel's) local zone is New York's (UTC-5 or -4) for the test: a time typed
    without a zone must still mean UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    assert time.timezone != 0
    yield
    monkeypatch.undo()
    time.tzset()


@dataclass(frozen=True)
class Peeked:
    sequence_number: int
    enqueued: dt.datetime
    body: str
    delivery_count: int


def broker(client: ServiceBusClient, queue: str = "q", sub_queue: str | None = None) -> list[Peeked]:
    """Every message in ``queue`` (or its dead-letter queue), from the SDK's own peek."""
    out: list[Peeked] = []
    seq = 1
    with client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver:  # type: ignore[arg-type]
        while page := receiver.peek_messages(max_message_count=250, sequence_number=seq):
            for m in page:
                assert m.sequence_number is not None and m.enqueued_time_utc is not None
                t = m.enqueued_time_utc
                t = t if t.tzinfo else t.replace(tzinfo=dt.UTC)
                out.append(Peeked(m.sequence_number, t, str(m), m.delivery_count or 0))
            seq = out[-1].sequence_number + 1
    return out


def groups(client: ServiceBusClient, queue: str = "q", names: str = "abc", size: int = 10) -> list[Peeked]:
    """Groups of ``size`` messages (bodies ``a0``..``a9``, ``b0``..), each sent in one batch, 50 ms
    apart; returns the broker's state. The groups' times are checked to be distinct and shared."""
    for name in names:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage(f"{name}{i}") for i in range(size)])
        time.sleep(0.05)
    state = broker(client, queue)
    for name in names:
        assert len({p.enqueued for p in state if p.body.startswith(name)}) == 1, "a batch shares one time"
    return state


def dead_letter_every_tenth(client: ServiceBusClient, total: int, page: int, queue: str = "q") -> None:
    """Receive ``total`` messages of ``groups`` (``page`` at a time): dead-letter those whose number is a
    multiple of ten, complete the rest, so the dead-letter queue's numbers are ten times as sparse."""
    with client.get_queue_receiver(queue) as receiver:
        done = 0
        while done < total:
            for m in receiver.receive_messages(max_message_count=page, max_wait_time=5):
                done += 1
                if int(str(m)[1:]) % 10 == 0:
                    receiver.dead_letter_message(m, reason="tenth")
                else:
                    receiver.complete_message(m)


def first_time(state: list[Peeked], name: str) -> dt.datetime:
    return next(p.enqueued for p in state if p.body == f"{name}0")


def bodies(state: list[Peeked], after: dt.datetime | None = None, before: dt.datetime | None = None) -> list[str]:
    """The bodies in the half-open window, from the broker's state (the expected answer)."""
    return sorted(
        p.body for p in state if (after is None or p.enqueued >= after) and (before is None or p.enqueued < before)
    )


def naive_utc_text(t: dt.datetime) -> str:
    """``t`` as ISO 8601 without a zone (meaning UTC): what an analyst types from a UTC timestamp."""
    return t.astimezone(dt.UTC).replace(tzinfo=None).isoformat()
