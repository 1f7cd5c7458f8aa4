"""What keeps the broker's cost per call flat as a store grows (issue 31), checked on the state
machine with a ManualClock: counts kept by state, peek after the oldest messages are gone, no
timer per never-expiring message after a restart, and rows written before lazy properties."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from proton import Message

from sbnotebook.emulator import Broker, ManualClock, Topology
from sbnotebook.emulator.amqp.codec import decode_message, encode_stored
from sbnotebook.emulator.broker.model import MessageData, MessageState
from sbnotebook.emulator.persistence.durability import open_broker
from sbnotebook.emulator.persistence.journal import Journal

TOPO = Topology.from_dict(
    {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": {"LockDuration": "PT10S"}}]}]}}
)


def _data(i: int, **props: object) -> MessageData:
    return decode_message(bytes(Message(body=f"m{i}", id=f"id-{i}", properties=props or None).encode()))


def _brute_counts(broker: Broker) -> dict[str, int]:
    source = broker.resolve_source("q")
    values = list(source.store.messages.values())
    return {
        "active": sum(m.state is MessageState.ACTIVE for m in values),
        "deferred": sum(m.state is MessageState.DEFERRED for m in values),
        "scheduled": sum(m.state is MessageState.SCHEDULED for m in values),
        "dead_letter": len(source.entity.dead_letter),
    }


def test_counts_kept_by_state_match_a_full_pass() -> None:
    clock = ManualClock(1000.0)
    broker = Broker(TOPO, clock=clock)
    broker.send("q", [_data(i) for i in range(20)])
    later = _data(99)
    object.__setattr__(later, "scheduled_enqueue_time", 2000.0)
    broker.send("q", [later])
    source = broker.resolve_source("q")
    got = broker.receive(source, 8, peek_lock=True, owner="r")
    broker.defer(got[0].lock_token)  # type: ignore[arg-type]
    broker.dead_letter(got[1].lock_token, "bad")  # type: ignore[arg-type]
    broker.complete(got[2].lock_token)  # type: ignore[arg-type]
    broker.abandon(got[3].lock_token)  # type: ignore[arg-type]
    assert broker.batch_delete(source, 5) == 5
    expected = {"active": 12, "deferred": 1, "scheduled": 1, "dead_letter": 1}  # 4 of the 12 locked
    assert broker.counts("q") == _brute_counts(broker) == expected
    clock.advance(1500)
    broker.tick()  # the schedule fires; the four locks still held lapse
    expected = {"active": 13, "deferred": 1, "scheduled": 0, "dead_letter": 1}
    assert broker.counts("q") == _brute_counts(broker) == expected


def test_peek_after_the_oldest_were_removed_skips_them_once() -> None:
    broker = Broker(TOPO, clock=ManualClock(1000.0))
    broker.send("q", [_data(i) for i in range(5000)])
    source = broker.resolve_source("q")
    assert broker.batch_delete(source, 4000) == 4000
    store = source.store
    assert store._order[0] < 4001  # removed entries are dropped lazily...
    assert [m.sequence_number for m in broker.peek(source, 1, 3)] == [4001, 4002, 4003]
    assert store._order[0] == 4001  # ...and the run in front of the peek by that peek, once


def test_a_restart_sets_no_timer_for_messages_that_never_expire(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    broker = open_broker(TOPO, ManualClock(1000.0), journal)
    broker.send("q", [_data(i) for i in range(100)])
    journal.close()
    again = open_broker(TOPO, ManualClock(1001.0), Journal(tmp_path))
    assert again.counts("q")["active"] == 100
    assert again.timers.next_due() is None


def test_rows_written_before_lazy_properties_still_load(tmp_path: Path) -> None:
    """Rows of the previous format hold both property maps encoded and no 'changed' flag; equal
    maps mean unchanged, and a changed map is what a receiver gets."""
    journal = Journal(tmp_path)
    broker = open_broker(TOPO, ManualClock(1000.0), journal)
    broker.send("q", [_data(1, colour="red"), _data(2, colour="blue")])
    source = broker.resolve_source("q")
    (second,) = [m for m in source.store.messages.values() if m.sequence_number == 2]
    second.writable_properties()["colour"] = "green"
    source.store.touch(second)
    journal.close()
    db = sqlite3.connect(tmp_path / "broker.sqlite3")
    from sbnotebook.emulator.persistence.rows import encode_map

    for seq, sent, now in ((1, {"colour": "red"}, {"colour": "red"}), (2, {"colour": "blue"}, {"colour": "green"})):
        (meta_text,) = db.execute("SELECT meta FROM messages WHERE seq = ?", (seq,)).fetchone()
        meta = json.loads(meta_text)
        del meta["changed"]  # as the previous version wrote it
        db.execute(
            "UPDATE messages SET meta = ?, sent_application_properties = ?, application_properties = ? WHERE seq = ?",
            (json.dumps(meta), encode_map(sent), encode_map(now), seq),
        )
    db.commit()
    db.close()
    again = open_broker(TOPO, ManualClock(1001.0), Journal(tmp_path))
    msgs = sorted(again.resolve_source("q").store.messages.values(), key=lambda m: m.sequence_number)
    assert [m.application_properties for m in msgs] == [{"colour": "red"}, {"colour": "green"}]
    assert [m.changed_properties is None for m in msgs] == [True, False]
    delivered = Message()
    delivered.decode(encode_stored(msgs[1]))
    assert delivered.properties == {"colour": "green"}
