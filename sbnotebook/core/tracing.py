"""The kit's operations as OpenTelemetry spans, and a copy's fresh trace context (docs/tracing.md).

opentelemetry-api is optional (the ``tracing`` extra: ``about.install().pip_install("tracing")`` says
how): it is imported on the first operation, and when it is missing nothing is, and each operation
costs one cached lookup. With the
API but no tracer provider, spans are OpenTelemetry's non-recording ones.

Each operation is one span named ``sbnotebook.<operation>`` (kind CLIENT), with the attributes the
azure-servicebus SDK puts on its own (``az.namespace``, ``messaging.system``, ``messaging.operation``,
``messaging.destination.name``, ``net.peer.name``) and OpenTelemetry's messaging conventions
(``messaging.operation.name``, ``messaging.operation.type``, ``server.address``,
``messaging.batch.message_count``), plus ``sbnotebook.outcome`` (``ok``, ``failed``,
``interrupted``) and ``sbnotebook.tally`` (``5 sent``). The SDK's spans started inside an
operation are its children: one trace.

A copy (resubmit, copy, import) is a new send: :func:`renew_context` drops the original's
``traceparent``, ``Diagnostic-Id`` and ``tracestate``, keeps the original's in
``sbnotebook-original-traceparent``, and gives the copy the context of its own ``sbnotebook.message``
span under the byte-string keys the SDK writes with ``setdefault``: the SDK keeps it, and the copy
holds one of each. That span (kind PRODUCER) continues the original's trace: a child of the
original's context, linked to it (``sbnotebook.link`` ``original``) and to the span of the operation
that made it (``operation``, named in ``sbnotebook.operation``), so the copy's story joins the
original's while the operation stays one span of its own. An original without a context gives a
span that is a child of the current one.

``sdk_traced`` says, in the task of an operation on a connection made with ``trace=True``, that the
SDK's own tracing is on for it (``sdk/messages.py`` ``kit_span`` reads it).
"""

from __future__ import annotations

import contextvars
import functools
from asyncio import CancelledError
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Protocol

TRACEPARENT = "traceparent"
DIAGNOSTIC_ID = "Diagnostic-Id"
TRACESTATE = "tracestate"
ORIGINAL_TRACEPARENT = "sbnotebook-original-traceparent"
_CONTEXT_KEYS = frozenset({"traceparent", "diagnostic-id", "tracestate"})  # compared lowercased

# The SDK's values (its TraceAttributes), so its spans and ours group alike.
AZ_NAMESPACE = "Microsoft.ServiceBus"
SYSTEM = "servicebus"
# The operation type of OpenTelemetry's messaging conventions, and the SDK's older ``messaging.operation``.
_TYPES = {
    "send": ("send", "publish"),
    "schedule": ("send", "publish"),
    "resubmit": ("send", "publish"),
    "copy": ("send", "publish"),
    "import": ("send", "publish"),
    "write": ("send", "publish"),
    "peek": ("receive", "receive"),
    "receive": ("receive", "receive"),
    "export": ("receive", "receive"),
    "read": ("receive", "receive"),
    "stream": ("receive", "receive"),
}
_SETTLE = ("settle", "settle")  # settle, defer, purge, discard: messages removed or settled

sdk_traced: contextvars.ContextVar[bool] = contextvars.ContextVar("sbnotebook_sdk_traced", default=False)

# The operations whose messages are copies (renew_context), and the one running with its span: a copy's
# span links to it and names it, also from inside a send the operation runs (an import's).
_COPYING = frozenset({"resubmit", "copy", "import"})
_copying: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar("sbnotebook_copying", default=None)


class Traced(Protocol):
    """What a span needs of a connection (a ``LiveConnection``)."""

    @property
    def fully_qualified_namespace(self) -> str: ...

    traced: bool


@functools.cache
def api() -> ModuleType | None:
    """``opentelemetry.trace``, or None when opentelemetry-api is not installed (looked up once)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


@functools.cache
def _tracer() -> Any:
    """The kit's tracer: a proxy until a tracer provider is set, which it then follows."""
    trace = api()
    return None if trace is None else trace.get_tracer("sbnotebook")


