"""What the AMQP handler keeps per connection and link, and the Service Bus link terms it reads
and writes (session filter, timeouts, lock tokens, .NET ticks): plain functions and records, no
handler state (``handler.py`` is the handler)."""

from __future__ import annotations

import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cproton_ffi import ffi, lib
from proton import Condition, Delivery, Link, Message, symbol

from ..broker.broker import Source
from ..errors import BadRequest, BrokerError
from ..security.sas import Grant, covers

CBS = "$cbs"
MANAGEMENT_SUFFIX = "/$management"
DEAD_LETTER_CONDITION = "com.microsoft:dead-letter"
TRACKING_ID = symbol("com.microsoft:tracking-id")
SENDER_CREDIT = 500
MAX_FRAME_SIZE = 256 * 1024
SESSION_CAPACITY = 64 * 1024 * 1024
T = TypeVar("T")
TICK_SECONDS = 0.05


def normalise_address(address: str | None) -> str:
    """``amqps://host:port/Orders`` -> ``Orders`` (scheme, authority and leading '/' removed)."""
    if not address:
        return ""
    text = address
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("/", 1)[1] if "/" in text else ""
    return text.strip("/")


def need(obj: T | None, what: str) -> T:
    # proton types event fields as optional; on the events handled here they are always set.
    if obj is None:
        raise RuntimeError(f"proton event without a {what}")
    return obj


def error_condition(exc: BrokerError) -> Condition:
    # The SDK hangs on sends if an error carries no info map.
    return Condition(exc.condition, exc.description, {TRACKING_ID: exc.tracking_id})


@dataclass(eq=False)
class ConnectionState:
    connection: Any = None
    grants: list[Grant] = field(default_factory=list)
    deliveries: int = 0
    cbs_sender: Link | None = None
    links: set[Link] = field(default_factory=set)
    idle_until: float | None = None  # closed then unless a link comes (connlimits.py); None: in use
    idle_after: float = 0.0  # the idle rule's seconds

    def authorized(self, path: str, right: str | None = None) -> bool:
        now = time.time()
        return any(covers(g, path, now, right) for g in self.grants)


@dataclass(eq=False)
class OutLink:
    """A link on which the broker sends: a receiver's source, or a reply channel."""

    link: Link
    source: Source | None = None
    peek_lock: bool = True
    session_id: str | None = None
    pending_replies: deque[Message] = field(default_factory=deque)


PN_ACCEPTED = int(Delivery.ACCEPTED)
SESSION_FILTER = symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
MAX_BATCH_SIZE = symbol("com.microsoft:max-message-batch-size")
# The most messages one batch may hold (Basic and Standard tiers; Premium takes about 15,885): more is
# refused with an internal error, whatever the bytes (Azure/azure-service-bus#397; the .NET SDK stops
# a batch there, Azure/azure-sdk-for-net#44916). No link property announces it, so the Python SDK
# admits more: 26,214 empty AmqpAnnotatedMessages fill its 256 KB batch.
MAX_BATCH_MESSAGES = 4500
OPERATION_TIMEOUT = symbol("com.microsoft:timeout")
DEFAULT_SESSION_WAIT = 60.0
DOTNET_EPOCH_TICKS = 621355968000000000


@dataclass
class WaitingAttach:
    out: OutLink
    session_id: str | None
    deadline: float


def session_filter(link: Link) -> tuple[bool, str | None]:
    """(is this a session receiver?, the session it asks for or None for next-available)."""
    data = link.remote_source.filter
    data.rewind()
    if not data.next():
        return False, None
    filters = data.get_object()
    if not isinstance(filters, dict) or SESSION_FILTER not in filters:
        return False, None
    value = filters[SESSION_FILTER]
    value = getattr(value, "value", value)  # a described filter
    if isinstance(value, (bytes, memoryview)):
        value = bytes(value).decode()
    if value is not None and not isinstance(value, str):
        # Service Bus refuses the link: a session id is a string (an int is not turned into one).
        raise BadRequest(
            f"The session filter must be a string or null, not {type(value).__name__} {value!r}.",
            entity=normalise_address(link.remote_source.address),
        )
    return True, value


def set_session_filter(link: Link, session_id: str) -> None:
    data = link.source.filter
    data.clear()
    data.put_map()
    data.enter()
    data.put_symbol(SESSION_FILTER)
    data.put_string(session_id)
    data.exit()


def link_timeout(link: Link) -> float:
    props = link.remote_properties or {}
    value = props.get(OPERATION_TIMEOUT)
    return int(value) / 1000.0 if value else DEFAULT_SESSION_WAIT


def dotnet_ticks(epoch_seconds: float) -> int:
    return int(epoch_seconds * 1000) * 10000 + DOTNET_EPOCH_TICKS


def raw_tag(impl: Any) -> bytes:
    tag = lib.pn_delivery_tag(impl)
    return bytes(ffi.unpack(tag.start, tag.size)) if tag.size else b""


def raw_token(impl: Any) -> uuid.UUID | None:
    """The lock token of one of our peek-lock deliveries, read from its tag (None otherwise)."""
    tag = lib.pn_delivery_tag(impl)
    if tag.size != 16:
        return None
    return uuid.UUID(bytes_le=ffi.unpack(tag.start, 16))


def string_keys(value: Any) -> dict[str, Any] | None:
    if not value:
        return None
    return {str(k): v for k, v in dict(value).items()}
