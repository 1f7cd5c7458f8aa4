"""Issue 60's first Done-when, end to end: a message sent with the SDK's tracing on, abandoned to its
MaxDeliveryCount, dead-lettered, resubmitted with %sb_resubmit and completed. Its spans tell the
story in one trace, the broker's joining the context each message carries, and %sb_trace lists the
same events in the same order from the original's id and from the copy's.

What "one trace" means (docs/tracing.md, "One trace: the copy continues its original's"): the copy's
context is its own, from the kit's ``sbnotebook.message`` span, a child of the original's creation
context (the SDK's ``ServiceBus.message``), linked to it and to the resubmit's span. So with no span of
the caller's around anything, the SDK's message span, every broker span of the original and of the
copy, and the copy's creation are one trace; the resubmit is one span in the trace current where it
ran, and the SDK's ``ServiceBus.send`` (started with no span current) a root linked to the message it
made. Under one span of the caller's (an incident span wrapping the session) all of it is one trace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook.emulator.journey import spans as broker
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.testing.spans import Spans
from tests import shell
from tests.core.test_tracing import links
from tests.notebook.test_journey import MAX_DELIVERY_COUNT, poison_resubmit_complete
from tests.required import require_module
from tests.shell import line

require_module("opentelemetry.sdk.trace")

ip, sb = shell.ip, shell.sb
BROKER = broker.SPAN_PREFIX  # ServiceBus.broker.<event>


@pytest.fixture
def sdk_tracing() -> Iterator[None]:
    """azure-core's tracing set to OpenTelemetry for the process (a producer's own choice): every
    client traces, the test's and the kit's; unset after (the suite sets no value that lasts), so the
    setting's default is in force again: the kit's span type, or azure-core's own pick."""
    from azure.core.settings import settings

    settings.tracing_implementation.set_value("opentelemetry")
    try:
        yield
    finally:
        settings.tracing_implementation.unset_value()


def _context(header: object) -> tuple[int, int]:
    """(trace id, span id) of a W3C ``traceparent`` (bytes, as the SDK decodes a property)."""
    assert isinstance(header, bytes), header
    text = header.decode()
    _, trace_id, span_id, _ = text.split("-")
    return int(trace_id, 16), int(span_id, 16)


def _ids(context: Any) -> tuple[int, int]:
    """(trace id, span id) of a span context: a link's is remote, the span's own is not."""
    return context.trace_id, context.span_id


def _broker_rows(found: list[Any]) -> list[tuple[str, str, int | None]]:
    """(event, entity, delivery count) of broker spans, in the order they ended."""
    rows = []
    for span in found:
        attrs = span.attributes or {}
        rows.append((span.name.removeprefix(BROKER), attrs[broker.DESTINATION], attrs.get(broker.DELIVERY_COUNT)))
    return rows


def _frame_rows(frame: pd.DataFrame) -> list[tuple[str, str, int | None]]:
    counts = [None if pd.isna(c) else int(c) for c in frame["delivery_count"]]
    return list(zip(frame["event"], frame["entity"], counts, strict=True))


def _joined(found: list[Any], context: tuple[int, int]) -> bool:
    """Every span of ``found`` is a child of ``context`` (trace id, span id)."""
    return bool(found) and all(
        s.parent is not None and (s.context.trace_id, s.parent.span_id) == context for s in found
    )


def _one_trace(found: list[Any]) -> int | None:
    """The trace id every span of ``found`` shares, or None when they are in more than one."""
    ids = {s.context.trace_id for s in found}
    return ids.pop() if len(ids) == 1 else None


def _stand_in(trace_id: int, span_id: int, linked: dict[str, tuple[int, int]] | None = None) -> Any:
    """A made-up finished span: its context and its links, as the checks above read them."""
    context = SimpleNamespace(trace_id=trace_id, span_id=span_id)
    made = [
        SimpleNamespace(context=SimpleNamespace(trace_id=t, span_id=s), attributes={"sbnotebook.link": k})
        for k, (t, s) in (linked or {}).items()
    ]
    return SimpleNamespace(context=context, links=made)


def test_the_checks_of_one_trace_fail_on_made_up_spans() -> None:
    """``_one_trace`` and ``links`` can fail: one span of another trace, a link left out."""
    spans = [_stand_in(7, n) for n in range(1, 5)]
    assert _one_trace(spans) == 7
    assert _one_trace([*spans[:3], _stand_in(8, 4)]) is None
    linked = _stand_in(7, 9, {"original": (7, 1), "operation": (5, 2)})
    assert links(linked) == {"original": (7, 1), "operation": (5, 2)}
    assert links(_stand_in(7, 9, {"original": (7, 1)})) != {"original": (7, 1), "operation": (5, 2)}


