"""The ``servicebus_spans`` fixture: the spans a test's emulator and kit produced, in memory.

OpenTelemetry lets a process set its global tracer provider once (``set_tracer_provider`` ignores,
with a warning, every later call). So the first test that asks installs one provider for the whole
session, with one in-memory exporter, as the global provider: the kit's spans, the SDK's and the
in-process emulator's broker spans (which use the global provider) all reach it. Its sampler records
only while a test holds the fixture (``recording``): the process's other tests run as without a
tracer. When the process already has an SDK tracer provider (the project set its own), the exporter
is added to that one instead, which samples as the project set it. Each test sees only the spans
that ended while it ran: the exporter is cleared when the test starts. Needs ``opentelemetry-sdk``
(and the kit's ``tracing`` extra).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Switch:
    """The session provider's sampler: every span recorded while a test holds ``servicebus_spans``
    (``on``), none otherwise, so the other tests of the process run as without a tracer (a copy the
    kit makes then carries no trace context of its own: core/tracing.py ``renew_context``)."""

    on = False

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        return (ALWAYS_ON if self.on else ALWAYS_OFF).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "sbnotebook servicebus_spans: on while a test records"


SWITCH = _Switch()


@functools.cache
def session_exporter() -> Any:
    """The process's one in-memory exporter, on the global tracer provider (see the module docstring)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the project's own: it samples as it was told to
        current.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider = TracerProvider(sampler=SWITCH)  # type: ignore[arg-type]
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        if trace.get_tracer_provider() is not provider:  # another provider got there first
            raise RuntimeError(f"the global tracer provider is {trace.get_tracer_provider()!r}, not an SDK one")
    return exporter


def _hex(trace_id: int | str) -> str:
    return trace_id if isinstance(trace_id, str) else f"{trace_id:032x}"


class Spans:
    """The spans that ended since the test started, oldest first; ``find`` filters them."""

    def __init__(self, exporter: Any) -> None:
        self._exporter = exporter

    def all(self) -> list[Any]:
        return list(self._exporter.get_finished_spans())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self.all())

    def find(
        self, name: str | None = None, *, message_id: str | None = None, trace_id: int | str | None = None
    ) -> list[Any]:
        """The spans named ``name``, about message ``message_id`` (their ``messaging.message.id``
        attribute), in trace ``trace_id`` (an int, or its 32 hex digits): each given filter applies."""
        found = []
        for span in self.all():
            if name is not None and span.name != name:
                continue
            if message_id is not None and (span.attributes or {}).get("messaging.message.id") != str(message_id):
                continue
            if trace_id is not None and f"{span.context.trace_id:032x}" != _hex(trace_id).lower():
                continue
            found.append(span)
        return found

    def names(self) -> list[str]:
        return [span.name for span in self.all()]

    def clear(self) -> None:
        self._exporter.clear()


@contextmanager
def recording() -> Iterator[Spans]:
    """The spans that end inside the ``with`` block, recorded on the session's provider (the
    ``servicebus_spans`` fixture is this around a test)."""
    exporter = session_exporter()
    exporter.clear()
    SWITCH.on = True
    try:
        yield Spans(exporter)
    finally:
        SWITCH.on = False
