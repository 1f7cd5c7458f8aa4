"""The live tail (issue 40 point 4): ``core.tail``, ``%sb_tail`` and its panel. Messages that arrive
are shown, those already there are not (unless --from-sequence-number), and the broker is left exactly as it
was: no lock, no delivery counted, no credit (another consumer gets every message meanwhile)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import RECORD_FIELDS
from sbnotebook.emulator import Emulator
from tests import shell
from tests.helpers import interrupt_main_thread, python_sigint, send
from tests.waiting import HANG, wait_until

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def later(seconds: float, work: Any) -> threading.Thread:
    """``work()`` on a thread after ``seconds`` (a producer or a consumer beside the tail)."""

    def run() -> None:
        time.sleep(seconds)
        work()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def store(emulator: Emulator, entity: str) -> Any:
    return emulator.broker.resolve_source(entity).store


def test_tail_shows_what_arrives_not_what_was_there_and_leaves_the_broker_as_it_was(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Driven by the tail's own polls, not by the clock: the new messages are sent after its first
    poll, and a consumer works beside it once it has shown them (``seconds`` only ends a hang)."""
    cs = emulator.connection_string
    send(client, "q", "old-1", "old-2")
    tail = core.tail("q", interval=0.2, seconds=HANG, connection=cs)
    assert tail.next_sequence_number == 3  # after the highest number present
    got: list[str] = []
    received: list[str] = []

    def consume() -> None:  # a consumer working while the tail watches: it gets every message
        with client.get_queue_receiver("q") as r:
            deadline = time.monotonic() + HANG
            while len(received) < 5 and time.monotonic() < deadline:
                for m in r.receive_messages(max_message_count=5, max_wait_time=5):
                    received.append(str(m))
                    r.complete_message(m)

    consumer: threading.Thread | None = None
    for records in tail:
        got += [r["body_text"] for r in records]
        # While the tail runs: no message locked by it, no delivery counted by a peek.
        assert all(m.delivery_count == 0 for m in store(emulator, "q").iter_from(1) if not m.locked)
        if tail.polls == 1:
            send(client, "q", "new-1", "new-2", "new-3")
        if len(got) == 3 and consumer is None:
            consumer = later(0, consume)
        if consumer is not None and not consumer.is_alive() and tail.polls >= 5:
            tail.stop()
    assert consumer is not None
    consumer.join()
    assert got == ["new-1", "new-2", "new-3"]
    assert sorted(received) == ["new-1", "new-2", "new-3", "old-1", "old-2"]  # no credit held by the tail
    assert tail.seen == 3 and tail.polls >= 5 and "3 messages in" in tail.status()
    frame = tail.to_pandas()
    assert list(frame.columns) == list(RECORD_FIELDS) and frame["sequence_number"].tolist() == [3, 4, 5]
    assert (frame["delivery_count"] == 0).all()


def test_a_tail_whose_time_is_up_before_it_began_still_polls_once(emulator: Emulator, client: ServiceBusClient) -> None:
    """A slow start (a loaded machine, a dead-letter count read first) used to end a short tail
    before its first poll: it showed nothing of what was there to show."""
    send(client, "q", "a")
    tail = core.tail("q", seconds=0.01, from_sequence_number=1, connection=emulator.connection_string).start()
    time.sleep(0.05)  # past its seconds before it is iterated (longer on a loaded machine: the same)
    assert [r["body_text"] for records in tail for r in records] == ["a"] and tail.polls == 1


def test_tail_never_locks_nor_counts_a_delivery(emulator: Emulator, client: ServiceBusClient) -> None:
    """Nobody consumes: after a tail has seen them, every message is still there, unlocked, with a
    delivery count of 0 (broker state read directly)."""
    cs = emulator.connection_string
    # Stopped once all 300 are seen (seconds= only bounds it): a 1 s tail ended before a loaded
    # machine had sent them (0 of 300 in a full run).
    tail = core.tail("q", interval=0.1, seconds=HANG, connection=cs)
    later(0.2, lambda: send(client, "q", *[f"m{i}" for i in range(300)]))  # more than one page per poll
    seen = 0
    for records in tail:
        seen += len(records)
        if seen >= 300:
            break
    assert seen == 300
    messages = list(store(emulator, "q").iter_from(1))
    assert len(messages) == 300 and not any(m.locked for m in messages)
    assert {m.delivery_count for m in messages} == {0}


