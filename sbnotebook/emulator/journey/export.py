"""Where the ``sbnotebook emulator`` process sends its spans: OpenTelemetry's standard environment.

Set up only when the environment asks for it (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, ``OTEL_SDK_DISABLED`` not ``true``): exporters
``otlp`` (the default; ``OTEL_EXPORTER_OTLP_PROTOCOL`` or ``..._TRACES_PROTOCOL`` ``grpc`` or
``http/protobuf``, the default), ``console``, ``none``, comma-separated. The service is named by
``OTEL_SERVICE_NAME`` (default ``sbnotebook-emulator``). The exporters' own variables (endpoint,
headers, timeout) are read by the exporters. Without OpenTelemetry's SDK, or an exporter's package,
one log line says so and the emulator runs untraced. An emulator in another program (``Emulator``)
never sets anything up: it uses that program's tracer provider (spans.py).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import Any

ASKING = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "sbnotebook-emulator"
INSTALL = "pip install opentelemetry-sdk"  # the SDK that exports: the kit's tracing extra holds only the API
_OTLP = {
    "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "opentelemetry-exporter-otlp-proto-grpc"),
    "http/protobuf": (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "opentelemetry-exporter-otlp-proto-http",
    ),
}


def wanted(environ: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for (none when it asks for nothing)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    if not any(environ.get(name) for name in ASKING):
        return []
    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    return [n for n in names if n != "none"]


def _exporter(name: str, environ: Mapping[str, str], log: logging.Logger) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("tracing: OTEL_TRACES_EXPORTER names %r, which the emulator does not know (otlp, console)", name)
        return None
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in _OTLP:
        log.warning("tracing: OTLP protocol %r is not one of %s", protocol, ", ".join(_OTLP))
        return None
    module, package = _OTLP[protocol]
    try:
        return importlib.import_module(module).OTLPSpanExporter()
    except ImportError:
        log.warning("tracing: no spans exported: the OTLP exporter is not installed (pip install %s)", package)
        return None


def configure(environ: Mapping[str, str] | None = None, log: logging.Logger | None = None) -> list[str]:
    """Set the global tracer provider the environment asks for; the exporters set up (none: untraced)."""
    environ = os.environ if environ is None else environ
    log = log or logging.getLogger("sbnotebook.emulator")
    names = wanted(environ)
    if not names:
        return []
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("tracing: no spans exported: OpenTelemetry's SDK is not installed (%s)", INSTALL)
        return []
    resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    done = []
    for name in names:
        exporter = _exporter(name, environ, log)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
            done.append(name)
    if done:
        trace.set_tracer_provider(provider)
        log.info("tracing: the broker's spans go to %s", ", ".join(done))
    return done
