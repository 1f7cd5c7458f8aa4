"""Subscription rules: which topic messages a subscription receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..sql.sqlaction import compile_action
from ..sql.sqlfilter import MISSING, compile_filter
from ..topology import RuleConfig
from .model import StoredMessage

RULE_NAME = "RuleName"

_SYSTEM = {
    "messageid": lambda m: m.data.message_id,
    "correlationid": lambda m: m.data.correlation_id,
    "label": lambda m: m.data.subject,
    "subject": lambda m: m.data.subject,
    "contenttype": lambda m: m.data.content_type,
    "to": lambda m: m.data.to,
    "replyto": lambda m: m.data.reply_to,
    "replytosessionid": lambda m: m.data.reply_to_session_id,
    "sessionid": lambda m: m.data.session_id,
    "partitionkey": lambda m: m.data.partition_key,
    "sequencenumber": lambda m: m.sequence_number,
    "enqueuedtimeutc": lambda m: m.enqueued_time,
    "deliverycount": lambda m: m.delivery_count,
    "size": lambda m: m.data.size,
    "timetolive": lambda m: m.data.ttl,
    "scheduledenqueuetimeutc": lambda m: m.data.scheduled_enqueue_time,
}

_CORRELATION_FIELDS = {
    "correlationid": "correlationid",
    "messageid": "messageid",
    "to": "to",
    "replyto": "replyto",
    "label": "label",
    "subject": "label",
    "sessionid": "sessionid",
    "replytosessionid": "replytosessionid",
    "contenttype": "contenttype",
}


def lookup_for(msg: StoredMessage) -> Callable[[str, str], Any]:
    props = msg.application_properties

    def lookup(scope: str, name: str) -> Any:
        if scope == "sys":
            getter = _SYSTEM.get(name.lower())
            value = getter(msg) if getter else None
            return MISSING if value is None else value
        if name in props:
            return props[name]
        lowered = name.lower()
        for key, value in props.items():
            if key.lower() == lowered:
                return value
        return MISSING

    return lookup


class Rule:
    def __init__(self, config: RuleConfig) -> None:
        self.config = config
        self.name = config.name
        if config.filter_type == "Correlation":
            self._match = _correlation_matcher(config.correlation)
        else:
            sql = compile_filter(config.sql_expression, config.parameters)
            self._match = lambda msg: sql(lookup_for(msg))
        action = config.action
        self._action = compile_action(action, config.action_parameters) if action and action.strip() else None

    @property
    def has_action(self) -> bool:
        return self._action is not None

    def matches(self, msg: StoredMessage) -> bool:
        return self._match(msg)

    def apply(self, msg: StoredMessage) -> None:
        """Run the rule's action on ``msg`` (a subscription's own copy) and name the rule on it,
        as Service Bus does with the ``RuleName`` property."""
        if self._action is not None:
            props = msg.writable_properties()  # before the lookup, which must read what the action sets
            self._action(lookup_for(msg), props)
            props[RULE_NAME] = self.name


def _correlation_matcher(spec: dict[str, Any]) -> Callable[[StoredMessage], bool]:
    wanted: list[tuple[str, Any]] = []
    user: dict[str, Any] = {}
    for key, value in spec.items():
        if key.lower() == "properties":
            user.update(value or {})
        elif value not in (None, ""):
            field = _CORRELATION_FIELDS.get(key.lower())
            if field is None:
                raise ValueError(f"unknown correlation filter field {key!r}")
            wanted.append((field, value))

    def match(msg: StoredMessage) -> bool:
        for field, value in wanted:
            if _SYSTEM[field](msg) != value:
                return False
        props = msg.application_properties
        return all(name in props and props[name] == value for name, value in user.items())

    return match


DEFAULT_RULE = RuleConfig(name="$Default", filter_type="True", sql_expression="1=1")  # as Service Bus makes it


def admit(rules: list[Rule], msg: StoredMessage, number: Callable[[], int]) -> list[StoredMessage]:
    """A subscription's copies of a topic message, as Service Bus makes them: one for all matching
    rules without an action, plus one per matching rule with an action (applied, ``RuleName`` set).
    The first copy keeps the topic's sequence number; further copies take new ones (``number``)."""
    plain = False
    acting: list[Rule] = []
    for rule in rules:
        if rule.matches(msg):
            if rule.has_action:
                acting.append(rule)
            else:
                plain = True
    out: list[StoredMessage] = []
    if plain:
        out.append(msg.copy_for(msg.sequence_number, msg.enqueued_time))
    for rule in acting:
        copy = msg.copy_for(number() if out else msg.sequence_number, msg.enqueued_time)
        rule.apply(copy)
        out.append(copy)
    return out
