"""A span per journey event, in the trace of the message it happened to.

Only when the process has OpenTelemetry's API loaded (``opentelemetry.trace`` in ``sys.modules``)
and a tracer provider set: this module imports nothing of OpenTelemetry itself until then, so an
emulator in a process without it imports nothing and pays one dictionary lookup per event. In
process (``Emulator``, the pytest plugin) the spans go to the global tracer provider; the
``sbnotebook emulator`` process sets one up (export.py).

Each span is a child of the context the message carries (its ``traceparent`` application property,
else its ``Diagnostic-Id``: what the SDK writes when its tracing is on), so the sender's trace shows
what the broker did with the message. A message without one gets a trace of its own. The span
starts and ends at the event's time on the broker's clock. The names and attributes are listed in
docs/emulator.md ("Tracing: the broker's spans"); they follow OpenTelemetry's messaging
conventions and the names the SDK gives its own spans (``ServiceBus.send``, ``ServiceBus.message``).
"""

from __future__ import annotations

import sys
from typing import Any

from .log import ABANDONED, ACCEPTED, COMPLETED, DEFERRED, DELIVERED, RECEIVED_AND_DELETED, SCHEDULED, JourneyEvent

SPAN_PREFIX = "ServiceBus.broker."  # + the event: ServiceBus.broker.delivered
TRACER_NAME = "sbnotebook.emulator"
SUBSCRIPTIONS = "/subscriptions/"

# OpenTelemetry's messaging conventions, and the SDK's own
SYSTEM = "messaging.system"  # "servicebus"
AZ_NAMESPACE = "az.namespace"  # "Microsoft.ServiceBus", as the SDK sets it
OPERATION_NAME = "messaging.operation.name"  # the event
OPERATION_TYPE = "messaging.operation.type"  # send, receive or settle, where the event is one
DESTINATION = "messaging.destination.name"  # the entity path it happened in
SUBSCRIPTION = "messaging.destination.subscription.name"
MESSAGE_ID = "messaging.message.id"
DELIVERY_COUNT = "messaging.servicebus.message.delivery_count"  # the first delivery is 1
DISPOSITION = "messaging.servicebus.disposition_status"  # complete, abandon, defer, dead_letter
# The broker's own (no convention names them)
SEQUENCE_NUMBER = "sbnotebook.broker.sequence_number"
LOCK_TOKEN = "sbnotebook.broker.lock_token"
REASON = "sbnotebook.broker.reason"  # the dead-letter reason (MaxDeliveryCountExceeded, ...)
DESCRIPTION = "sbnotebook.broker.description"  # the dead-letter description
TO = "sbnotebook.broker.to"  # where it went: forward target, dead-letter queue, subscription
CAME_FROM = "sbnotebook.broker.from"  # where it came from: the topic, the forwarding entity
ORIGINAL_MESSAGE_ID = "sbnotebook.broker.original_message_id"  # the message this one is a copy of

_OPERATION_TYPES = {
    ACCEPTED: "send",
    SCHEDULED: "send",
    DELIVERED: "receive",
    RECEIVED_AND_DELETED: "receive",
    COMPLETED: "settle",
    ABANDONED: "settle",
    DEFERRED: "settle",
}
_DISPOSITIONS = {COMPLETED: "complete", ABANDONED: "abandon", DEFERRED: "defer", "dead_lettered": "dead_letter"}


class _Tracing:
    """The tracer of the provider last seen, and OpenTelemetry's pieces, imported on first use."""

    provider: Any = None
    tracer: Any = None
    propagator: Any = None
    internal: Any = None
    no_parent: Any = None  # an empty context: a message without one starts a trace of its own


_tracing = _Tracing()


def _tracer() -> Any:
    """The global provider's tracer, or None while OpenTelemetry is not loaded or no provider is set."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is _tracing.provider:
        return _tracing.tracer
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None  # nobody set one: spans would go nowhere
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _tracing.no_parent = Context()
    _tracing.propagator = TraceContextTextMapPropagator()
    _tracing.internal = trace.SpanKind.INTERNAL
    _tracing.tracer = provider.get_tracer(TRACER_NAME)
    _tracing.provider = provider
    return _tracing.tracer


def attributes(e: JourneyEvent) -> dict[str, str | int]:
    """The span attributes of one event (those with a value)."""
    found: dict[str, str | int | None] = {
        SYSTEM: "servicebus",
        AZ_NAMESPACE: "Microsoft.ServiceBus",
        OPERATION_NAME: e.event,
        OPERATION_TYPE: _OPERATION_TYPES.get(e.event),
        DESTINATION: e.entity,
        MESSAGE_ID: e.message_id,
        DELIVERY_COUNT: e.delivery_count,
        DISPOSITION: _DISPOSITIONS.get(e.event),
        SEQUENCE_NUMBER: e.sequence_number or None,
        LOCK_TOKEN: None if e.lock_token is None else str(e.lock_token),
        REASON: e.reason,
        DESCRIPTION: e.description,
        TO: e.to,
        CAME_FROM: e.came_from,
        ORIGINAL_MESSAGE_ID: e.original_message_id,
    }
    lowered = e.entity.lower()
    if SUBSCRIPTIONS in lowered:
        found[SUBSCRIPTION] = e.entity[lowered.index(SUBSCRIPTIONS) + len(SUBSCRIPTIONS) :].split("/")[0]
    return {k: v for k, v in found.items() if v is not None}


def emit(e: JourneyEvent) -> None:
    """The event as a span, when there is a tracer provider to take it (a journey listener)."""
    tracer = _tracer()
    if tracer is None:
        return
    # Never the thread's current context: the broker's spans belong to the message, not to whoever called.
    parent = _tracing.propagator.extract({"traceparent": e.traceparent}) if e.traceparent else _tracing.no_parent
    at = int(e.time * 1_000_000_000)
    span = tracer.start_span(
        SPAN_PREFIX + e.event, context=parent, kind=_tracing.internal, attributes=attributes(e), start_time=at
    )
    span.end(end_time=at)
