"""Why ``trace=True`` slows the send benchmark (issue 60, docs/benchmarks.md): what the azure-servicebus
SDK's tracing does for each message sent, timed piece by piece, in microseconds a message.

  message  the SDK's ``trace_message`` on one outgoing message, as the kit's batches call it: a
           ``ServiceBus.message`` span made through azure-core's OpenTelemetry plugin (a tracer looked
           up, the span started and made current, its context written into two properties, ended)
  link     the ``ServiceBus.send`` span's link to that message: azure-core's plugin extracts each
           message's context when the send span starts (timed on sends of 100 messages, per message)
  bare     one span started and ended on a tracer kept (OpenTelemetry's own cost, for scale)

in four set-ups, each in a process of its own (a tracer provider is set once per process):

  none     a TracerProvider with no span processor: spans made, none exported
  simple   SimpleSpanProcessor + InMemorySpanExporter (tracing_cost.py's kit+sdk): exported as it ends
  batch    BatchSpanProcessor + InMemorySpanExporter: handed to an exporting thread
  kit      simple, with the kit's span type (``kit_span``, inside a traced operation) in place of
           azure-core's own: what the kit adds to the SDK's tracing

The set-ups take turns, round after round; medians of the rounds, [lowest, highest].

    python benchmarks/sdk_span_cost.py [--rounds 5] [--n 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SETUPS = ("none", "simple", "batch", "kit")
LINKS_PER_SEND = 100
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _per_call_us(fn: Callable[[], object], n: int) -> float:
    for _ in range(min(n, 500)):  # warm
        fn()
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


def one_setup(setup: str, n: int) -> dict[str, float]:
    """In this process: the three pieces' cost in ``setup``."""
    from azure.core.settings import settings
    from azure.core.tracing import Link, SpanKind
    from azure.core.tracing.ext.opentelemetry_span import OpenTelemetrySpan
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus._common.tracing import trace_message
    from azure.servicebus._common.utils import transform_outbound_messages
    from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sbnotebook.core import tracing
    from sbnotebook.core.sdk.messages import kit_span

    provider = TracerProvider()
    if setup in ("simple", "kit"):
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    elif setup == "batch":
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    span_type = kit_span() if setup == "kit" else OpenTelemetrySpan
    settings.tracing_implementation.set_value(span_type)
    tracing.sdk_traced.set(True)  # as inside an operation on a connection made with trace=True

    outgoing: Any = transform_outbound_messages(
        ServiceBusMessage("m-1"), ServiceBusMessage, PyamqpTransport.to_outgoing_amqp_message
    )
    transport: Any = PyamqpTransport  # the SDK passes the class itself
    links = [Link({"traceparent": TRACEPARENT})] * LINKS_PER_SEND
    tracer = trace.get_tracer("sdk_span_cost")

    def send_span() -> None:
        with span_type(name="ServiceBus.send", kind=SpanKind.CLIENT, links=links):
            pass

    def bare() -> None:
        tracer.start_span("bare").end()

    found = {
        "message": _per_call_us(lambda: trace_message(outgoing._message, amqp_transport=transport), n),
        "link": _per_call_us(send_span, max(1, n // LINKS_PER_SEND)) / LINKS_PER_SEND,
        "bare": _per_call_us(bare, n),
    }
    provider.shutdown()
    return found


def run_setup(setup: str, n: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--run", setup, "--n", str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"setup {setup} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--run", choices=SETUPS, help=argparse.SUPPRESS)  # one set-up, in this process
    args = parser.parse_args()
    if args.run:
        print(json.dumps(one_setup(args.run, args.n)))
        return 0
    found: dict[str, list[dict[str, float]]] = {s: [] for s in SETUPS}
    for _ in range(args.rounds):
        for setup in SETUPS:
            found[setup].append(run_setup(setup, args.n))
    print(f"us a message, medians of {args.rounds} rounds [lowest, highest]")
    for setup in SETUPS:
        parts = []
        for piece in ("message", "link", "bare"):
            values = [r[piece] for r in found[setup]]
            parts.append(f"{piece} {statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]")
        print(f"{setup:7s} " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
