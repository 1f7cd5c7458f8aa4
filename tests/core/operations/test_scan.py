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


def _every_number(client: ServiceBusClient, queue: str) -> list[int]:
    """Every message's sequence number, read with the SDK's own peeks (not the scanner)."""
    out: list[int] = []
    with client.get_queue_receiver(queue) as r:
        while got := r.peek_messages(max_message_count=250, sequence_number=out[-1] + 1 if out else 1):
            out.extend(int(m.sequence_number) for m in got)
    return out


def test_a_scan_again_peeks_its_windows_at_once_and_still_finds_what_changed(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first scan of an entity peeks one page alone (where does it start, how dense is it); a
    scan of it again on the same connection peeks its windows at once from what the first found, when
    the entity ran past that page. A guess: messages gone from the start, new ones below and beyond,
    or none at all, are read right."""
    from sbnotebook.core.operations import scan as scan_module

    started: list[int] = []  # where each peek of a scan started, in order
    returned: list[int] = []  # how many peeks had started when each returned
    peek = scan_module._Pager.peek

    async def counted(self: scan_module._Pager, first: int, count: int) -> list[object]:
        started.append(first)
        got = await peek(self, first, count)
        returned.append(len(started))
        return list(got)

    def peeks_at_once() -> tuple[list[int], int]:
        """A whole scan's sequence numbers, and how many peeks it had started when its first returned."""
        started.clear()
        returned.clear()
        seqs = _seqs(list(core.scan("q", connection=live)))
        return seqs, returned[0]

    monkeypatch.setattr(scan_module._Pager, "peek", counted)
    live = core.connect(emulator.connection_string, warm=False)
    core.send("q", ["a", "b"], connection=live)
    for _ in range(2):  # an entity that ends within its first page is not remembered: one page alone
        seqs, at_once = peeks_at_once()
        assert seqs == _every_number(client, "q") and len(seqs) == 2 and at_once == 1
    core.send("q", [f"m{i}" for i in range(1998)], connection=live)
    seqs, at_once = peeks_at_once()
    assert seqs == _every_number(client, "q") and len(seqs) == 2000 and at_once == 1
    seqs, at_once = peeks_at_once()
    assert seqs == _every_number(client, "q") and at_once == scan_module.DEFAULT_MAX_IN_FLIGHT

    with client.get_queue_receiver("q", max_wait_time=3) as r:  # the first 1,200 gone
        done = 0
        while done < 1200:
            got = r.receive_messages(max_message_count=min(100, 1200 - done), max_wait_time=3)
            for m in got:
                r.complete_message(m)
            done += len(got)
    core.send("q", [f"n{i}" for i in range(700)], connection=live)
    seqs, at_once = peeks_at_once()
    assert seqs == _every_number(client, "q") and len(seqs) == 1500 and at_once > 1

    assert core.purge("q", connection=live).ok
    assert peeks_at_once()[0] == []
    core.send("q", [f"p{i}" for i in range(300)], connection=live)
    seqs, at_once = peeks_at_once()  # the empty entity was forgotten: one page alone again
    assert seqs == _every_number(client, "q") and len(seqs) == 300 and at_once == 1
