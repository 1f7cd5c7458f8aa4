"""Entity topology in the format of Microsoft's Service Bus emulator config file.

    {"UserConfig": {"Namespaces": [{"Name": "...",
        "Queues": [{"Name": "q", "Properties": {"LockDuration": "PT1M", ...}}],
        "Topics": [{"Name": "t", "Properties": {...},
                    "Subscriptions": [{"Name": "s", "Properties": {...},
                                       "Rules": [{"Name": "r", "Properties": {
                                           "FilterType": "Sql",
                                           "SqlFilter": {"SqlExpression": "a = 1"}}}]}]}]}]}}

Durations are ISO-8601 (``PT1M``, ``P14D``, ``PT0.5S``). Unknown property names are
refused so that a typo does not silently fall back to a default.

Emulator extension: shared access policies, beside ``Properties`` of a queue or topic (and of the
namespace), as Service Bus's ``AuthorizationRules``::

    "AuthorizationRules": [{"KeyName": "reader", "Rights": ["Listen"],
                            "PrimaryKey": "...", "SecondaryKey": "..."}]

Keys left out are made at random for the run (``Emulator.policy_connection_string`` tells them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sqlrules.lexer import SqlFilterError
from ..sqlrules.rule import compile_rule
from .security.entra import Principal
from .security.sas import Policy, new_key, rights_of

# Service Bus defaults (Standard tier).
DEFAULT_LOCK_DURATION = 60.0
MAX_LOCK_DURATION = 300.0
DEFAULT_MAX_DELIVERY_COUNT = 10
DEFAULT_DUPLICATE_WINDOW = 600.0
INFINITE_TTL = 10675199 * 86400.0  # TimeSpan.MaxValue in days, as Service Bus reports it
DEFAULT_MAX_MESSAGE_SIZE = 256 * 1024
DEFAULT_MAX_SIZE_MB = 1024

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


class TopologyError(ValueError):
    """The topology file is malformed; the message says where."""


def parse_duration(text: str | float | int, *, where: str = "duration") -> float:
    """ISO-8601 duration (``PT1M``) or plain seconds -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if isinstance(text, str):
        match = _DURATION.match(text.strip().upper())
        if match and text.strip().upper() not in ("P", "PT"):
            parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
            return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
    raise TopologyError(f"{where}: {text!r} is not an ISO-8601 duration such as 'PT1M'")


