"""The manual clock from the command line (issue 54, point 3), as a user runs it: ``sbnotebook
emulator --clock manual`` in one process, ``sbnotebook emulator --advance 10m`` from another, an SDK
client in a third whose lock the advance expires. The broker's state is read back through the SDK
(peek) and ``--status``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import MessageLockLostError

from sbnotebook.emulator import userprocess
from tests.helpers import QuickCloseClient
from tests.processes import free_port, run_cli_emulator, start_cli_emulator

pytestmark = pytest.mark.timeout(120)


def sbnotebook(*args: str, **run: object) -> subprocess.CompletedProcess[str]:
    """``sbnotebook emulator ARGS`` to its end."""
    return run_cli_emulator("emulator", *args, module="sbnotebook", **run)


@pytest.fixture
def manual(tmp_path: Path) -> Iterator[tuple[str, Path, int]]:
    """An emulator started as ``sbnotebook emulator --clock manual``: its connection string, state
    file and port."""
    state = tmp_path / "state.json"
    port = free_port()
    proc, conn = start_cli_emulator("--clock", "manual", "--port", str(port), "--state-file", str(state))
    try:
        yield conn, state, port
    finally:
        proc.terminate()
        proc.wait(15)


def test_advance_from_another_process_expires_a_lock_an_sdk_client_holds(manual: tuple[str, Path, int]) -> None:
    conn, state, _ = manual
    with QuickCloseClient.from_connection_string(conn, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:  # the default topology: a 1-minute lock
            sender.send_messages(ServiceBusMessage("o-1"))
        with client.get_queue_receiver("orders") as receiver:
            (m,) = receiver.receive_messages(max_wait_time=5)
            moved = sbnotebook("--advance", "10m", "--state-file", str(state))
            assert moved.returncode == 0, moved.stderr
            assert "by 10m" in moved.stdout and "manual clock, 9m" in moved.stdout  # 10m less what real time did
            (peeked,) = receiver.peek_messages(sequence_number=m.sequence_number)
            assert peeked.delivery_count == 1  # fired before --advance returned
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(m)
    status = sbnotebook("--status", "--state-file", str(state))
    assert status.returncode == 0, status.stderr
    assert "(manual clock, 9m" in status.stdout and "ahead of real time)" in status.stdout


def test_a_typed_port_names_the_emulator_and_the_kits_durations_are_taken(manual: tuple[str, Path, int]) -> None:
    _, _, port = manual
    for duration in ("90s", "2h", "1d", "600"):
        moved = sbnotebook("--advance", duration, "--port", str(port))
        assert moved.returncode == 0, moved.stderr
    status = sbnotebook("--status", "--port", str(port))
    assert "(manual clock, 1d 2h 1" in status.stdout, status.stdout  # 1d 2h 11m 30s less real time


def test_the_system_clock_and_bad_durations_are_refused_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    proc, _ = start_cli_emulator("--port", "0", "--state-file", str(state))
    try:
        refused = sbnotebook("--advance", "1m", "--state-file", str(state))
        assert refused.returncode == 1
        assert refused.stderr.count("\n") == 1 and "--clock manual" in refused.stderr, refused.stderr
        status = sbnotebook("--status", "--state-file", str(state))
        assert "(system clock)" in status.stdout
    finally:
        proc.terminate()
        proc.wait(15)
    bad = sbnotebook("--advance", "soon", "--port", str(free_port()))
    assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr
    nobody = sbnotebook("--advance", "1m", "--port", str(free_port()))
    assert nobody.returncode == 1 and "cannot reach the emulator on 127.0.0.1" in nobody.stderr


@pytest.mark.slow
def test_the_shared_emulator_on_a_manual_clock(tmp_path: Path) -> None:
    env = {**os.environ, userprocess.ENV_HOME: str(tmp_path)}  # never the user's own shared emulator
    try:
        started = sbnotebook("--start", "--clock", "manual", env=env)
        assert started.returncode == 0, started.stderr
        assert "(manual clock, at real time)" in started.stdout
        moved = sbnotebook("--advance", "1h", env=env)
        assert moved.returncode == 0 and "Advanced the shared emulator by 1h" in moved.stdout, moved
        status = sbnotebook("--status", env=env)
        assert "Shared emulator running" in status.stdout and "(manual clock, 59m" in status.stdout, status.stdout
    finally:
        userprocess.stop(tmp_path / "emulator")
