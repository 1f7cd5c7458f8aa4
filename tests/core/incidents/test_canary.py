"""A canary: ``canary=Canary(20)`` moves 20 of 300 dead letters into ``plain``, whose consumer (an SDK receiver
on a thread of the test: tests/core/incidents/test_brake.py's) dead-letters the bad third and
defers the rest; the run waits until none of the 20 is still active there, says their fate, and
moves nothing more. The broker agrees with what it says; ``resume=True`` moves the rest, once."""

from __future__ import annotations

import json

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.core.incidents import test_brake as brake

emulator = brake.emulator  # the namespace on the system clock
K = 20


def test_a_canary_moves_k_says_their_fate_from_the_broker_and_moves_nothing_more(emulator: Emulator) -> None:
    brake.dead_letters(emulator)
    cs = emulator.connection_string
    with brake.Consumer(emulator):
        report = core.resubmit(brake.DLQ, target="plain", canary=core.Canary(K), connection=cs)
    found = brake.places(emulator)
    brake.exactly_once(found)
    bad = sum(json.loads(b)["bad"] for b in found["target"] + found["target dlq"])
    assert report.ok and report.count("resubmitted") == K, report
    assert report.stats["canary"] == {"moved": K, "settled": K - bad, "dead_lettered": bad, "waiting": 0}
    assert sum(found["target dlq"].values()) == bad > 0 and sum(found["source"].values()) == brake.N - K
    assert emulator.broker.counts("plain")["deferred"] == K - bad  # the consumer had every one
    assert f"canary: {K} moved; at the target {K - bad} settled, {bad} dead-lettered, 0 not yet taken" in str(report)

    rest = core.resubmit(brake.DLQ, target="plain", resume=True, connection=cs)
    assert rest.ok and rest.count("resubmitted") == brake.N - K, rest
    found = brake.places(emulator)
    brake.exactly_once(found)
    assert not found["source"]


def test_a_canary_not_taken_in_time_says_so(emulator: Emulator) -> None:
    """No consumer: after the timeout the 20 are still waiting at the target, and the Report says it."""
    brake.dead_letters(emulator)
    cs = emulator.connection_string
    report = core.resubmit(brake.DLQ, target="plain", canary=core.Canary(K, canary_timeout=0.5), connection=cs)
    assert report.stats["canary"] == {"moved": K, "settled": 0, "dead_lettered": 0, "waiting": K}
    assert emulator.broker.counts("plain")["active"] == K


def test_a_canary_is_checked_before_anything_moves(emulator: Emulator) -> None:
    with pytest.raises(core.InvalidInputError, match="canary must be a whole number"):
        core.Canary(0)
    with pytest.raises(core.InvalidInputError, match="canary_timeout must be"):
        core.Canary(5, canary_timeout=-1)
