"""The administration API's documents: entities, rules and feeds as Service Bus writes them in ATOM
XML, and what a request's XML body says. No HTTP here: ``admin.py`` serves these."""

from __future__ import annotations

import urllib.parse
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from ..broker.entities import Queue, Subscription, Topic
from ..broker.model import MessageState
from ..topology import (
    INFINITE_TTL,
    EntityProperties,
    RuleConfig,
    format_duration,
    parse_duration,
)

SB = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
SB_COUNTS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
ATOM = "http://www.w3.org/2005/Atom"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
STARTED = datetime.now(UTC)


def _stamp(dt: datetime = STARTED) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _ttl(seconds: float) -> str:
    return "P10675199DT2H48M5.4775807S" if seconds >= INFINITE_TTL else format_duration(seconds)


def _el(name: str, value: Any) -> str:
    if value is None or value == "":
        return ""
    return f"<{name}>{escape(str(value))}</{name}>"


def _count_details(active: int, dead: int, scheduled: int) -> str:
    d = "d2p1"
    return (
        f'<CountDetails xmlns:{d}="{SB_COUNTS}">'
        f"<{d}:ActiveMessageCount>{active}</{d}:ActiveMessageCount>"
        f"<{d}:DeadLetterMessageCount>{dead}</{d}:DeadLetterMessageCount>"
        f"<{d}:ScheduledMessageCount>{scheduled}</{d}:ScheduledMessageCount>"
        f"<{d}:TransferMessageCount>0</{d}:TransferMessageCount>"
        f"<{d}:TransferDeadLetterMessageCount>0</{d}:TransferDeadLetterMessageCount>"
        "</CountDetails>"
    )


def _receivable_counts(entity: Queue | Subscription) -> tuple[int, int, int, int, int]:
    store = entity.store
    active = len(store) - store.count(MessageState.SCHEDULED)
    scheduled = store.count(MessageState.SCHEDULED)
    dead = len(entity.dead_letter)
    size = store.size_bytes + entity.dead_letter.size_bytes
    return active, dead, scheduled, active + dead + scheduled, size


def queue_xml(q: Queue) -> str:
    p = q.props
    active, dead, scheduled, total, size = _receivable_counts(q)
    return (
        f'<QueueDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<LockDuration>{format_duration(p.lock_duration)}</LockDuration>"
        "<MaxSizeInMegabytes>1024</MaxSizeInMegabytes>"
        f"<RequiresDuplicateDetection>{_bool(p.requires_duplicate_detection)}</RequiresDuplicateDetection>"
        f"<RequiresSession>{_bool(p.requires_session)}</RequiresSession>"
        f"<DefaultMessageTimeToLive>{_ttl(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        f"<DeadLetteringOnMessageExpiration>{_bool(p.dead_lettering_on_message_expiration)}"
        "</DeadLetteringOnMessageExpiration>"
        f"<DuplicateDetectionHistoryTimeWindow>{format_duration(p.duplicate_detection_window)}"
        "</DuplicateDetectionHistoryTimeWindow>"
        f"<MaxDeliveryCount>{p.max_delivery_count}</MaxDeliveryCount>"
        "<EnableBatchedOperations>true</EnableBatchedOperations>"
        f"<SizeInBytes>{size}</SizeInBytes><MessageCount>{total}</MessageCount>"
        "<IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/>"
        "<Status>Active</Status>"
        f"<CreatedAt>{_stamp(q.created_at)}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
        "<SupportOrdering>true</SupportOrdering>"
        f"{_count_details(active, dead, scheduled)}"
        "<AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle>"
        "<EnablePartitioning>false</EnablePartitioning>"
        "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress>"
        f"{_el('ForwardTo', p.forward_to)}{_el('ForwardDeadLetteredMessagesTo', p.forward_dead_lettered_messages_to)}"
        f"<MaxMessageSizeInKilobytes>{p.max_message_size // 1024}</MaxMessageSizeInKilobytes>"
        "</QueueDescription>"
    )


