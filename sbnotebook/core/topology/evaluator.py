"""Which subscriptions of a topic a message goes to, and why not, with the broker's own evaluator
(``sbnotebook.sqlrules``): each rule compiled once, each message read once into the properties
filters see, then for each subscription what Service Bus does (``sqlrules.rule.admits``: one copy
for the rules without an action, one per matching rule with an action, applied, ``RuleName`` set).

A message is a record (the kit's schema, ``records.py``), an export line read back (its
``application_property_types`` give each property its AMQP type), or a dict typed by hand (plain
JSON values). The ``sys.`` properties come from the record's fields (``subject`` is ``sys.Label``,
...); those only the broker sets (``SequenceNumber``, ``EnqueuedTimeUtc``) are the record's own,
which are the source entity's, not what a send to the topic would give; ``DeliveryCount``, ``State``
and ``ForcePersistence`` are what the broker sees of every message it routes (``AS_ROUTED``);
``ReplyToSessionId`` comes from the record's side map (``BROKER_PROPERTIES``). ``Size`` stays NULL:
the broker's is the length of the message as its sender encoded it, which a receiver does not get
(the broker's own annotations and header come with it); ``LockToken``, ``LockedUntilUtc`` and
``ViaPartitionKey`` are NULL as the broker has them when it routes.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ...sqlrules.context import MessageProperties
from ...sqlrules.dotnet import EPOCH, described_value, encoded_decimal
from ...sqlrules.lexer import SqlFilterError
from ...sqlrules.rule import RULE_NAME, CompiledRule, admits, compile_rule
from ..amqp_codec import Typed, from_form
from ..errors import InvalidInputError

# sys. name -> the record's field
SYSTEM_FIELDS = {
    "MessageId": "message_id",
    "Label": "subject",
    "To": "to",
    "ReplyTo": "reply_to",
    "CorrelationId": "correlation_id",
    "ContentType": "content_type",
    "SessionId": "session_id",
    "PartitionKey": "partition_key",
    "SequenceNumber": "sequence_number",
    "EnqueuedSequenceNumber": "sequence_number",
    "EnqueuedTimeUtc": "enqueued_time",
    "ScheduledEnqueueTimeUtc": "scheduled_enqueue_time",
    "DeadLetterSource": "dead_letter_source",
}
# What the broker sees of every message it routes through a topic's rules (a send, a scheduled
# message's time come, a forward): not yet delivered, not locked, active, persisted as sent.
AS_ROUTED = {"DeliveryCount": 0, "State": "Active", "ForcePersistence": False}
BROKER_PROPERTIES = "broker_properties"
"""A record's side map, beside the schema's fields (as ``application_property_types`` is): the
``sys.`` properties the one record schema has no field for, by name (``ReplyToSessionId``), where
the source has them (an entity's messages, a typed message's ``reply_to_session_id``)."""


NO_RULES = "None"  # a RuleSpec's filter_type standing for a subscription that has no rule at all


@dataclass(frozen=True)
class RuleSpec:
    """One rule of a subscription, wherever it was read (the administration API, Config.json, a
    what-if typed in a cell). ``filter_type``: "Sql", "True", "False" or "Correlation" (``NO_RULES``:
    none, the subscription gets nothing); correlation fields by Config.json's names (``Label``,
    ``Properties``, ...)."""

    subscription: str
    name: str
    filter_type: str = "Sql"
    sql: str = "1=1"
    correlation: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    action: str | None = None
    action_parameters: Mapping[str, Any] = field(default_factory=dict)

    def compiled(self) -> CompiledRule:
        """The rule compiled, once for this spec (kept on it: a Spark task routes many Arrow batches
        with the same specs); a filter or action outside the grammar refused, naming the rule, the
        position and the text there."""
        found: CompiledRule | None = self.__dict__.get("_compiled")
        if found is None:
            found = self._compile()
            object.__setattr__(self, "_compiled", found)  # not a field: equality and repr ignore it
        return found

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its compiled rule: a task that unpickles the spec compiles its own."""
        return {k: v for k, v in self.__dict__.items() if k != "_compiled"}

    def _compile(self) -> CompiledRule:
        try:
            return compile_rule(
                self.filter_type,
                self.sql,
                self.correlation,
                dict(self.parameters),
                self.action,
                dict(self.action_parameters),
            )
        except SqlFilterError as exc:
            raise InvalidInputError(f"Rule {self.name!r} of {self.subscription}: {exc}") from None


def compile_topic(rules: Iterable[RuleSpec]) -> dict[str, list[tuple[str, CompiledRule]]]:
    """Each subscription's compiled rules, in the order given (a subscription without a rule gets nothing)."""
    out: dict[str, list[tuple[str, CompiledRule]]] = {}
    for spec in rules:
        found = out.setdefault(spec.subscription, [])
        if spec.filter_type != NO_RULES:
            found.append((spec.name, spec.compiled()))
    return out


def _described(t: Typed) -> Any:
    """.NET's TimeSpan and DateTimeOffset (ticks, described) as the broker reads them; others NULL."""
    descriptor, value = t.value
    if not isinstance(value.value, int) or isinstance(value.value, bool):
        return None
    return described_value(str(descriptor.value), value.value)


def sql_value(t: Typed) -> Any:
    """A typed AMQP value as filters compare it (the broker's ``sqlvalues.to_sql``, from the export's form)."""
    if t.type == "timestamp":
        return EPOCH + dt.timedelta(milliseconds=t.value)
    if t.type == "described":
        return _described(t)
    if t.type.startswith("decimal"):
        return encoded_decimal(t.value)  # System.Decimal, as the broker decodes it
    if t.type in ("list", "array", "map"):
        return None  # not compared by the kit's route (docs/magics.md, %sb_route)
    return t.value


