"""--data-dir compaction: a snapshot of every live message + the journal's tail (journal.py, snapshot.py).

A restart after a compaction keeps every message with its sequence number, state, delivery count,
dead-letter fields and properties, releases locks, and continues the numbering; a compaction killed
before or after its rename loses nothing."""

from __future__ import annotations

import datetime as dt
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook.emulator import Emulator

from .conftest import TEST_TOPOLOGY
from .helpers import QuickCloseClient, free_port, start_cli_emulator


def _state(client: ServiceBusClient, queue: str, **kwargs: Any) -> list[tuple[Any, ...]]:
    with client.get_queue_receiver(queue, **kwargs) as r:
        peeked = r.peek_messages(max_message_count=1000, sequence_number=0)
    return [
        (
            m.sequence_number,
            str(m),
            m._raw_amqp_message.annotations.get(b"x-opt-message-state"),
            m.delivery_count,
            m.dead_letter_reason,
            dict(m.application_properties or {}),
            m.session_id,
        )
        for m in peeked
    ]


def _everything(client: ServiceBusClient) -> dict[str, Any]:
    return {
        "q": _state(client, "q"),
        "q/dlq": _state(client, "q", sub_queue=ServiceBusSubQueue.DEAD_LETTER),
        "sq60": _state(client, "sq60", session_id="s1"),
    }


def _fill(client: ServiceBusClient) -> tuple[int, int]:
    """Every kind of message state; returns (a deferred message's and a locked one's sequence numbers)."""
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(30)])
        s.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    with client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(f"s{i}", session_id="s1") for i in range(3)])
    with client.get_queue_receiver("sq60", session_id="s1") as r:
        r.session.set_state(b"session-state")
    r = client.get_queue_receiver("q", prefetch_count=0)
    r.__enter__()
    got = r.receive_messages(max_message_count=6, max_wait_time=5)
    assert len(got) == 6
    r.complete_message(got[0])
    r.dead_letter_message(got[1], reason="bad", error_description="why")
    r.defer_message(got[2])
    r.abandon_message(got[3])  # delivery count 1, available again
    # got[4], got[5] stay locked: a restart releases them
    return got[2].sequence_number, got[4].sequence_number


@pytest.mark.timeout(120)
def test_a_restart_after_compaction_keeps_every_message_and_releases_locks(tmp_path: Path) -> None:
    with (
        Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu,
        QuickCloseClient.from_connection_string(emu.connection_string) as c,
    ):
        deferred, locked = _fill(c)
        written = emu.compact()
        assert written >= 33 and (tmp_path / "snapshot.bin").exists()
        # The tail after the snapshot: a new message, a snapshot message completed, one dead-lettered.
        with c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("after", application_properties={"late": True}))
        with c.get_queue_receiver("q", prefetch_count=0) as r:
            a, b = r.receive_messages(max_message_count=2, max_wait_time=5)
            r.complete_message(a)
            r.dead_letter_message(b, reason="tail")
        before = _everything(c)
    with (
        Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu,
        QuickCloseClient.from_connection_string(emu.connection_string) as c,
    ):
        after = _everything(c)
        assert after == before
        assert any(row[0] == locked for row in after["q"])  # still there, and (below) lock-free
        with c.get_queue_receiver("q", prefetch_count=0) as r:
            taken = r.receive_messages(max_message_count=100, max_wait_time=3)
            assert locked in {m.sequence_number for m in taken}
            (d,) = r.receive_deferred_messages([deferred])
            assert str(d) == "m2"
        with c.get_queue_receiver("sq60", session_id="s1") as r:
            assert r.session.get_state() == b"session-state"
        with c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("next"))
        with c.get_queue_receiver("q") as r:
            newest = max(m.sequence_number for m in r.peek_messages(max_message_count=1000, sequence_number=0))
        assert newest > max(row[0] for row in before["q"] + before["q/dlq"])


def _start(data_dir: Path, port: int) -> tuple[Any, str]:
    return start_cli_emulator("--port", str(port), "--data-dir", str(data_dir))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("point", ["before-rename", "after-rename"])
def test_a_compaction_killed_midway_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    monkeypatch.setenv("SBNOTEBOOK_COMPACT_MIN_ROWS", "1")  # compact on every stop
    port = free_port()
    proc, conn = _start(tmp_path, port)
    try:  # a first snapshot, so that the killed compaction has a tail with tombstones over it
        with QuickCloseClient.from_connection_string(conn, retry_total=0) as c, c.get_queue_sender("orders") as s:
            s.send_messages([ServiceBusMessage(f"a{i}") for i in range(200)])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert (tmp_path / "snapshot.bin").exists()
    monkeypatch.setenv("SBNOTEBOOK_COMPACTION_PAUSE", point)
    proc, conn = _start(tmp_path, port)
    try:
        with QuickCloseClient.from_connection_string(conn, retry_total=0) as c:
            with c.get_queue_sender("orders") as s:
                s.send_messages([ServiceBusMessage(f"b{i}") for i in range(200)])
            with c.get_queue_receiver("orders", prefetch_count=0) as r:
                for m in r.receive_messages(max_message_count=50, max_wait_time=5):
                    r.complete_message(m)  # 50 of the snapshot's a-messages: tombstones
            with c.get_queue_receiver("orders") as r:
                expected = {(m.sequence_number, str(m)) for m in r.peek_messages(max_message_count=1000)}
        assert len(expected) == 350
        proc.send_signal(signal.SIGTERM)  # stopping compacts, and pauses at `point`
        assert proc.stdout is not None
        while (line := proc.stdout.readline()) and "compaction paused" not in line:
            pass
        assert point in line
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    monkeypatch.delenv("SBNOTEBOOK_COMPACTION_PAUSE")
    proc, conn = _start(tmp_path, port)
    try:
        assert not (tmp_path / "snapshot.bin.partial").exists()
        with QuickCloseClient.from_connection_string(conn) as c, c.get_queue_receiver("orders") as r:
            found = {(m.sequence_number, str(m)) for m in r.peek_messages(max_message_count=1000)}
        assert found == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
