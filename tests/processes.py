"""Processes and ports for tests: an emulator started by its command line, a script killed midway,
a server waited for and stopped, a port's listener and its accepted connections."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from sbnotebook.emulator.ports import restartable_port
from tests.waiting import wait_until

ANY_CONNECTION_STRING = re.compile(r"^Endpoint=sb://\S+$")


def start_cli_emulator(
    *args: str, pattern: re.Pattern[str] = ANY_CONNECTION_STRING, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Run ``python -m sbnotebook.emulator ARGS`` (with ``env`` added to the environment) and wait
    for the line holding its connection string."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbnotebook.emulator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    for _ in range(6):
        line = proc.stdout.readline().strip()
        if pattern.match(line):
            return proc, line
    proc.kill()
    raise AssertionError(f"no connection string printed; stderr: {proc.stderr.read() if proc.stderr else ''}")


def run_cli_emulator(*args: str, module: str = "sbnotebook.emulator", **run: Any) -> subprocess.CompletedProcess[str]:
    """Run ``python -m sbnotebook.emulator ARGS`` (or ``-m MODULE``) to its end, for arguments it
    refuses: its exit code and output (``run`` goes to ``subprocess.run``: ``cwd=``, ``env=``)."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60, **run)


def run_and_kill(script: str, args: list[str], stop_when: Callable[[], bool], timeout: float = 60) -> None:
    """Run ``script`` in a new Python process and SIGKILL it as soon as ``stop_when()`` holds (the
    process must still be running then: one that ended first fails the test with its stderr)."""
    # stderr to a file, not a pipe: nobody reads a pipe while waiting, and a child that wrote more than
    # a pipe holds (64 KiB) would block there until the timeout.
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], stderr=err)
        try:
            wait_until(lambda: stop_when() or proc.poll() is not None, timeout=timeout, interval=0.01)
            if proc.poll() is not None:
                err.seek(0)
                raise AssertionError(f"it ended before it was killed: {err.read().decode(errors='replace')}")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def free_port() -> int:
    """A port an emulator can be killed and restarted on (and its +1 admin port free too)."""
    return restartable_port()


def port_open(port: int) -> bool:
    """Something listens on ``127.0.0.1:port``."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for_server(
    proc: subprocess.Popen[Any], ready: Callable[[], bool], what: str, log: Path, timeout: float
) -> None:
    """Poll ``ready`` (an ``OSError`` counts as not yet) until it says yes. If ``proc`` exits
    first, or ``timeout`` seconds pass, fail with the end of its ``log``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Ask ``proc`` to end (SIGTERM); kill it if it has not within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def server_sockets(port: int) -> set[tuple[str, int]]:
    """Client ends of the TCP connections accepted by the emulator listening on ``port``."""
    out = set()
    for c in psutil.Process().net_connections(kind="tcp"):
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED and c.raddr:
            out.add((c.raddr.ip, c.raddr.port))
    return out
