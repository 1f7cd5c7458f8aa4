"""Subscription rules in the AMQP encoding of Microsoft's request-response protocol.

``com.microsoft:add-rule`` carries a ``rule-description`` map (``sql-filter`` or
``correlation-filter``, optional ``sql-rule-action``); ``com.microsoft:enumerate-rules``
answers with described lists under the vendor descriptor codes the .NET and JS SDKs
read. This module translates between those and the broker's ``RuleConfig``.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal
from typing import Any

from proton import Described, decimal32, decimal64, decimal128, timestamp, ulong

from ..broker.sqlvalues import to_sql
from ..errors import BadRequest
from ..topology import RuleConfig

RULE_DESCRIPTION = ulong(0x0000013700000004)
EMPTY_RULE_ACTION = ulong(0x0000013700000005)
SQL_RULE_ACTION = ulong(0x0000013700000006)
SQL_FILTER = ulong(0x0000001370000006)
TRUE_FILTER = ulong(0x0000001370000007)
FALSE_FILTER = ulong(0x0000001370000008)
CORRELATION_FILTER = ulong(0x0000001370000009)

# (AMQP map key, the broker's correlation field), in the order of the encoded list.
_CORRELATION = (
    ("correlation-id", "CorrelationId"),
    ("message-id", "MessageId"),
    ("to", "To"),
    ("reply-to", "ReplyTo"),
    ("label", "Label"),
    ("session-id", "SessionId"),
    ("reply-to-session-id", "ReplyToSessionId"),
    ("content-type", "ContentType"),
)


def _map(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"'{what}' must be a map, not {type(value).__name__}.")
    return {str(k): v for k, v in value.items()}


def _plain(value: Any) -> Any:
    """proton's typed scalars (symbol, ulong, ...) as the Python values rules compare; the typed
    values the SDKs send for .NET types (``DateTime`` a timestamp, ``TimeSpan`` described ticks,
    ``decimal`` a decimal128, ``Guid`` a uuid) are kept for ``_typed`` below."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (timestamp, Described, decimal32, decimal64, decimal128, uuid.UUID)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value)
    return str(value)


def _typed(values: dict[str, Any], where: str, types: dict[str, str]) -> dict[str, Any]:
    """Parameters (or correlation properties) as the administration API's path keeps them, so a
    rule reads the same whichever way it came (and the journal can write it as JSON): a DateTime as
    its ISO text and a TimeSpan as an ISO duration, each with its XML Schema type in ``types``
    (``broker/rules.py`` turns them back); a decimal as a double (as the XML path reads one); a Guid
    as its text."""
    out: dict[str, Any] = {}
    for key, raw in values.items():
        value = to_sql(_plain(raw))
        if isinstance(value, dt.datetime):
            out[key], types[f"{where}:{key}"] = value.isoformat().replace("+00:00", "Z"), "dateTime"
        elif isinstance(value, dt.timedelta):
            sign = "-" if value < dt.timedelta(0) else ""
            out[key], types[f"{where}:{key}"] = f"{sign}PT{abs(value).total_seconds()}S", "duration"
        elif isinstance(value, Decimal):
            out[key] = float(value)
        elif isinstance(value, (uuid.UUID, Described)):
            out[key] = str(value)
        else:
            out[key] = value
    return out


def rule_from_amqp(name: str, description: Any) -> RuleConfig:
    """An add-rule request's ``rule-description`` -> the broker's rule definition."""
    desc = _map(description, "rule-description")
    action = _map(desc.get("sql-rule-action"), "sql-rule-action")
    action_sql = action.get("expression")
    types: dict[str, str] = {}
    action_parameters = _typed(_map(action.get("parameters"), "parameters"), "action", types)
    common: dict[str, Any] = {
        "action": None if action_sql is None else str(action_sql),
        "action_parameters": action_parameters,
        "xsd_types": types,
    }
    if desc.get("sql-filter") is not None:
        sql = _map(desc["sql-filter"], "sql-filter")
        expression = sql.get("expression")
        if not expression:
            raise BadRequest("The sql-filter of the rule has no expression.")
        parameters = _typed(_map(sql.get("parameters"), "parameters"), "filter", types)
        return RuleConfig(name, "Sql", str(expression), parameters=parameters, **common)
    if desc.get("correlation-filter") is not None:
        corr = _map(desc["correlation-filter"], "correlation-filter")
        fields: dict[str, Any] = {field: str(corr[key]) for key, field in _CORRELATION if corr.get(key) is not None}
        properties = _map(corr.get("properties"), "properties")
        if properties:
            fields["Properties"] = _typed(properties, "property", types)
        return RuleConfig(name, "Correlation", correlation=fields, **common)
    raise BadRequest("The rule-description needs a sql-filter or a correlation-filter.")


def rule_to_amqp(rule: RuleConfig, created_at: float | None = None) -> Described:
    """A rule as an enumerate-rules answer describes it: [filter, action, name, created-at]."""
    if rule.filter_type == "Correlation":
        corr = {k.lower(): v for k, v in rule.correlation.items()}
        if "label" not in corr and "subject" in corr:
            corr["label"] = corr["subject"]
        values: list[Any] = [corr.get(field.lower()) for _, field in _CORRELATION]
        values.append(dict(corr.get("properties") or {}))
        flt = Described(CORRELATION_FILTER, values)
    elif rule.sql_expression.strip() == "1=1":
        flt = Described(TRUE_FILTER, ["1=1"])
    elif rule.sql_expression.strip() == "1=0":
        flt = Described(FALSE_FILTER, ["1=0"])
    else:
        flt = Described(SQL_FILTER, [rule.sql_expression])
    action = Described(SQL_RULE_ACTION, [rule.action]) if rule.action else Described(EMPTY_RULE_ACTION, [])
    created = timestamp(int((created_at if created_at is not None else time.time()) * 1000))
    return Described(RULE_DESCRIPTION, [flt, action, rule.name, created])
