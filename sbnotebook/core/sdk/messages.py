"""The SDK boundary at messages and batches: a message added to a batch with one encoding, wrapped without setters.

- ``add_to_batch``: what ``ServiceBusMessageBatch._add`` does, in the same order, with the message
  encoded once where the SDK encodes it twice, and the batch's envelope counted whole (the SDK's
  batch leaves out the first message's ids it copies there: ``envelope_growth``);
  ``BATCH_ADD_SOURCE``, ``BATCH_ENCODE_SOURCE`` and ``TRACE_SOURCE`` pin the SDK lines it repeats
  (tests/core/sdk/test_batches.py);
- ``as_service_bus_message``: a ``ServiceBusMessage`` over an ``AmqpAnnotatedMessage``, made as the
  SDK makes one to send it, without the public constructor's property setters (``WRAP_SOURCE``,
  tests/core/operations/test_copies.py);
- ``amqp_properties``: a message's AMQP properties read at once, as its getters return them;
- ``trace_kit_clients``: the SDK's tracing of the messages it sends (and of the rest) on for the kit's
  connections made with ``trace=True``, not for the process (``kit_span``; ``tracing_on`` reads it);
  ``claim_implicit_tracing``: the same at a process's first connection where azure-core (older than
  ``IMPLICIT_TRACING_BEFORE``) would pick its tracing plugin for every client by itself.

``sdk.USED_BY`` lists the private names used here.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

from ...about import install
from ..errors import ConfigurationError
from ..tracing import sdk_traced

# ``add_to_batch`` does what ``ServiceBusMessageBatch._add`` does, in the same order, but encodes the
# message once: the SDK encodes it to measure it (``get_message_encoded_size``), then again to add
# it (``add_batch``), about 35 us of the 90 us a 1 KB message costs to add. These are the statements
# of ``_add`` (comments and docstring left out) and the two helpers it repeats;
# tests/core/sdk/test_batches.py fails when an installed SDK's differ.
BATCH_ADD_SOURCE: tuple[str, ...] = (
    "def _add(self, add_message: Union[ServiceBusMessage, Mapping[str, Any], AmqpAnnotatedMessage]) -> None:",
    "outgoing_sb_message = transform_outbound_messages(",
    "add_message, ServiceBusMessage, self._amqp_transport.to_outgoing_amqp_message",
    ")",
    "outgoing_sb_message = cast(ServiceBusMessage, outgoing_sb_message)",
    "outgoing_sb_message._message = trace_message(",
    "outgoing_sb_message._message,",
    "amqp_transport=self._amqp_transport,",
    "additional_attributes=self._tracing_attributes,",
    ")",
    "message_size = self._amqp_transport.get_message_encoded_size(",
    "outgoing_sb_message._message  # pylint: disable=protected-access",
    ")",
    "size_after_add = self._size + message_size + _BATCH_MESSAGE_OVERHEAD_COST[0 if (message_size < 256) else 1]",
    "if size_after_add > self.max_size_in_bytes:",
    "raise MessageSizeExceededError(",
    'message=f"ServiceBusMessageBatch has reached its size limit: {self.max_size_in_bytes}"',
    ")",
    "self._amqp_transport.add_batch(self, outgoing_sb_message)",
    "self._size = size_after_add",
    "self._count += 1",
    "self._messages.append(outgoing_sb_message)",
    "if self._count == 1:  # Populate properties on the batch envelope from the first message",
    "self._amqp_transport.set_batch_envelope_properties(",
    "self._message,",
    "outgoing_sb_message.message_id,",
    "outgoing_sb_message.session_id,",
    "outgoing_sb_message.partition_key,",
    ")",
)
BATCH_ENCODE_SOURCE: dict[str, tuple[str, ...]] = {
    "get_message_encoded_size": ("output = bytearray()", "encode_payload(output, message)", "return len(output)"),
    "add_batch": ("output = bytearray()", "encode_payload(output, message)", "batch[5].append(output)"),
}


log = logging.getLogger("sbnotebook.core.sdk")


@dataclass(frozen=True)
class _BatchParts:
    """The SDK names ``add_to_batch`` uses, imported once (an import per message costs microseconds)."""

    message_type: Any
    overhead: Any
    trace: Any
    outbound: Any
    encode: Any
    transport: Any
    too_big: Any
    _checked: dict[Any, bool] = field(default_factory=dict)

    def repeats(self, transport: Any) -> bool:
        """Whether ``transport`` (a sender's, sync or async) packs batches with the steps repeated
        here: pyamqp's. Another (uamqp's, if ever asked for) is left to the SDK, logged once."""
        known = self._checked.get(transport)
        if known is None:
            names = ("add_batch", "get_message_encoded_size", "set_batch_envelope_properties")
            known = all(getattr(transport, n, None) is getattr(self.transport, n) for n in names)
            self._checked[transport] = known
            if not known:
                log.info("batches for %s are packed by the SDK (each message encoded twice)", transport.__name__)
        return known


@functools.cache
def _batch_parts() -> _BatchParts:
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus._common.constants import _BATCH_MESSAGE_OVERHEAD_COST
    from azure.servicebus._common.tracing import trace_message
    from azure.servicebus._common.utils import transform_outbound_messages
    from azure.servicebus._pyamqp._encode import encode_payload
    from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
    from azure.servicebus.exceptions import MessageSizeExceededError

    return _BatchParts(
        message_type=ServiceBusMessage,
        overhead=_BATCH_MESSAGE_OVERHEAD_COST,
        trace=trace_message,
        outbound=transform_outbound_messages,
        encode=encode_payload,
        transport=PyamqpTransport,
        too_big=MessageSizeExceededError,
    )


# The first lines of ``trace_message``: a message is traced only when azure-core has a tracing
# implementation, which it looks up in its settings (and the environment) on every call.
# tests/core/sdk/test_batches.py fails when they change.
TRACE_SOURCE: tuple[str, ...] = (
    "span_impl_type: Optional[Type[AbstractSpan]] = settings.tracing_implementation()",
    "if span_impl_type is not None:",
)


def tracing_on() -> bool:
    """Whether the SDK traces sent messages now: azure-core has a tracing implementation, and, when it is
    the kit's (``kit_span`` below), this is an operation of a connection made with ``trace=True``."""
    from azure.core.settings import settings

    span = settings.tracing_implementation()
    return span is not None and (not getattr(span, "kit_only", False) or sdk_traced.get())


