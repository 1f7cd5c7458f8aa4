"""Creating, changing and deleting queues, topics, subscriptions and rules (the administration API).

Properties are given by their SDK names (``lock_duration``, ``max_delivery_count``,
``requires_session``, ...); durations as ``timedelta``, seconds, ``30s``/``5m``/``2h``/``7d`` or ISO
8601 (``PT30S``). Names the kind does not have are refused before anything is sent. Deleting is
destructive by name: the notebook layer asks before calling it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath, entity_name, not_dead_letter
from ..errors import InvalidInputError, SbError
from ..sdk.clients import rule_arguments
from ..sdk.failures import is_entity_not_found
from .counts import admin_error

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$", re.I)
_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.I)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(value: Any, name: str = "duration") -> dt.timedelta:
    """A timedelta from a timedelta, seconds, '30s'/'5m'/'2h'/'7d' or ISO 8601 ('PT30S')."""
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.timedelta(seconds=value)
    text = str(value).strip()
    match = _DURATION.match(text)
    if match:
        return dt.timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()])
    iso = _ISO.match(text)
    if iso and any(iso.groups()):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
        return dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    raise InvalidInputError(f"{name} takes a duration such as 30s, 5m, 2h, 7d or PT30S, not {value!r}.")


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise InvalidInputError(f"{name} takes true or false, not {value!r}.")


def _integer(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} takes a whole number, not {value!r}.") from None
    if number < 1:
        raise InvalidInputError(f"{name} must be 1 or more, not {number}.")
    return number


def _text(value: Any, name: str) -> str:
    return str(value)


_Kinds = dict[str, Callable[[Any, str], Any]]
QUEUE_PROPERTIES: _Kinds = {
    "lock_duration": duration,
    "max_delivery_count": _integer,
    "requires_session": _boolean,
    "default_message_time_to_live": duration,
    "dead_lettering_on_message_expiration": _boolean,
    "requires_duplicate_detection": _boolean,
    "duplicate_detection_history_time_window": duration,
    "max_size_in_megabytes": _integer,
    "max_message_size_in_kilobytes": _integer,
    "forward_to": _text,
    "forward_dead_lettered_messages_to": _text,
    "auto_delete_on_idle": duration,
    "user_metadata": _text,
}
TOPIC_PROPERTIES: _Kinds = {
    "default_message_time_to_live": duration,
    "requires_duplicate_detection": _boolean,
    "duplicate_detection_history_time_window": duration,
    "max_size_in_megabytes": _integer,
    "max_message_size_in_kilobytes": _integer,
    "auto_delete_on_idle": duration,
    "user_metadata": _text,
}
SUBSCRIPTION_PROPERTIES: _Kinds = {
    "lock_duration": duration,
    "max_delivery_count": _integer,
    "requires_session": _boolean,
    "default_message_time_to_live": duration,
    "dead_lettering_on_message_expiration": _boolean,
    "dead_lettering_on_filter_evaluation_exceptions": _boolean,
    "forward_to": _text,
    "forward_dead_lettered_messages_to": _text,
    "auto_delete_on_idle": duration,
    "user_metadata": _text,
}
PROPERTIES: dict[str, _Kinds] = {
    "queue": QUEUE_PROPERTIES,
    "topic": TOPIC_PROPERTIES,
    "subscription": SUBSCRIPTION_PROPERTIES,
}
# What Service Bus does not let an existing entity change.
FIXED_AFTER_CREATE = ("requires_session", "requires_duplicate_detection")


def entity_properties_of(kind: str, properties: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check and convert properties for a kind (SDK names and types); unknown names are refused."""
    allowed = PROPERTIES.get(kind)
    if allowed is None:
        raise InvalidInputError(f"kind is queue, topic or subscription, not {kind!r}.")
    out: dict[str, Any] = {}
    for name, value in (properties or {}).items():
        convert = allowed.get(name)
        if convert is None:
            raise InvalidInputError(f"A {kind} has no property {name!r}; it has: {', '.join(sorted(allowed))}.")
        if value is not None:
            out[name] = convert(value, name)
    return out


def _admin(conn: LiveConnection, entity: str, work: Callable[[Any], Any]) -> Any:
    try:
        return work(conn.admin())
    except SbError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "ResourceExistsError":
            raise InvalidInputError(f"{entity} exists already: update it, or delete it first.") from None
        raise admin_error(exc, conn, entity) from None


