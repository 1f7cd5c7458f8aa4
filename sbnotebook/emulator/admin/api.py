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

import io
import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..broker.broker import Broker, Topic
from ..broker.rules import Rule
from ..errors import BrokerError, Conflict, EntityNotFound
from ..journey.queries import answer
from ..net.peerio import Wire
from ..security.entra import MAX_FORM, EntraError, Issuer
from ..security.sas import MANAGE, KeyRing, TokenError, covers, validate
from ..topology import TopologyError
from .atom import entry, error_xml, feed, namespace_xml, page, parse_description
from .clockroute import CLOCK_ROOT, ClockOwner, serve_clock
from .documents import entity_xml, subscription_xml
from .entities import put_entity, put_subscription
from .handoff import HandoffServer, Prefixed
from .journeyroute import serve_journey
from .rulexml import rule_config_from, rule_xml

log = logging.getLogger("sbnotebook.emulator")

SHUTDOWN_POLL = 0.05  # seconds between the admin server's checks for stop()
# Entity and rule descriptions are a few KiB; a larger body is refused (413) before it is read.
MAX_BODY = 256 * 1024


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class AdminServer:
    """The API's handlers. Listens on a port of its own if given one; the AMQP listener also hands
    it the HTTP connections that arrive on the AMQP port (``serve_connection``)."""

    def __init__(
        self,
        broker: Broker,
        keys: KeyRing | dict[str, str],
        host: str | None = None,
        port: int = 0,
        issuer: Issuer | None = None,
    ) -> None:
        self.broker = broker
        self.keys = KeyRing.of(keys)
        self.issuer = issuer  # Entra ID: its authority's endpoints, and Bearer tokens (with --tls)
        self.latency = 0.0  # seconds added to every reply, as the AMQP side does (simulated distance)
        self.clock: ClockOwner | None = None  # /$emulator/clock (clockroute.py), set by the Emulator
        # Set by the Emulator: detaches the links of what a DELETE removed before it is answered, so a
        # client told "deleted" finds its links detached (not a tick later, on an entity made again).
        self.on_delete: Callable[[], None] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                prefix = getattr(self.server, "prefixes", {}).pop(self.client_address, b"")
                if prefix:  # bytes the AMQP port read while telling HTTP from AMQP
                    self.rfile = io.BufferedReader(Prefixed(prefix, self.rfile))

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("admin: " + format, *args)

            def do_GET(self) -> None:
                server._serve(self, "GET")

            def do_PUT(self) -> None:
                server._serve(self, "PUT")

            def do_DELETE(self) -> None:
                server._serve(self, "DELETE")

            def do_POST(self) -> None:
                server._serve(self, "POST")

        self._shared = HandoffServer(Handler)
        self.status: Callable[[], dict[str, int]] | None = None  # the loop's counts (GET /$emulator/status)
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

    def serve_connection(self, sock: Wire, prefix: bytes) -> None:
        """Serve one HTTP connection the AMQP port accepted (on a thread of its own: handoff.py)."""
        self._shared.serve(sock, prefix)

    # ----------------------------------------------------------- dispatch

    def _serve(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(req.path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        base = f"https://{req.headers.get('Host', 'localhost')}"
        if self.issuer is not None and self.issuer.handles(parts):
            self._serve_authority(req, method, parts, base)
            return
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
            status, payload = exc.status, error_xml(exc.status, exc.message)
            if not body_read and not _discard_small_body(req):
                req.close_connection = True  # the body was left unread: this connection ends here
        except Conflict as exc:
            status, payload = 409, error_xml(409, exc.description)
        except EntityNotFound as exc:
            status, payload = 404, error_xml(404, exc.description)
        except (BrokerError, ValueError, TopologyError) as exc:
            status, payload = 400, error_xml(400, getattr(exc, "description", str(exc)))
        data = payload.encode()
        kind = "application/json" if payload.startswith("{") else "application/atom+xml;type=entry;charset=utf-8"
        if self.latency:
            time.sleep(self.latency)  # this connection's own thread: other requests are not held up
        req.send_response(status)
        req.send_header("Content-Type", kind)
        req.send_header("Content-Length", str(len(data)))
        if req.close_connection:
            req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(data)

    def _serve_authority(self, req: BaseHTTPRequestHandler, method: str, parts: list[str], base: str) -> None:
        """Entra ID's endpoints (OpenID discovery, token, keys): JSON, no caller to authorize (the
        form carries the client's credentials), a form over MAX_FORM refused unread."""
        assert self.issuer is not None
        try:
            length = _body_length(req.headers)
        except _HttpError as exc:
            status, payload = exc.status, {"error": "invalid_request", "error_description": exc.message}
            length = -1
        else:
            if length > MAX_FORM:
                status, payload = 413, {"error": "invalid_request", "error_description": "The request is too large."}
            else:
                form = req.rfile.read(length) if length else b""
                status, payload = self.issuer.serve(method, parts, form, base)
        if length < 0 or length > MAX_FORM:
            req.close_connection = True  # the body was left unread
        data = json.dumps(payload).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json; charset=utf-8")
        req.send_header("Content-Length", str(len(data)))
        req.send_header("Cache-Control", "no-store")
        if req.close_connection:
            req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(data)

    def _authorize(self, header: str | None, path: str) -> None:
        """A valid SAS token whose audience covers the requested path (Service Bus's prefix rule:
        a token for ``sb://ns/orders`` reaches ``orders`` and below; one for the namespace reaches all),
        or an Entra ID token (``Bearer``) whose principal has the Manage claim (Data Owner)."""
        if not header:
            raise _HttpError(401, "Missing Authorization header: a SharedAccessSignature token is required.")
        if header.strip().lower().startswith("bearer "):
            self._authorize_bearer(header.strip()[len("bearer ") :])
            return
        token = header.strip()
        try:
            grant = validate(token, keys=self.keys, resource=_token_audience(token))
        except TokenError as exc:
            raise _HttpError(401, f"Unauthorized: {exc}") from None
        if not covers(grant, path, time.time()):
            raise _HttpError(401, "Unauthorized: the token's audience does not cover the requested resource.")
        if MANAGE not in grant.rights:  # a policy with Send or Listen only
            raise _HttpError(401, "SubCode=40100: Unauthorized: Manage,EntityRead claims required for this operation.")

    def _authorize_bearer(self, token: str) -> None:
        if self.issuer is None:
            raise _HttpError(401, "Unauthorized: this emulator accepts Entra ID tokens with --tls only.")
        try:
            identity = self.issuer.validate(token)
        except EntraError as exc:
            raise _HttpError(401, f"Unauthorized: {exc}.") from None
        if MANAGE not in identity.principal.rights:
            # Service Bus answers 401 (SubCode 40100) when the claims are missing, not 403
            raise _HttpError(
                401,
                "SubCode=40100: Unauthorized: Manage,EntityRead claims required for this operation "
                "(the role Azure Service Bus Data Owner).",
            )

    def _route(
        self, method: str, parts: list[str], query: dict[str, list[str]], body: bytes, base: str, headers: Any
    ) -> tuple[int, str]:
        lowered = [p.lower() for p in parts]
        b = self.broker
        if lowered == ["$emulator", "status"] and method == "GET" and self.status is not None:
            return 200, json.dumps(self.status())  # the emulator's own: connections open and the cap
        if lowered == [CLOCK_ROOT, "journey"]:  # one message's journey (journeyroute.py)
            return serve_journey(lambda q: answer(b.journey, q), method, query)
        if lowered[:1] == [CLOCK_ROOT]:  # the rest of /$emulator/: its clock (clockroute.py)
            return serve_clock(self.clock, method, lowered[1:], query)
        if method == "POST":
            raise _HttpError(405, "The administration API takes GET, PUT and DELETE.")
        if lowered == ["$namespaceinfo"] and method == "GET":
            return 200, entry(base, "$namespaceinfo", b.namespace, namespace_xml(b.namespace))
        if len(lowered) == 2 and lowered[0] == "$resources" and method == "GET":
            kind = lowered[1]
            if kind not in ("queues", "topics"):
                raise _HttpError(404, f"Unknown resource list '{parts[1]}'.")
            with b.lock:
                entities = page([e for e in b.entities if (e.kind == "queue") == (kind == "queues")], query)
                entries = [entry(base, e.name, e.name, entity_xml(e, _host(base))) for e in entities]
            return 200, feed(base, f"$Resources/{parts[1]}", entries, entities.next_skip, entities.top)
        if len(parts) == 1:
            return self._entity(method, parts[0], body, base, headers)
        if len(parts) == 2 and lowered[1] == "subscriptions" and method == "GET":
            with b.lock:
                topic = _topic(b, parts[0])
                subs = page(list(topic.subscriptions.values()), query)
                # Ids echo the request's path as written: the JS admin client finds the names in
                # them by the case-sensitive '/Subscriptions/' and '/Rules/'.
                path = "/".join(parts)
                entries = [entry(base, f"{path}/{s.name}", s.name, subscription_xml(s, _host(base))) for s in subs]
            return 200, feed(base, path, entries, subs.next_skip, subs.top)
        if len(parts) == 3 and lowered[1] == "subscriptions":
            return self._subscription(method, parts[0], parts[2], body, base, headers, "/".join(parts))
        if len(parts) == 4 and lowered[1] == "subscriptions" and lowered[3] == "rules" and method == "GET":
            with b.lock:
                sub = b.subscription(parts[0], parts[2])
                rules = page(list(sub.rules), query)
                path = "/".join(parts)
                entries = [entry(base, f"{path}/{r.name}", r.name, rule_xml(r.config)) for r in rules]
            return 200, feed(base, path, entries, rules.next_skip, rules.top)
        if len(parts) == 5 and lowered[1] == "subscriptions" and lowered[3] == "rules":
            return self._rule(method, parts[0], parts[2], parts[4], body, base, headers, "/".join(parts))
        raise _HttpError(404, f"No such resource: /{'/'.join(parts)}")

    def _entity(self, method: str, name: str, body: bytes, base: str, headers: Any) -> tuple[int, str]:
        b = self.broker
        if method == "DELETE":
            b.delete_entity(name)  # under the broker's lock, released before the links are detached
            self._detached()
            return 200, ""
        with b.lock:
            if method == "GET":
                try:
                    entity = b.entity(name)
                except EntityNotFound:
                    return 200, feed(base, name, [])  # Service Bus answers a missing entity with an empty feed
                return 200, entry(base, entity.name, entity.name, entity_xml(entity, _host(base)))
            status, made = put_entity(b, name, parse_description(body), headers.get("If-Match") == "*")
            return status, entry(base, made.name, made.name, entity_xml(made, _host(base)))

    def _subscription(
        self, method: str, topic: str, name: str, body: bytes, base: str, headers: Any, path: str
    ) -> tuple[int, str]:
        b = self.broker
        if method == "DELETE":
            b.delete_subscription(topic, name)
            self._detached()
            return 200, ""
        with b.lock:
            if method == "GET":
                try:
                    sub = b.subscription(topic, name)
                except EntityNotFound:
                    return 200, feed(base, path, [])
                return 200, entry(base, path, sub.name, subscription_xml(sub, _host(base)))
            update = headers.get("If-Match") == "*"
            status, sub = put_subscription(b, topic, name, parse_description(body), update)
            return status, entry(base, path, sub.name, subscription_xml(sub, _host(base)))

    def _detached(self) -> None:
        if self.on_delete is not None:
            self.on_delete()

    def _rule(
        self, method: str, topic: str, sub_name: str, name: str, body: bytes, base: str, headers: Any, path: str
    ) -> tuple[int, str]:
        b = self.broker
        with b.lock:
            sub = b.subscription(topic, sub_name)
            existing = next((r for r in sub.rules if r.name.lower() == name.lower()), None)
            if method == "GET":
                if existing is None:
                    return 200, feed(base, path, [])
                return 200, entry(base, path, existing.name, rule_xml(existing.config))
            if method == "DELETE":
                if existing is None:
                    raise EntityNotFound(f"The rule '{name}' could not be found.", entity=path)
                b.delete_rule(sub, name)
                return 200, ""
            config = rule_config_from(name, parse_description(body))
            rule = Rule(config)
            if existing is not None:
                if headers.get("If-Match") != "*":
                    raise Conflict(f"The rule '{name}' already exists.", entity=path)
                b.put_rule(sub, rule)
                return 200, entry(base, path, name, rule_xml(config))
            b.put_rule(sub, rule)
            return 201, entry(base, path, name, rule_xml(config))


def _host(base: str) -> str:
    """The namespace as the caller addressed it (``https://host:port`` -> ``host:port``)."""
    return base.partition("://")[2]


def _topic(b: Broker, name: str) -> Topic:
    entity = b.entity(name)
    if not isinstance(entity, Topic):
        raise EntityNotFound(f"'{name}' is not a topic.", entity=name)
    return entity


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
