"""The emulator under test as a process of its own (``python -m sbnotebook.emulator``), what it
holds (threads, resident memory, from outside), and the SDK options that reach it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from azure.servicebus import TransportType

STARTUP_LINES = 12


@dataclass
class Served:
    """A running emulator process: its connection string, port, CA file (``--tls``) and process."""

    proc: subprocess.Popen[str]
    conn: str
    port: int
    ca: Path | None

    @property
    def process(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)

    def held(self) -> tuple[int, float]:
        """(threads, resident MiB) of the emulator process now."""
        process = self.process
        return process.num_threads(), process.memory_info().rss / 2**20

    def cpu(self) -> float:
        """CPU seconds (user and system) the emulator has used so far."""
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def options(self, transport: TransportType = TransportType.Amqp) -> dict[str, Any]:
        """What an SDK client needs besides the connection string (no retries: a refusal shows at once)."""
        if self.ca is None:
            if transport == TransportType.Amqp:
                return {}
            return {"transport_type": transport, "custom_endpoint_address": f"sb://127.0.0.1:{self.port}"}
        scheme = "sb" if transport == TransportType.Amqp else "https"
        return {
            "transport_type": transport,
            "custom_endpoint_address": f"{scheme}://localhost:{self.port}",
            "connection_verify": str(self.ca),
        }

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def start(*args: str, tls: bool = False) -> Served:
    """``sbnotebook emulator --port 0 ARGS`` (``--tls``: its CA made in a temporary folder)."""
    home = tempfile.mkdtemp(prefix="sbnotebook-load-")
    command = [sys.executable, "-m", "sbnotebook.emulator", "--port", "0", *(["--tls"] if tls else []), *args]
    env = {**os.environ, "SBNOTEBOOK_HOME": home}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    ca: Path | None = None
    for _ in range(STARTUP_LINES):
        line = proc.stdout.readline().strip()
        if line.startswith("CA certificate: "):
            ca = Path(line.removeprefix("CA certificate: "))
        if line.startswith("Endpoint=sb://"):
            port = int(line.split(";")[0].rsplit(":", 1)[1])
            time.sleep(0.2)  # its loop settles: the idle figures are taken after start-up
            return Served(proc, line, port, ca)
    proc.kill()
    raise SystemExit(f"the emulator did not start: {' '.join(command)}")
