"""The brake and the canary of a glob's copy (``copy_many``, issue 62): prod's orders-a, orders-b and
orders-c (90 messages each, a third of them ``"bad": true``) copied into the queues of the same names
at home, whose consumers (tests/core/incidents/test_brake.py's: real SDK receivers on threads of the
test) dead-letter the bad ones and defer the others.

A copy peeks: the sources keep every message. So "exactly once" is: each source whole, and the targets
with their dead-letter queues holding each copied body once, as many as the Report says, read from
the broker through the SDK (peeks) and the administration API. No sleeps: the test waits by
conditions on the broker (tests/waiting.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.core.incidents.copy.many_stops import GlobStops
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from tests.core.incidents.test_brake import Consumer
from tests.core.incidents.test_copy_many import EMPTY
from tests.helpers import QuickCloseClient
from tests.interrupting import peek_all
from tests.waiting import wait_until

QUEUES = ("orders-a", "orders-b", "orders-c")
EACH = 90  # 30 bad each: one entity alone never brings back LIMIT
LIMIT = 40  # stop_if_dead_letters: reached only over two entities
# Slow enough that the consumers' lag cannot move the stop out of the second entity: the first and
# second bring back 60 bad copies, the brake needs 40, so the consumers may trail the copy by 20 bad
# ones (60 messages: 6 s at this rate) before orders-c would begin. A load that slows them more than that
# is a hang, not a schedule.
RATE = "10/s"


def body(queue: str, i: int) -> str:
    return json.dumps({"q": queue, "i": i, "bad": i % 3 == 0})


EVERY = {q: Counter(body(q, i) for i in range(EACH)) for q in QUEUES}


def namespace(filled: bool) -> Iterator[Emulator]:
    with Emulator(EMPTY) as emu:  # the system clock
        admin = emulator_admin_client(emu.connection_string)
        for q in QUEUES:
            admin.create_queue(q)
        if filled:
            with QuickCloseClient.from_connection_string(emu.connection_string) as client:
                for q in QUEUES:
                    with client.get_queue_sender(q) as sender:
                        sender.send_messages([ServiceBusMessage(body(q, i)) for i in range(EACH)])
        yield emu
        core.close_all()


@pytest.fixture
def prod() -> Iterator[Emulator]:
    yield from namespace(filled=True)


@pytest.fixture
def home() -> Iterator[Emulator]:
    yield from namespace(filled=False)


@contextmanager
def consumers(home: Emulator) -> Iterator[None]:
    """A consumer on each target (dead-letters the bad, defers the others); at the end, each target's
    copies all taken (none waiting), then the consumers stopped."""
    with ExitStack() as stack:
        for q in QUEUES:
            stack.enter_context(Consumer(home, q))
        yield
        wait_until(lambda: all(home.broker.counts(q)["active"] == 0 for q in QUEUES))


def places(prod: Emulator, home: Emulator) -> dict[str, dict[str, Counter[str]]]:
    """Through the SDK, per queue: the source's bodies, the target's and its dead-letter queue's."""
    found: dict[str, dict[str, Counter[str]]] = {}
    with QuickCloseClient.from_connection_string(prod.connection_string) as at_prod:
        with QuickCloseClient.from_connection_string(home.connection_string) as at_home:
            for q in QUEUES:
                found[q] = {
                    "source": Counter(str(m) for m in peek_all(at_prod, q)),
                    "target": Counter(str(m) for m in peek_all(at_home, q)),
                    "target dlq": Counter(str(m) for m in peek_all(at_home, q, ServiceBusSubQueue.DEAD_LETTER)),
                }
    assert not home.broker._locks, "a message is locked"
    return found


def copied_once(found: dict[str, dict[str, Counter[str]]], copied: dict[str, int]) -> None:
    """Each source whole (a copy takes nothing); at each target (with its DLQ) ``copied[q]`` of the
    source's bodies, each once."""
    for q, there in found.items():
        assert there["source"] == EVERY[q], f"the source {q} changed"
        copies = there["target"] + there["target dlq"]
        assert not copies or max(copies.values()) == 1, f"a message of {q} copied twice"
        assert set(copies) <= set(EVERY[q]), f"a message at {q} not from its source"
        assert sum(copies.values()) == copied.get(q, 0), f"a copy of {q} lost (or the Report says another count)"


def test_the_check_fails_on_a_copy_lost_twice_foreign_or_a_source_changed() -> None:
    some = Counter(body("orders-a", i) for i in range(3))
    whole = {q: {"source": EVERY[q], "target": Counter(), "target dlq": Counter()} for q in QUEUES}
    whole["orders-a"] = {**whole["orders-a"], "target": some}
    copied_once(whole, {"orders-a": 3})
    with pytest.raises(AssertionError, match="twice"):
        copied_once({**whole, "orders-a": {**whole["orders-a"], "target dlq": Counter([body("orders-a", 1)])}}, {})
    with pytest.raises(AssertionError, match="lost"):
        copied_once(whole, {"orders-a": 4})
    with pytest.raises(AssertionError, match="not from its source"):
        copied_once({**whole, "orders-b": {**whole["orders-b"], "target": some}}, {"orders-a": 3, "orders-b": 3})
    with pytest.raises(AssertionError, match="source orders-c changed"):
        copied_once({**whole, "orders-c": {**whole["orders-c"], "source": Counter()}}, {"orders-a": 3})


def sent(report: core.Report) -> dict[str, int]:
    return {str(p.entity): p.count("sent") for p in report.parts}