def format_duration(seconds: float) -> str:
    """Seconds -> ISO-8601 duration as Service Bus writes it."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    frac = seconds - whole
    out = "P" + (f"{days}D" if days else "")
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if secs or frac or not (days or hours or minutes):
        time += f"{secs + frac:g}S"
    return out + ("T" + time if time else "")


@dataclass
class RuleConfig:
    name: str
    filter_type: str = "Sql"  # "Sql" | "Correlation" | "True" | "False" (SQL filters of fixed value)
    sql_expression: str = "1=1"
    correlation: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)  # the SQL filter's @parameters
    action_parameters: dict[str, Any] = field(default_factory=dict)  # the action's @parameters
    # XML Schema types given through the administration API where the value does not say it
    # ("long", "dateTime", "duration"), by "filter:@name", "action:@name" or "property:name"
    xsd_types: dict[str, str] = field(default_factory=dict)


@dataclass
class EntityProperties:
    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    default_message_ttl: float = INFINITE_TTL
    dead_lettering_on_message_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window: float = DEFAULT_DUPLICATE_WINDOW
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    enable_partitioning: bool = False  # only what Service Bus refuses on one (batch delete) differs
    # Kept and reported by the administration API; what of them the broker acts on, docs/emulator.md says
    status: str = "Active"
    auto_delete_on_idle: float = INFINITE_TTL
    enable_batched_operations: bool = True
    user_metadata: str | None = None
    max_size_in_megabytes: int = DEFAULT_MAX_SIZE_MB
    enable_express: bool = False
    support_ordering: bool = True
    filtering_messages_before_publishing: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    # A queue's or topic's shared access policies (keys never in a repr)
    policies: tuple[Policy, ...] = ()


@dataclass
class SubscriptionConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)
    rules: list[RuleConfig] = field(default_factory=list)


@dataclass
class TopicConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)
    subscriptions: list[SubscriptionConfig] = field(default_factory=list)


@dataclass
class QueueConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)


@dataclass
class Topology:
    """The emulator's namespace, queues, topics (with subscriptions and rules) and its extensions
    (faults, Entra ID principals, shared access policies): Microsoft's emulator Config.json as read
    by ``Topology.from_file`` or ``Topology.from_dict``."""

    namespace: str = "sbemulatorns"
    queues: list[QueueConfig] = field(default_factory=list)
    topics: list[TopicConfig] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)  # emulator extension, see faults.py
    # Entra ID service principals (emulator extension, with --tls; see entra.py); secrets never in a repr
    principals: list[Principal] = field(default_factory=list)
    # Shared access policies of the namespace and of queues and topics (extension); keys never in a repr
    policies: list[Policy] = field(default_factory=list)

    @classmethod
    def from_file(cls, path: str | Path) -> Topology:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        user = _require(data, "UserConfig", "top level")
        namespaces = _require(user, "Namespaces", "UserConfig")
        if not isinstance(namespaces, list) or len(namespaces) != 1:
            raise TopologyError("UserConfig.Namespaces must list exactly one namespace")
        ns = namespaces[0]
        topo = cls(namespace=str(ns.get("Name", "sbemulatorns")))
        faults = ns.get("Faults") or []
        if not isinstance(faults, list):
            raise TopologyError("Faults must be a list of rules")
        topo.faults = list(faults)
        principals = ns.get("Principals") or []
        if not isinstance(principals, list):
            raise TopologyError("Principals must be a list of {ClientId, ClientSecret, Roles}")
        try:
            topo.principals = [Principal.from_config(p, f"Principals[{i}]") for i, p in enumerate(principals)]
        except ValueError as exc:
            raise TopologyError(str(exc)) from None
        topo.policies += _policies(ns.get("AuthorizationRules"), None, "namespace")
        for i, q in enumerate(ns.get("Queues") or []):
            where = f"Queues[{i}]"
            topo.queues.append(QueueConfig(_name(q, where), _properties(q.get("Properties"), where)))
            topo.policies += _policies(q.get("AuthorizationRules"), topo.queues[-1].name, where)
        for i, t in enumerate(ns.get("Topics") or []):
            where = f"Topics[{i}]"
            topic = TopicConfig(_name(t, where), _properties(t.get("Properties"), where))
            topo.policies += _policies(t.get("AuthorizationRules"), topic.name, where)
            for j, s in enumerate(t.get("Subscriptions") or []):
                swhere = f"{where}.Subscriptions[{j}]"
                if isinstance(s, dict) and "AuthorizationRules" in s:
                    raise TopologyError(f"{swhere}: subscriptions have no policies in Service Bus; give the topic one")
                sub = SubscriptionConfig(_name(s, swhere), _properties(s.get("Properties"), swhere))
                for k, r in enumerate(s.get("Rules") or []):
                    sub.rules.append(_rule(r, f"{swhere}.Rules[{k}]"))
                topic.subscriptions.append(sub)
            topo.topics.append(topic)
        topo.validate()
        return topo

    def validate(self) -> None:
        names = [q.name.lower() for q in self.queues] + [t.name.lower() for t in self.topics]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise TopologyError(f"entity names must be unique (case-insensitive): {sorted(dupes)}")
        for props, where in self._all_properties():
            for target in (props.forward_to, props.forward_dead_lettered_messages_to):
                if target and target.lower() not in names:
                    raise TopologyError(f"{where}: forwarding target {target!r} is not a queue or topic")

    def _all_properties(self) -> list[tuple[EntityProperties, str]]:
        out = [(q.properties, q.name) for q in self.queues]
        for t in self.topics:
            out += [(s.properties, f"{t.name}/Subscriptions/{s.name}") for s in t.subscriptions]
        return out


_PROPERTY_NAMES = {
    "LockDuration": "lock_duration",
    "MaxDeliveryCount": "max_delivery_count",
    "DefaultMessageTimeToLive": "default_message_ttl",
    "DeadLetteringOnMessageExpiration": "dead_lettering_on_message_expiration",
    "RequiresDuplicateDetection": "requires_duplicate_detection",
    "DuplicateDetectionHistoryTimeWindow": "duplicate_detection_window",
    "RequiresSession": "requires_session",
    "ForwardTo": "forward_to",
    "ForwardDeadLetteredMessagesTo": "forward_dead_lettered_messages_to",
    "MaxMessageSizeInKilobytes": "max_message_size",
    "EnablePartitioning": "enable_partitioning",
}
_DURATIONS = {"lock_duration", "default_message_ttl", "duplicate_detection_window"}
_BOOLS = {
    "dead_lettering_on_message_expiration",
    "requires_duplicate_detection",
    "requires_session",
    "enable_partitioning",
}


def _properties(raw: dict[str, Any] | None, where: str) -> EntityProperties:
    props = EntityProperties()
    for key, value in (raw or {}).items():
        attr = _PROPERTY_NAMES.get(key)
        if attr is None:
            known = ", ".join(sorted(_PROPERTY_NAMES))
            raise TopologyError(f"{where}.Properties: unknown property {key!r} (known: {known})")
        if attr in _DURATIONS:
            value = parse_duration(value, where=f"{where}.Properties.{key}")
        elif attr in _BOOLS:
            if not isinstance(value, bool):
                raise TopologyError(f"{where}.Properties.{key}: expected true or false")
        elif attr == "max_delivery_count":
            if not isinstance(value, int) or value < 1:
                raise TopologyError(f"{where}.Properties.{key}: expected a positive integer")
        elif attr == "max_message_size":
            value = int(value) * 1024
        else:
            value = str(value) or None
        setattr(props, attr, value)
    if props.lock_duration > MAX_LOCK_DURATION:
        raise TopologyError(f"{where}.Properties.LockDuration: Service Bus allows at most PT5M")
    if props.lock_duration <= 0:
        raise TopologyError(f"{where}.Properties.LockDuration: must be positive")
    return props


def _policies(raw: Any, entity: str | None, where: str) -> list[Policy]:
    """Shared access policies (``AuthorizationRules``) of the namespace or of one queue or topic."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TopologyError(
            f"{where}.AuthorizationRules must be a list of {{KeyName, Rights, PrimaryKey?, SecondaryKey?}}"
        )
    out: list[Policy] = []
    for i, rule in enumerate(raw):
        rwhere = f"{where}.AuthorizationRules[{i}]"
        if not isinstance(rule, dict):
            raise TopologyError(f"{rwhere}: expected an object")
        unknown = set(rule) - {"KeyName", "Rights", "PrimaryKey", "SecondaryKey"}
        if unknown:
            raise TopologyError(
                f"{rwhere}: unknown field(s) {sorted(unknown)} (known: KeyName, PrimaryKey, Rights, SecondaryKey)"
            )
        name = rule.get("KeyName")
        if not isinstance(name, str) or not name or len(name) > 256:
            raise TopologyError(f"{rwhere}: KeyName must be a name of 1 to 256 characters")
        rights = rule.get("Rights")
        if not isinstance(rights, list):
            raise TopologyError(f'{rwhere}.Rights: expected a list such as ["Listen"]')
        try:
            granted = rights_of(rights, f"{rwhere}.Rights")
        except ValueError as exc:
            raise TopologyError(str(exc)) from None
        keys = []
        for which in ("PrimaryKey", "SecondaryKey"):
            key = rule.get(which)
            if key is None:
                key = new_key()  # as Azure makes keys left out; told by the emulator
            elif not isinstance(key, str) or not key:
                raise TopologyError(f"{rwhere}.{which}: expected a non-empty string")
            keys.append(key)
        if any(p.name == name for p in out):
            raise TopologyError(f"{rwhere}: KeyName {name!r} appears twice")
        out.append(Policy(name, keys[0], keys[1], granted, entity))
    return out


