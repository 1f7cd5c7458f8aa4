"""The one "copy first, then complete" (core.copy_then_complete): a copy confirmed completes its
original; a copy not confirmed leaves the original locked, untouched; a copy sent for an original
that can no longer be completed is reported duplicated, never hidden."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator


def test_the_copy_is_sent_first_and_the_original_completed_second(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["a", "b"], connection=cs)
    with core.receive("q", count=2, wait=5, connection=cs) as batch:
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
    with core.receive("q", count=2, wait=5, connection=cs) as batch:
        too_big = ServiceBusMessage(b"x" * (2 * 1024 * 1024))  # over the entity's message size limit
        copies = [(0, too_big), (1, core.copy_message(batch.messages[1]))]
        report = core.copy_then_complete(batch, copies, "fwd-dst")
        assert [(o.outcome, o.index) for o in report] == [("failed", 0), ("completed", 1)]
        assert batch.complete(0).outcomes[0].outcome == "completed"  # the original was still locked, not settled


def test_no_copy_sent_at_all_raises_and_touches_no_original(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["keep me"], connection=cs)
    with core.receive("q", count=1, wait=5, connection=cs) as batch:
        with pytest.raises(core.EntityNotFoundError):
            core.copy_then_complete(batch, [(0, core.copy_message(batch.messages[0]))], "no-such-queue")
        assert batch.complete(0).outcomes[0].outcome == "completed"


def test_a_copy_sent_for_an_original_already_settled_is_reported_duplicated(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["twice"], connection=cs)
    with core.receive("q", count=1, wait=5, connection=cs) as batch:
        batch.complete(0)
        report = core.copy_then_complete(batch, [(0, core.copy_message(batch.messages[0]))], "fwd-dst")
    (outcome,) = report
    assert outcome.outcome == "duplicated" and not report.ok
    assert [r["body_text"] for r in core.peek("fwd-dst", connection=cs).records] == ["twice"]
