"""The broker's spans: children of the context the message carries, so they join the sender's trace
when the SDK's tracing is on; nothing of OpenTelemetry imported when it cannot be; the process's
exporter set up from OpenTelemetry's environment. Each runs in a process of its own (a tracer
provider is set once per process; an import blocked must be blocked from the start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sbnotebook.emulator.journey import spans
from sbnotebook.emulator.journey.export import wanted
from tests.required import require_module

ROOT = Path(__file__).resolve().parents[3]
RUN_TIMEOUT = 120  # seconds: only a hang takes this long


def run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def broker_spans(found: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [s for s in found if s["attributes"].get(spans.MESSAGE_ID) == message_id]


def joins(found: list[dict[str, Any]], message_id: str) -> bool:
    """Every broker span of the message is a child of the SDK's ``ServiceBus.message`` span."""
    roots = [s for s in found if s["name"] == "ServiceBus.message"]
    mine = broker_spans(found, message_id)
    return bool(mine) and any(
        all((s["trace_id"], s["parent"]) == (r["trace_id"], r["span_id"]) for s in mine) for r in roots
    )


def test_broker_spans_join_the_senders_trace_when_the_sdk_traces() -> None:
    require_module("opentelemetry.sdk.trace")  # the subprocess records with it, the SDK traces through it
    found = json.loads(run("-m", "tests.emulator.journey.traced_run").stdout)
    traced = broker_spans(found, "traced")
    assert [s["name"] for s in traced] == [
        "ServiceBus.broker.accepted",
        *["ServiceBus.broker.delivered", "ServiceBus.broker.abandoned"] * 3,
        "ServiceBus.broker.dead_lettered",
    ]
    assert joins(found, "traced")
    assert [s["attributes"][spans.DELIVERY_COUNT] for s in traced if s["name"].endswith(".delivered")] == [1, 2, 3]
    last = traced[-1]["attributes"]
    assert last[spans.REASON] == "MaxDeliveryCountExceeded"
    assert last[spans.TO] == "poison/$DeadLetterQueue"
    assert last[spans.DISPOSITION] == "dead_letter"
    first = traced[0]["attributes"]
    assert first[spans.SYSTEM] == "servicebus"
    assert first[spans.DESTINATION] == "poison"
    assert first[spans.OPERATION_TYPE] == "send"
    assert isinstance(first[spans.SEQUENCE_NUMBER], int)
    assert all(s["attributes"][spans.LOCK_TOKEN] for s in traced[1:-1])
    # The SDK's own spans are there, and a message sent with its tracing off joins no one's trace
    assert {"ServiceBus.send", "ServiceBus.receive", "ServiceBus.abandon"} <= {s["name"] for s in found}
    assert len(broker_spans(found, "untraced")) == 8
    assert not joins(found, "untraced")


def test_nothing_of_opentelemetry_is_imported_when_it_cannot_be() -> None:
    done = json.loads(run("-m", "tests.emulator.journey.traced_run", "--block").stdout)
    assert done["loaded"] == []
    assert done["events"][0] == "accepted" and done["events"][-1] == "dead_lettered"


def test_an_emulator_in_a_process_without_opentelemetry_loaded_loads_none() -> None:
    code = (
        "import sys\n"
        "from sbnotebook.emulator import Emulator\n"
        "from tests.emulator.journey.traced_run import journey\n"
        "from tests.emulator.journey.test_journey import TOPOLOGY\n"
        "from tests.helpers import QuickCloseClient\n"
        "with Emulator(TOPOLOGY) as emu, QuickCloseClient.from_connection_string(emu.connection_string) as sb:\n"
        "    journey(emu, sb, 'm')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    assert run("-c", code).stdout.strip() == "[]"


def test_the_process_exports_as_the_environment_says() -> None:
    require_module("opentelemetry.sdk.trace")  # the console exporter is opentelemetry-sdk's
    assert wanted({}) == []
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == ["otlp"]
    assert wanted({"OTEL_TRACES_EXPORTER": "console,none"}) == ["console"]
    assert wanted({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}) == []
    # The OTLP exporter's package is not installed here: one line says so, the console still exports
    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from sbnotebook.emulator.journey.export import configure\n"
        "print(configure({'OTEL_TRACES_EXPORTER': 'otlp,console'}))\n"
    )
    done = run("-c", code)
    assert done.stdout.strip() == "['console']"
    missing = [line for line in done.stderr.splitlines() if "not installed" in line]
    assert len(missing) == 1 and "opentelemetry-exporter-otlp-proto-http" in missing[0]


def test_span_attributes_name_a_subscription_and_leave_out_what_is_not_known() -> None:
    from sbnotebook.emulator.journey.log import JourneyLog

    log = JourneyLog()
    log.note(0.0, "delivered", "t/Subscriptions/s/$DeadLetterQueue", 4, None, delivery_count=2)
    (event,) = log.events()
    found = spans.attributes(event)
    assert found[spans.SUBSCRIPTION] == "s"
    assert spans.MESSAGE_ID not in found and spans.REASON not in found
    assert found[spans.OPERATION_TYPE] == "receive"