class Operation:
    """One operation's span, or nothing (``span`` None): what the operation learns as it goes."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def count(self, n: int) -> None:
        if self.span is not None:
            self.span.set_attribute("messaging.batch.message_count", n)

    def outcome(self, text: str) -> None:
        if self.span is not None:
            self.span.set_attribute("sbnotebook.outcome", text)

    def report(self, report: Any) -> None:
        """The count and outcome of a ``Report`` (``ok`` or ``failed``), and its tally (``5 sent``)."""
        if self.span is not None:
            self.count(int(report.total))
            self.outcome("ok" if report.ok else "failed")
            self.span.set_attribute("sbnotebook.tally", report.tally() or "nothing")

    def attribute(self, key: str, value: str | int | bool) -> None:
        if self.span is not None:
            self.span.set_attribute(key, value)


_NOTHING = Operation(None)


def attributes(operation: str, namespace: str, entity: str) -> dict[str, str]:
    """The attributes every span of ``operation`` on ``entity`` starts with."""
    kind, legacy = _TYPES.get(operation, _SETTLE)
    host = namespace.rsplit(":", 1)[0] if namespace.count(":") == 1 else namespace
    return {
        "az.namespace": AZ_NAMESPACE,
        "messaging.system": SYSTEM,
        "messaging.operation": legacy,
        "messaging.operation.name": operation,
        "messaging.operation.type": kind,
        "messaging.destination.name": entity,
        "net.peer.name": host,
        "server.address": host,
    }


@contextmanager
def operation(name: str, connection: Traced, entity: object, *, source: object = None) -> Iterator[Operation]:
    """The span of one operation of the kit on ``entity`` (``source``: where a copy's messages come
    from), current while it runs; an exception marks it failed and goes on. On a connection made with
    ``trace=True`` the SDK's own tracing is on inside it (``sdk_traced``)."""
    token = sdk_traced.set(True) if connection.traced else None
    try:
        trace = api()
        if trace is None:
            yield _NOTHING
            return
        tracer = _tracer()
        attrs = attributes(name, connection.fully_qualified_namespace, str(entity))
        if source is not None:
            attrs["sbnotebook.source.name"] = str(source)
        with tracer.start_as_current_span(f"sbnotebook.{name}", kind=trace.SpanKind.CLIENT, attributes=attrs) as span:
            op = Operation(span)
            copying = _copying.set((name, span)) if name in _COPYING else None
            try:
                yield op
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                op.outcome("interrupted" if isinstance(exc, KeyboardInterrupt | CancelledError) else "failed")
                raise
            finally:
                if copying is not None:
                    _reset(copying, _copying)
    finally:
        if token is not None:
            _reset(token, sdk_traced)


def _reset(token: contextvars.Token[Any], var: contextvars.ContextVar[Any]) -> None:
    """``var`` as it was. A generator's span (a Spark partition's rows) may be closed by the garbage
    collector in another context, where the token cannot be used: that context never had it set."""
    try:
        var.reset(token)
    except ValueError:
        return


def _text(value: Any) -> str | None:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("ascii", "replace")
    if isinstance(value, str):
        return value
    return None


def original_context(properties: Mapping[Any, Any] | None) -> str | None:
    """The trace context a message carries: its ``traceparent``, else its ``Diagnostic-Id``
    (keys text or bytes, as the SDK decodes them or a record holds them)."""
    found: dict[str, str] = {}
    for key, value in (properties or {}).items():
        name, text = _text(key), _text(value)
        if name is not None and text:
            found.setdefault(name.lower(), text)
    return found.get("traceparent") or found.get("diagnostic-id")


def renew_context(props: dict[Any, Any], original: str | None, message_id: Any = None) -> None:
    """A copy's properties ``props`` (changed in place) with a context of its own (module docstring):
    ``original`` is the original's context (:func:`original_context`), ``message_id`` the copy's."""
    for key in [k for k in props if (_text(k) or "").lower() in _CONTEXT_KEYS]:
        del props[key]
    if original:
        props.setdefault(ORIGINAL_TRACEPARENT, original)
    trace = api()
    if trace is None or not provides_spans(trace.get_tracer_provider()):
        return
    header = _message_span(trace, original, message_id)
    if header is not None:
        # Byte-string keys, as the SDK writes its own with setdefault: it keeps these, adds none.
        props[TRACEPARENT.encode()] = header
        props[DIAGNOSTIC_ID.encode()] = header


def provides_spans(provider: Any) -> bool:
    """Whether ``provider`` may record a span: not OpenTelemetry's stand-in while none is set (its
    proxy) nor its no-op one. Asked once per copied message: without a provider, the copy's span
    would be a non-recording one, given no context (``_message_span``): made for nothing."""
    from opentelemetry import trace

    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _message_span(trace: ModuleType, original: str | None, message_id: Any) -> str | None:
    """The traceparent of a new ``sbnotebook.message`` span (module docstring), or None when no tracer
    records it."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent, links = None, []
    if original:
        carried = TraceContextTextMapPropagator().extract({TRACEPARENT: original})
        linked = trace.get_current_span(carried).get_span_context()
        if linked.is_valid:
            parent = carried  # the copy continues its original's trace
            links.append(trace.Link(linked, {"sbnotebook.link": "original"}))
    attrs = {"az.namespace": AZ_NAMESPACE, "messaging.system": SYSTEM, "messaging.operation.type": "create"}
    maker = _copying.get()
    if maker is not None:
        name, op_span = maker
        links.append(trace.Link(op_span.get_span_context(), {"sbnotebook.link": "operation"}))
        attrs["sbnotebook.operation"] = name
    if message_id is not None:
        attrs["messaging.message.id"] = str(message_id)
    kind = trace.SpanKind.PRODUCER
    span = _tracer().start_span("sbnotebook.message", context=parent, kind=kind, links=links, attributes=attrs)
    try:
        ctx = span.get_span_context()
        if not span.is_recording():  # no tracer, or one that sampled it out: the copy is given no context
            return None
        return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    finally:
        span.end()
