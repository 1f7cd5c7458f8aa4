"""The one scanner: complete, ordered, disjoint pages, however the sequence numbers are spread."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import InvalidInputError
from sbnotebook.emulator import Emulator


def _seqs(pages: list[list[dict]]) -> list[int]:  # type: ignore[type-arg]
    return [int(r["sequence_number"]) for p in pages for r in p]


@pytest.mark.parametrize("max_in_flight", [1, 4])
def test_scan_returns_every_message_once_in_order(emulator: Emulator, max_in_flight: int) -> None:
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(1300)], connection=cs)
    pages = list(core.scan("q", max_in_flight=max_in_flight, connection=cs))
    seqs = _seqs(pages)
    assert len(seqs) == 1300 and seqs == sorted(set(seqs))
    assert all(len(p) <= core.PAGE_SIZE for p in pages)


def test_scan_over_gaps_and_interleaved_entities(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    for i in range(6):  # another entity's messages in between, then a big hole
        core.send("q", [f"a{i}-{k}" for k in range(100)], connection=cs)
        core.send("once", [f"b{i}-{k}" for k in range(300)], connection=cs)
    with client.get_queue_receiver("q", max_wait_time=3) as r:  # complete a stretch in the middle
        done = 0
        while done < 250:
            got = r.receive_messages(max_message_count=100, max_wait_time=3)
            for m in got:
                if 150 <= done < 400:
                    r.complete_message(m)
                else:
                    r.abandon_message(m)
                done += 1
    expected = _seqs([core.peek("q", max_messages=10_000, connection=cs).records])
    scanned = _seqs(list(core.scan("q", max_in_flight=4, page_size=50, connection=cs)))
    assert scanned == expected and len(scanned) == len(set(scanned))


def test_scan_bounds_limit_and_states(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(600)], connection=cs)
    first = core.peek("q", max_messages=1, connection=cs).records[0]["sequence_number"]
    ranged = _seqs(
        list(core.scan("q", from_sequence_number=first + 100, before_sequence_number=first + 400, connection=cs))
    )
    assert ranged == list(range(first + 100, first + 400))
    assert len(core.scan_records("q", max_messages=333, max_in_flight=3, connection=cs)) == 333
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        for m in r.receive_messages(max_message_count=5, max_wait_time=3):
            r.defer_message(m)
    deferred = core.scan_records("q", states=["deferred"], connection=cs)
    assert len(deferred) == 5 and {r["state"] for r in deferred} == {"deferred"}
    seen: list[int] = []
    list(core.scan("q", progress=seen.append, connection=cs))
    assert seen[-1] == 600 and seen == sorted(seen)


def test_scan_rejects_bad_arguments(emulator: Emulator) -> None:
    cs = emulator.connection_string
    bad = (
        {"max_messages": 0},
        {"max_in_flight": 0},
        {"page_size": 251},
        {"from_sequence_number": -1},
        {"states": ["gone"]},
    )
    for kwargs in bad:
        with pytest.raises(InvalidInputError):
            list(core.scan("q", connection=cs, **kwargs))  # type: ignore[arg-type]


def test_scan_of_a_missing_entity_says_so(emulator: Emulator) -> None:
    with pytest.raises(core.EntityNotFoundError):
        core.scan_records("no-such-queue", connection=emulator.connection_string)