def _queue_or_topic(name: str, as_queue: Callable[[str], Any], as_topic: Callable[[str], Any]) -> tuple[str, Any]:
    """("queue", as_queue(name)), or ("topic", as_topic(name)) where the name is not a queue: one
    request for a queue, two for a topic (the administration API has no "what is this name")."""
    try:
        return "queue", as_queue(name)
    except (AttributeError, TypeError):
        pass  # the name is a topic: the SDK cannot read its description as a queue's
    except Exception as exc:
        if not is_entity_not_found(exc):
            raise
    return "topic", as_topic(name)  # not found either: the caller's error handler says so


def _described(admin: Any, path: EntityPath) -> tuple[str, Any]:
    """The kind (queue or topic for a bare name) and the SDK's description of the entity: one request
    for a queue or a subscription, two for a topic (asks the administration API)."""
    if path.is_subscription:
        return "subscription", admin.get_subscription(path.name, path.subscription)
    return _queue_or_topic(path.name, admin.get_queue, admin.get_topic)


def created_at(admin: Any, path: EntityPath) -> dt.datetime:
    """When a queue, topic or subscription was created (its runtime properties' CreatedAt): one
    request for a queue or a subscription, two for a topic."""
    if path.is_subscription:
        return admin.get_subscription_runtime_properties(path.name, path.subscription).created_at_utc
    runtime = _queue_or_topic(path.name, admin.get_queue_runtime_properties, admin.get_topic_runtime_properties)[1]
    return runtime.created_at_utc


def _kind_of(admin: Any, path: EntityPath) -> str:
    """queue, topic or subscription (asks the administration API)."""
    if path.is_subscription:
        return "subscription"
    return str(_described(admin, path)[0])


def _plain(kind: str, props: Any) -> dict[str, Any]:
    plain = {"kind": kind, "name": props.name} | {
        name: getattr(props, name, None) for name in PROPERTIES[kind] if hasattr(props, name)
    }
    for forward in ("forward_to", "forward_dead_lettered_messages_to"):  # by name, as the kit takes them
        if forward in plain:
            plain[forward] = entity_name(plain[forward])
    return plain


def _path(entity: str | EntityPath) -> EntityPath:
    return not_dead_letter(entity, "manage {parent} instead.")


def entity_properties(entity: str | EntityPath, *, connection: ConnectionLike = None) -> dict[str, Any]:
    """A queue's, topic's or subscription's kind, name and settable properties, as a dict."""
    path = _path(entity)
    conn = live(connection)

    result: dict[str, Any] = _admin(conn, str(path), lambda admin: _plain(*_described(admin, path)))
    return result


def create_entity(
    entity: str | EntityPath,
    *,
    kind: str = "queue",
    properties: Mapping[str, Any] | None = None,
    connection: ConnectionLike = None,
) -> dict[str, Any]:
    """Create a queue, topic (``kind="topic"``) or subscription (an address
    ``topic/subscriptions/name``; a new subscription gets the default rule, which takes every
    message). Returns its properties as :func:`entity_properties` shows them."""
    path = _path(entity)
    kind = "subscription" if path.is_subscription else kind
    if kind == "subscription" and not path.is_subscription:
        raise InvalidInputError(f"A subscription is named topic/subscriptions/name, not {path}.")
    values = entity_properties_of(kind, properties)
    conn = live(connection)

    def create(admin: Any) -> Any:
        if kind == "queue":
            return admin.create_queue(path.name, **values)
        if kind == "topic":
            return admin.create_topic(path.name, **values)
        return admin.create_subscription(path.name, path.subscription, **values)

    made = _plain(kind, _admin(conn, str(path), create))
    conn.entity_changes += 1
    return made


def update_entity(
    entity: str | EntityPath, properties: Mapping[str, Any], *, connection: ConnectionLike = None
) -> dict[str, Any]:
    """Change properties of an existing queue, topic or subscription (read, change, write back).
    Returns ``{"before": ..., "after": ...}`` for the changed properties."""
    path = _path(entity)
    conn = live(connection)

    def update(admin: Any) -> dict[str, Any]:
        kind, current = _described(admin, path)
        values = entity_properties_of(kind, properties)
        fixed = [name for name in values if name in FIXED_AFTER_CREATE]
        if fixed:
            raise InvalidInputError(f"{', '.join(fixed)} cannot change after a {kind} is created: create a new one.")
        before = {name: getattr(current, name, None) for name in values}
        for name, value in values.items():
            setattr(current, name, value)
        if kind == "queue":
            admin.update_queue(current)
        elif kind == "topic":
            admin.update_topic(current)
        else:
            admin.update_subscription(path.name, current)
        return {"kind": kind, "before": before, "after": values}

    result: dict[str, Any] = _admin(conn, str(path), update)
    return result