def add_to_batch(batch: Any, message: Any, *, tracing: bool = True) -> None:
    """``batch.add_message(message)`` with the message encoded once (see ``BATCH_ADD_SOURCE``): the
    same bytes, and ``MessageSizeExceededError`` when it does not fit, counting what the SDK leaves
    out: the envelope's copy of the first message's ids (``envelope_growth``).
    ``tracing=False``: the caller read ``tracing_on()`` for this batch, and it was off (``trace_message``
    would look it up again for every message, 1-10 us each, to do nothing: ``TRACE_SOURCE``)."""
    parts = _batch_parts()
    transport = batch._amqp_transport
    if not parts.repeats(transport):
        batch.add_message(message)
        return
    outgoing: Any = parts.outbound(message, parts.message_type, transport.to_outgoing_amqp_message)
    if tracing:
        outgoing._message = parts.trace(
            outgoing._message, amqp_transport=transport, additional_attributes=batch._tracing_attributes
        )
    encoded = bytearray()
    parts.encode(encoded, outgoing._message)
    size = len(encoded)
    reserve = envelope_growth(batch, outgoing) if batch._count == 0 else 0
    size_after_add = batch._size + reserve + size + parts.overhead[0 if size < 256 else 1]
    if size_after_add > batch.max_size_in_bytes:
        raise parts.too_big(message=f"ServiceBusMessageBatch has reached its size limit: {batch.max_size_in_bytes}")
    batch._message[5].append(encoded)  # add_batch, without encoding again
    batch._size = size_after_add
    batch._count += 1
    batch._messages.append(outgoing)
    if batch._count == 1:
        transport.set_batch_envelope_properties(
            batch._message, outgoing.message_id, outgoing.session_id, outgoing.partition_key
        )


def envelope_growth(batch: Any, first: Any) -> int:
    """The bytes the batch's envelope gains when the first message's id, session id and partition
    key are copied into it (``set_batch_envelope_properties``). The SDK's ``_add`` copies them after
    sizing the batch, so its batches encode up to this much over ``max_size_in_bytes`` (56 bytes for
    a GUID id; more with a session id and partition key), and Service Bus refuses a transfer over
    the link's limit (tests/core/sdk/test_batch_envelope.py). Reserved here, as the .NET and Java SDKs
    reserve it, so a batch the kit packs encodes within the limit."""
    transport = batch._amqp_transport
    envelope = list(batch._message)  # a copy: the batch's own envelope is set when the message is added
    before = transport.get_batch_message_encoded_size(envelope)
    transport.set_batch_envelope_properties(envelope, first.message_id, first.session_id, first.partition_key)
    return int(transport.get_batch_message_encoded_size(envelope)) - int(before)


# The AMQP properties behind ServiceBusMessage's getters of the same meaning (``session_id`` is
# ``group_id``, ``reply_to_session_id`` is ``reply_to_group_id``).
AMQP_PROPERTIES: tuple[str, ...] = (
    "message_id",
    "content_type",
    "subject",
    "correlation_id",
    "group_id",
    "to",
    "reply_to",
    "reply_to_group_id",
)


def amqp_properties(msg: Any) -> dict[str, Any]:
    """A message's AMQP properties (``AMQP_PROPERTIES``) as its getters return them: text decoded
    from UTF-8 where the SDK decodes it. Read at once: each getter first tests the properties
    section for emptiness, which lists its fields (1-2 us a getter; a copy reads eight).
    tests/core/operations/test_copies.py compares this with the getters."""
    props = msg.raw_amqp_message.properties
    if not props:
        return dict.fromkeys(AMQP_PROPERTIES)
    return {name: _as_text(getattr(props, name, None)) for name in AMQP_PROPERTIES}