def topic_xml(t: Topic) -> str:
    p = t.props
    scheduled = len(t.scheduled)
    # Across all subscriptions, as Service Bus counts them: true/false filters are SQL filters.
    rules = [r.config for s in t.subscriptions.values() for r in s.rules]
    sql_filters = sum(1 for r in rules if r.filter_type != "Correlation")
    return (
        f'<TopicDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<DefaultMessageTimeToLive>{_ttl(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        "<MaxSizeInMegabytes>1024</MaxSizeInMegabytes>"
        f"<RequiresDuplicateDetection>{_bool(p.requires_duplicate_detection)}</RequiresDuplicateDetection>"
        f"<DuplicateDetectionHistoryTimeWindow>{format_duration(p.duplicate_detection_window)}"
        "</DuplicateDetectionHistoryTimeWindow>"
        "<EnableBatchedOperations>true</EnableBatchedOperations>"
        f"<SizeInBytes>{t.scheduled.size_bytes}</SizeInBytes>"
        "<FilteringMessagesBeforePublishing>false</FilteringMessagesBeforePublishing>"
        "<IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/><Status>Active</Status>"
        f"<CreatedAt>{_stamp(t.created_at)}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
        "<SupportOrdering>true</SupportOrdering>"
        f"{_count_details(0, 0, scheduled)}"
        f"<SubscriptionCount>{len(t.subscriptions)}</SubscriptionCount>"
        f"<SqlFilterCount>{sql_filters}</SqlFilterCount>"
        f"<CorrelationFilterCount>{len(rules) - sql_filters}</CorrelationFilterCount>"
        "<AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle>"
        "<EnablePartitioning>false</EnablePartitioning>"
        "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress>"
        f"<MaxMessageSizeInKilobytes>{p.max_message_size // 1024}</MaxMessageSizeInKilobytes>"
        "</TopicDescription>"
    )


def subscription_xml(s: Subscription) -> str:
    p = s.props
    active, dead, scheduled, total, _ = _receivable_counts(s)
    return (
        f'<SubscriptionDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<LockDuration>{format_duration(p.lock_duration)}</LockDuration>"
        f"<RequiresSession>{_bool(p.requires_session)}</RequiresSession>"
        f"<DefaultMessageTimeToLive>{_ttl(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        f"<DeadLetteringOnMessageExpiration>{_bool(p.dead_lettering_on_message_expiration)}"
        "</DeadLetteringOnMessageExpiration>"
        "<DeadLetteringOnFilterEvaluationExceptions>true</DeadLetteringOnFilterEvaluationExceptions>"
        f"<MessageCount>{total}</MessageCount>"
        f"<MaxDeliveryCount>{p.max_delivery_count}</MaxDeliveryCount>"
        "<EnableBatchedOperations>true</EnableBatchedOperations><Status>Active</Status>"
        f"{_el('ForwardTo', p.forward_to)}"
        f"<CreatedAt>{_stamp(s.created_at)}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
        f"{_count_details(active, dead, scheduled)}"
        "<AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle>"
        f"{_el('ForwardDeadLetteredMessagesTo', p.forward_dead_lettered_messages_to)}"
        "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"
        "</SubscriptionDescription>"
    )


def rule_xml(r: RuleConfig) -> str:
    if r.filter_type == "Correlation":
        c = dict(r.correlation)
        props = c.pop("Properties", None) or {}
        fields = "".join(_el(k if k != "Subject" else "Label", v) for k, v in c.items())
        flt = f'<Filter i:type="CorrelationFilter">{fields}<Properties>{_key_values(props)}</Properties></Filter>'
    else:
        flt = (
            f'<Filter i:type="SqlFilter"><SqlExpression>{escape(r.sql_expression)}</SqlExpression>'
            f"<CompatibilityLevel>20</CompatibilityLevel>{_parameters(r.parameters)}</Filter>"
        )
    action = (
        f'<Action i:type="SqlRuleAction"><SqlExpression>{escape(r.action)}</SqlExpression>'
        f"<CompatibilityLevel>20</CompatibilityLevel>{_parameters(r.action_parameters)}</Action>"
        if r.action
        else '<Action i:type="EmptyRuleAction"/>'
    )
    return (
        f'<RuleDescription xmlns="{SB}" xmlns:i="{XSI}">{flt}{action}'
        f"<CreatedAt>{_stamp()}</CreatedAt><Name>{escape(r.name)}</Name></RuleDescription>"
    )