def delete_entity(entity: str | EntityPath, *, connection: ConnectionLike = None) -> str:
    """Delete a queue, topic (with its subscriptions) or subscription, and every message in it.
    Returns the kind deleted."""
    path = _path(entity)
    conn = live(connection)

    def delete(admin: Any) -> str:
        kind = _kind_of(admin, path)
        if kind == "queue":
            admin.delete_queue(path.name)
        elif kind == "topic":
            admin.delete_topic(path.name)
        else:
            admin.delete_subscription(path.name, path.subscription)
        return kind

    result: str = _admin(conn, str(path), delete)
    conn.entity_changes += 1
    return result


# ---------------------------------------------------------------- rules


@dataclass(frozen=True)
class RuleInfo:
    """A subscription rule: its filter (SQL, correlation, or true/false) and SQL action."""

    name: str
    filter_kind: str  # sql, correlation, true, false
    filter: str  # the SQL expression, or the correlation properties as text
    action: str | None


# A correlation filter's system fields ("subject" is accepted for "label", the SDK's name).
CORRELATION_FIELDS = ("correlation_id", "message_id", "to", "reply_to", "label", "session_id", "content_type")


def _subscription(entity: str | EntityPath) -> EntityPath:
    path = _path(entity)
    if not path.is_subscription:
        raise InvalidInputError(f"Rules belong to subscriptions (topic/subscriptions/name), not {path}.")
    return path


def _rule_info(rule: Any) -> RuleInfo:
    f = rule.filter
    kind = type(f).__name__.replace("RuleFilter", "").lower() or "sql"
    if kind == "correlation":
        parts = {name: getattr(f, name) for name in CORRELATION_FIELDS if getattr(f, name, None) is not None}
        if getattr(f, "properties", None):
            parts["properties"] = dict(f.properties)
        text = ", ".join(f"{k}={v!r}" for k, v in parts.items())
    else:
        text = getattr(f, "sql_expression", None) or kind
    action = getattr(rule.action, "sql_expression", None) if rule.action is not None else None
    return RuleInfo(rule.name, kind, text, action)


def list_rules(subscription: str | EntityPath, *, connection: ConnectionLike = None) -> list[RuleInfo]:
    """A subscription's rules."""
    path = _subscription(subscription)
    conn = live(connection)
    result: list[RuleInfo] = _admin(
        conn, str(path), lambda admin: [_rule_info(r) for r in admin.list_rules(path.name, path.subscription)]
    )
    return result


def create_rule(
    subscription: str | EntityPath,
    name: str,
    *,
    sql: str | None = None,
    correlation: Mapping[str, Any] | None = None,
    action: str | None = None,
    connection: ConnectionLike = None,
) -> RuleInfo:
    """Add a rule: a SQL filter (``sql="color = 'red'"``) or a correlation filter (``correlation=
    {"subject": "order", "properties": {"region": "eu"}}``; system fields and/or application
    properties), optionally with a SQL action (``action="SET sys.label = 'eu'"``)."""
    path = _subscription(subscription)
    if (sql is None) == (correlation is None):
        raise InvalidInputError("A rule takes a SQL filter or a correlation filter (one of them).")
    fields = None
    if correlation is not None:
        fields = dict(correlation)
        if "subject" in fields:
            fields["label"] = fields.pop("subject")
        unknown = set(fields) - {*CORRELATION_FIELDS, "properties"}
        if unknown:
            raise InvalidInputError(
                f"A correlation filter has no field {sorted(unknown)}; it has: "
                f"{', '.join(CORRELATION_FIELDS)} (or subject) and properties."
            )
    arguments = rule_arguments(sql=sql, correlation=fields, action=action)
    conn = live(connection)
    rule = _admin(conn, str(path), lambda admin: admin.create_rule(path.name, path.subscription, name, **arguments))
    return _rule_info(rule)


def delete_rule(subscription: str | EntityPath, name: str, *, connection: ConnectionLike = None) -> None:
    """Remove a rule. A subscription with no rule receives nothing."""
    path = _subscription(subscription)
    conn = live(connection)
    _admin(conn, f"{path} rule {name}", lambda admin: admin.delete_rule(path.name, path.subscription, name))