def _as_text(value: Any) -> Any:
    """The getters' ``value.decode("UTF-8")``, falling back to the value. Tested for bytes first:
    most properties are None, and an AttributeError raised for each costs microseconds."""
    if not isinstance(value, (bytes, bytearray)):
        return value
    try:
        return value.decode("UTF-8")
    except UnicodeDecodeError:
        return value


# ``as_service_bus_message`` uses ServiceBusMessage's constructor as the SDK itself does when it sends
# an AmqpAnnotatedMessage (``_convert_to_single_service_bus_message``): these lines of ``__init__``
# take the annotated message as it is. tests/core/operations/test_copies.py fails when they change.
WRAP_SOURCE: tuple[str, ...] = (
    'if "message" in kwargs:',
    'self._message = kwargs["message"]',
    'if "raw_amqp_message" in kwargs:',
    'self._raw_amqp_message = kwargs["raw_amqp_message"]',
)


def as_service_bus_message(annotated: Any) -> Any:
    """A ``ServiceBusMessage`` over ``annotated`` (an ``AmqpAnnotatedMessage``), as the SDK makes one
    to send it: its outgoing form is made when it is sent. The public constructor's property
    setters each list the message's sections: about 20 us of a 30 us copy."""
    from azure.servicebus import ServiceBusMessage

    return ServiceBusMessage(None, message=None, raw_amqp_message=annotated)


# The SDK's tracing on for the kit's own clients, not for the process: azure-servicebus asks azure-core's
# one process-wide setting, settings.tracing_implementation(), for the span type to trace with, on every
# send, receive and settlement. The kit makes kit_span() that setting's default: it records inside an
# operation of the kit on a connection made with trace=True (tracing.sdk_traced) and nothing elsewhere.
# A default, the setting's lowest rank: a type the user set, or AZURE_SDK_TRACING_IMPLEMENTATION, comes
# first and is kept (it traces every client already, the kit's too). An azure-core older than
# IMPLICIT_TRACING_BEFORE (DBR 15.4 has 1.30.2) has a default of its own: with nothing set, it picks its
# OpenTelemetry plugin for every client once anything has imported opentelemetry (the kit's spans do),
# trace=True or not. There the kit sets its default at the process's first connection
# (claim_implicit_tracing), not only on trace=True.
_log_tracing = logging.getLogger("sbnotebook.tracing")
TRACING_MISSING = (
    "trace=True turns the azure-servicebus SDK's OpenTelemetry tracing on, which needs opentelemetry-api and "
    "azure-core-tracing-opentelemetry: {install}"
)
IMPLICIT_TRACING_BEFORE = (1, 33)  # azure-core's first version that picks no tracing plugin by itself


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
        raise ConfigurationError(TRACING_MISSING.format(install=install().pip_install("tracing"))) from None

    class KitSpan(OpenTelemetrySpan):
        kit_only = True  # messages.tracing_on reads it: outside the kit's traced operations, nothing to trace

        def __init__(self, span: Any = None, name: str | None = "span", **kwargs: Any) -> None:
            if span is None and not sdk_traced.get():
                span = NonRecordingSpan(INVALID_SPAN_CONTEXT)
            super().__init__(span, name, **kwargs)

    return KitSpan


def _kit_default(span: type) -> None:
    """``span`` as the default of azure-core's tracing setting (the comment above), said once; and
    said when a value set by the user or the environment comes first."""
    from azure.core.settings import settings

    setting = settings.tracing_implementation
    if setting.default is not span:
        setting._default = span
        _log_tracing.info("the SDK traces the kit's clients with trace=True only (azure-core %s)", _version())
    current = setting()
    if current is not span:
        _log_tracing.info(
            "azure-core's tracing implementation is set to %r, before the kit's default: every client, "
            "the kit's too, is traced as it makes them",
            current,
        )


def trace_kit_clients() -> None:
    """trace=True: ``kit_span()`` as azure-core's default tracing implementation (the comment above);
    ``ConfigurationError`` without the tracing extra."""
    _kit_default(kit_span())


def implicit_tracing(version: str | None = None) -> bool:
    """Whether azure-core ``version`` (the installed one by default) picks its OpenTelemetry plugin by
    itself: before ``IMPLICIT_TRACING_BEFORE``."""
    major_minor = (version or _version()).split(".")[:2]
    return tuple(int(part) for part in major_minor) < IMPLICIT_TRACING_BEFORE


@functools.cache
def claim_implicit_tracing() -> None:
    """Where azure-core picks its plugin by itself (``implicit_tracing``), ``kit_span()`` as the default
    in its place, once a process, before its first connection: the SDK then traces the kit's clients
    only with trace=True, and others only once the user sets an implementation, as a newer azure-core
    does. Nothing without the tracing extra (azure-core finds no plugin either)."""
    if not implicit_tracing():
        return
    try:
        span = kit_span()
    except ConfigurationError:
        return
    _kit_default(span)


def _version() -> str:
    from azure.core import __version__

    return __version__
