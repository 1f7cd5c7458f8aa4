"""Run by test_spans.py in a process of its own (a tracer provider is set once per process): a
message sent with the SDK's tracing on, abandoned to its MaxDeliveryCount, and one sent with it
off; prints the spans an in-memory exporter caught, as JSON.

``--block`` instead blocks every import of OpenTelemetry, runs the same journey untraced and prints
the OpenTelemetry modules loaded (none) and the events the journey kept."""

from __future__ import annotations

import importlib.abc
import json
import sys
from typing import Any

BLOCKED = "opentelemetry"


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name == BLOCKED or name.startswith(BLOCKED + "."):
            raise ImportError(f"{name} is blocked for this test")
        return None


def journey(emu: Any, sb: Any, message_id: str) -> None:
    from azure.servicebus import ServiceBusMessage

    with sb.get_queue_sender("poison") as sender:
        sender.send_messages(ServiceBusMessage("x", message_id=message_id))
    with sb.get_queue_receiver("poison") as receiver:
        for _ in range(3):
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=30)
            receiver.abandon_message(msg)


def traced() -> list[dict[str, Any]]:
    from azure.core.settings import settings
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sbnotebook.core.sdk.messages import kit_span
    from sbnotebook.emulator import Emulator
    from tests.emulator.journey.test_journey import TOPOLOGY
    from tests.helpers import QuickCloseClient

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with Emulator(TOPOLOGY, clock="manual") as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as sb:
            settings.tracing_implementation = "opentelemetry"
            journey(emu, sb, "traced")
            # Off: the kit's span type records nothing outside the kit's traced operations. Not None:
            # before 1.33, azure-core then picks its plugin by itself (sbnotebook/core/sdk/messages.py).
            settings.tracing_implementation = kit_span()
            journey(emu, sb, "untraced")
    return [
        {
            "name": s.name,
            "trace_id": f"{s.context.trace_id:032x}",
            "span_id": f"{s.context.span_id:016x}",
            "parent": None if s.parent is None else f"{s.parent.span_id:016x}",
            "attributes": dict(s.attributes or {}),
        }
        for s in exporter.get_finished_spans()
    ]


def blocked() -> dict[str, Any]:
    sys.meta_path.insert(0, _Blocker())
    from sbnotebook.emulator import Emulator
    from tests.emulator.journey.test_journey import TOPOLOGY
    from tests.helpers import QuickCloseClient

    with Emulator(TOPOLOGY, clock="manual") as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as sb:
            journey(emu, sb, "untraced")
        events = [e["event"] for e in emu.journey("poison", message_id="untraced").events]
    return {"loaded": sorted(m for m in sys.modules if m.split(".")[0] == BLOCKED), "events": events}


if __name__ == "__main__":
    print(json.dumps(blocked() if "--block" in sys.argv else traced()))
