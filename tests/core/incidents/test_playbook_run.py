"""A playbook over an incident, planned and run from the command line as a job runs it: the plan's
counts are the broker's, the brake stops the run (exit 3), ``--resume`` finishes it, every message is
in exactly one place, the audit agrees with the broker message by message, and a second run handles
0. Each check reads the broker through the SDK, not the kit's words."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusSubQueue

from sbnotebook import cli, core
from sbnotebook.core.operations.copies import ORIGINAL_ID
from sbnotebook.emulator import Emulator
from tests.core.incidents.playbook_incident import (
    INCIDENT,
    SUBSCRIPTION,
    TOPOLOGY,
    dead_letter_kinds,
    make_incident,
    playbook_text,
)
from tests.helpers import QuickCloseClient, emulator_config
from tests.required import require_module

BRAKE = "    rate: 100/s\n    stop_if_dead_letters: 20\n    watch_interval: 0.1\n"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as emu:
        yield emu
        core.close_all()


def originals(emulator: Emulator, entity: str, dead_letter: bool = False) -> list[str]:
    """The original message id of each message in ``entity`` (or its DLQ): a copy's
    ``sbnotebook-original-message-id``, else its own id; peeked through the SDK."""
    found: list[str] = []
    sub_queue = {"sub_queue": ServiceBusSubQueue.DEAD_LETTER} if dead_letter else {}
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        topic, _, sub = entity.partition("/subscriptions/")
        receiver = (
            client.get_subscription_receiver(topic, sub, **sub_queue)
            if sub
            else client.get_queue_receiver(entity, **sub_queue)
        )
        with receiver:
            after = 0
            while page := receiver.peek_messages(max_message_count=250, sequence_number=after + 1):
                for m in page:
                    props = m.application_properties or {}
                    original = props.get(ORIGINAL_ID.encode()) or props.get(ORIGINAL_ID)
                    found.append(original.decode() if isinstance(original, bytes) else str(original or m.message_id))
                after = page[-1].sequence_number
    return found


def ids_of(kind: str) -> set[str]:
    """The incident's message ids of one kind (``t``, ``s``, ``x``, ``v``)."""
    return {f"{kind}-{e.split('/')[0]}-{i}" for e, kinds in INCIDENT.items() for i in range(kinds.get(kind, 0))}


