"""The ``servicebus_topology`` marker as a topology in Microsoft's emulator config format.

    @pytest.mark.servicebus_topology(
        queues=["orders"] or {"orders": {"requires_session": True, "lock_duration": 5}},
        topics={"events": ["audit", "billing"]} or {"events": {"audit": {"sql_filter": "region = 'eu'"}}},
        config="Config.json",   # Microsoft's format, relative to the test file (or that content as a
    )                           # dict); queues= and topics= are added to it

Property names are the SDK's (``ServiceBusAdministrationClient.create_queue``); durations are
seconds, ``timedelta`` or ISO-8601 (``"PT5S"``). The emulator's own validation then refuses an
unknown property or a bad value, naming it.
"""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any

from sbnotebook.emulator import Topology, TopologyError

SDK_PROPERTY_NAMES = {
    "lock_duration": "LockDuration",
    "max_delivery_count": "MaxDeliveryCount",
    "default_message_time_to_live": "DefaultMessageTimeToLive",
    "dead_lettering_on_message_expiration": "DeadLetteringOnMessageExpiration",
    "requires_duplicate_detection": "RequiresDuplicateDetection",
    "duplicate_detection_history_time_window": "DuplicateDetectionHistoryTimeWindow",
    "requires_session": "RequiresSession",
    "forward_to": "ForwardTo",
    "forward_dead_lettered_messages_to": "ForwardDeadLetteredMessagesTo",
    "max_message_size_in_kilobytes": "MaxMessageSizeInKilobytes",
    "enable_partitioning": "EnablePartitioning",
}
_CONFIG_NAMES = set(SDK_PROPERTY_NAMES.values())
MARKER_KEYWORDS = ("queues", "topics", "config")


def marker_config(args: tuple[Any, ...], kwargs: dict[str, Any], base: Path) -> dict[str, Any]:
    """The marker's entities as a config dict (``Topology.from_dict`` validates it)."""
    if args:
        raise TopologyError("servicebus_topology takes keywords only: queues=, topics=, config=")
    unknown = sorted(set(kwargs) - set(MARKER_KEYWORDS))
    if unknown:
        raise TopologyError(f"servicebus_topology: unknown keyword(s) {unknown} (known: {', '.join(MARKER_KEYWORDS)})")
    config = _load_config(kwargs.get("config"), base)
    namespace = config["UserConfig"]["Namespaces"][0]
    queues = namespace.setdefault("Queues", [])
    for name, props in _named(kwargs.get("queues"), "queues"):
        queues.append({"Name": name, "Properties": _properties(props, f"queues[{name!r}]", subscription=False)})
    topics = namespace.setdefault("Topics", [])
    for name, subs in _named(kwargs.get("topics"), "topics"):
        subscriptions = [
            {"Name": sub, **_subscription(props, f"topics[{name!r}][{sub!r}]")}
            for sub, props in _named(subs, f"topics[{name!r}]")
        ]
        topics.append({"Name": name, "Properties": {}, "Subscriptions": subscriptions})
    return config


def marker_topology(args: tuple[Any, ...], kwargs: dict[str, Any], base: Path) -> Topology:
    return Topology.from_dict(marker_config(args, kwargs, base))


def _load_config(path: Any, base: Path) -> dict[str, Any]:
    if path is None:
        return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [], "Topics": []}]}}
    if isinstance(path, dict):  # the file's content given directly
        Topology.from_dict(path)
        return copy.deepcopy(path)
    file = Path(path)
    if not file.is_absolute():
        file = base / file
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TopologyError(f"servicebus_topology config={path!r}: cannot read {file}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{file}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    Topology.from_dict(data)  # refuse a bad file with its own words before anything is added to it
    return copy.deepcopy(data)


def _named(value: Any, where: str) -> list[tuple[str, Any]]:
    """A list of names or a dict of name -> properties (None or {} for the defaults)."""
    if value is None:
        return []
    if isinstance(value, str):
        raise TopologyError(f"servicebus_topology {where}: give a list of names or a dict, not the string {value!r}")
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    return [(str(name), None) for name in value]


def _properties(props: Any, where: str, *, subscription: bool) -> dict[str, Any]:
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise TopologyError(f"servicebus_topology {where}: properties must be a dict, not {props!r}")
    out: dict[str, Any] = {}
    for key, value in props.items():
        if subscription and key in ("sql_filter", "correlation_filter"):
            continue
        if key in SDK_PROPERTY_NAMES:
            name = SDK_PROPERTY_NAMES[key]
        elif key in _CONFIG_NAMES:  # the config file's own names are taken too
            name = key
        else:
            known = ", ".join(
                sorted(SDK_PROPERTY_NAMES) + (["sql_filter", "correlation_filter"] if subscription else [])
            )
            raise TopologyError(f"servicebus_topology {where}: unknown property {key!r} (known: {known})")
        out[name] = value.total_seconds() if isinstance(value, datetime.timedelta) else value
    return out


def _subscription(props: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"Properties": _properties(props, where, subscription=True)}
    if not isinstance(props, dict):
        return out
    if "sql_filter" in props and "correlation_filter" in props:
        raise TopologyError(f"servicebus_topology {where}: give sql_filter or correlation_filter, not both")
    if "sql_filter" in props:
        rule = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": str(props["sql_filter"])}}
        out["Rules"] = [{"Name": "filter", "Properties": rule}]
    elif "correlation_filter" in props:
        rule = {"FilterType": "Correlation", "CorrelationFilter": dict(props["correlation_filter"])}
        out["Rules"] = [{"Name": "filter", "Properties": rule}]
    return out
