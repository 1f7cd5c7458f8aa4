"""Subscription rules in the administration API: a ``RuleDescription`` read into the broker's
``RuleConfig`` and written back as Service Bus writes it.

Kept as given: the filter's kind (SQL, correlation, true, false), its expression or fields, the
action, and every parameter and property with its XML Schema type (``long``, ``dateTime`` and
``duration`` included, which the SDKs read back as such). ``CompatibilityLevel`` is always 20 and
``RequiresPreprocessing`` is not reported, as Service Bus answers; anything else is refused (400).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any
from xml.sax.saxutils import escape

from ..topology import RuleConfig
from .documents import SB, XSI, element, stamp, xml_bool
from .limits import refuse
from .properties import local_name

XSD = "http://www.w3.org/2001/XMLSchema"
SERIALIZATION = "http://schemas.microsoft.com/2003/10/Serialization/"  # where Service Bus puts "duration"
CORRELATION_FIELDS = {"CorrelationId", "MessageId", "To", "ReplyTo", "Label", "SessionId", "ReplyToSessionId"}
CORRELATION_FIELDS |= {"ContentType"}
_SQL_FIELDS = {"SqlExpression", "CompatibilityLevel", "Parameters", "RequiresPreprocessing"}
_FIXED_SQL = {"TrueFilter": ("True", "1=1"), "FalseFilter": ("False", "1=0")}
_KINDS_OUT = {"True": "TrueFilter", "False": "FalseFilter"}


def _fields(el: ET.Element, allowed: set[str], what: str) -> dict[str, ET.Element]:
    fields = {local_name(child.tag): child for child in el}
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise refuse(f"The {what} has unsupported properties: {', '.join(unknown)}.")
    return fields


def _xsi_type(el: ET.Element, default: str) -> str:
    return (el.get(f"{{{XSI}}}type") or default).split(":")[-1]


def rule_config_from(name: str, desc: ET.Element) -> RuleConfig:
    fields = _fields(desc, {"Filter", "Action", "Name", "CreatedAt"}, "rule description")
    types: dict[str, str] = {}
    action_sql, action_parameters = _action(fields.get("Action"), types)
    common: dict[str, Any] = {"action": action_sql, "action_parameters": action_parameters, "xsd_types": types}
    flt = fields.get("Filter")
    if flt is None:  # as the SDKs' TrueRuleFilter
        return RuleConfig(name, "True", "1=1", **common)
    kind = _xsi_type(flt, "SqlFilter")
    if kind == "CorrelationFilter":
        ffields = _fields(flt, {*CORRELATION_FIELDS, "Properties"}, "correlation filter")
        corr: dict[str, Any] = {k: el.text for k, el in ffields.items() if k != "Properties" and el.text}
        if "Properties" in ffields:
            corr["Properties"] = _read_key_values(ffields["Properties"], "property", types)
        return RuleConfig(name, "Correlation", correlation=corr, **common)
    if kind not in ("SqlFilter", *_FIXED_SQL):
        raise refuse(f"The filter type '{kind}' is not one of SqlFilter, CorrelationFilter, TrueFilter, FalseFilter.")
    ffields = _fields(flt, _SQL_FIELDS, "SQL filter")
    if kind in _FIXED_SQL:
        filter_type, expression = _FIXED_SQL[kind]
        return RuleConfig(name, filter_type, expression, **common)
    expr = ffields.get("SqlExpression")
    parameters = _read_key_values(ffields.get("Parameters"), "filter", types)
    return RuleConfig(name, "Sql", (expr.text if expr is not None else None) or "1=1", parameters=parameters, **common)


def _action(action: ET.Element | None, types: dict[str, str]) -> tuple[str | None, dict[str, Any]]:
    if action is None:
        return None, {}
    kind = _xsi_type(action, "SqlRuleAction")
    if kind == "EmptyRuleAction":
        _fields(action, set(), "empty rule action")
        return None, {}
    if kind != "SqlRuleAction":
        raise refuse(f"The action type '{kind}' is not one of SqlRuleAction, EmptyRuleAction.")
    fields = _fields(action, _SQL_FIELDS, "SQL rule action")
    expr = fields.get("SqlExpression")
    return (expr.text if expr is not None else None), _read_key_values(fields.get("Parameters"), "action", types)


def _read_key_values(el: ET.Element | None, where: str, types: dict[str, str]) -> dict[str, Any]:
    """``<KeyValueOfstringanyType><Key/><Value i:type=.../>`` items -> typed values; a type the
    value does not tell (long, dateTime, duration) noted in ``types``."""
    out: dict[str, Any] = {}
    for kv in el if el is not None else ():
        kvf = {local_name(child.tag): child for child in kv}
        if "Key" not in kvf or "Value" not in kvf:
            raise refuse("A key-value item needs a Key and a Value.")
        key = kvf["Key"].text or ""
        out[key], xsd = _typed(kvf["Value"])
        if xsd in ("long", "dateTime", "duration"):
            types[f"{where}:{key}"] = xsd
    return out


def _typed(el: ET.Element) -> tuple[Any, str]:
    kind = _xsi_type(el, "string")
    text = el.text or ""
    try:
        if kind in ("int", "long", "short"):
            return int(text), kind
        if kind in ("double", "float", "decimal"):
            return float(text), kind
    except ValueError:
        raise refuse(f"The value '{text}' is not a valid {kind}.") from None
    if kind == "boolean":
        return text == "true", kind
    return text, kind  # dateTime and duration kept as their text (docs/emulator.md)


def rule_xml(r: RuleConfig) -> str:
    if r.filter_type == "Correlation":
        c = dict(r.correlation)
        props = c.pop("Properties", None) or {}
        fields = "".join(element(k if k != "Subject" else "Label", v) for k, v in c.items())
        flt = (
            f'<Filter i:type="CorrelationFilter">{fields}'
            f"<Properties>{_key_values(props, 'property', r.xsd_types)}</Properties></Filter>"
        )
    else:
        kind = _KINDS_OUT.get(r.filter_type, "SqlFilter")
        flt = (
            f'<Filter i:type="{kind}"><SqlExpression>{escape(r.sql_expression)}</SqlExpression>'
            f"<CompatibilityLevel>20</CompatibilityLevel>{_parameters(r.parameters, 'filter', r.xsd_types)}</Filter>"
        )
    action = (
        f'<Action i:type="SqlRuleAction"><SqlExpression>{escape(r.action)}</SqlExpression>'
        f"<CompatibilityLevel>20</CompatibilityLevel>{_parameters(r.action_parameters, 'action', r.xsd_types)}"
        "</Action>"
        if r.action
        else '<Action i:type="EmptyRuleAction"/>'
    )
    return (
        f'<RuleDescription xmlns="{SB}" xmlns:i="{XSI}">{flt}{action}'
        f"<CreatedAt>{stamp()}</CreatedAt><Name>{escape(r.name)}</Name></RuleDescription>"
    )


def _key_values(values: dict[str, Any], where: str, types: dict[str, str]) -> str:
    out = ""
    for k, v in values.items():
        kind = types.get(f"{where}:{k}") or _xsd_type(v)
        ns = SERIALIZATION if kind == "duration" else XSD
        text = xml_bool(v) if isinstance(v, bool) else str(v)
        out += (
            f"<KeyValueOfstringanyType><Key>{escape(str(k))}</Key>"
            f'<Value i:type="d6p1:{kind}" xmlns:d6p1="{ns}">{escape(text)}</Value></KeyValueOfstringanyType>'
        )
    return out


def _parameters(values: dict[str, Any], where: str, types: dict[str, str]) -> str:
    return f"<Parameters>{_key_values(values, where, types)}</Parameters>" if values else ""


def _xsd_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int" if -(2**31) <= v < 2**31 else "long"
    if isinstance(v, float):
        return "double"
    return "string"
