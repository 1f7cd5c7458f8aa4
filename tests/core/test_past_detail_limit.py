"""Past the Report's detail limit (10,000 outcomes kept, the rest counted), nothing that must see
every outcome reads only the kept ones: copy-then-complete, resubmit, defer (and its reminders),
schedule and cancel, each on 10,050 messages, with the broker's state read apart from the report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from sbnotebook import core
from sbnotebook.core.outcome import MAX_DETAILS
from sbnotebook.emulator import Emulator
from tests.helpers import emulator_config

N = MAX_DETAILS + 50

pytestmark = pytest.mark.timeout(300)

# q's locks at Service Bus's longest, 5 minutes (the suite's q has 30 s): holding 10,050 locks while
# 10,050 copies are made is CPU-bound, and on a loaded machine one run took 142 s, its renewals late:
# 7,750 locks lapsed. What these tests check is the detail limit, not renewal under starvation.
LONG_LOCKS = emulator_config("detail", {"q": {"LockDuration": "PT5M"}, "fwd-dst": {}, "dl-target": {}})


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(LONG_LOCKS) as emu:
        yield emu
        core.close_all()


def _fill(emulator: Emulator, queue: str, n: int = N) -> None:
    core.send(queue, (f"m{i}" for i in range(n)), max_in_flight=16, connection=emulator.connection_string)
    assert emulator.broker.counts(queue)["active"] == n


def _receive_all(emulator: Emulator, queue: str, n: int = N) -> core.LockedBatch:
    batch = core.receive(
        queue, max_messages=n, wait_seconds=10, max_in_flight=16, connection=emulator.connection_string
    )
    assert len(batch) == n
    return batch


def test_copy_then_complete_of_10050_completes_every_original(emulator: Emulator) -> None:
    """It reported "10000 completed, 50 failed": the 50 copies were sent, their originals left locked."""
    _fill(emulator, "q")
    with _receive_all(emulator, "q") as batch:
        copies = [(i, core.copy_message(m)) for i, m in enumerate(batch.messages)]
        report = core.copy_then_complete(batch, copies, "fwd-dst")
        # Before the batch gives its locks back: nothing of q is left, locked or not.
        assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
        assert batch.unsettled == []
    assert report.count("completed") == N and report.ok and report.total == N, report
    assert emulator.broker.counts("fwd-dst")["active"] == N  # one copy each, none twice


def test_resubmit_in_batches_past_the_detail_limit_moves_each_message_once(emulator: Emulator) -> None:
    """A resubmit whose batches are larger than the detail limit reads every row's outcome."""
    _fill(emulator, "q")
    with _receive_all(emulator, "q") as batch:
        dead = batch.dead_letter(reason="bad")
    assert dead.count("dead_lettered") == N and dead.ok
    assert emulator.broker.counts("q")["dead_letter"] == N
    report = core.resubmit(
        "q/$deadletterqueue", target="fwd-dst", batch_size=N, max_in_flight=1, connection=emulator.connection_string
    )
    assert report.count("resubmitted") == N and report.ok and report.total == N, report
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    assert emulator.broker.counts("fwd-dst")["active"] == N


def test_defer_with_reminder_of_10050_returns_every_sequence_number(emulator: Emulator) -> None:
    """The deferred list was read from the kept outcomes: 10,000 numbers, 50 deferred messages with
    no reminder and no handle."""
    _fill(emulator, "q")
    with _receive_all(emulator, "q") as batch:
        expected = sorted(int(m.sequence_number) for m in batch.messages)
        seqs = core.deferral.defer_with_reminder(batch, remind_at=dt.timedelta(hours=1), reminder_entity="dl-target")
    assert sorted(seqs) == expected
    assert emulator.broker.counts("q")["deferred"] == N
    assert emulator.broker.counts("dl-target")["scheduled"] == N  # one reminder per deferred message


def test_schedule_of_10050_reports_every_sequence_number_and_cancel_takes_them(emulator: Emulator) -> None:
    cs = emulator.connection_string
    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    report = core.schedule("q", [f"s{i}" for i in range(N)], at, connection=cs)
    seqs = [o.sequence_number for o in report]
    assert len(seqs) == N and len(set(seqs)) == N and report.ok, report
    assert emulator.broker.counts("q")["scheduled"] == N
    cancelled = core.cancel_scheduled("q", [int(s) for s in seqs if s is not None], connection=cs)
    assert cancelled.count("cancelled") == N and cancelled.ok
    assert emulator.broker.counts("q")["scheduled"] == 0


def test_a_report_that_counted_past_its_limit_refuses_to_list_every_outcome() -> None:
    report = core.Report("send", "q", max_details=2)
    for i in range(3):
        report.add(core.Outcome(None, i + 1, "sent", index=i))
    assert report.count("sent") == 3 and len(report.outcomes) == 2 and not report.detailed
    with pytest.raises(RuntimeError, match="keeps 2 of its 3 outcomes"):
        report.every()
