"""What several benchmarks share: ``sbnotebook emulator`` as a process of its own, and the CPU seconds
a process has used. Imported as a sibling (``from _common import start_emulator``; benchmarks/__init__.py
says how that works when the scripts are imported as ``benchmarks.<name>``)."""

from __future__ import annotations

import subprocess
import sys
from typing import IO, Any

import psutil

# The emulator prints a few lines (entities, the administration API) before its connection string.
STARTUP_LINES = 8


def spawn(args: list[str], *, stderr: IO[Any] | None = None) -> subprocess.Popen[str]:
    """``python -m sbnotebook.emulator *args``, its output read through a pipe (``endpoint``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sbnotebook.emulator", *args], stdout=subprocess.PIPE, stderr=stderr, text=True
    )


def endpoint(proc: subprocess.Popen[str]) -> str:
    """The connection string the emulator prints once it listens; "" when it printed none in its first
    lines or exited first (the process is then the caller's to end)."""
    assert proc.stdout is not None
    for _ in range(STARTUP_LINES):
        line = proc.stdout.readline().strip()
        if line.startswith("Endpoint=sb://"):
            return line
        if not line and proc.poll() is not None:
            break
    return ""


def start_emulator(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    """The one way the benchmarks start ``sbnotebook emulator --port 0`` at a latency: the process and
    its connection string."""
    proc = spawn(["--port", "0", "--latency-ms", str(latency_ms)])
    conn = endpoint(proc)
    if not conn:
        proc.kill()
        proc.wait()
        raise SystemExit("the emulator did not start")
    return proc, conn


def cpu_seconds(process: psutil.Process) -> float:
    """CPU seconds (user and system) the process has used so far."""
    times = process.cpu_times()
    return float(times.user + times.system)
