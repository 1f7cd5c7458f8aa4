"""--data-dir keeps what the administration API made, rules and duplicate detection, in a format
that cannot run code."""

from __future__ import annotations

import copy
import datetime as dt
import os
import pickle
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.servicebus import ServiceBusMessage
from azure.servicebus.management import SqlRuleAction, SqlRuleFilter

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, drain, subscription_with_one_rule
from tests.processes import free_port, run_cli_emulator, start_cli_emulator

pytestmark = pytest.mark.timeout(120)


def _start(data_dir: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    return start_cli_emulator("--port", str(port), "--data-dir", str(data_dir))


def test_sigkill_and_restart_keep_admin_entities_rules_and_duplicate_detection(tmp_path: Path) -> None:
    port = free_port()
    proc, conn = _start(tmp_path, port)
    try:
        with emulator_admin_client(conn) as admin:
            admin.create_queue("made", lock_duration=dt.timedelta(seconds=20), max_delivery_count=4)
            admin.create_queue("dd", requires_duplicate_detection=True)
            admin.create_topic("news")
            subscription_with_one_rule(
                admin,
                "news",
                "sport",
                "only-sport",
                filter=SqlRuleFilter("kind = 'sport'"),
                action=SqlRuleAction("SET seen = 1"),
            )
            orders = admin.get_queue("orders")
            orders.max_delivery_count = 7
            admin.update_queue(orders)
            admin.delete_queue("results")
        with QuickCloseClient.from_connection_string(conn) as c:
            with c.get_queue_sender("made") as s:
                s.send_messages(ServiceBusMessage("kept"))
            with c.get_queue_sender("dd") as s:
                s.send_messages(ServiceBusMessage("first", message_id="m1"))
            with c.get_topic_sender("news") as s:
                s.send_messages([ServiceBusMessage("goal", application_properties={"kind": "sport"})])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    proc, conn = _start(tmp_path, port)
    try:
        with emulator_admin_client(conn) as admin:
            made = admin.get_queue("made")
            assert (made.lock_duration, made.max_delivery_count) == (dt.timedelta(seconds=20), 4)
            assert admin.get_queue("dd").requires_duplicate_detection is True
            assert admin.get_queue("orders").max_delivery_count == 7
            with pytest.raises(ResourceNotFoundError):
                admin.get_queue("results")
            (rule,) = admin.list_rules("news", "sport")
            assert (rule.name, rule.filter.sql_expression, rule.action.sql_expression) == (
                "only-sport",
                "kind = 'sport'",
                "SET seen = 1",
            )
        with QuickCloseClient.from_connection_string(conn) as c:
            with c.get_queue_sender("dd") as s:
                s.send_messages(ServiceBusMessage("again", message_id="m1"))  # a duplicate: dropped
            assert [str(m) for m in drain(c, "dd")] == ["first"]
            assert [str(m) for m in drain(c, "made")] == ["kept"]
            with c.get_topic_sender("news") as s:
                s.send_messages(
                    [ServiceBusMessage("news"), ServiceBusMessage("match", application_properties={"kind": "sport"})]
                )
            with c.get_subscription_receiver("news", "sport", max_wait_time=3) as r:
                got = r.receive_messages(max_message_count=5, max_wait_time=3)
                assert [str(m) for m in got] == ["goal", "match"]
                assert all(m.application_properties[b"seen"] == 1 for m in got)
                for m in got:
                    r.complete_message(m)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_in_process_restart_keeps_deleted_subscriptions_deleted(tmp_path: Path) -> None:
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.delete_subscription("t", "sql")
        admin.create_subscription("t", "extra")
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert sorted(s.name for s in admin.list_subscriptions("t")) == ["all", "corr", "extra"]


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch BOOM",))


def test_a_data_dir_holding_pickles_is_refused_and_never_unpickled(tmp_path: Path) -> None:
    """Rule: a data directory from someone else can hold wrong data, never code."""
    db = sqlite3.connect(tmp_path / "broker.sqlite3")
    db.execute("CREATE TABLE messages (store TEXT, seq INTEGER, row BLOB, PRIMARY KEY (store, seq))")
    db.execute("INSERT INTO messages VALUES ('orders', 1, ?)", (pickle.dumps(_Boom()),))
    db.commit()
    db.close()
    result = run_cli_emulator(
        "--port",
        "0",
        "--data-dir",
        str(tmp_path),
        cwd=tmp_path,  # where the payload would write
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},  # this checkout's emulator
    )
    assert not (tmp_path / "BOOM").exists()
    assert result.returncode != 0
    assert "older emulator" in result.stderr


def test_rows_are_json_and_amqp_not_pickle(tmp_path: Path) -> None:
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c, c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("x", application_properties={"k": b"\x00\x01"}))
    db = sqlite3.connect(tmp_path / "broker.sqlite3")
    blobs = [v for row in db.execute("SELECT * FROM messages") for v in row if isinstance(v, bytes)]
    assert blobs and not any(b.startswith(b"\x80") for b in blobs)  # pickle streams start with PROTO 0x80
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            (m,) = drain(c, "q", count=1)
            assert m.application_properties == {b"k": b"\x00\x01"}


