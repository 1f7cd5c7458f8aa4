"""The shared embedded emulator (sbnotebook.emulator.userprocess): one per user, found by every process,
kept across kernel restarts, restarted when its state file names a dead process, started once when
kernels start together. Each test has its own SBNOTEBOOK_HOME, so the user's real one is never touched."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sbnotebook.emulator import cli, userprocess
from tests.waiting import HANG

pytestmark = pytest.mark.slow

SEND = """
from sbnotebook import core
conn = core.connect()
print(conn.settings)
core.send("orders", [{"from": "process one"}], connection=conn)
"""
PEEK = """
import json
from sbnotebook import core
print(json.dumps([r["body_text"] for r in core.peek("orders")]))
"""
ENSURE = """
from sbnotebook.emulator import userprocess
r = userprocess.ensure()
print(r.pid, r.port)
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(userprocess.ENV_HOME, str(tmp_path))
    yield tmp_path / "emulator"
    userprocess.stop(tmp_path / "emulator")


def python(code: str, home: Path) -> str:
    """Run ``code`` in a new Python process (a kernel, as far as the emulator can tell)."""
    env = {**os.environ, userprocess.ENV_HOME: str(home.parent)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_two_processes_see_the_same_messages_and_the_key_stays_private(home: Path) -> None:
    said = python(SEND, home)
    assert "shared by your notebooks" in said and str(home) in said and "--reset" in said
    assert json.loads(python(PEEK, home)) == ['{"from": "process one"}']
    key = (home / "key").read_text().strip()
    assert len(key) >= 40 and key not in said  # random, never printed
    assert stat.S_IMODE((home / "key").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert key not in (home / "state.json").read_text()
    running = userprocess.status(home)
    assert running is not None and key not in repr(running)
    # the key is not on the emulator's command line, which every user of the machine can read
    cmdline = Path(f"/proc/{running.pid}/cmdline")
    if cmdline.exists():
        assert key.encode() not in cmdline.read_bytes()


def test_the_emulator_outlives_the_kernel_and_a_restart_of_its_own_keeps_the_messages(home: Path) -> None:
    python(SEND, home)
    first = userprocess.status(home)
    assert first is not None  # the sending process has exited; the emulator has not
    assert userprocess.stop(home) == first.pid
    assert userprocess.status(home) is None
    assert json.loads(python(PEEK, home)) == ['{"from": "process one"}']  # a new emulator, same store
    second = userprocess.status(home)
    assert second is not None and second.pid != first.pid


def test_a_state_file_naming_a_dead_process_starts_a_fresh_emulator(home: Path) -> None:
    python(SEND, home)
    old = userprocess.status(home)
    assert old is not None
    os.kill(old.pid, signal.SIGKILL)  # killed: it cannot remove its state file
    deadline = time.monotonic() + HANG
    while userprocess.answers(old.host, old.port, 0.2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert json.loads((home / "state.json").read_text())["pid"] == old.pid
    assert json.loads(python(PEEK, home)) == ['{"from": "process one"}']
    new = userprocess.status(home)
    assert new is not None and new.pid != old.pid


def test_kernels_starting_together_get_one_emulator(home: Path) -> None:
    env = {**os.environ, userprocess.ENV_HOME: str(home.parent)}
    starts = [
        subprocess.Popen([sys.executable, "-c", ENSURE], env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    seen = {p.communicate(timeout=90)[0].strip() for p in starts}
    assert len(seen) == 1, seen
    running = userprocess.status(home)
    assert running is not None and seen == {f"{running.pid} {running.port}"}


def test_reset_deletes_the_messages_and_the_key(home: Path) -> None:
    python(SEND, home)
    key = (home / "key").read_text()
    userprocess.reset(home)
    assert userprocess.status(home) is None
    assert json.loads(python(PEEK, home)) == []
    assert (home / "key").read_text() != key


def test_status_shows_the_open_connections_and_the_cap(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    running = userprocess.ensure(home)
    with socket.create_connection((running.host, running.port), timeout=5) as held:
        held.sendall(b"AMQP\x03\x01\x00\x00")
        assert held.recv(8) == b"AMQP\x03\x01\x00\x00"  # an AMQP connection, counted
        assert cli.main(["--status"]) == 0
    said = capsys.readouterr().out
    assert f"running on {running.host}:{running.port}" in said
    assert "AMQP connections open: 1 of 5000 allowed" in said
