"""The brake and the canary on a copy: q's 300 dead letters copied into ``plain``, whose consumer
(tests/core/incidents/test_brake.py's: a real SDK receiver on a thread of the test) dead-letters
every message whose body says ``"bad": true`` (a third) and defers the others.

A copy peeks: the source keeps every message, whatever happens. So "exactly once" is: the source
whole, and the target with its dead-letter queue holding each copied body once (none lost on the
way, none copied twice), read from the broker through the SDK; after the same copy again, every
body once. No sleeps: the test waits by conditions on the broker (tests/waiting.py)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.core.incidents import test_brake as brake
from tests.waiting import wait_until

emulator = brake.emulator  # the namespace on the system clock
K = 20
EVERY = Counter(brake.body(i) for i in range(brake.N))


def copied_once(found: dict[str, Counter[str]], copied: int) -> None:
    """The source whole (a copy takes nothing), and ``copied`` bodies at the target, each once."""
    assert found["source"] == EVERY, "the source changed"
    copies = found["target"] + found["target dlq"]
    assert not copies or max(copies.values()) == 1, "a message copied twice"
    assert sum(copies.values()) == copied, "a copy lost (or one more than the Report says)"


def test_the_check_fails_on_a_copy_lost_twice_or_a_source_changed() -> None:
    some = Counter(brake.body(i) for i in range(3))
    whole = {"source": EVERY, "target": some, "target dlq": Counter()}
    copied_once(whole, 3)
    with pytest.raises(AssertionError, match="twice"):
        copied_once({**whole, "target dlq": Counter([brake.body(1)])}, 4)
    with pytest.raises(AssertionError, match="lost"):
        copied_once(whole, 4)
    with pytest.raises(AssertionError, match="source changed"):
        copied_once({**whole, "source": EVERY - some}, 3)


def test_a_copy_stops_when_its_copies_come_back_dead_lettered_and_the_same_copy_copies_the_rest(
    emulator: Emulator,
) -> None:
    brake.dead_letters(emulator)
    cs = emulator.connection_string
    with brake.Consumer(emulator):
        report = core.copy(
            brake.DLQ,
            "plain",
            rate="50/s",
            brake=core.Brake(stop_if_dead_letters=20, watch_interval=0.2),
            connection=cs,
        )
        wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)  # the consumer had each copy
    copied = report.count("sent")
    assert core.braked(report) and not report.ok and report.stats["came_back"] >= 20, report
    error = report.errors[0]
    assert f"{copied} copied, " in error and "the same copy again (resume=True) copies it" in error
    assert not core.interrupted(report)
    found = brake.places(emulator)
    copied_once(found, copied)
    assert copied < brake.N and sum(found["target dlq"].values()) >= 20

    rest = core.copy(brake.DLQ, "plain", connection=cs)  # the record on disk: only what is left
    assert rest.ok and rest.count("sent") == brake.N - copied, rest
    assert f"resumed: {copied} copied before" in str(rest)
    copied_once(brake.places(emulator), brake.N)


def test_a_copy_canary_copies_k_says_their_fate_from_the_broker_and_copies_nothing_more(emulator: Emulator) -> None:
    brake.dead_letters(emulator)
    cs = emulator.connection_string
    with brake.Consumer(emulator):
        report = core.copy(brake.DLQ, "plain", canary=core.Canary(K), connection=cs)
    found = brake.places(emulator)
    copied_once(found, K)
    bad = sum(json.loads(b)["bad"] for b in found["target"] + found["target dlq"])
    assert report.ok and report.count("sent") == K, report
    assert report.stats["canary"] == {"moved": K, "settled": K - bad, "dead_lettered": bad, "waiting": 0}
    assert sum(found["target dlq"].values()) == bad > 0
    assert emulator.broker.counts("plain")["deferred"] == K - bad  # the consumer had every one
    said = f"canary: {K} moved; at the target {K - bad} settled, {bad} dead-lettered, 0 not yet taken"
    assert f"{said}; nothing more moved: the same copy again without canary copies the rest" in str(report)

    rest = core.copy(brake.DLQ, "plain", connection=cs)
    assert rest.ok and rest.count("sent") == brake.N - K, rest
    copied_once(brake.places(emulator), brake.N)


def test_a_copy_canary_not_taken_in_time_says_so(emulator: Emulator) -> None:
    """No consumer: after the timeout the 20 are still waiting at the target, and the Report says it."""
    brake.dead_letters(emulator)
    cs = emulator.connection_string
    report = core.copy(brake.DLQ, "plain", canary=core.Canary(K, canary_timeout=0.5), connection=cs)
    assert report.stats["canary"] == {"moved": K, "settled": 0, "dead_lettered": 0, "waiting": K}
    assert emulator.broker.counts("plain")["active"] == K


def test_a_copy_brake_and_canary_are_checked_before_anything_is_copied(emulator: Emulator) -> None:
    cs = emulator.connection_string
    with pytest.raises(core.InvalidInputError, match="brake must be a Brake"):
        core.copy(brake.DLQ, "plain", brake=20, connection=cs)  # type: ignore[arg-type]
    with pytest.raises(core.InvalidInputError, match="canary must be a Canary"):
        core.copy(brake.DLQ, "plain", canary="20", connection=cs)  # type: ignore[arg-type]
    # The old keywords (one release): checked as before, each with its warning.
    with pytest.warns(FutureWarning), pytest.raises(core.InvalidInputError, match="stop_if_dead_letters must be"):
        core.copy(brake.DLQ, "plain", stop_if_dead_letters=-1, connection=cs)
    with pytest.warns(FutureWarning), pytest.raises(core.InvalidInputError, match="watch= only says where it looks"):
        core.copy(brake.DLQ, "plain", watch="plain", connection=cs)
    with pytest.warns(FutureWarning), pytest.raises(core.InvalidInputError, match="canary must be a whole number"):
        core.copy(brake.DLQ, "plain", canary=0, connection=cs)
    assert emulator.broker.counts("plain")["active"] == 0