_FIXED_FILTERS = {"1=1": "True", "1=0": "False"}


def _rule(raw: dict[str, Any], where: str) -> RuleConfig:
    name = _name(raw, where)
    props = raw.get("Properties") or {}
    ftype = str(props.get("FilterType", "Sql"))
    action = props.get("Action") or {}
    # Parameters (extension: the format has none; `sbnotebook topology export` writes them)
    common: dict[str, Any] = {
        "action": action.get("SqlExpression"),
        "action_parameters": _parameters(action.get("Parameters"), f"{where}.Action"),
    }
    if ftype.lower() == "sql":
        sql = props.get("SqlFilter") or {}
        expr = str(sql.get("SqlExpression") or "")
        if not expr:
            raise TopologyError(f"{where}: Sql filter needs SqlFilter.SqlExpression")
        parameters = _parameters(sql.get("Parameters"), f"{where}.SqlFilter")
        # The format has no true or false filter: 1=1 and 1=0 are read as them (Service Bus's
        # TrueFilter and FalseFilter are those SQL filters), as `sbnotebook topology export` writes them.
        fixed = None if parameters else _FIXED_FILTERS.get(expr.replace(" ", ""))
        config = RuleConfig(name, fixed or "Sql", sql_expression=expr, parameters=parameters, **common)
    elif ftype.lower() == "correlation":
        corr = props.get("CorrelationFilter")
        if not isinstance(corr, dict):
            raise TopologyError(f"{where}: Correlation filter needs a CorrelationFilter object")
        config = RuleConfig(name, "Correlation", correlation=dict(corr), **common)
    else:
        raise TopologyError(f"{where}: FilterType must be 'Sql' or 'Correlation', not {ftype!r}")
    try:  # a filter or action outside the grammar: refused here, naming the rule
        c = config
        compile_rule(c.filter_type, c.sql_expression, c.correlation, c.parameters, c.action, c.action_parameters)
    except SqlFilterError as exc:
        raise TopologyError(f"{where} ({name}): {exc}") from None
    return config


