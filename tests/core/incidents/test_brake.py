"""The brake: a resubmit from q's dead-letter queue into ``plain``, whose consumer (a real SDK
receiver on a thread of the test) dead-letters every message whose body says ``"bad": true`` (a
third) and defers the others (so they stay where the test can read them). With
``brake=Brake(stop_if_dead_letters=20)`` the run stops on its own; the broker, read through the SDK, then holds
every message exactly once across the source, the target and its dead-letter queue, none locked;
the Report says how many moved and how many came back, and ``resume=True`` moves the rest.

No sleeps: the test waits for the consumer by conditions on the broker (tests/waiting.py)."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.core.incidents.brake import BRAKED
from sbnotebook.emulator import Emulator
from tests.core.incidents import test_replay_rate
from tests.helpers import QuickCloseClient
from tests.interrupting import peek_all
from tests.waiting import wait_until

N = 300
DLQ = "q/$deadletterqueue"


emulator = test_replay_rate.emulator  # the same namespace on the system clock


def body(i: int) -> str:
    return json.dumps({"i": i, "bad": i % 3 == 0})


def dead_letters(emulator: Emulator) -> None:
    cs = emulator.connection_string
    with QuickCloseClient.from_connection_string(cs) as client, client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage(body(i), message_id=f"m-{i}") for i in range(N)])
    while emulator.broker.counts("q")["active"]:
        with core.receive("q", max_messages=250, connection=cs) as batch:
            assert batch.dead_letter(reason="first failure").ok


class Consumer:
    """``plain``'s consumer: dead-letters each "bad" message, defers the others; until stopped."""

    def __init__(self, emulator: Emulator, queue: str = "plain") -> None:
        self.cs, self.queue = emulator.connection_string, queue
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with QuickCloseClient.from_connection_string(self.cs) as client, client.get_queue_receiver(self.queue) as r:
            while not self.stopped.is_set():
                for m in r.receive_messages(max_message_count=50, max_wait_time=1):
                    if json.loads(str(m))["bad"]:
                        r.dead_letter_message(m, reason="still bad")
                    else:
                        r.defer_message(m)

    def __enter__(self) -> Consumer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def places(emulator: Emulator) -> dict[str, Counter[str]]:
    """Through the SDK: each place's bodies, counted; a message locked now fails the test."""
    found: dict[str, Counter[str]] = {}
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        for place, queue, sub in (("source", "q", ServiceBusSubQueue.DEAD_LETTER), ("target", "plain", None)):
            found[place] = Counter(str(m) for m in peek_all(client, queue, sub))
        found["target dlq"] = Counter(str(m) for m in peek_all(client, "plain", ServiceBusSubQueue.DEAD_LETTER))
    assert not emulator.broker._locks, "a message is locked"
    return found


def exactly_once(found: dict[str, Counter[str]]) -> None:
    together = found["source"] + found["target"] + found["target dlq"]
    assert set(together) == {body(i) for i in range(N)}, "a message lost"
    assert max(together.values()) == 1, "a message in two places"


def test_the_check_fails_on_a_message_lost_or_in_two_places() -> None:
    whole = {"source": Counter(body(i) for i in range(N)), "target": Counter(), "target dlq": Counter()}
    exactly_once(whole)
    with pytest.raises(AssertionError, match="two places"):
        exactly_once({**whole, "target": Counter([body(5)])})
    with pytest.raises(AssertionError, match="lost"):
        exactly_once({**whole, "source": Counter(body(i) for i in range(1, N))})


def test_a_resubmit_stops_when_its_copies_come_back_dead_lettered_and_resume_moves_the_rest(
    emulator: Emulator,
) -> None:
    dead_letters(emulator)
    cs = emulator.connection_string
    with Consumer(emulator):
        report = core.resubmit(
            DLQ,
            target="plain",
            rate="50/s",
            brake=core.Brake(stop_if_dead_letters=20, watch_interval=0.2),
            connection=cs,
        )
        moved = report.count("resubmitted")
        # the consumer has settled each copy that reached plain: none locked, none waiting
        wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)
    assert any(e.startswith(f"{BRAKED}: ") for e in report.errors) and not report.ok, report
    assert "resume=True" in report.errors[0] and report.stats["came_back"] >= 20, report
    found = places(emulator)
    exactly_once(found)
    assert sum(found["target"].values()) + sum(found["target dlq"].values()) == moved < N  # the broker's counts
    assert report.count("left") == sum(found["source"].values()) == N - moved
    assert "not taken: the brake stopped the run" in str(report)
    assert sum(found["target dlq"].values()) >= 20
    assert f"{moved} moved, " in report.errors[0]

    rest = core.resubmit(DLQ, target="plain", resume=True, connection=cs)
    assert rest.ok and rest.count("resubmitted") == N - moved, rest
    found = places(emulator)
    exactly_once(found)
    assert not found["source"]


def test_a_brake_is_checked_before_anything_moves(emulator: Emulator) -> None:
    cs = emulator.connection_string
    with pytest.raises(core.InvalidInputError, match="stop_if_dead_letters must be a whole number"):
        core.Brake(stop_if_dead_letters=-1)
    with pytest.raises(core.InvalidInputError, match="A Brake stops on stop_if_dead_letters= or stop_if_active="):
        core.Brake(watch="plain")
    with pytest.raises(core.InvalidInputError, match="watch_interval must be"):
        core.Brake(stop_if_active=5, watch_interval=0)
    with pytest.raises(core.InvalidInputError, match="brake must be a Brake"):
        core.resubmit(DLQ, brake=5, connection=cs)  # type: ignore[arg-type]
    # The old keywords, for one release: the same checks (tests/project/test_old_keywords.py: the same run).
    with pytest.warns(FutureWarning), pytest.raises(core.InvalidInputError, match="watch= only says where it looks"):
        core.resubmit(DLQ, watch="plain", connection=cs)


def test_a_resubmit_back_into_its_own_queue_stops_when_they_come_back(emulator: Emulator) -> None:
    """The usual case: q's dead letters back to q, whose consumer dead-letters the bad third again,
    into the very queue the run is emptying. What came back is counted apart from what the run took
    (the count alone falls as the run drains it, and would never reach the brake)."""
    dead_letters(emulator)
    cs = emulator.connection_string
    with Consumer(emulator, "q"):
        report = core.resubmit(
            DLQ, rate="50/s", brake=core.Brake(stop_if_dead_letters=20, watch_interval=0.2), connection=cs
        )
        wait_until(lambda: emulator.broker.counts("q")["active"] == 0)
    assert any(e.startswith(f"{BRAKED}: ") for e in report.errors) and report.stats["came_back"] >= 20, report
    with QuickCloseClient.from_connection_string(cs) as client:
        queue = Counter(str(m) for m in peek_all(client, "q"))
        dlq = Counter(str(m) for m in peek_all(client, "q", ServiceBusSubQueue.DEAD_LETTER))
    assert not emulator.broker._locks
    exactly_once({"source": dlq, "target": queue, "target dlq": Counter()})  # the DLQ: the rest and those back
    moved = report.count("resubmitted")
    # the good copies are in q (deferred), the bad back in its DLQ: what came back, counted at the run's
    # end (the consumer may have had a few more since), is those
    assert moved < N and 20 <= report.stats["came_back"] <= moved - sum(queue.values()), (moved, report.stats)
    assert all(not json.loads(b)["bad"] for b in queue)
