"""A namespace's entities as Microsoft's Service Bus emulator reads them (its ``Config.json``,
schema: ServiceBus-Emulator/Schema/Config-schema.json in Azure/azure-service-bus-emulator-installer),
and what that format or Microsoft's emulator cannot hold, said once per kind (:class:`Notes`).

Every property the format has is written (lock duration, max delivery count, sessions, time to
live, dead-lettering on expiration, duplicate detection and its window, forwarding and dead-letter
forwarding), durations in ISO 8601, rules with their SQL or correlation filters and SQL actions.
What goes past Microsoft's emulator's bounds (50 queues and topics, 1-10 deliveries, a time to live
of PT5M-PT1H, ...) is written as it is: the kit's emulator takes it, and a note names the entities.
Two things the format lacks are written as the kit's extensions (Microsoft's schema allows extra
properties): ``MaxMessageSizeInKilobytes`` and SQL ``Parameters``. Keys and policies are never read.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..entities import entity_name
from ..sdk.api import CorrelationRuleFilter, FalseRuleFilter, SqlRuleFilter, TrueRuleFilter

INFINITE_DAYS = 10675199  # TimeSpan.MaxValue in whole days: Service Bus's "never"
NAME = re.compile(r"^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$")  # the schema's name pattern
MAX_ENTITIES = 50  # queues and topics, Microsoft's emulator's most (its schema's maxItems)
MAX_SUBSCRIPTIONS = 50


@dataclass
class Notes:
    """What the export could not write as Microsoft's emulator takes it: kind -> names, in order."""

    kinds: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, name: str) -> None:
        names = self.kinds.setdefault(kind, [])
        if name not in names:
            names.append(name)

    def lines(self) -> list[str]:
        out = []
        for kind, names in self.kinds.items():
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            out.append(f"{kind}: {shown}")
        return out


def iso_duration(value: dt.timedelta | None) -> str | None:
    """A duration as ISO 8601 (``PT1M``, ``P14D``); Service Bus's "never" (``TimeSpan.MaxValue``)
    as ``P10675199D``, which reads back as the same "never"."""
    if value is None:
        return None
    if value >= dt.timedelta(days=INFINITE_DAYS):
        return f"P{INFINITE_DAYS}D"
    days, rest = value.days, value.seconds
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    fraction = f"{value.microseconds / 1e6:.6f}".rstrip("0")[1:] if value.microseconds else ""
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if seconds or fraction or not (days or hours or minutes):
        time += f"{seconds}{fraction}S"
    return ("P" + (f"{days}D" if days else "")) + (f"T{time}" if time else "")


# (the format's name, the SDK's attribute, how it is written, Microsoft's emulator's bounds or None)
Field = tuple[str, str, str, tuple[Any, Any] | None]
_TTL: Field = ("DefaultMessageTimeToLive", "default_message_time_to_live", "duration", ("PT5M", "PT1H"))
_DUPLICATES: Field = (
    "DuplicateDetectionHistoryTimeWindow",
    "duplicate_detection_history_time_window",
    "duration",
    ("PT5S", "PT5M"),
)
_DELIVERIES: Field = ("MaxDeliveryCount", "max_delivery_count", "int", (1, 10))
_FORWARDING: tuple[Field, ...] = (
    ("ForwardTo", "forward_to", "entity", None),
    ("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to", "entity", None),
)
QUEUE_FIELDS: tuple[Field, ...] = (
    ("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration", "bool", None),
    _TTL,
    _DUPLICATES,
    *_FORWARDING,
    ("LockDuration", "lock_duration", "duration", ("PT5S", "PT5M")),
    _DELIVERIES,
    ("RequiresDuplicateDetection", "requires_duplicate_detection", "bool", None),
    ("RequiresSession", "requires_session", "bool", None),
)
TOPIC_FIELDS: tuple[Field, ...] = (
    _TTL,
    _DUPLICATES,
    ("RequiresDuplicateDetection", "requires_duplicate_detection", "bool", None),
)
SUBSCRIPTION_FIELDS: tuple[Field, ...] = (
    ("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration", "bool", None),
    _TTL,
    ("LockDuration", "lock_duration", "duration", ("PT1M", "PT5M")),
    _DELIVERIES,
    *_FORWARDING,
    ("RequiresSession", "requires_session", "bool", None),
)
# Properties the format has no place for, and the value that needs no saying (anything else is noted).
_LEFT_OUT: dict[str, Callable[[Any], bool]] = {
    "auto_delete_on_idle": lambda v: v is None or v >= dt.timedelta(days=INFINITE_DAYS),
    "status": lambda v: v is None or str(v).lower().endswith("active"),
    "user_metadata": lambda v: not v,
    "dead_lettering_on_filter_evaluation_exceptions": lambda v: v is None or v is True,
    "enable_partitioning": lambda v: not v,  # Microsoft's emulator has no partitioned entities
}
_WRITERS: dict[str, Callable[[Any], Any]] = {
    "duration": iso_duration,
    "int": int,
    "bool": bool,
    "entity": entity_name,
}


def _seconds(text: str) -> dt.timedelta:
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?", text)
    assert match is not None
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _beyond(value: Any, bounds: tuple[Any, Any]) -> bool:
    low, high = (_seconds(b) if isinstance(b, str) else b for b in bounds)
    return not low <= value <= high