def test_from_seq_shows_what_was_there_and_where_filters(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    send(client, "q", "a", "b", "c")
    tail = core.tail("q", interval=0.1, seconds=0.5, from_sequence_number=2, where='text != "c"', connection=cs)
    shown = [r["body_text"] for records in tail for r in records]  # the first poll shows them (at least one)
    assert shown == ["b"] and tail.seen == 2 and tail.shown == 1
    assert "1 of 2 messages matched" in tail.status()


def test_a_dead_letter_queue_says_what_arrived_below_the_numbers_seen(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A dead-letter queue keeps each message's sequence number: message 1 dead-lettered after
    message 2 arrives below what the tail has seen. The tail cannot show it, and says so."""
    cs = emulator.connection_string
    send(client, "q", "first", "second")
    with client.get_queue_receiver("q") as r:
        one, two = r.receive_messages(max_message_count=2, max_wait_time=5)
        tail = core.tail("q/$deadletterqueue", interval=0.2, seconds=HANG, connection=cs)
        shown: list[str] = []
        below_sent = False
        for records in tail:  # each step after a poll of its own, whatever the machine's speed
            shown += [r["body_text"] for r in records]
            if tail.polls == 1:
                r.dead_letter_message(two, reason="late")
            elif shown == ["second"] and not below_sent:
                r.dead_letter_message(one, reason="later still")
                below_sent = True
            elif below_sent and tail.below:
                tail.stop()
    assert shown == ["second"]
    assert tail.below == 1 and "grew by at least 1 more than that" in tail.status()


def test_interrupt_stops_the_tail_in_the_magic_and_returns_what_it_showed(
    emulator: Emulator, client: ServiceBusClient, sb: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sbnotebook.notebook.magics import tail as tail_magic

    send(client, "q", "there before")

    polled, shown = threading.Event(), threading.Event()
    add = tail_magic.Lines.add

    def add_and_tell(view: Any, records: list[dict[str, Any]]) -> None:
        add(view, records)
        polled.set()  # the tail has begun: what is sent now arrives after it
        if any(r["body_text"] == "y" for r in records):
            shown.set()  # the magic has shown both (x came first)

    monkeypatch.setattr(tail_magic.Lines, "add", add_and_tell)

    def produce_then_interrupt() -> None:
        polled.wait(HANG)
        send(client, "q", "x", "y")
        shown.wait(HANG)
        interrupt_main_thread()  # a kernel interrupt, as the stop button sends

    with python_sigint():
        stopper = later(0, produce_then_interrupt)
        frame = sb.shell.run_line_magic("sb_tail", "q")
        stopper.join()
    out = capsys.readouterr().out
    assert frame["body_text"].tolist() == ["x", "y"]
    assert "#2 " in out and "#3 " in out and "there before" not in out  # a terminal: a line per message
    assert "Ended (interrupted): 2 messages in" in out


def test_tail_magic_seconds_from_seq_and_dlq(
    emulator: Emulator, client: ServiceBusClient, sb: Any, capsys: Any
) -> None:
    send(client, "q", "a", "b")
    with client.get_queue_receiver("q") as r:
        for m in r.receive_messages(max_message_count=2, max_wait_time=5):
            r.dead_letter_message(m, reason="broken", error_description=f"id {m.sequence_number}")
    frame = sb.shell.run_line_magic("sb_tail", "q --dlq --seconds 0.5 --from-sequence-number 1")
    assert frame["dead_letter_reason"].tolist() == ["broken", "broken"]
    out = capsys.readouterr().out
    assert "broken:" in out and "Ended (time is up)" in out


def test_the_live_table_updates_one_display(emulator: Emulator, client: ServiceBusClient) -> None:
    """In a notebook (a kernel) the tail is one display updated in place: a rate line and the last
    messages as a table."""
    from sbnotebook.notebook.magics.tail import LiveTable

    cs = emulator.connection_string
    send(client, "q", "there before")  # the client's sender open before the tail starts
    tail = core.tail("q", interval=0.1, seconds=HANG, connection=cs)
    updates: list[dict[str, str]] = []

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool) -> None:
            updates.append(bundle)

    view = LiveTable(tail)  # the test shell draws it once; the updates go to the handle below
    view.handle = Handle()
    for records in tail:  # sent after the first poll, then stopped once shown: not raced against a 1 s tail
        view.add(records)
        if tail.polls == 1:
            send(client, "q", "<b>hi</b>")
        if records:
            tail.stop()
    view.finish("time is up")
    last = updates[-1]
    assert "Ended (time is up): 1 message in" in last["text/plain"]
    assert "&lt;b&gt;hi&lt;/b&gt;" in last["text/html"] and "<td>2</td>" in last["text/html"]


def test_tail_panel_runs_in_the_background_until_stopped(emulator: Emulator, client: ServiceBusClient) -> None:
    from sbnotebook.notebook.widgets.tail import TailPanel

    panel = TailPanel("q", interval=0.1, connection=emulator.connection_string)
    send(client, "q", "one", "two")
    wait_until(lambda: len(panel.shown) >= 2)
    assert [r["body_text"] for r in panel.shown] == ["one", "two"]
    assert not panel.stop_button.disabled
    panel.stop_button.click()
    assert panel.wait(HANG)
    assert panel.stop_button.disabled and "Ended: 2 messages" in panel.status.value
    assert panel.to_pandas()["body_text"].tolist() == ["one", "two"]


def test_a_tail_on_a_missing_entity_or_a_topic_fails_the_cell_in_one_line(sb: Any) -> None:
    from tests.helpers import magic_fails

    ip = sb.shell
    assert "Entity not found (nope)" in magic_fails(ip, "sb_tail nope --seconds 1")
    assert "receive from one of its subscriptions" in magic_fails(ip, "sb_tail t --seconds 1")
    # A session-enabled entity: refused in one line saying why (a peek there takes a session's lock)
    # and what to do, whether the tail starts after what is there or --from-sequence-number.
    for line in ("sb_tail sq --seconds 1", "sb_tail sq --seconds 1 --from-sequence-number 1"):
        shown = magic_fails(ip, line)
        assert "sq is session-enabled, and a tail peeks with nothing locked" in shown, shown
        assert "only through one session's lock" in shown and "(sq/$deadletterqueue)" in shown, shown
    assert "--seconds" in magic_fails(ip, "sb_tail q --seconds 0")
    assert "--from-sequence-number" in magic_fails(ip, "sb_tail q --from-sequence-number -1")
    assert "Unknown name in the search: nme" in magic_fails(ip, "sb_tail q --seconds 1 --where 'nme == 1'")
    assert "No connection named 'prod'" in magic_fails(ip, "sb_tail prod:orders --seconds 1")
    result = ip.run_cell("%sb_tail nope --seconds 1")  # as Run All sees it: the cell failed
    assert not result.success
