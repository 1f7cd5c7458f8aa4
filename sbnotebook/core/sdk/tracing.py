"""The SDK's tracing on for the kit's own clients, not for the process.

azure-servicebus asks azure-core's one process-wide setting, ``settings.tracing_implementation()``,
for the span type to trace with, on every send, receive and settlement. When nothing is set there (by
the user, or ``AZURE_SDK_TRACING_IMPLEMENTATION``), :func:`trace_kit_clients` sets :func:`kit_span`:
azure-core-tracing-opentelemetry's ``OpenTelemetrySpan`` inside an operation of the kit on a connection
made with ``trace=True`` (``tracing.sdk_traced``), and a span that records nothing and writes no
context everywhere else: the user's own SDK clients stay untraced. A type the user set is kept (it
traces every client already).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ..errors import ConfigurationError
from ..tracing import sdk_traced

log = logging.getLogger("sbnotebook.tracing")

MISSING = (
    "trace=True turns the azure-servicebus SDK's OpenTelemetry tracing on, which needs opentelemetry-api and "
    "azure-core-tracing-opentelemetry: pip install 'sbnotebook[tracing]'"
)


@functools.cache
def kit_span() -> type:
    """azure-core-tracing-opentelemetry's ``OpenTelemetrySpan``, recording only inside the kit's traced
    operations; elsewhere it wraps OpenTelemetry's invalid non-recording span: no span, no context
    written into a message (``to_header`` is empty), nothing made current. ``ConfigurationError``
    when the tracing extra is not installed."""
    try:
        from azure.core.tracing.ext.opentelemetry_span import OpenTelemetrySpan
        from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan
    except ImportError:
        raise ConfigurationError(MISSING) from None

    class KitSpan(OpenTelemetrySpan):
        kit_only = True  # messages.tracing_on reads it: outside the kit's traced operations, nothing to trace

        def __init__(self, span: Any = None, name: str | None = "span", **kwargs: Any) -> None:
            if span is None and not sdk_traced.get():
                span = NonRecordingSpan(INVALID_SPAN_CONTEXT)
            super().__init__(span, name, **kwargs)

    return KitSpan


def trace_kit_clients() -> None:
    """Make azure-core's tracing implementation ``kit_span()`` unless one is set already (by the user,
    or ``AZURE_SDK_TRACING_IMPLEMENTATION``: it traces every client, the kit's too, and is left as it is)."""
    from azure.core.settings import settings

    span = kit_span()
    current = settings.tracing_implementation()
    if current is span:
        return
    if current is not None:
        log.info("azure-core's tracing implementation is set already (%r): it traces the kit's clients too", current)
        return
    settings.tracing_implementation.set_value(span)
    log.info("the azure-servicebus SDK traces the operations of the kit's connections made with trace=True")
