"""Time windows on the core functions that read or act (issue 53: ``enqueued_after`` /
``enqueued_before`` on peek, export_jsonl, copy, resubmit, discard, group_counts and their async
forms) and ``where`` honesty (a search that raises is counted, one that raises on every message
fails). Real SDK, embedded emulator; the expected messages come from the SDK's own peek, what was
removed from the administration API's counts and a peek of the sequence numbers left."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.core import WhereFailed
from sbnotebook.core.operations.bounds import FANOUT
from sbnotebook.core.views.search import filter_records
from sbnotebook.emulator import Emulator
from tests import windows
from tests.helpers import InterruptAtFirstProgress, counted_peeks, dead_letter, send
from tests.interrupting import answered
from tests.waiting import wait_until
from tests.windows import bodies, broker, dead_letter_every_tenth, first_time, groups, naive_utc_text

new_york = windows.new_york  # the fixture: the process's local zone is New York's


def peeked(cs: str, entity: str = "q", **window: object) -> list[str]:
    page = core.peek(entity, max_messages=1000, connection=cs, **window)  # type: ignore[arg-type]
    return sorted(r["body_text"] for r in page.records)


def test_peek_returns_exactly_the_window_with_a_shared_boundary_in_a_non_utc_kernel(
    emulator: Emulator, client: ServiceBusClient, new_york: None
) -> None:
    cs = emulator.connection_string
    state = groups(client)
    ta, tb, tc = (first_time(state, g) for g in "abc")
    # Ten messages share each boundary: all in at `after`, all out at `before`.
    assert (
        peeked(cs, enqueued_after=naive_utc_text(tb))
        == bodies(state, after=tb)
        == sorted(f"{g}{i}" for g in "bc" for i in range(10))
    )
    assert peeked(cs, enqueued_before=naive_utc_text(tb)) == bodies(state, before=tb) == [f"a{i}" for i in range(10)]
    assert peeked(cs, enqueued_after=ta, enqueued_before=tc) == bodies(state, ta, tc)
    assert peeked(cs, enqueued_after=tb, enqueued_before=tb + dt.timedelta(milliseconds=1)) == bodies(
        state, tb, tb + dt.timedelta(milliseconds=1)
    )
    assert peeked(cs, enqueued_after="1h") == bodies(state)  # an age: everything sent in the last hour
    assert peeked(cs, enqueued_before="1h") == []
    page = core.peek("q", max_messages=3, enqueued_after=tb, connection=cs)
    assert [r["body_text"] for r in page.records] == ["b0", "b1", "b2"]  # the first three, in sequence order
    assert page.window is not None and page.window.after == tb


def test_the_window_is_found_by_bisection_not_by_reading_everything(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = emulator.connection_string
    for g in range(4):
        send(client, "q", *[f"g{g}-{i}" for i in range(500)])
        time.sleep(0.05)
    send(client, "q", *[f"last-{i}" for i in range(20)])
    state = broker(client)
    t_last = next(p.enqueued for p in state if p.body == "last-0")
    peeks = counted_peeks(emulator, monkeypatch)
    assert peeked(cs, enqueued_after=t_last) == bodies(state, after=t_last)
    looked_at = sum(count for _, count in peeks)
    # The snapshot, then at most 3 rounds of FANOUT small probes (log17(2020)), then the window's 20:
    # a whole read peeks all 2,020 messages.
    assert len(peeks) <= 4 + 3 * FANOUT and looked_at < 1200, peeks


def test_a_search_that_fails_on_every_message_fails_and_on_some_is_counted(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    cs = emulator.connection_string
    send(client, "q", *[json.dumps({"n": i, "amount": 5 if i % 2 else "n/a"}) for i in range(6)])
    with pytest.raises(WhereFailed) as failed:
        core.peek("q", where="len(body_json.n) > 1", connection=cs)
    said = str(failed.value)
    assert "TypeError: object of type 'int' has no len()" in said and "sequence number 1" in said
    assert "any of the 6" in said and '{"n": 0' in said
    page = core.peek("q", where="body_json.amount > 1", connection=cs)
    assert [json.loads(r["body_text"])["n"] for r in page.records] == [1, 3, 5]
    assert page.unevaluated == 3 and page.scanned == 6
    ((kind, n),) = page.unevaluated_by_error.items()
    assert n == 3 and kind.startswith("TypeError: '>' not supported")
    assert page.unevaluated_text is not None and page.unevaluated_text.startswith("3 message(s) could not be")
    # A field some messages lack is not an error: "missing" compares false.
    assert core.peek("q", where="body_json.nothing > 1", connection=cs).unevaluated == 0
    assert core.peek("q", where="any(x for x in body_json.nothing)", connection=cs).unevaluated == 0
    with pytest.raises(WhereFailed):
        filter_records([{"body_text": '{"n": 1}', "sequence_number": 1}], "len(body_json.n) > 1")


def test_discard_removes_exactly_the_window_and_gives_the_rest_back(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    cs = emulator.connection_string
    state = groups(client)
    tb, tc = first_time(state, "b"), first_time(state, "c")
    before = admin.get_queue_runtime_properties("q").active_message_count
    report = core.discard("q", enqueued_after=tb, enqueued_before=tc, connection=cs)
    after = broker(client)
    assert report.ok and report.count("discarded") == 10 == before - len(after)
    assert admin.get_queue_runtime_properties("q").active_message_count == before - 10
    assert sorted(p.body for p in after) == bodies(state, before=tb) + bodies(state, after=tc)
    assert {p.sequence_number for p in after} == {p.sequence_number for p in state if not p.body.startswith("b")}
    assert all(p.delivery_count == 0 for p in after)  # a's were locked and given back: no delivery counted
    nothing = core.discard("q", enqueued_after=tb, enqueued_before=tc, connection=cs)
    assert nothing.total == 0 and len(broker(client)) == 20


def test_a_discard_or_resubmit_whose_search_fails_everywhere_removes_nothing(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient, tmp_path: Path
) -> None:
    cs = emulator.connection_string
    send(client, "q", *[json.dumps({"n": i, "amount": 5 if i % 2 else "n/a"}) for i in range(6)])
    dead_letter(client, "q", 6, "bad")
    for act in (core.discard, core.resubmit):
        with pytest.raises(WhereFailed, match="Nothing matched, so nothing was done"):
            act("q/$deadletterqueue", where="len(body_json.n) > 1", connection=cs)
    assert admin.get_queue_runtime_properties("q").dead_letter_message_count == 6
    for act in (core.export_jsonl, core.copy):  # a file, a target: nothing written, nothing sent
        with pytest.raises(WhereFailed):
            act(
                "q/$deadletterqueue",
                str(tmp_path / "x.jsonl") if act is core.export_jsonl else "fwd-dst",
                where="len(body_json.n) > 1",
                connection=cs,
            )
    assert not (tmp_path / "x.jsonl").exists() and broker(client, "fwd-dst") == []
    written = core.export_jsonl("q/$deadletterqueue", tmp_path / "y.jsonl", where="body_json.amount > 1", connection=cs)
    copied = core.copy("q/$deadletterqueue", "fwd-dst", where="body_json.amount > 1", connection=cs)
    assert written == 3 and written.unevaluated == 3 and copied.count("sent") == 3  # type: ignore[attr-defined]
    assert copied.stats["unevaluated"] == 3 and any("could not be evaluated" in n for n in copied.notes)
    report = core.discard("q/$deadletterqueue", where="body_json.amount > 1", connection=cs)
    assert report.count("discarded") == 3 and report.stats["unevaluated"] == 3
    assert any("3 message(s) could not be evaluated" in n for n in report.notes)
    left = broker(client, sub_queue="deadletter")
    assert sorted(json.loads(p.body)["n"] for p in left) == [0, 2, 4]
    assert admin.get_queue_runtime_properties("q").dead_letter_message_count == 3


def test_resubmit_copy_export_and_counts_take_the_window_of_a_dead_letter_queue(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    cs = emulator.connection_string
    state = groups(client)
    dead_letter(client, "q", 30, "bad")  # a dead-letter queue keeps the enqueued times
    dlq = "q/$deadletterqueue"
    tb, tc = first_time(state, "b"), first_time(state, "c")
    b = bodies(state, tb, tc)
    assert peeked(cs, dlq, enqueued_after=tb, enqueued_before=tc) == b
    written = core.export_jsonl(dlq, tmp_path / "b.jsonl", enqueued_after=tb, enqueued_before=tc, connection=cs)
    assert written == 10 and sorted(r["body_text"] for r in core.read_jsonl(tmp_path / "b.jsonl")) == b
    copied = core.copy(dlq, "fwd-dst", enqueued_after=tb, enqueued_before=tc, connection=cs)
    assert copied.count("sent") == 10 and sorted(p.body for p in broker(client, "fwd-dst")) == b
    counted = core.group_counts(dlq, enqueued_after=tb, enqueued_before=tc, connection=cs)
    assert counted.scanned == counted.total == 10 and counted.counts() == {"bad": 10}
    report = asyncio.run(_aresubmit(dlq, cs, tb, tc))
    assert report.count("resubmitted") == 10
    assert sorted(p.body for p in broker(client)) == b
    assert sorted(p.body for p in broker(client, sub_queue="deadletter")) == bodies(state, before=tb) + bodies(
        state, after=tc
    )


async def _aresubmit(dlq: str, cs: str, after: dt.datetime, before: dt.datetime) -> core.Report:
    return await core.aresubmit(dlq, enqueued_after=after, enqueued_before=before, connection=cs)


def test_a_scheduled_message_enqueued_within_the_window_is_found_below_it(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    cs = emulator.connection_string
    with client.get_queue_sender("q") as sender:
        sender.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    state = groups(client, names="ab")
    tb = first_time(state, "b")
    # Numbered first, enqueued in an hour: within "from b on", below b's numbers.
    assert peeked(cs, enqueued_after=tb) == sorted([*bodies(state, after=tb)])
    assert "later" in peeked(cs, enqueued_after=tb + dt.timedelta(minutes=30))


def test_a_windowed_purge_removes_exactly_the_window_by_the_path_it_says(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    cs = emulator.connection_string
    send(client, "q", *[f"a{i}" for i in range(10)])
    with client.get_queue_receiver("q") as r:
        (a0,) = r.receive_messages(max_message_count=1, max_wait_time=5)
        r.defer_message(a0)  # deferred, enqueued with group a
    time.sleep(0.05)
    state = groups(client, names="bc")
    with client.get_queue_sender("q") as s:
        s.schedule_messages(ServiceBusMessage("s"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    state = broker(client)
    tb, tc = first_time(state, "b"), first_time(state, "c")

    def total() -> int:
        props = admin.get_queue_runtime_properties("q")
        return props.active_message_count + props.scheduled_message_count

    before = total()
    # No start: batch delete with the window's end as its cut-off, a0 (deferred) by its number.
    report = core.purge("q", enqueued_before=tb, connection=cs)
    assert report.ok and report.count("purged") == 10 == before - total()
    assert any("deleted on the server" in n for n in report.notes), report.notes
    assert sorted(p.body for p in broker(client)) == sorted([*bodies(state, after=tb)])
    # A start: received with a peek-lock; b's are passed, given back with no delivery counted.
    before = total()
    report = core.purge("q", enqueued_after=tc, connection=cs)
    assert report.ok and report.count("purged") == 11 == before - total()  # c's and s (cancelled)
    assert any("10 message(s) outside the window were locked" in n for n in report.notes), report.notes
    left = broker(client)
    assert sorted(p.body for p in left) == bodies(state, tb, tc) and all(p.delivery_count == 0 for p in left)
    assert {p.sequence_number for p in left} == {p.sequence_number for p in state if p.body.startswith("b")}
    nothing = core.purge("q", enqueued_before=tb, connection=cs)  # gone already: nothing to remove
    assert nothing.total == 0 and len(broker(client)) == 10


def test_a_sparse_dead_letter_queue_is_searched_past_the_count_s_guess(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Every tenth of 300 messages dead-lettered: the DLQ's 30 numbers spread over 1..300, so the
    count's guess of its end (first + 29) is far too low; the search goes on to the real end."""
    cs = emulator.connection_string
    state = groups(client, size=100)
    dead_letter_every_tenth(client, 300, 100)
    dlq = broker(client, sub_queue="deadletter")
    assert len(dlq) == 30 and dlq[-1].sequence_number - dlq[0].sequence_number > 250
    tb, tc = first_time(state, "b"), first_time(state, "c")
    assert (
        peeked(cs, "q/$deadletterqueue", enqueued_after=tb)
        == bodies(dlq, after=tb)
        == sorted(f"{g}{i}" for g in "bc" for i in range(0, 100, 10))
    )
    assert peeked(cs, "q/$deadletterqueue", enqueued_after=tb, enqueued_before=tc) == bodies(dlq, tb, tc)
    assert peeked(cs, "q/$deadletterqueue", enqueued_before=tc) == bodies(dlq, before=tc)


