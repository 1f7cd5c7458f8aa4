"""azure-core's tracing setting and the kit's span type (sbnotebook/core/sdk/messages.py): azure-core before
1.33 (DBR 15.4 has 1.30.2) picks its OpenTelemetry plugin by itself for every client once opentelemetry
is imported; the kit's span type, that setting's default from the process's first connection, takes
that place, so the SDK traces the kit's clients only with trace=True, on every azure-core. The runs
are processes of their own: the first connection of a process is what they watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sbnotebook.core.sdk.messages import implicit_tracing
from tests.required import require_module

require_module("opentelemetry.sdk.trace")

ROOT = Path(__file__).resolve().parents[3]
SDK = ["ServiceBus.message", "ServiceBus.send"]  # the SDK's spans of one send


def test_the_version_named_is_where_azure_core_stops_picking_its_plugin_by_itself() -> None:
    import opentelemetry.trace  # noqa: F401  (azure-core's own pick looks for it among the imported modules)
    from azure.core.settings import convert_tracing_impl

    assert (convert_tracing_impl(None) is not None) is implicit_tracing()
    # The check can fail: the versions either side of the one named answer differently.
    assert implicit_tracing("1.30.2") and implicit_tracing("1.32.0")
    assert not implicit_tracing("1.33.0") and not implicit_tracing("1.41.0")


# The user's own SDK client and the kit's, sending one message each at each step; what it prints is
# which SDK spans each send made.
WHO_IS_TRACED = """
import json
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sbnotebook import core
from sbnotebook.emulator import Emulator

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def sdk_spans():
    names = {s.name for s in exporter.get_finished_spans() if s.name.startswith("ServiceBus.")}
    exporter.clear()
    return sorted(n for n in names if not n.startswith("ServiceBus.broker."))


config = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": {}}],
          "Topics": []}], "Logging": {"Type": "Console"}}}
seen = {}
with Emulator(config) as emu, ServiceBusClient.from_connection_string(emu.connection_string) as client:
    with client.get_queue_sender("q") as mine:
        mine.send_messages(ServiceBusMessage("mine"))
        seen["yours, before the kit"] = sdk_spans()
        conn = core.connect(emu.connection_string, warm=False)
        core.send("q", ["kit"], connection=conn).raise_for_failures()
        seen["the kit's"] = sdk_spans()
        mine.send_messages(ServiceBusMessage("mine"))
        seen["yours"] = sdk_spans()
        core.connect(emu.connection_string, trace=True, warm=False)
        core.send("q", ["kit"], connection=conn).raise_for_failures()
        seen["the kit's, trace=True"] = sdk_spans()
        mine.send_messages(ServiceBusMessage("mine"))
        seen["yours, the kit traced"] = sdk_spans()
    core.close_all()
print(json.dumps(seen))
"""


def _who_is_traced(**env: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", WHO_IS_TRACED],
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    return seen


def test_the_sdk_traces_the_kits_clients_with_trace_true_only_on_this_azure_core() -> None:
    seen = _who_is_traced()
    # Before the kit's first connection azure-core decides alone: before 1.33 it traces every client.
    assert seen.pop("yours, before the kit") == (SDK if implicit_tracing() else [])
    assert seen == {
        "the kit's": [],
        "yours": [],
        "the kit's, trace=True": SDK,
        "yours, the kit traced": [],
    }
    # The check can fail: with an implementation set for the process, every client traces, the kit's too.
    every = _who_is_traced(AZURE_SDK_TRACING_IMPLEMENTATION="opentelemetry")
    assert set(map(tuple, every.values())) == {tuple(SDK)}
