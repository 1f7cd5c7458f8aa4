"""Where ``trace=True``'s time goes inside the send benchmark (issue 60, docs/benchmarks.md): the
kit's ``core.send`` of N small messages (its defaults, ``max_in_flight=10``) to ``sbnotebook emulator``
at 0 ms, with a TracerProvider and SimpleSpanProcessor + InMemorySpanExporter (tracing_cost.py's kit
and kit+sdk), once without the SDK's tracing and once with it (``connect(trace=True)``). With it, the
SDK's pieces are timed where they run, in microseconds a message sent:

  trace_message    the SDK's per-message ``ServiceBus.message`` span, whole (the kit's batches call it
                   as the SDK's ``add_message`` does)
  span started     inside it, starting a span through azure-core's OpenTelemetry plugin (the
                   ``ServiceBus.send`` spans, with a link per message, counted apart)
  span ended       ending spans, the SimpleSpanProcessor's export to memory included

and the emulator's CPU a message (its process, from outside). Each run is a process of its own
(a tracer provider is set once per process); runs alternate. ``--emulator-tree DIR`` runs the
emulator of another tree (``git archive 5eca7c3 | tar -x -C DIR``: the broker before its journey).

    python benchmarks/sdk_span_in_send.py [--messages 20000] [--rounds 3] [--emulator-tree DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from _common import cpu_seconds, start_emulator  # the one way the benchmarks start `sbnotebook emulator`

QUEUE = "results"
MODES = ("kit", "kit+sdk")
spent: collections.defaultdict[str, float] = collections.defaultdict(float)


def _timed(label: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label(*args, **kwargs)] += time.perf_counter() - started

    return timed


def _instrument() -> None:
    """Time the SDK's tracing pieces where they run (wrappers: the same calls, timed)."""
    from azure.core.tracing.ext.opentelemetry_span import OpenTelemetrySpan

    from sbnotebook.core.sdk import messages

    def started(self: Any, span: Any = None, name: Any = "span", **kwargs: Any) -> str:
        return "span started: ServiceBus.send" if name == "ServiceBus.send" else "span started"

    span_type: Any = OpenTelemetrySpan
    span_type.__init__ = _timed(started, span_type.__init__)
    span_type.__exit__ = _timed(lambda *a: "span ended", span_type.__exit__)
    parts = messages._batch_parts()
    timed_parts = dataclasses.replace(parts, trace=_timed(lambda *a, **k: "trace_message", parts.trace))
    messages._batch_parts = lambda: timed_parts  # type: ignore[assignment]


def one_run(conn_str: str, mode: str, n: int, broker_pid: int) -> dict[str, Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sbnotebook import core

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    _instrument()
    conn = core.connect(conn_str, trace=True if mode == "kit+sdk" else None)
    core.send(QUEUE, (f"warm-{i}" for i in range(1000)), max_in_flight=10, connection=conn).raise_for_failures()
    spent.clear()
    broker = psutil.Process(broker_pid)
    started, broker_started = time.perf_counter(), cpu_seconds(broker)
    core.send(QUEUE, (f"m-{i}" for i in range(n)), max_in_flight=10, connection=conn).raise_for_failures()
    wall = time.perf_counter() - started
    broker_us = (cpu_seconds(broker) - broker_started) / n * 1e6
    core.purge(QUEUE, connection=conn).raise_for_failures()
    core.close_all()
    return {"us": wall / n * 1e6, "broker_us": broker_us, **{k: v / n * 1e6 for k, v in spent.items()}}


def run_mode(conn_str: str, mode: str, n: int, broker_pid: int) -> dict[str, float]:
    args = ["--run", mode, "--conn", conn_str, "--messages", str(n), "--broker", str(broker_pid)]
    done = subprocess.run([sys.executable, str(Path(__file__)), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"mode {mode} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run", choices=MODES, help=argparse.SUPPRESS)  # one mode, in this process
    parser.add_argument("--conn", help=argparse.SUPPRESS)
    parser.add_argument("--broker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--emulator-tree", help="the tree whose sbnotebook.emulator to run (default: this one)")
    args = parser.parse_args()
    if args.run:
        print(json.dumps(one_run(args.conn, args.run, args.messages, args.broker)))
        return 0
    if args.emulator_tree:  # the emulator's process imports from there; this one's runs are started after it
        env_before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = args.emulator_tree
    proc, conn = start_emulator(0)
    if args.emulator_tree:
        os.environ.pop("PYTHONPATH")
        if env_before is not None:
            os.environ["PYTHONPATH"] = env_before
    found: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    try:
        for _ in range(args.rounds):
            for mode in MODES:
                found[mode].append(run_mode(conn, mode, args.messages, proc.pid))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"us a message sent ({args.messages} messages, 0 ms), medians of {args.rounds} rounds [lowest, highest]")
    for mode in MODES:
        keys = sorted({k for r in found[mode] for k in r}, key=lambda k: (k not in ("us", "broker_us"), k))
        cells = []
        for key in keys:
            values = [r.get(key, 0.0) for r in found[mode]]
            cells.append(f"{key} {statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]")
        print(f"{mode:8s} " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
