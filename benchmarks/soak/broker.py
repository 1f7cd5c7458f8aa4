"""The chaos soak's broker: its topology, and the emulator as a process it kills and restarts."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from _common import endpoint, spawn

from sbnotebook.emulator.ports import restartable_port

QUEUE = "soak"
PURGED = "soak-purge"
DLQ = f"{QUEUE}/$deadletterqueue"
TOPOLOGY: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "soak",
                "Queues": [
                    {
                        "Name": QUEUE,
                        # Duplicate detection: a send retried after a lost acknowledgement stays one message.
                        "Properties": {
                            "LockDuration": "PT5S",
                            "MaxDeliveryCount": 4,
                            "RequiresDuplicateDetection": True,
                            "DuplicateDetectionHistoryTimeWindow": "PT10M",
                        },
                    },
                    {"Name": PURGED, "Properties": {}},
                ],
            }
        ]
    }
}


class Broker:
    """The emulator as a process: started with this epoch's faults, killed with SIGKILL."""

    def __init__(self, workdir: Path, rng: random.Random, latency_ms: float) -> None:
        self.port = restartable_port()  # the same port across kills (the kit reconnects to it)
        self.stderr_path = workdir / "emulator.stderr"
        self.data_dir = workdir / "data"
        self.config = workdir / "topology.json"
        self.config.write_text(json.dumps(TOPOLOGY))
        self.rng = rng
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen[str] | None = None
        self.connection_string = ""
        self.faults = 0

    def start(self, *, faults: bool = True) -> None:
        args = ["--port", str(self.port), "--data-dir", str(self.data_dir), "--config", str(self.config)]
        if faults:
            rejections = self.rng.randint(1, 4)
            args += ["--reject-sends", f"{QUEUE}={rejections}:server-busy"]
            args += ["--latency-ms", str(self.latency_ms + self.rng.choice([0, 2, 5]))]
            self.faults += rejections + 1
            if self.rng.random() < 0.5:
                args += ["--slow", f"{QUEUE}={self.rng.choice([5, 20])}"]
                self.faults += 1
            if self.rng.random() < 0.5:
                args += ["--drop-after", f"{QUEUE}={self.rng.randint(60, 200)}"]
                self.faults += 1
        else:
            args += ["--latency-ms", str(self.latency_ms)]
        for _ in range(50):  # the port of a killed broker can take a moment to free
            # stderr to a file: a pipe nobody reads fills up and then blocks the broker's logging.
            with self.stderr_path.open("a") as stderr:
                self.proc = spawn(args, stderr=stderr)
            conn = endpoint(self.proc)
            if conn:
                self.connection_string = conn
                return
            self.proc.kill()
            self.proc.wait()
            time.sleep(0.2)
        said = self.stderr_path.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"the emulator did not start on port {self.port}: {' / '.join(said) or 'it said nothing'}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