EXPECTED = [
    ("accepted", "q", None),
    *[row for n in range(1, MAX_DELIVERY_COUNT + 1) for row in (("delivered", "q", n), ("abandoned", "q", n))],
    ("dead_lettered", "q", MAX_DELIVERY_COUNT),
    ("delivered", "q/$DeadLetterQueue", MAX_DELIVERY_COUNT + 1),  # the kit's resubmit takes it
    ("accepted", "q", None),  # its copy
    ("completed", "q/$DeadLetterQueue", MAX_DELIVERY_COUNT + 1),  # copied first, then completed
    ("delivered", "q", 1),
    ("completed", "q", 1),
]


@pytest.mark.servicebus_clock("manual")  # no lock runs out on a busy machine: one delivery per attempt
@pytest.mark.parametrize("incident", [True, False], ids=["under-an-incident-span", "alone"])
def test_a_poison_messages_story_from_send_to_the_copys_completion_in_spans_and_in_sb_trace(
    ip: Any,
    sb: SbMagics,
    client: ServiceBusClient,
    sdk_tracing: None,
    servicebus_spans: Spans,
    monkeypatch: pytest.MonkeyPatch,
    incident: bool,
) -> None:
    from opentelemetry import trace

    wrapping = trace.get_tracer("tests").start_as_current_span("incident") if incident else contextlib.nullcontext()
    with wrapping:
        copy = poison_resubmit_complete(ip, client, monkeypatch)
    props = copy.application_properties or {}
    original = _context(props[b"sbnotebook-original-traceparent"])
    fresh = _context(props[b"traceparent"])
    assert props[b"traceparent"] == props[b"Diagnostic-Id"] and fresh != original

    # The SDK's send: its ServiceBus.message span is the original's creation context, its send links to it
    (created,) = [s for s in servicebus_spans.find("ServiceBus.message") if s.context.span_id == original[1]]
    (sent,) = [s for s in servicebus_spans.find("ServiceBus.send") if original in [_ids(x.context) for x in s.links]]
    # The kit's resubmit: the copy's context is its sbnotebook.message span, a child of the original's
    # context, linked to it and to the resubmit's span, which names the operation that made it
    (resubmit,) = servicebus_spans.find("sbnotebook.resubmit")
    (made,) = servicebus_spans.find("sbnotebook.message", message_id=str(copy.message_id))
    assert _ids(made.context) == fresh and fresh[0] == original[0]  # the original's trace, a span of its own
    assert made.parent is not None and _ids(made.parent) == original
    assert links(made) == {"original": original, "operation": _ids(resubmit.context)}
    assert (made.attributes or {})["sbnotebook.operation"] == "resubmit"

    # The broker's spans: the original's join the original's context, the copy's the copy's own
    originals = [s for s in servicebus_spans.find(message_id="poison-1") if s.name.startswith(BROKER)]
    copies = [s for s in servicebus_spans.find(message_id=str(copy.message_id)) if s.name.startswith(BROKER)]
    assert _joined(originals, original) and _joined(copies, fresh)
    assert not _joined(copies, original) and not _joined(originals, fresh)  # the check can fail
    story = [s for s in servicebus_spans if s.name.startswith(BROKER) and s in originals + copies]
    assert _broker_rows(story) == EXPECTED
    (dead,) = [s for s in originals if s.name == BROKER + "dead_lettered"]
    assert (dead.attributes or {})[broker.REASON] == "MaxDeliveryCountExceeded"

    # One trace, with no span of the caller's around anything: the SDK's message span (its send's
    # creation context), each delivery (counts 1..N), the dead-lettering, the copy's creation, its
    # delivery and completion. The resubmit stays one span where it ran (linked from the copy's); the
    # SDK's ServiceBus.send, started with no span current, a root linked to the message it made.
    assert _one_trace([created, *story, made]) == original[0]
    if incident:
        assert _one_trace([sent, created, resubmit, made, *story]) == original[0]
    else:
        assert resubmit.parent is None and resubmit.context.trace_id != original[0]
        assert sent.parent is None and sent.context.trace_id != original[0]

    # %sb_trace: the same events in the same order, from the original's id and from the copy's
    for message_id in ("poison-1", copy.message_id):
        assert _frame_rows(line(ip, f"sb_trace q --message-id {message_id}")) == _broker_rows(story)
