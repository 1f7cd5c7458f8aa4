"""--data-dir compaction: a snapshot of every live message + the journal's tail (journal.py, snapshot.py).

A restart after a compaction keeps every message with its sequence number, state, delivery count,
dead-letter fields and properties, releases locks, and continues the numbering; a compaction killed
before or after its rename loses nothing; a start-up reads the snapshot a block at a time (its
memory is the messages, not the messages and the whole index), still reads the version 1 format,
and refuses a damaged file."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook.emulator import Emulator
from sbnotebook.emulator.broker.model import MessageData, MessageState, StoredMessage
from sbnotebook.emulator.persistence import snapshot
from sbnotebook.emulator.persistence.rows import RowError
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient
from tests.processes import free_port, start_cli_emulator


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
@pytest.mark.parametrize("block", [snapshot.BLOCK, 4])  # 4: the snapshot's messages in several blocks
def test_a_restart_after_compaction_keeps_every_message_and_releases_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(snapshot, "BLOCK", block)
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


def _stored(n: int) -> list[StoredMessage]:
    out = []
    for seq in range(1, n + 1):
        data = MessageData(b"", b"body-%d" % seq, 10, message_id=f"id-{seq}", subject="s")
        out.append(StoredMessage(data, seq, 1000.0 + seq, state=MessageState(seq % 2), delivery_count=seq % 3))
    return out


def _summary(items: list[tuple[str, StoredMessage]]) -> list[tuple[Any, ...]]:
    return [
        (name, m.sequence_number, m.data.raw_body, m.data.message_id, m.state, m.delivery_count, m.enqueued_time)
        for name, m in items
    ]


@pytest.mark.timeout(60)
def test_a_start_up_holds_one_block_of_the_index_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / snapshot.FILE_NAME
    assert snapshot.write(path, [("q", _stored(40_000)), ("q/$deadletterqueue", _stored(3))]) == 40_003
    tracemalloc.start()
    try:
        count = sum(1 for _ in snapshot.read(path))  # each message let go at once, as a test of the reader
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 40_003
    # The whole index parsed at once took ~25 MB here (40,000 entries); one block of 4,096 ~3 MB.
    assert peak < 8 * 2**20, peak


@pytest.mark.timeout(60)
def test_a_version_1_snapshot_still_loads_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    """Version 1: MAGIC_V1, the index length, one JSON index (store names; entries led by the store's
    number) and the sections back to back. Built here from a version 2 file's blocks."""
    v2 = tmp_path / "v2.bin"
    stores = [("q", _stored(5)), ("q/$deadletterqueue", _stored(2))]
    snapshot.write(v2, stores)
    expected = _summary(list(snapshot.read(v2)))
    raw = v2.read_bytes()[len(snapshot.MAGIC) :]
    names: list[str] = []
    entries: list[list[Any]] = []
    sections = b""
    while raw[:16] != bytes(16):
        head_size, size = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:16], "little")
        doc = json.loads(raw[16 : 16 + head_size])
        names.append(doc["store"])
        entries += [[len(names) - 1, *entry] for entry in doc["messages"]]
        sections += raw[16 + head_size : 16 + head_size + size]
        raw = raw[16 + head_size + size :]
    head = json.dumps({"version": 1, "stores": names, "messages": entries}).encode()
    v1 = tmp_path / "v1.bin"
    v1.write_bytes(snapshot.MAGIC_V1 + len(head).to_bytes(8, "little") + head + sections)
    assert _summary(list(snapshot.read(v1))) == expected
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(v2.read_bytes()[:-20])  # the end mark and some sections lost
    with pytest.raises(RowError):
        list(snapshot.read(truncated))
