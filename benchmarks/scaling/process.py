"""What scale.py measures a step with: the emulator in a process of its own (its RSS apart from the
kernel's), and the peak RSS of a process sampled while the step runs."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from _common import cpu_seconds, endpoint, spawn

from sbnotebook import core


class Peak:
    """Samples a process's RSS every 50 ms while a step runs (``which``: the process now; the
    emulator's changes when a step restarts it)."""

    def __init__(self, which: Callable[[], psutil.Process]) -> None:
        self.which = which
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _take(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess, AssertionError):  # between a stop and a start
            self.peak = max(self.peak, self.which().memory_info().rss)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._take()

    def __enter__(self) -> Peak:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()


class EmulatorProcess:
    """``sbnotebook emulator`` in its own process (its RSS apart from ours), restartable on the same
    data directory when durable."""

    def __init__(self, latency_ms: float, workdir: Path, durable: bool, topology: dict[str, Any]) -> None:
        config = workdir / "topology.json"
        config.write_text(json.dumps(topology))
        self.args = ["--port", "0", "--config", str(config), "--admin-port", "0", "--latency-ms", str(latency_ms)]
        if durable:
            self.args += ["--data-dir", str(workdir / "data")]
        self.proc: subprocess.Popen[str] | None = None
        self.conn = ""

    @property
    def process(self) -> psutil.Process:
        assert self.proc is not None
        return psutil.Process(self.proc.pid)

    def cpu(self) -> tuple[int, float] | None:
        """(pid, CPU seconds used so far) of the running emulator; None while it is stopped."""
        if self.proc is None:
            return None
        return self.proc.pid, cpu_seconds(self.process)

    def cpu_since(self, before: tuple[int, float] | None) -> float | None:
        """CPU seconds used since ``before`` (``cpu()``); None when the emulator was stopped or restarted
        in between (a restarted one counts from zero again, a stopped one cannot be read)."""
        now = self.cpu()
        if before is None or now is None or now[0] != before[0]:
            return None
        return now[1] - before[1]

    def start(self) -> None:
        self.proc = spawn(self.args)
        self.conn = endpoint(self.proc)
        if not self.conn:
            self.stop()
            raise SystemExit("the emulator did not start")

    def stop(self) -> None:
        core.close_all()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=120)
            self.proc = None
