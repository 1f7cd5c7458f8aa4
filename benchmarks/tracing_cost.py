"""What tracing costs the send benchmark (issue 60): the kit's defaults sending N messages
(``core.send``, as many per send as fit, ``max_in_flight=10``) and a peek's latency, in four modes,
each in a process of its own (OpenTelemetry sets its tracer provider once per process):

  absent   opentelemetry made missing: the kit as installed without the tracing extra
  off      opentelemetry-api installed, no tracer provider: the kit's spans do not record
  kit      a TracerProvider with an in-memory exporter: the kit's spans recorded
  kit+sdk  the same, and ``connect(trace=True)``: the SDK's spans too (one per message sent)

The modes take turns, round after round (a, b, c, d, a, b, ...), so a slower minute of a shared
machine falls on every mode alike; the medians are compared. Target: ``kit`` at least 0.90 of
``absent``'s rate; ``off`` within the rounds' spread of ``absent``.

    python benchmarks/tracing_cost.py [--latency-ms 0] [--messages 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`

MODES = ("absent", "off", "kit", "kit+sdk")
QUEUE = "results"
PEEKS = 50


class _Missing:
    """A meta path finder that makes opentelemetry missing (mode ``absent``)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(f"{name} is made missing")


def one_run(conn_str: str, mode: str, n: int) -> dict[str, float]:
    """In this process: the send's rate and the peek's median latency, in ``mode``."""
    if mode == "absent":
        sys.meta_path.insert(0, _Missing())
    if mode in ("kit", "kit+sdk"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    from sbnotebook import core

    conn = core.connect(conn_str, trace=True if mode == "kit+sdk" else None)
    core.send(QUEUE, (f"warm-{i}" for i in range(1000)), max_in_flight=10, connection=conn).raise_for_failures()
    started = time.perf_counter()
    core.send(QUEUE, (f"m-{i}" for i in range(n)), max_in_flight=10, connection=conn).raise_for_failures()
    rate = n / (time.perf_counter() - started)
    latencies = []
    for _ in range(PEEKS):
        t0 = time.perf_counter()
        core.peek(QUEUE, max_messages=10, connection=conn)
        latencies.append(time.perf_counter() - t0)
    core.purge(QUEUE, connection=conn).raise_for_failures()
    loaded = any(m.split(".")[0] == "opentelemetry" for m in sys.modules)
    span_us = one_span_us(conn)
    core.close_all()
    return {
        "rate": rate,
        "peek_ms": statistics.median(latencies) * 1000,
        "span_us": span_us,
        "opentelemetry_loaded": float(loaded),
    }


def one_span_us(conn: object, n: int = 20_000) -> float:
    """What one operation's span costs by itself, started and ended with nothing inside (microseconds)."""
    from sbnotebook.core import operation_span

    started = time.perf_counter()
    for _ in range(n):
        with operation_span("send", conn, QUEUE) as span:  # type: ignore[arg-type]
            span.count(1)
    return (time.perf_counter() - started) / n * 1e6


def run_mode(conn_str: str, mode: str, n: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--run", mode, "--conn", conn_str, "--messages", str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"mode {mode} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--run", choices=MODES, help=argparse.SUPPRESS)  # one mode, in this process
    parser.add_argument("--conn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(one_run(args.conn, args.run, args.messages)))
        return 0
    proc, conn = start_emulator(args.latency_ms)
    found: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    try:
        for _ in range(args.rounds):
            for mode in MODES:
                found[mode].append(run_mode(conn, mode, args.messages))
    finally:
        proc.terminate()
        proc.wait(10)
    base = statistics.median(r["rate"] for r in found["absent"])
    best = max(r["rate"] for r in found["absent"])
    print(
        f"send of {args.messages} messages (kit defaults, max_in_flight=10), latency {args.latency_ms:.0f} ms, "
        f"{args.rounds} rounds; medians, [min, max]"
    )
    for mode in MODES:
        rates = [r["rate"] for r in found[mode]]
        peeks = [r["peek_ms"] for r in found[mode]]
        loaded = "yes" if any(r["opentelemetry_loaded"] for r in found[mode]) else "no"
        spans = [r["span_us"] for r in found[mode]]
        print(
            f"{mode:8s} {statistics.median(rates):8.0f} msg/s [{min(rates):.0f}, {max(rates):.0f}] "
            f"= {statistics.median(rates) / base:.2f} of absent (best {max(rates) / best:.2f}); "
            f"peek {statistics.median(peeks):.2f} ms [{min(peeks):.2f}, {max(peeks):.2f}]; "
            f"one span {statistics.median(spans):.1f} us; opentelemetry imported: {loaded}"
        )
    kit = statistics.median(r["rate"] for r in found["kit"]) / base
    ok = kit >= 0.90 and not any(r["opentelemetry_loaded"] for r in found["absent"])
    print("target met (kit >= 0.90 of absent)" if ok else "TARGET MISSED (kit < 0.90 of absent)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