def dead_lettered(home: Emulator) -> int:
    """What the targets' dead-letter queues hold, from the administration API."""
    admin = emulator_admin_client(home.connection_string)
    return sum(int(admin.get_queue_runtime_properties(q).dead_letter_message_count) for q in QUEUES)


def test_a_glob_copy_stops_when_its_copies_come_back_over_the_run_and_the_same_call_finishes(
    prod: Emulator, home: Emulator
) -> None:
    ends: dict[str, Any] = {"source_connection": prod.connection_string, "connection": home.connection_string}
    with consumers(home):
        report = core.copy_many(
            "orders-*", rate=RATE, brake=core.Brake(stop_if_dead_letters=LIMIT, watch_interval=0.2), **ends
        )
    assert core.braked(report) and not report.ok, report
    # One entity alone brings back 30 < 40: the run's count stopped it in the second, the third not begun.
    assert [p.entity for p in report.parts] == ["orders-a", "orders-b"], report
    assert report.parts[0].ok and report.parts[0].count("sent") == EACH
    came_back = report.stats["came_back"]
    assert LIMIT <= came_back <= dead_lettered(home), (came_back, dead_lettered(home))  # the broker's, read after
    copied = report.count("sent")
    error = report.errors[0]
    assert error.startswith(f"stopped by the brake: at orders-b, {came_back} came back (stop_if_dead_letters={LIMIT})")
    assert f"{copied} copied, {came_back} came back; the entities after it not begun: the same call again" in error
    assert len(report.errors) == 1 and f"in the run (stop_if_dead_letters={LIMIT})" in report.parts[1].errors[0]
    found = places(prod, home)
    copied_once(found, sent(report))  # the Report's counts are the broker's
    assert copied == EACH + report.parts[1].count("sent") < 2 * EACH and not found["orders-c"]["target"]

    again = core.copy_many("orders-*", **ends)  # the same call: what is left, nothing twice
    assert again.ok and again.count("sent") == 3 * EACH - copied, again
    assert "copied in full by an earlier run" in str(again.parts[0])
    copied_once(places(prod, home), dict.fromkeys(QUEUES, EACH))


def test_a_glob_canary_copies_k_over_the_entities_says_their_fate_and_copies_nothing_more(
    prod: Emulator, home: Emulator
) -> None:
    ends: dict[str, Any] = {"source_connection": prod.connection_string, "connection": home.connection_string}
    k = EACH + 10  # all of orders-a, then 10 of orders-b
    with consumers(home):
        report = core.copy_many("orders-*", canary=core.Canary(k), **ends)
    assert report.ok and sent(report) == {"orders-a": EACH, "orders-b": 10}, report
    found = places(prod, home)
    copied_once(found, {"orders-a": EACH, "orders-b": 10})
    dead = dead_lettered(home)
    deferred = sum(home.broker.counts(q)["deferred"] for q in QUEUES)  # taken and settled by the consumers
    assert report.stats["canary"] == {"moved": k, "settled": deferred, "dead_lettered": dead, "waiting": 0}
    assert dead == 30 + 4 and deferred == k - dead  # read from the broker: each bad one of the K dead-lettered
    said = f"canary: {k} moved; at the target {deferred} settled, {dead} dead-lettered, 0 not yet taken (over the"
    assert f"{said} entities); nothing more copied: the same call again without canary copies the rest" in str(report)

    again = core.copy_many("orders-*", **ends)  # without canary: the rest, nothing twice
    assert again.ok and again.count("sent") == 3 * EACH - k, again
    assert "copied in full by an earlier run" in str(again.parts[0])  # orders-a's canary took it whole
    copied_once(places(prod, home), dict.fromkeys(QUEUES, EACH))


def test_a_glob_s_brake_and_canary_are_checked_before_anything_is_read(prod: Emulator, home: Emulator) -> None:
    ends: dict[str, Any] = {"source_connection": prod.connection_string, "connection": home.connection_string}
    with pytest.raises(core.InvalidInputError, match="brake must be a Brake"):
        core.copy_many("orders-*", brake=-1, **ends)  # type: ignore[arg-type]
    with pytest.warns(FutureWarning), pytest.raises(core.InvalidInputError, match="canary must be a whole number"):
        core.copy_many("orders-*", canary=0, **ends)  # the old form, checked as before
    assert all(home.broker.counts(q)["active"] == 0 for q in QUEUES)


def test_the_run_s_brake_gives_each_entity_what_is_left_of_it_and_stops_once_it_is_spent() -> None:
    """Counted over the run, not per entity: 30 back in the first copy leave 10 to the second, and 10
    more by the second's end reading stop the glob after it (though its own brake, at 10, did not fire)."""
    run_brake = core.Brake(stop_if_dead_letters=LIMIT, watch_interval=0.2)
    stops = GlobStops(brake=run_brake, canary=None)
    assert stops.left() == {"brake": run_brake, "canary": None}
    first, second = core.Report("copy", "orders-a"), core.Report("copy", "orders-b")
    first.stats["came_back"], second.stats["came_back"] = 30, 10
    assert not stops.stops_after(first, "orders-a")
    assert stops.left() == {"brake": core.Brake(stop_if_dead_letters=10, watch_interval=0.2), "canary": None}
    assert stops.stops_after(second, "orders-b") and stops.braked and stops.at == "orders-b"
    report = core.Report("copy", "orders-*", parts=[first, second])
    stops.said(report, complete=False)
    assert report.stats["came_back"] == LIMIT and core.braked(report), report
    assert report.errors[0].startswith(f"stopped by the brake: at orders-b, {LIMIT} came back")
