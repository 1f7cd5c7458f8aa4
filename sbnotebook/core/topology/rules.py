"""A topic's rules, read from where they live, as ``topology.evaluator.RuleSpec``: the administration API
of a connection (Azure or the emulator; it needs the Manage right, said in one line when missing),
Microsoft's emulator ``Config.json`` (as ``sbnotebook topology export`` writes it, ``Parameters``
included), and what-if rules typed by hand."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..errors import InvalidInputError
from ..operations.counts import admin_call
from ..sdk.api import CorrelationRuleFilter, FalseRuleFilter, TrueRuleFilter
from .config_json import CORRELATION_ATTRIBUTES
from .evaluator import NO_RULES, RuleSpec

WHAT_IF = "what if: "  # the name of a what-if rule's row (its own subscription, beside the real ones)


def rule_spec(subscription: str, described: Any) -> RuleSpec:
    """One rule as the SDK's administration client reads it (``RuleProperties``)."""
    flt, action = described.filter, described.action
    act = getattr(action, "sql_expression", None) if action is not None else None
    act_params = dict(getattr(action, "parameters", None) or {}) if act else {}
    common: dict[str, Any] = {"action": act, "action_parameters": act_params}
    if isinstance(flt, CorrelationRuleFilter):
        fields: dict[str, Any] = {k: getattr(flt, a) for k, a in CORRELATION_ATTRIBUTES if getattr(flt, a, None)}
        if flt.properties:
            fields["Properties"] = dict(flt.properties)
        return RuleSpec(subscription, described.name, "Correlation", correlation=fields, **common)
    if isinstance(flt, TrueRuleFilter | FalseRuleFilter):
        return RuleSpec(subscription, described.name, "True" if isinstance(flt, TrueRuleFilter) else "False", **common)
    params = dict(getattr(flt, "parameters", None) or {})
    return RuleSpec(subscription, described.name, "Sql", flt.sql_expression, parameters=params, **common)


def rules_from_admin(topic: str, *, connection: ConnectionLike = None) -> list[RuleSpec]:
    """Every rule of every subscription of ``topic``, in the administration API's order."""
    conn = live(connection)

    def read(admin: Any) -> list[RuleSpec]:
        out: list[RuleSpec] = []
        for sub in admin.list_subscriptions(topic):
            found = [rule_spec(sub.name, r) for r in admin.list_rules(topic, sub.name)]
            out += found or [RuleSpec(sub.name, "", NO_RULES)]  # it receives nothing, and route says so
        return out

    found: list[RuleSpec] = admin_call(conn, read, topic)
    return found


def _config_rule(subscription: str, raw: Mapping[str, Any], where: str) -> RuleSpec:
    name = str(raw.get("Name") or "")
    props = raw.get("Properties") or {}
    action = props.get("Action") or {}
    common: dict[str, Any] = {
        "action": action.get("SqlExpression"),
        "action_parameters": dict(action.get("Parameters") or {}),
    }
    kind = str(props.get("FilterType", "Sql")).lower()
    if kind == "correlation":
        return RuleSpec(
            subscription, name, "Correlation", correlation=dict(props.get("CorrelationFilter") or {}), **common
        )
    if kind != "sql":
        raise InvalidInputError(f"{where}: FilterType must be 'Sql' or 'Correlation', not {props.get('FilterType')!r}.")
    sql = props.get("SqlFilter") or {}
    return RuleSpec(
        subscription,
        name,
        "Sql",
        str(sql.get("SqlExpression") or ""),
        parameters=dict(sql.get("Parameters") or {}),
        **common,
    )


def rules_from_config(config: str | Path | Mapping[str, Any], topic: str) -> list[RuleSpec]:
    """``topic``'s rules in a Config.json (a path or the document); a subscription without
    ``Rules`` has ``$Default`` (true), as an emulator started from the file gives it."""
    doc = json.loads(Path(config).read_text(encoding="utf-8")) if isinstance(config, str | Path) else config
    topics = [t for ns in doc.get("UserConfig", {}).get("Namespaces", []) for t in ns.get("Topics", [])]
    found = next((t for t in topics if str(t.get("Name", "")).lower() == topic.lower()), None)
    if found is None:
        names = ", ".join(str(t.get("Name")) for t in topics) or "none"
        raise InvalidInputError(f"The topology has no topic {topic!r} (its topics: {names}).")
    out: list[RuleSpec] = []
    for i, sub in enumerate(found.get("Subscriptions") or []):
        name = str(sub.get("Name"))
        rules = sub.get("Rules")
        if not rules:  # the emulators give such a subscription $Default
            out.append(RuleSpec(name, "$Default", "True"))
            continue
        where = f"{found.get('Name')}.Subscriptions[{i}]"
        out += [_config_rule(name, r, f"{where}.Rules[{k}]") for k, r in enumerate(rules)]
    return out


def what_if_rules(texts: Iterable[str]) -> list[RuleSpec]:
    """Each SQL filter typed by hand as a subscription of its own (``what if: <filter>``)."""
    return [RuleSpec(WHAT_IF + text, "what-if", "Sql", text) for text in texts]


def given_rules(rules: Iterable[RuleSpec] | Mapping[str, Iterable[RuleSpec | str]]) -> list[RuleSpec]:
    """Rules passed to ``route`` by hand: RuleSpecs, or {subscription: [RuleSpec or SQL filter, ...]}."""
    if not isinstance(rules, Mapping):
        return list(rules)
    out: list[RuleSpec] = []
    for subscription, items in rules.items():
        for i, item in enumerate(items):
            out.append(item if isinstance(item, RuleSpec) else RuleSpec(subscription, f"rule{i + 1}", "Sql", item))
    return out