class DeadLettering:
    """A consumer of ``retry`` that dead-letters everything it gets (what is still broken), until stopped."""

    def __init__(self, emulator: Emulator) -> None:
        self.stop = threading.Event()
        self.cs = emulator.connection_string
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with QuickCloseClient.from_connection_string(self.cs) as client, client.get_queue_receiver("retry") as r:
            while not self.stop.is_set():
                for m in r.receive_messages(max_message_count=20, max_wait_time=0.2):
                    r.dead_letter_message(m, reason="TimeoutException", error_description="still broken")

    def __enter__(self) -> DeadLettering:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def test_a_playbook_planned_braked_resumed_and_run_again_moves_each_message_once(
    emulator: Emulator, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_incident(emulator)
    monkeypatch.setenv("SB_TEST", emulator.connection_string)
    path = tmp_path / "orders.yaml"
    path.write_text(playbook_text(BRAKE) + "connection: env:SB_TEST\n", encoding="utf-8")
    kinds = dead_letter_kinds(emulator)  # (entity, kind) -> n, read through the SDK

    # The plan: one scan, nothing touched, its counts the broker's.
    assert cli.main(["playbook", "plan", str(path)]) == 0
    said = capsys.readouterr().out
    book = core.playbook.load(path)
    emulator.requests.clear()
    plan = core.playbook.plan(book)
    # one scan: each message peeked once, in no more requests than %sb_dlq --summary --by signature's
    planned = (emulator.requests["com.microsoft:peek-message"], emulator.requests["peeked messages"])
    emulator.requests.clear()
    for entity in plan.entities:
        core.group_counts(entity, by=["signature"], connection=emulator.connection_string)
    summary = (emulator.requests["com.microsoft:peek-message"], emulator.requests["peeked messages"])
    assert planned[0] <= summary[0] and planned[1] == summary[1] == 1_050, (planned, summary)
    rule_of = {"t": "timeouts", "s": "old-schema", "x": "test-traffic", "v": "(no rule)"}
    expected = Counter({(f"{e}/$deadletterqueue", rule_of[k]): n for (e, k), n in kinds.items()})
    assert plan.counts() == expected
    assert "1,050 dead letters in 3 dead-letter queues" in said and "no rule matches: 50" in said, said
    assert dead_letter_kinds(emulator) == kinds

    # The run: the consumer of retry dead-letters what it gets; the brake stops the run.
    with DeadLettering(emulator):
        code = cli.main(["playbook", "run", str(path), "--yes"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 3 and "stopped by the brake in rule timeouts" in out[-1], out[-3:]
    assert core.playbook.state_path(book).is_file()
    assert cli.main(["playbook", "run", str(path), "--yes"]) == 2  # unfinished: only --resume goes on
    assert "did not finish" in capsys.readouterr().err

    # Resumed without the consumer: every message in exactly one place.
    assert cli.main(["playbook", "run", str(path), "--yes", "--resume"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "; done." in last, last
    retried = originals(emulator, "retry") + originals(emulator, "retry", dead_letter=True)
    parked = originals(emulator, "parked")
    left = [i for e in INCIDENT for i in originals(emulator, e, dead_letter=True)]
    assert sorted(retried) == sorted(ids_of("t")) and sorted(parked) == sorted(ids_of("s"))
    assert sorted(left) == sorted(ids_of("v"))  # no rule: still dead-lettered; the x- discarded
    assert not core.playbook.state_path(book).exists()

    # The audit, message by message: the last row of each says where the broker has it.
    audit = core.playbook.audit(book.audit)
    last_rows = audit.sort_values("time").groupby(["entity", "sequence_number"]).tail(1)
    where = dict(zip(last_rows["message_id"], last_rows["outcome"], strict=True))
    assert {i for i, o in where.items() if o == "moved"} == ids_of("t")
    assert {i for i, o in where.items() if o == "parked"} == ids_of("s")
    assert {i for i, o in where.items() if o == "discarded"} == ids_of("x")
    assert set(where.values()) == {"moved", "parked", "discarded"}
    assert (audit["outcome"] == "stopped before").any()  # the braked run said what it had not reached
    copies = set(audit.loc[audit["outcome"] == "moved", "copy_message_id"])
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("retry") as r:
            active = {str(m.message_id) for m in r.peek_messages(max_message_count=1000)}
        with client.get_queue_receiver("retry", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            dead = {str(m.message_id) for m in r.peek_messages(max_message_count=1000)}
    assert active | dead == copies and len(copies) == len(ids_of("t"))

    # A second run: nothing left to move, and it says so.
    assert cli.main(["playbook", "run", str(path), "--yes"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "0 moved, 0 parked, 0 discarded, 0 kept; done (nothing to move)." in last, last
    assert sorted(i for e in INCIDENT for i in originals(emulator, e, dead_letter=True)) == sorted(ids_of("v"))
    assert SUBSCRIPTION in INCIDENT


def test_a_copy_that_comes_back_dead_lettered_is_kept_not_moved_again(tmp_path: Path) -> None:
    """A consumer that dead-letters again what is still broken: the next run keeps those (their
    originals were moved by a run, the audit says so) and moves nothing."""
    with Emulator(emulator_config("back", {"q": {}}), clock="manual") as emulator:
        cs = emulator.connection_string
        core.send("q", [f"m{i}" for i in range(20)], connection=cs)
        with core.receive("q", max_messages=20, wait_seconds=5, connection=cs) as batch:
            assert batch.dead_letter(reason="TimeoutException", description="after 30 s").ok
        path = tmp_path / "q.yaml"
        path.write_text(
            "playbook: back\nentities: [q]\nrules:\n  - name: timeouts\n    when: {reason: TimeoutException}\n"
            "    do: resubmit\naudit: audit\n",
            encoding="utf-8",
        )
        book = core.playbook.load(path)
        first = core.playbook.run(book, connection=cs)
        assert first.exit_code == 0 and first.counts["moved"] == 20, first
        with core.receive("q", max_messages=20, wait_seconds=5, connection=cs) as batch:
            assert len(batch) == 20 and batch.dead_letter(reason="TimeoutException", description="again").ok
        second = core.playbook.run(book, connection=cs)
        assert second.exit_code == 0 and second.counts["moved"] == 0 and second.counts["kept"] == 20, second
        assert emulator.broker.counts("q")["dead_letter"] == 20 and emulator.broker.counts("q")["active"] == 0
        kept = core.playbook.audit(second.audit_file)
        assert set(kept["outcome"]) == {"kept"} and kept["note"].str.contains("came back").all()
        core.close_all()


def test_a_finished_runs_audit_as_parquet_reads_back_as_the_broker_has_it(tmp_path: Path) -> None:
    require_module("pyarrow")
    with Emulator(emulator_config("pq", {"q": {}, "parked": {}}), clock="manual") as emulator:
        cs = emulator.connection_string
        core.send("q", [f"m{i}" for i in range(5)], connection=cs)
        with core.receive("q", max_messages=5, wait_seconds=5, connection=cs) as batch:
            assert batch.dead_letter(reason="Poison").ok
        path = tmp_path / "q.yaml"
        path.write_text(
            "playbook: pq\nentities: [q]\nrules:\n  - name: all\n    do: park\n    to: parked\n"
            "audit: audit\nformat: parquet\n",
            encoding="utf-8",
        )
        done = core.playbook.run(core.playbook.load(path), connection=cs)
        assert done.exit_code == 0 and done.audit_file.suffix == ".parquet" and done.audit_file.is_file()
        assert not list((tmp_path / "audit").glob("*.jsonl"))
        audit = core.playbook.audit(tmp_path / "audit")
        assert list(audit.columns) == list(core.playbook.COLUMNS) and set(audit["outcome"]) == {"parked"}
        assert sorted(audit["copy_message_id"]) == sorted(originals_ids(emulator, "parked"))
        assert emulator.broker.counts("parked")["active"] == 5 and emulator.broker.counts("q")["dead_letter"] == 0
        core.close_all()


def originals_ids(emulator: Emulator, entity: str) -> list[str]:
    """The message ids in ``entity``, peeked through the SDK."""
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(entity) as r:
            return [str(m.message_id) for m in r.peek_messages(max_message_count=100)]


def test_a_rules_edit_changes_each_copy_as_the_broker_delivers_it(tmp_path: Path) -> None:
    """``edit:`` on a rule: each copy's JSON body merge-patched, properties set (typed) and removed,
    its time to live set; a body that is not JSON goes unchanged with the other edits. The plan shows
    the edit. Read back through the SDK at the target."""
    with Emulator(emulator_config("ed", {"q": {}, "fixed": {}}), clock="manual") as emulator:
        cs = emulator.connection_string
        bodies = ['{"version": 1, "legacy": "x", "n": 0}', '{"version": 1, "legacy": "y", "n": 1}', "not json"]
        core.send("q", [{"body": b, "application_properties": {"retryHint": "soon", "n": i}} for i, b in
                        enumerate(bodies)], connection=cs)  # fmt: skip
        with core.receive("q", max_messages=3, wait_seconds=5, connection=cs) as batch:
            assert batch.dead_letter(reason="SchemaError").ok
        path = tmp_path / "q.yaml"
        path.write_text(
            "playbook: ed\nentities: [q]\nrules:\n  - name: migrate\n    do: resubmit\n    target: fixed\n"
            "    edit:\n      patch: {version: 2, legacy: null}\n      set_properties: {migrated: true, v: 2}\n"
            "      remove_properties: [retryHint]\n      time_to_live: 1d\naudit: audit\n",
            encoding="utf-8",
        )
        book = core.playbook.load(path)
        shown = "\n".join(core.playbook.plan(book, connection=cs).lines())
        assert "each copy edited: body patch" in shown and "remove retryHint" in shown, shown
        assert core.playbook.run(book, connection=cs).exit_code == 0
        with QuickCloseClient.from_connection_string(cs) as client, client.get_queue_receiver("fixed") as r:
            got = {m.application_properties[b"n"]: m for m in r.peek_messages(max_message_count=10)}
        assert sorted(got) == [0, 1, 2] and emulator.broker.counts("q")["dead_letter"] == 0
        for n, m in got.items():
            props = {k.decode(): v for k, v in m.application_properties.items()}
            assert props["migrated"] is True and props["v"] == 2 and "retryHint" not in props, props
            assert m.time_to_live is not None and m.time_to_live.total_seconds() == 86400
            body = b"".join(m.body).decode()
            assert body == ("not json" if n == 2 else f'{{"version": 2, "n": {n}}}'), body
        core.close_all()


def test_a_dead_letter_locked_by_another_receiver_is_audited_left_and_the_next_run_takes_it(tmp_path: Path) -> None:
    """A message the run selected but could not take (another receiver holds its lock): the run
    exits 1, its audit row says ``left``, the broker still holds it dead-lettered; once the lock is
    given back the next run moves it. Nothing is moved twice."""
    with Emulator(emulator_config("lf", {"q": {}, "parked": {}}), clock="manual") as emulator:
        cs = emulator.connection_string
        core.send("q", [f"m{i}" for i in range(5)], connection=cs)
        with core.receive("q", max_messages=5, wait_seconds=5, connection=cs) as batch:
            assert batch.dead_letter(reason="Poison").ok
        path = tmp_path / "q.yaml"
        path.write_text(
            "playbook: lf\nentities: [q]\nrules:\n  - name: all\n    do: park\n    to: parked\naudit: audit\n",
            encoding="utf-8",
        )
        book = core.playbook.load(path)
        with (
            QuickCloseClient.from_connection_string(cs) as client,
            client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as holder,
        ):
            (held,) = holder.receive_messages(max_message_count=1, max_wait_time=5)
            first = core.playbook.run(book, connection=cs)
            assert first.exit_code == 1 and first.counts["parked"] == 4 and first.counts["left"] == 1, first
            rows = core.playbook.audit(first.audit_file)
            assert rows.loc[rows["outcome"] == "left", "sequence_number"].tolist() == [held.sequence_number]
            assert emulator.broker.counts("parked")["active"] == 4 and emulator.broker.counts("q")["dead_letter"] == 1
            holder.abandon_message(held)
        second = core.playbook.run(book, connection=cs)
        assert second.exit_code == 0 and second.counts["parked"] == 1, second
        assert sorted(originals_ids(emulator, "parked")) == sorted(set(originals_ids(emulator, "parked")))
        assert emulator.broker.counts("parked")["active"] == 5 and emulator.broker.counts("q")["dead_letter"] == 0
        core.close_all()
