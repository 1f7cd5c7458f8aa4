"""--data-dir: nothing the broker acknowledged is lost when it is killed."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from azure.servicebus import ServiceBusMessage, ServiceBusMessageState, ServiceBusSubQueue

from sbnotebook.emulator import Emulator, ManualClock
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, drain
from tests.processes import free_port, start_cli_emulator


def _start(data_dir: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    return start_cli_emulator("--port", str(port), "--data-dir", str(data_dir))


def test_sigkill_loses_nothing_acknowledged_and_releases_locks(tmp_path: Path) -> None:
    port = free_port()
    proc, conn = _start(tmp_path, port)
    acknowledged: list[str] = []
    try:
        with QuickCloseClient.from_connection_string(conn, retry_total=0) as c:
            with c.get_queue_sender("orders") as s:
                for i in range(50):
                    s.send_messages([ServiceBusMessage(f"m{i}-{j}") for j in range(10)])
                    acknowledged += [f"m{i}-{j}" for j in range(10)]
            with c.get_queue_receiver("orders", max_wait_time=3) as r:
                got = r.receive_messages(max_message_count=20, max_wait_time=3)
                for m in got[:10]:
                    r.complete_message(m)  # these are gone for good
                completed = {str(m) for m in got[:10]}
                r.defer_message(got[10])
                deferred_seq = got[10].sequence_number
                r.dead_letter_message(got[11], reason="bad")
                # got[12:] stay locked when the broker dies

                # Keep sending from another thread while the broker is killed mid-stream.
                def hammer() -> None:
                    try:
                        with QuickCloseClient.from_connection_string(conn, retry_total=0) as c2:
                            with c2.get_queue_sender("results") as s2:
                                for k in range(10_000):
                                    s2.send_messages(ServiceBusMessage(f"r{k}"))
                                    acked_results.append(k)
                    except Exception:  # the broker is SIGKILLed under it: what was acknowledged is what counts
                        pass

                acked_results: list[int] = []
                t = threading.Thread(target=hammer)
                t.start()
                while len(acked_results) < 50:
                    t.join(0.05)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                t.join(30)
    finally:
        proc.kill()
    proc, conn = _start(tmp_path, port)
    try:
        with QuickCloseClient.from_connection_string(conn) as c:
            left = {str(m) for m in drain(c, "orders")}
            assert left == set(acknowledged) - completed - {str(got[10]), str(got[11])}
            with c.get_queue_receiver("orders", max_wait_time=3) as r:
                (d,) = r.receive_deferred_messages([deferred_seq])
                r.complete_message(d)
            (dead,) = drain(c, "orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER, count=1)
            assert dead.dead_letter_reason == "bad"
            results = {str(m) for m in drain(c, "results")}
            assert {f"r{k}" for k in acked_results} <= results  # every acknowledged send survived
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_restart_keeps_sequence_numbers_schedules_and_session_state(tmp_path: Path) -> None:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=8)  # not due before the peek below
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            with c.get_queue_sender("q") as s:
                s.send_messages(ServiceBusMessage("one"))
                (scheduled_seq,) = s.schedule_messages(ServiceBusMessage("later"), when)
            with c.get_queue_sender("sq") as s:
                s.send_messages(ServiceBusMessage("s", session_id="k"))
            with c.get_queue_receiver("sq", session_id="k") as r:
                r.session.set_state(b"state-1")
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        assert emu.broker.restored == 3
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            with c.get_queue_sender("q") as s:
                s.send_messages(ServiceBusMessage("two"))
            with c.get_queue_receiver("q", max_wait_time=6) as r:
                peeked = {str(m): m for m in r.peek_messages(max_message_count=10, sequence_number=1)}
                assert set(peeked) == {"one", "later", "two"}
                assert peeked["two"].sequence_number > scheduled_seq  # numbering continues after a restart
                later = peeked["later"]
                if later.state == ServiceBusMessageState.SCHEDULED:  # still waiting: its number kept
                    assert later.sequence_number == scheduled_seq
                else:  # fell due before this peek (a slow restart): numbered again, as Service Bus does
                    assert later.sequence_number > peeked["two"].sequence_number
            got = drain(c, "q", wait=12)
            assert sorted(str(m) for m in got) == ["later", "one", "two"]  # the schedule fired after the restart
            with c.get_queue_receiver("sq", session_id="k") as r:
                assert r.session.get_state() == b"state-1"


def test_a_schedule_due_at_restore_is_numbered_again_before_the_broker_serves(tmp_path: Path) -> None:
    """Falling due while stopped is falling due: at restore the message is appended with a new
    number (as a running broker does, 867c9e7), not served under the number it was scheduled with."""
    clock = ManualClock(time.time())  # nothing falls due unless the test moves it
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path, clock=clock) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            with c.get_queue_sender("q") as s:
                s.send_messages(ServiceBusMessage("one"))
                when = dt.datetime.fromtimestamp(clock.now() + 60, dt.UTC)
                (scheduled_seq,) = s.schedule_messages(ServiceBusMessage("later"), when)
    clock.advance(120)  # due while the emulator was stopped
    emu = Emulator(TEST_TOPOLOGY, data_dir=tmp_path, clock=clock)
    # Restored, not yet serving: no timer of the running broker has fired, the restore alone did it
    assert emu.broker.counts("q") == {"active": 2, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    with emu, QuickCloseClient.from_connection_string(emu.connection_string) as c:
        with c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("two"))
        with c.get_queue_receiver("q") as r:
            peeked = [(str(m), m.sequence_number, m.state) for m in r.peek_messages(max_message_count=10)]
    active = ServiceBusMessageState.ACTIVE
    assert peeked == [("one", 1, active), ("later", scheduled_seq + 1, active), ("two", scheduled_seq + 2, active)]
    # The journal kept the new number: a third start has 'later' once, under it
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path, clock=clock) as emu:
        assert emu.broker.restored == 3
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            with c.get_queue_receiver("q") as r:
                again = [(str(m), m.sequence_number) for m in r.peek_messages(max_message_count=10)]
    assert again == [(name, seq) for name, seq, _ in peeked]