def _parameters(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TopologyError(f"{where}.Parameters: expected an object of @name: value")
    return dict(raw)


def _name(raw: Any, where: str) -> str:
    if not isinstance(raw, dict) or not raw.get("Name"):
        raise TopologyError(f"{where}: every entity needs a Name")
    name = str(raw["Name"])
    if len(name) > 260 or "//" in name or name.startswith("/"):
        raise TopologyError(f"{where}: invalid entity name {name!r}")
    return name


def _require(data: Any, key: str, where: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise TopologyError(f"{where}: missing {key!r}")
    return data[key]


DEFAULT_TOPOLOGY: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {"Name": "orders", "Properties": {"MaxDeliveryCount": 5}},
                    {"Name": "results", "Properties": {}},
                    {"Name": "retries", "Properties": {"LockDuration": "PT5S", "MaxDeliveryCount": 3}},
                    {
                        "Name": "dedup",
                        "Properties": {
                            "RequiresDuplicateDetection": True,
                            "DuplicateDetectionHistoryTimeWindow": "PT10M",
                        },
                    },
                    {
                        "Name": "expiring",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT10S",
                            "DeadLetteringOnMessageExpiration": True,
                        },
                    },
                    {"Name": "sessions", "Properties": {"RequiresSession": True}},
                ],
                "Topics": [
                    {
                        "Name": "events",
                        "Properties": {},
                        "Subscriptions": [
                            {"Name": "all", "Properties": {}},
                            {
                                "Name": "high-priority",
                                "Properties": {},
                                "Rules": [
                                    {
                                        "Name": "high",
                                        "Properties": {
                                            "FilterType": "Sql",
                                            "SqlFilter": {"SqlExpression": "priority = 'high'"},
                                        },
                                    }
                                ],
                            },
                            {
                                "Name": "eu",
                                "Properties": {},
                                "Rules": [
                                    {
                                        "Name": "eu-region",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {"Properties": {"region": "eu"}},
                                        },
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ]
    }
}
"""The entities an emulator started without a topology has, in Microsoft's Config.json form
(docs/emulator.md has them as a table)."""


def default_topology() -> Topology:
    """``DEFAULT_TOPOLOGY`` as a ``Topology``."""
    return Topology.from_dict(DEFAULT_TOPOLOGY)