def _key_values(values: dict[str, Any]) -> str:
    return "".join(
        f"<KeyValueOfstringanyType><Key>{escape(str(k))}</Key>"
        f'<Value i:type="d6p1:{_xsd_type(v)}" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">'
        f"{escape(_xsd_value(v))}</Value></KeyValueOfstringanyType>"
        for k, v in values.items()
    )


def _parameters(values: dict[str, Any]) -> str:
    return f"<Parameters>{_key_values(values)}</Parameters>" if values else ""


def _xsd_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    return "string"


def _xsd_value(v: Any) -> str:
    return _bool(v) if isinstance(v, bool) else str(v)


def entry(base: str, path: str, title: str, content: str) -> str:
    url = f"{base}/{path}"
    return (
        f'<entry xmlns="{ATOM}"><id>{escape(url)}</id><title type="text">{escape(title)}</title>'
        f"<published>{_stamp()}</published><updated>{_stamp()}</updated>"
        f'<link rel="self" href="{escape(url)}"/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def feed(base: str, path: str, entries: list[str], next_skip: int | None = None, top: int = 100) -> str:
    url = f"{base}/{path}"
    links = f'<link rel="self" href="{escape(url)}"/>'
    if next_skip is not None:  # the SDK pages by following a second link
        links += f'<link rel="next" href="{escape(f"{url}?$skip={next_skip}&$top={top}")}"/>'
    return (
        f'<feed xmlns="{ATOM}"><title type="text">{escape(path)}</title><id>{escape(url)}</id>'
        f"<updated>{_stamp()}</updated>{links}{''.join(entries)}</feed>"
    )


# ------------------------------------------------------------ request bodies


def local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_description(body: bytes) -> ET.Element:
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the request body is not XML: {exc}") from None
    for el in root.iter():
        if local_name(el.tag).endswith("Description"):
            return el
    raise ValueError("the request body holds no entity description")


def fields_of(desc: ET.Element) -> dict[str, ET.Element]:
    return {local_name(child.tag): child for child in desc}


def properties_from(fields: dict[str, ET.Element], base: EntityProperties | None = None) -> EntityProperties:
    props = EntityProperties() if base is None else EntityProperties(**base.__dict__)

    def text(name: str) -> str | None:
        el = fields.get(name)
        return el.text if el is not None and el.text is not None else None

    if (v := text("LockDuration")) is not None:
        props.lock_duration = parse_duration(v)
    if (v := text("MaxDeliveryCount")) is not None:
        props.max_delivery_count = int(v)
    if (v := text("DefaultMessageTimeToLive")) is not None:
        props.default_message_ttl = INFINITE_TTL if v.startswith("P10675199D") else parse_duration(v)
    if (v := text("DeadLetteringOnMessageExpiration")) is not None:
        props.dead_lettering_on_message_expiration = v == "true"
    if (v := text("RequiresDuplicateDetection")) is not None:
        props.requires_duplicate_detection = v == "true"
    if (v := text("DuplicateDetectionHistoryTimeWindow")) is not None:
        props.duplicate_detection_window = parse_duration(v)
    if (v := text("RequiresSession")) is not None:
        props.requires_session = v == "true"
    if "ForwardTo" in fields:
        props.forward_to = entity_name(text("ForwardTo"))
    if "ForwardDeadLetteredMessagesTo" in fields:
        props.forward_dead_lettered_messages_to = entity_name(text("ForwardDeadLetteredMessagesTo"))
    if (v := text("MaxMessageSizeInKilobytes")) is not None:
        props.max_message_size = int(v) * 1024
    return props


def entity_name(value: str | None) -> str | None:
    """ForwardTo arrives as a full URL (``https://ns/queue``) or a bare name."""
    if not value:
        return None
    if "://" in value:
        value = urllib.parse.urlparse(value).path
    return value.strip("/") or None


def rule_config_from(name: str, desc: ET.Element) -> RuleConfig:
    fields = fields_of(desc)
    flt = fields.get("Filter")
    action = fields.get("Action")
    action_sql = None
    action_parameters: dict[str, Any] = {}
    if action is not None:
        afields = fields_of(action)
        expr = afields.get("SqlExpression")
        action_sql = expr.text if expr is not None else None
        action_parameters = _read_key_values(afields.get("Parameters"))
    if flt is None:
        return RuleConfig(name, "Sql", "1=1", action=action_sql, action_parameters=action_parameters)
    kind = flt.get(f"{{{XSI}}}type", "SqlFilter")
    ffields = fields_of(flt)
    if kind == "CorrelationFilter":
        corr: dict[str, Any] = {}
        for key, el in ffields.items():
            if key == "Properties":
                corr["Properties"] = _read_key_values(el)
            elif el.text:
                corr[key] = el.text
        return RuleConfig(name, "Correlation", correlation=corr, action=action_sql, action_parameters=action_parameters)
    if kind == "TrueFilter":
        return RuleConfig(name, "Sql", "1=1", action=action_sql, action_parameters=action_parameters)
    if kind == "FalseFilter":
        return RuleConfig(name, "Sql", "1=0", action=action_sql, action_parameters=action_parameters)
    expr = ffields.get("SqlExpression")
    return RuleConfig(
        name,
        "Sql",
        (expr.text if expr is not None else None) or "1=1",
        action=action_sql,
        parameters=_read_key_values(ffields.get("Parameters")),
        action_parameters=action_parameters,
    )


def _read_key_values(el: ET.Element | None) -> dict[str, Any]:
    """``<KeyValueOfstringanyType><Key/><Value i:type=.../>`` items -> a dict of typed values."""
    out: dict[str, Any] = {}
    for kv in el if el is not None else ():
        kvf = fields_of(kv)
        if "Key" not in kvf or "Value" not in kvf:
            raise ValueError("a key-value item needs a Key and a Value")
        out[kvf["Key"].text or ""] = _typed(kvf["Value"])
    return out


def _typed(el: ET.Element) -> Any:
    kind = (el.get(f"{{{XSI}}}type") or "").split(":")[-1]
    text = el.text or ""
    if kind in ("int", "long", "short"):
        return int(text)
    if kind in ("double", "float", "decimal"):
        return float(text)
    if kind == "boolean":
        return text == "true"
    return text


# ------------------------------------------------------------------ server


class Page(list[Any]):
    next_skip: int | None = None
    top: int = 100


def page(items: list[Any], query: dict[str, list[str]]) -> Page:
    skip = int((query.get("$skip") or ["0"])[0])
    top = int((query.get("$top") or ["100"])[0])
    page = Page(items[skip : skip + top])
    page.top = top
    page.next_skip = skip + top if skip + top < len(items) else None
    return page


def namespace_xml(name: str) -> str:
    return (
        f'<NamespaceInfo xmlns="{SB}" xmlns:i="{XSI}"><CreatedTime>{_stamp()}</CreatedTime>'
        f"<MessagingSKU>Standard</MessagingSKU><ModifiedTime>{_stamp()}</ModifiedTime>"
        f"<Name>{escape(name)}</Name><NamespaceType>Messaging</NamespaceType></NamespaceInfo>"
    )


def error_xml(status: int, message: str) -> str:
    return f"<Error><Code>{status}</Code><Detail>{escape(message)}</Detail></Error>"