_NUMBER_START = frozenset("-0123456789")


def _untyped(value: Any) -> Any:
    """A property of a record without types: the record's JSON-encoded numbers and booleans back."""
    if not isinstance(value, str) or not (value[:1] in _NUMBER_START or value in ("true", "false")):
        return value  # (JSON is tried only where it could give a number or a boolean: it costs)
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, bool | int | float) else value


def user_properties(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's application properties with the types filters compare."""
    raw = record.get("application_properties") or {}
    types = record.get("application_property_types")
    if isinstance(types, Mapping):
        return {k: sql_value(from_form(types[k], v)) if k in types else v for k, v in raw.items()}
    return {str(k): _untyped(v) for k, v in raw.items()}


def _system(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: record.get(key) for name, key in SYSTEM_FIELDS.items() if record.get(key) is not None}
    extra = record.get(BROKER_PROPERTIES)
    if isinstance(extra, Mapping):
        out.update({name: value for name, value in extra.items() if value is not None})
    ttl = record.get("time_to_live")
    if ttl is not None:
        out["TimeToLive"] = dt.timedelta(seconds=float(ttl))
        if record.get("enqueued_time") is not None:
            out["ExpiresAtUtc"] = record["enqueued_time"] + out["TimeToLive"]
    return out


class RoutedProperties(MessageProperties):
    """A message's properties as the broker's rules see them: a ``sys.`` property the message does
    not hold reads as every routed message has it (``AS_ROUTED``), kept out of the dicts (and so
    out of the rows, where it would say nothing of the message)."""

    def system(self, name: str) -> Any:
        found = self.system_properties.get(name, _UNSET)
        return AS_ROUTED.get(name) if found is _UNSET else found


_UNSET = object()


def properties_of(record: Mapping[str, Any]) -> MessageProperties:
    """What filters read of a record: its user properties (typed) and its ``sys.`` ones."""
    return RoutedProperties(user_properties(record), _system(record))


@dataclass(slots=True)
class Delivery:
    """One copy a subscription gets: the acting rule (None: the copy of the rules without an
    action), and its properties after that rule's action (a plain copy shares the message's dicts:
    read them, never change them)."""

    rule: str | None
    application_properties: dict[str, Any]
    system_properties: dict[str, Any]


@dataclass(slots=True)
class Routed:
    """One message and one subscription: the copies it gets (none: not matched), the rules that
    matched, and for a subscription it does not get, why not (per rule, its first failing clause)."""

    message: int  # the message's place among those routed (0-based)
    message_id: str | None
    sequence_number: int | None
    subscription: str
    deliveries: tuple[Delivery, ...]
    why_not: tuple[str, ...] = ()

    @property
    def matched(self) -> bool:
        return bool(self.deliveries)

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules that matched (``*`` for the copy of the rules without an action)."""
        return tuple(d.rule or "*" for d in self.deliveries)


def _copy(props: MessageProperties, name: str, rule: CompiledRule) -> Delivery:
    copy = RoutedProperties(props.user_properties, props.system_properties)
    rule.apply(copy)
    copy.set_user(RULE_NAME, name)
    return Delivery(name, copy.user_properties, copy.system_properties)


def why_not(rules: Sequence[tuple[str, CompiledRule]], props: MessageProperties) -> tuple[str, ...]:
    """Each rule's first failing clause with the values seen; a subscription with no rule says so."""
    if not rules:
        return ("no rule: a subscription without rules receives nothing",)
    return tuple(f"{name}: {rule.reason(props)}" for name, rule in rules)


def route_one(
    index: int, record: Mapping[str, Any], topic: Mapping[str, Sequence[tuple[str, CompiledRule]]], explain: bool
) -> list[Routed]:
    """One message against every subscription of ``topic`` (compiled rules by subscription)."""
    props = properties_of(record)
    out: list[Routed] = []
    for subscription, rules in topic.items():
        plain, acting = admits(rules, props)
        deliveries = [Delivery(None, props.user_properties, props.system_properties)] if plain else []
        if acting:
            by_name = dict(rules)
            deliveries += [_copy(props, name, by_name[name]) for name in acting]
        reasons = why_not(rules, props) if explain and not deliveries else ()
        out.append(
            Routed(
                index,
                record.get("message_id"),
                record.get("sequence_number"),
                subscription,
                tuple(deliveries),
                reasons,
            )
        )
    return out


_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int to Python
    (int, "long"),
    (float, "double"),
    (str, "string"),
    (dt.datetime, "timestamp"),
    (dt.timedelta, "timespan"),
    (uuid.UUID, "uuid"),
    (Decimal, "decimal128"),
    (bytes, "binary"),
)


def type_name(value: Any) -> str:
    """A property's type after routing, by the AMQP names the export uses: a whole number an action
    set is a ``long`` (the broker encodes it so), a DateTime a ``timestamp``, a TimeSpan a ``timespan``."""
    if value is None:
        return "null"
    return next((name for cls, name in _TYPE_NAMES if isinstance(value, cls)), type(value).__name__)


def json_form(value: Any) -> Any:
    """A property's value in JSON: numbers, booleans, text and null as they are, a timestamp as ISO
    8601, a timespan in seconds, a uuid or decimal as its text, binary as base64."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return str(value)
