"""%sb_connect --trace: the SDK's spans join the kit's for the notebook's connection, and a
%sb_resubmit is a span whose copy carries its own context (issue 60), read back with the SDK."""

from __future__ import annotations

from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.testing.spans import Spans
from tests import shell
from tests.helpers import QuickCloseClient
from tests.required import require_module
from tests.shell import line, loaded

require_module("opentelemetry.sdk.trace")

ip = shell.ip


def not_the_brokers(names: list[str]) -> list[str]:
    """The in-process emulator's spans (``ServiceBus.broker.*``, tests/emulator/journey) left out."""
    return [n for n in names if not n.startswith("ServiceBus.broker.")]


@pytest.fixture
def traced(ip: Any, emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> Any:
    with loaded(ip, capsys, emulator.connection_string) as magics:
        yield magics


def test_sb_connect_trace_turns_the_sdks_spans_on_for_the_notebooks_connection(
    ip: Any, traced: SbMagics, emulator: Emulator, servicebus_spans: Spans, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = traced.conn()
    core.send("q", ["before"], connection=conn).raise_for_failures()
    # the kit's span only: the SDK's tracing is off
    assert not_the_brokers(servicebus_spans.names()) == ["sbnotebook.send"]
    servicebus_spans.clear()
    line(ip, f"sb_connect --trace {emulator.connection_string}")
    assert "Traced: the SDK's spans" in capsys.readouterr().out
    core.send("q", ["poison"], connection=traced.conn()).raise_for_failures()
    sdk_and_kit = {"sbnotebook.send", "ServiceBus.message", "ServiceBus.send"}
    assert set(not_the_brokers(servicebus_spans.names())) == sdk_and_kit
    with core.receive("q", max_messages=2, wait_seconds=5, connection=conn) as batch:
        batch.dead_letter(reason="bad").raise_for_failures()
    servicebus_spans.clear()
    report = line(ip, "sb_resubmit q/$deadletterqueue --yes")
    assert report.count("resubmitted") == 2
    (resubmit,) = servicebus_spans.find("sbnotebook.resubmit")
    sends = servicebus_spans.find("ServiceBus.send")
    assert sends and all(s.context.trace_id == resubmit.context.trace_id for s in sends)
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("q") as receiver:
            got = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            for msg in got:
                props = msg.application_properties
                made = servicebus_spans.find("sbnotebook.message", message_id=str(msg.message_id))
                assert len(made) == 1 and props[b"traceparent"] == props[b"Diagnostic-Id"]
                assert props[b"traceparent"].decode().split("-")[2] == f"{made[0].context.span_id:016x}"
                receiver.complete_message(msg)
    assert len(got) == 2