def test_stored_duplicate_history_is_pruned_after_its_window(tmp_path: Path) -> None:
    from sbnotebook.emulator import ManualClock, Topology
    from sbnotebook.emulator.amqp.codec import decode_message
    from sbnotebook.emulator.persistence.durability import open_broker
    from sbnotebook.emulator.persistence.journal import Journal

    clock = ManualClock()
    journal = Journal(tmp_path)
    broker = open_broker(Topology.from_dict(TEST_TOPOLOGY), clock, journal)
    from proton import Message

    m = Message(id="m1", body="x")
    broker.send("dedup", [decode_message(bytes(m.encode()))])
    db = sqlite3.connect(tmp_path / "broker.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM duplicates").fetchone()[0] == 1
    clock.advance(601)  # past the 10-minute window
    broker.tick()
    assert db.execute("SELECT COUNT(*) FROM duplicates").fetchone()[0] == 0
    journal.close()


def test_each_entity_says_when_it_was_created_and_a_restart_keeps_it(tmp_path: Path) -> None:
    """The administration API's CreatedAt, as Service Bus answers it: each queue, topic and
    subscription its own creation time, a new one when deleted and created again, and the same after
    a restart from the data directory (it said the emulator's start time for every entity, so a
    queue created again looked unchanged: core.copy's record tells entities apart by it)."""
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.create_queue("made")
        admin.create_topic("news")
        admin.create_subscription("news", "all")
        made = admin.get_queue_runtime_properties("made").created_at_utc
        news = admin.get_topic_runtime_properties("news").created_at_utc
        sub = admin.get_subscription_runtime_properties("news", "all").created_at_utc
        assert made < news <= sub <= dt.datetime.now(dt.UTC), (made, news, sub)
        assert admin.get_queue_runtime_properties("q").created_at_utc < made  # the topology's, at start
        admin.delete_queue("made")
        admin.create_queue("made")
        made = admin.get_queue_runtime_properties("made").created_at_utc
        assert made > sub  # created again: a new time
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_queue_runtime_properties("made").created_at_utc == made
        assert admin.get_topic_runtime_properties("news").created_at_utc == news
        assert admin.get_subscription_runtime_properties("news", "all").created_at_utc == sub


def test_a_topology_entity_keeps_its_creation_time_across_restarts(tmp_path: Path) -> None:
    """An entity of the topology file is built again at each start; its CreatedAt is the first
    start's, as Service Bus answers one creation time for an entity never deleted (it said each
    start's time, so an interrupted copy from it started over after a restart). One that left the
    topology file and came back is new."""
    topology = copy.deepcopy(TEST_TOPOLOGY)
    with Emulator(topology, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        q = admin.get_queue_runtime_properties("q").created_at_utc
        topic = admin.get_topic_runtime_properties("st").created_at_utc
        sub = admin.get_subscription_runtime_properties("st", "s").created_at_utc
    time.sleep(0.05)  # a rebuilt entity would say a later time
    with Emulator(topology, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_queue_runtime_properties("q").created_at_utc == q
        assert admin.get_topic_runtime_properties("st").created_at_utc == topic
        assert admin.get_subscription_runtime_properties("st", "s").created_at_utc == sub
    queues = topology["UserConfig"]["Namespaces"][0]["Queues"]
    queues[:] = [one for one in queues if one["Name"] != "q"]
    with Emulator(topology, data_dir=tmp_path):
        pass
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_queue_runtime_properties("q").created_at_utc > q  # gone, then back: new
        assert admin.get_topic_runtime_properties("st").created_at_utc == topic


def test_a_kept_rule_the_grammar_now_refuses_stops_the_start_naming_it(tmp_path: Path) -> None:
    # A data dir written by an earlier emulator whose evaluator took `_x = 1` (a name may not begin
    # with `_`): starting on it names the subscription and the rule, instead of routing differently.
    from sbnotebook.emulator.persistence.journal import Journal
    from sbnotebook.emulator.persistence.rows import entity_doc
    from sbnotebook.emulator.topology import EntityProperties, RuleConfig, TopologyError
    from tests.helpers import emulator_config

    topology = emulator_config("kept", {}, [{"Name": "t", "Properties": {}, "Subscriptions": []}])
    with Emulator(topology, data_dir=tmp_path):
        pass  # the data dir made as the emulator makes it
    journal = Journal(tmp_path)
    rules = [RuleConfig("old", sql_expression="_x = 1")]
    journal.entity("t/subscriptions/s", entity_doc("subscription", "s", EntityProperties(), topic="t", rules=rules))
    journal.flush()
    journal.close()
    with pytest.raises(TopologyError, match=r"subscription t/subscriptions/s, rule 'old': .*position"):
        Emulator(topology, data_dir=tmp_path).__enter__()
