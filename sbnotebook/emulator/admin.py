"""The Service Bus administration API (ATOM over HTTP), as ``ServiceBusAdministrationClient`` uses it.

Served on a port of its own beside AMQP. Every request must carry a valid SAS
token in ``Authorization`` (401 otherwise). Entity and runtime figures are read
from the broker at request time, so counts match its state at that moment.

Routes (case-insensitive, ``api-version`` ignored):
``/$namespaceinfo``; ``/$Resources/queues``, ``/$Resources/topics``;
``/{queue|topic}``; ``/{topic}/subscriptions[/{sub}]``;
``/{topic}/subscriptions/{sub}/rules[/{rule}]``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from xml.sax.saxutils import escape

from .broker import Broker, Queue, Subscription, Topic
from .errors import BrokerError, Conflict, EntityNotFound
from .filters import Rule
from .model import MessageState
from .sas import TokenError, covers, validate
from .topology import (
    INFINITE_TTL,
    EntityProperties,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
    TopologyError,
    format_duration,
    parse_duration,
)

log = logging.getLogger("sbnotebook.emulator")

SB = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
SB_COUNTS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
ATOM = "http://www.w3.org/2005/Atom"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
STARTED = datetime.now(UTC)
SHUTDOWN_POLL = 0.05  # seconds between the admin server's checks for stop()
# Entity and rule descriptions are a few KiB; a larger body is refused (413) before it is read.
MAX_BODY = 256 * 1024


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
        f"<CreatedAt>{_stamp()}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
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
        f"<CreatedAt>{_stamp()}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
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
        f"<CreatedAt>{_stamp()}</CreatedAt><UpdatedAt>{_stamp()}</UpdatedAt><AccessedAt>{_stamp()}</AccessedAt>"
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


def _entry(base: str, path: str, title: str, content: str) -> str:
    url = f"{base}/{path}"
    return (
        f'<entry xmlns="{ATOM}"><id>{escape(url)}</id><title type="text">{escape(title)}</title>'
        f"<published>{_stamp()}</published><updated>{_stamp()}</updated>"
        f'<link rel="self" href="{escape(url)}"/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def _feed(base: str, path: str, entries: list[str], next_skip: int | None = None, top: int = 100) -> str:
    url = f"{base}/{path}"
    links = f'<link rel="self" href="{escape(url)}"/>'
    if next_skip is not None:  # the SDK pages by following a second link
        links += f'<link rel="next" href="{escape(f"{url}?$skip={next_skip}&$top={top}")}"/>'
    return (
        f'<feed xmlns="{ATOM}"><title type="text">{escape(path)}</title><id>{escape(url)}</id>'
        f"<updated>{_stamp()}</updated>{links}{''.join(entries)}</feed>"
    )


# ------------------------------------------------------------ request bodies


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _description(body: bytes) -> ET.Element:
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the request body is not XML: {exc}") from None
    for el in root.iter():
        if _local(el.tag).endswith("Description"):
            return el
    raise ValueError("the request body holds no entity description")


def _fields(desc: ET.Element) -> dict[str, ET.Element]:
    return {_local(child.tag): child for child in desc}


def _properties(fields: dict[str, ET.Element], base: EntityProperties | None = None) -> EntityProperties:
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
        props.forward_to = _entity_name(text("ForwardTo"))
    if "ForwardDeadLetteredMessagesTo" in fields:
        props.forward_dead_lettered_messages_to = _entity_name(text("ForwardDeadLetteredMessagesTo"))
    if (v := text("MaxMessageSizeInKilobytes")) is not None:
        props.max_message_size = int(v) * 1024
    return props


def _entity_name(value: str | None) -> str | None:
    """ForwardTo arrives as a full URL (``https://ns/queue``) or a bare name."""
    if not value:
        return None
    if "://" in value:
        value = urllib.parse.urlparse(value).path
    return value.strip("/") or None


def _rule_config(name: str, desc: ET.Element) -> RuleConfig:
    fields = _fields(desc)
    flt = fields.get("Filter")
    action = fields.get("Action")
    action_sql = None
    action_parameters: dict[str, Any] = {}
    if action is not None:
        afields = _fields(action)
        expr = afields.get("SqlExpression")
        action_sql = expr.text if expr is not None else None
        action_parameters = _read_key_values(afields.get("Parameters"))
    if flt is None:
        return RuleConfig(name, "Sql", "1=1", action=action_sql, action_parameters=action_parameters)
    kind = flt.get(f"{{{XSI}}}type", "SqlFilter")
    ffields = _fields(flt)
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
        kvf = _fields(kv)
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


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class AdminServer:
    """The API's handlers. Listens on a port of its own if given one; the AMQP listener also hands
    it the HTTP connections that arrive on the AMQP port (``serve_connection``)."""

    def __init__(self, broker: Broker, keys: dict[str, str], host: str | None = None, port: int = 0) -> None:
        self.broker = broker
        self.keys = keys
        self.latency = 0.0  # seconds added to every reply, as the AMQP side does (simulated distance)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                prefix = getattr(self.server, "prefixes", {}).pop(self.client_address, b"")
                if prefix:  # bytes the AMQP port read while telling HTTP from AMQP
                    self.rfile = io.BufferedReader(_Prefixed(prefix, self.rfile))

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("admin: " + format, *args)

            def do_GET(self) -> None:
                server._serve(self, "GET")

            def do_PUT(self) -> None:
                server._serve(self, "PUT")

            def do_DELETE(self) -> None:
                server._serve(self, "DELETE")

        self._handler = Handler
        self._shared = _HandoffServer()
        self.httpd: ThreadingHTTPServer | None = None
        self.port: int | None = None
        if host is not None:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
            self.httpd.daemon_threads = True
            self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.httpd is not None:
            # shutdown() waits for serve_forever's next poll: at the default 0.5 s every stop of an
            # emulator took up to half a second (the suite starts one per test)
            self._thread = threading.Thread(
                target=self.httpd.serve_forever,
                kwargs={"poll_interval": SHUTDOWN_POLL},
                name="sbnotebook-admin",
                daemon=True,
            )
            self._thread.start()

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def serve_connection(self, sock: socket.socket, prefix: bytes) -> None:
        """Serve one HTTP connection (keep-alive included) on a thread of its own."""
        threading.Thread(
            target=self._run_connection, args=(sock, prefix), name="sbnotebook-admin-conn", daemon=True
        ).start()

    def _run_connection(self, sock: socket.socket, prefix: bytes) -> None:
        key = ("amqp-port", id(sock))  # stands in for the client address
        self._shared.prefixes[key] = prefix
        try:
            sock.settimeout(300)
            self._handler(sock, key, cast(Any, self._shared))
        except OSError:
            pass
        except Exception:
            log.exception("admin request failed")
        finally:
            self._shared.prefixes.pop(key, None)
            with contextlib.suppress(OSError):
                sock.close()

    # ----------------------------------------------------------- dispatch

    def _serve(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(req.path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        base = f"https://{req.headers.get('Host', 'localhost')}"
        self.broker.requests[f"admin {method}"] += 1
        body_read = False
        try:
            # The caller is checked before a byte of the body is read: an unauthenticated client
            # must not make the emulator hold (or even wait for) what it declares.
            length = _body_length(req.headers)
            self._authorize(req.headers.get("Authorization"), "/".join(parts))
            if length > MAX_BODY:
                raise _HttpError(413, f"The request body is larger than the {MAX_BODY // 1024} KiB allowed.")
            body = req.rfile.read(length) if length else b""
            body_read = True
            status, payload = self._route(method, parts, query, body, base, req.headers)
        except _HttpError as exc:
            status, payload = exc.status, _error_xml(exc.status, exc.message)
            if not body_read and not _discard_small_body(req):
                req.close_connection = True  # the body was left unread: this connection ends here
        except Conflict as exc:
            status, payload = 409, _error_xml(409, exc.description)
        except EntityNotFound as exc:
            status, payload = 404, _error_xml(404, exc.description)
        except (BrokerError, ValueError, TopologyError) as exc:
            status, payload = 400, _error_xml(400, getattr(exc, "description", str(exc)))
        data = payload.encode()
        if self.latency:
            time.sleep(self.latency)  # this connection's own thread: other requests are not held up
        req.send_response(status)
        req.send_header("Content-Type", "application/atom+xml;type=entry;charset=utf-8")
        req.send_header("Content-Length", str(len(data)))
        if req.close_connection:
            req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(data)

    def _authorize(self, header: str | None, path: str) -> None:
        """A valid SAS token whose audience covers the requested path (Service Bus's prefix rule:
        a token for ``sb://ns/orders`` reaches ``orders`` and below; one for the namespace reaches all)."""
        if not header:
            raise _HttpError(401, "Missing Authorization header: a SharedAccessSignature token is required.")
        token = header.strip()
        try:
            grant = validate(token, keys=self.keys, resource=_token_audience(token))
        except TokenError as exc:
            raise _HttpError(401, f"Unauthorized: {exc}") from None
        if not covers(grant, path, time.time()):
            raise _HttpError(401, "Unauthorized: the token's audience does not cover the requested resource.")

    def _route(
        self, method: str, parts: list[str], query: dict[str, list[str]], body: bytes, base: str, headers: Any
    ) -> tuple[int, str]:
        lowered = [p.lower() for p in parts]
        b = self.broker
        if lowered == ["$namespaceinfo"] and method == "GET":
            return 200, _entry(base, "$namespaceinfo", b.namespace, _namespace_xml(b.namespace))
        if len(lowered) == 2 and lowered[0] == "$resources" and method == "GET":
            kind = lowered[1]
            if kind not in ("queues", "topics"):
                raise _HttpError(404, f"Unknown resource list '{parts[1]}'.")
            with b.lock:
                entities = _page([e for e in b.entities if (e.kind == "queue") == (kind == "queues")], query)
                entries = [
                    _entry(base, e.name, e.name, queue_xml(e) if isinstance(e, Queue) else topic_xml(e))
                    for e in entities
                ]
            return 200, _feed(base, f"$Resources/{parts[1]}", entries, entities.next_skip, entities.top)
        if len(parts) == 1:
            return self._entity(method, parts[0], body, base, headers)
        if len(parts) == 2 and lowered[1] == "subscriptions" and method == "GET":
            with b.lock:
                topic = _topic(b, parts[0])
                subs = _page(list(topic.subscriptions.values()), query)
                # Ids echo the request's path as written: the JS admin client finds the names in
                # them by the case-sensitive '/Subscriptions/' and '/Rules/'.
                path = "/".join(parts)
                entries = [_entry(base, f"{path}/{s.name}", s.name, subscription_xml(s)) for s in subs]
            return 200, _feed(base, path, entries, subs.next_skip, subs.top)
        if len(parts) == 3 and lowered[1] == "subscriptions":
            return self._subscription(method, parts[0], parts[2], body, base, headers, "/".join(parts))
        if len(parts) == 4 and lowered[1] == "subscriptions" and lowered[3] == "rules" and method == "GET":
            with b.lock:
                sub = b.subscription(parts[0], parts[2])
                rules = _page(list(sub.rules), query)
                path = "/".join(parts)
                entries = [_entry(base, f"{path}/{r.name}", r.name, rule_xml(r.config)) for r in rules]
            return 200, _feed(base, path, entries, rules.next_skip, rules.top)
        if len(parts) == 5 and lowered[1] == "subscriptions" and lowered[3] == "rules":
            return self._rule(method, parts[0], parts[2], parts[4], body, base, headers, "/".join(parts))
        raise _HttpError(404, f"No such resource: /{'/'.join(parts)}")

    def _entity(self, method: str, name: str, body: bytes, base: str, headers: Any) -> tuple[int, str]:
        b = self.broker
        with b.lock:
            if method == "GET":
                try:
                    entity = b.entity(name)
                except EntityNotFound:
                    return 200, _feed(base, name, [])  # Service Bus answers a missing entity with an empty feed
                content = queue_xml(entity) if isinstance(entity, Queue) else topic_xml(entity)
                return 200, _entry(base, entity.name, entity.name, content)
            if method == "DELETE":
                b.delete_entity(name)
                return 200, ""
            desc = _description(body)
            fields = _fields(desc)
            update = headers.get("If-Match") == "*"
            kind = _local(desc.tag)
            if update:
                entity = b.entity(name)
                b.update_properties(entity, _properties(fields, entity.props))
                created, status = entity, 200
            elif kind == "QueueDescription":
                created, status = b.add_queue(QueueConfig(name, _properties(fields))), 201
            elif kind == "TopicDescription":
                created, status = b.add_topic(TopicConfig(name, _properties(fields))), 201
            else:
                raise _HttpError(400, f"Cannot create an entity from a {kind}.")
            content = queue_xml(created) if isinstance(created, Queue) else topic_xml(created)
            return status, _entry(base, created.name, created.name, content)

    def _subscription(
        self, method: str, topic: str, name: str, body: bytes, base: str, headers: Any, path: str
    ) -> tuple[int, str]:
        b = self.broker
        with b.lock:
            if method == "GET":
                try:
                    sub = b.subscription(topic, name)
                except EntityNotFound:
                    return 200, _feed(base, path, [])
                return 200, _entry(base, path, sub.name, subscription_xml(sub))
            if method == "DELETE":
                b.delete_subscription(topic, name)
                return 200, ""
            fields = _fields(_description(body))
            if headers.get("If-Match") == "*":
                sub = b.subscription(topic, name)
                b.update_properties(sub, _properties(fields, sub.props))
                return 200, _entry(base, path, sub.name, subscription_xml(sub))
            sub = b.add_subscription(topic, SubscriptionConfig(name, _properties(fields)))
            return 201, _entry(base, path, sub.name, subscription_xml(sub))

    def _rule(
        self, method: str, topic: str, sub_name: str, name: str, body: bytes, base: str, headers: Any, path: str
    ) -> tuple[int, str]:
        b = self.broker
        with b.lock:
            sub = b.subscription(topic, sub_name)
            existing = next((r for r in sub.rules if r.name.lower() == name.lower()), None)
            if method == "GET":
                if existing is None:
                    return 200, _feed(base, path, [])
                return 200, _entry(base, path, existing.name, rule_xml(existing.config))
            if method == "DELETE":
                if existing is None:
                    raise EntityNotFound(f"The rule '{name}' could not be found.", entity=path)
                b.delete_rule(sub, name)
                return 200, ""
            config = _rule_config(name, _description(body))
            rule = Rule(config)
            if existing is not None:
                if headers.get("If-Match") != "*":
                    raise Conflict(f"The rule '{name}' already exists.", entity=path)
                b.put_rule(sub, rule)
                return 200, _entry(base, path, name, rule_xml(config))
            b.put_rule(sub, rule)
            return 201, _entry(base, path, name, rule_xml(config))


def _topic(b: Broker, name: str) -> Topic:
    entity = b.entity(name)
    if not isinstance(entity, Topic):
        raise EntityNotFound(f"'{name}' is not a topic.", entity=name)
    return entity


class _Page(list[Any]):
    next_skip: int | None = None
    top: int = 100


def _page(items: list[Any], query: dict[str, list[str]]) -> _Page:
    skip = int((query.get("$skip") or ["0"])[0])
    top = int((query.get("$top") or ["100"])[0])
    page = _Page(items[skip : skip + top])
    page.top = top
    page.next_skip = skip + top if skip + top < len(items) else None
    return page


def _body_length(headers: Any) -> int:
    """The declared body length: a chunked or malformed one is refused (the SDK always sends a length)."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        raise _HttpError(411, "A Content-Length is required.")
    text = headers.get("Content-Length") or "0"
    if not text.isdigit():
        raise _HttpError(400, "The Content-Length header is not a number.")
    return int(text)


def _discard_small_body(req: BaseHTTPRequestHandler) -> bool:
    """Read and drop the body of a refused request if it is small (the connection can then be kept,
    and the client sees the answer rather than a reset). False: it was left unread."""
    try:
        length = _body_length(req.headers)
    except _HttpError:
        return False
    if length > MAX_BODY:
        return False
    if length:
        req.rfile.read(length)
    return True


def _token_audience(token: str) -> str:
    """The ``sr`` a SAS token names (its signature is checked against exactly this)."""
    fields = dict(p.partition("=")[::2] for p in token.removeprefix("SharedAccessSignature ").split("&"))
    return urllib.parse.unquote_plus(fields.get("sr", ""))


def _namespace_xml(name: str) -> str:
    return (
        f'<NamespaceInfo xmlns="{SB}" xmlns:i="{XSI}"><CreatedTime>{_stamp()}</CreatedTime>'
        f"<MessagingSKU>Standard</MessagingSKU><ModifiedTime>{_stamp()}</ModifiedTime>"
        f"<Name>{escape(name)}</Name><NamespaceType>Messaging</NamespaceType></NamespaceInfo>"
    )


def _error_xml(status: int, message: str) -> str:
    return f"<Error><Code>{status}</Code><Detail>{escape(message)}</Detail></Error>"


class _HandoffServer:
    """What a request handler needs of its server when the AMQP listener accepted the socket."""

    def __init__(self) -> None:
        self.prefixes: dict[object, bytes] = {}


class _Prefixed(io.RawIOBase):
    """A socket's reader with bytes already taken from it put back in front."""

    def __init__(self, prefix: bytes, rest: Any) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._rest.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)