class InterruptOnceDiscarded(InterruptAtFirstProgress):
    """Interrupts at the first progress after a message was discarded (the batches before the
    window, passed and held, come first)."""

    def __call__(self, report: core.Report) -> None:
        if report.count("discarded"):
            super().__call__(report)


def test_an_interrupted_discard_of_a_window_loses_nothing_and_the_same_call_finishes(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """The guarantees of a resubmit: interrupted midway, what was taken is gone, the rest (the window's
    and the others) is still there, given back with no delivery counted; the same call finishes."""
    cs = emulator.connection_string
    state = groups(client, names="ab", size=1000)
    tb = first_time(state, "b")
    emulator.latency_ms = 200
    hook = InterruptOnceDiscarded()
    with answered(hook):
        stopped = core.discard("q", enqueued_after=tb, connection=cs, progress=hook)
    emulator.latency_ms = 0
    assert core.interrupted(stopped), stopped  # its Report, not a KeyboardInterrupt
    wait_until(lambda: not emulator.broker._locks, timeout=30, interval=0.05)  # the locks given back
    middle = broker(client)
    assert 1000 < len(middle) < 2000, len(middle)  # some of b gone, not all
    assert stopped.count("discarded") == 2000 - len(middle)  # the broker's count
    assert [p.body for p in middle if p.body[0] == "a"] == [f"a{i}" for i in range(1000)]
    report = core.discard("q", enqueued_after=tb, connection=cs)
    left = broker(client)
    assert report.ok and report.count("discarded") == len(middle) - 1000
    assert sorted(p.body for p in left) == bodies(state, before=tb)
    assert all(p.delivery_count == 0 for p in left)