def properties(kind: str, described: Any, fields: Iterable[Field], where: str, notes: Notes) -> dict[str, Any]:
    """The format's ``Properties`` of one queue, topic or subscription (read from the SDK's
    ``QueueProperties``, ``TopicProperties`` or ``SubscriptionProperties``)."""
    out: dict[str, Any] = {}
    for name, attribute, how, bounds in fields:
        value = getattr(described, attribute, None)
        if value is None:
            continue
        written = _WRITERS[how](value)
        if written is None:
            continue
        out[name] = written
        # A duplicate detection window matters only where duplicate detection is on.
        idle = attribute == "duplicate_detection_history_time_window" and not described.requires_duplicate_detection
        if bounds is not None and not idle and _beyond(value, bounds):
            notes.add(
                f"{name} outside Microsoft's emulator's {bounds[0]}-{bounds[1]} (the kit's emulator takes it)", where
            )
        if how == "duration" and "." in written:
            notes.add("durations with fractions of a second (Microsoft's schema takes whole seconds)", where)
    size = getattr(described, "max_message_size_in_kilobytes", None)
    if kind != "subscription" and size and size != 256:
        out["MaxMessageSizeInKilobytes"] = int(size)
        notes.add("MaxMessageSizeInKilobytes (the kit's emulator reads it; Microsoft's keeps 256)", where)
    for attribute, unremarkable in _LEFT_OUT.items():
        if hasattr(described, attribute) and not unremarkable(getattr(described, attribute)):
            notes.add(f"{attribute} left out (the format has no place for it)", where)
    return out


def rules(described: list[Any], where: str, notes: Notes) -> list[dict[str, Any]] | None:
    """A subscription's ``Rules``, every one of them; None when it has just the rule a subscription
    gets when the file lists none ($Default, true, no action), so the file need not say it. A
    ``$Default`` beside other rules is written: left out, an emulator started from the file would
    route without it."""
    if len(described) == 1 and _is_default(described[0]):
        return None
    if not described:
        notes.add(
            "subscriptions without rules (the format cannot say so: started from the file, they get $Default)", where
        )
    return [rule(r, where, notes) for r in described]


def _is_default(described: Any) -> bool:
    return bool(described.name == "$Default" and described.action is None and _always(described.filter))


def rule(described: Any, where: str, notes: Notes) -> dict[str, Any]:
    """One rule in the format (``Name``, ``Properties``: ``FilterType``, the filter, ``Action``)."""
    flt, action = described.filter, described.action
    if not NAME.match(described.name):
        notes.add("rule names Microsoft's schema refuses (the kit's emulator takes them)", where)
    props: dict[str, Any]
    if isinstance(flt, CorrelationRuleFilter):
        props = {"FilterType": "Correlation", "CorrelationFilter": _correlation(flt, where, notes)}
    elif isinstance(flt, (TrueRuleFilter, FalseRuleFilter)):
        props = {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "1=1" if isinstance(flt, TrueRuleFilter) else "1=0"},
        }
    elif isinstance(flt, SqlRuleFilter):
        props = {"FilterType": "Sql", "SqlFilter": _sql(flt, where, notes)}
    else:
        raise TypeError(f"a rule filter of a kind the export does not know: {type(flt).__name__}")
    if action is not None and getattr(action, "sql_expression", None):
        props["Action"] = _sql(action, where, notes)
    return {"Name": described.name, "Properties": props}


def _always(flt: Any) -> bool:
    """A filter that takes every message: true, or SQL ``1=1`` (as the emulator reports a true filter)."""
    if isinstance(flt, TrueRuleFilter):
        return True
    return (
        isinstance(flt, SqlRuleFilter) and not flt.parameters and (flt.sql_expression or "").replace(" ", "") == "1=1"
    )


def _sql(described: Any, where: str, notes: Notes) -> dict[str, Any]:
    out: dict[str, Any] = {"SqlExpression": described.sql_expression}
    if described.parameters:
        out["Parameters"] = {str(k): _json_value(v, where, notes) for k, v in described.parameters.items()}
        notes.add("SQL parameters (the kit's emulator reads Parameters; Microsoft's format has none)", where)
    return out


CORRELATION_ATTRIBUTES = (  # (Config.json's name, the SDK's attribute) of a correlation filter
    ("ContentType", "content_type"),
    ("CorrelationId", "correlation_id"),
    ("Label", "label"),
    ("MessageId", "message_id"),
    ("ReplyTo", "reply_to"),
    ("ReplyToSessionId", "reply_to_session_id"),
    ("SessionId", "session_id"),
    ("To", "to"),
)


def _correlation(described: Any, where: str, notes: Notes) -> dict[str, Any]:
    out = {name: getattr(described, a) for name, a in CORRELATION_ATTRIBUTES if getattr(described, a)}
    if described.properties:
        out["Properties"] = {str(k): _json_value(v, where, notes) for k, v in described.properties.items()}
    if not out:
        notes.add("correlation filters matching every message (Microsoft's schema wants a field)", where)
    return out


def _json_value(value: Any, where: str, notes: Notes) -> Any:
    """A filter's or action's property value as JSON holds it (text, number, boolean); other types
    (dates, durations) as their text, said."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    notes.add("filter values that are not text, numbers or booleans (written as text)", where)
    return str(value)
