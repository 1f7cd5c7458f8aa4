"""The control links of an AMQP connection: tokens put on ``$cbs`` (SAS or Entra ID) and the
rights they grant, and requests on an entity's ``$management`` node with their replies. A part of
``amqp.BrokerHandler``, which holds the state declared here."""

from __future__ import annotations

import logging
import uuid
from typing import Any, cast

from proton import Link, Message, int32

from ..errors import Unauthorized
from ..security.entra import EntraError, Issuer
from ..security.sas import Grant, KeyRing, TokenError, resource_key, validate
from .management import OPERATION_RIGHTS, ManagementHandler
from .terms import (
    MANAGEMENT_SUFFIX,
    ConnectionState,
    OutLink,
    normalise_address,
)

log = logging.getLogger("sbnotebook.emulator")
SAS_TOKEN_TYPE = "servicebus.windows.net:sastoken"
JWT_TOKEN_TYPE = "jwt"
ASSOCIATED_LINK_NAME = "associated-link-name"
_NO_LINK = object()  # the holder named by a link that is not (or no longer) open: it holds nothing


class ControlLinks:
    """Token and management handling for ``amqp.BrokerHandler`` (its state, declared here)."""

    keys: KeyRing
    issuer: Issuer | None
    _conns: dict[Any, ConnectionState]
    _out: dict[Link, OutLink]
    _management: dict[Link, ManagementHandler]

    def _conn(self, connection: Any) -> ConnectionState:
        state = self._conns.get(connection)
        if state is None:
            state = self._conns[connection] = ConnectionState(connection)
        return state

    def _authorize(self, conn: ConnectionState, address: str, right: str | None = None) -> None:
        """A token on $cbs covering ``address`` and, if named, giving ``right`` (Send, Listen, Manage)."""
        if not conn.authorized(address):
            raise Unauthorized(f"Unauthorized access to '{address}': put a valid token on $cbs first.")
        if right is not None and not conn.authorized(address, right):
            host = conn.grants[-1].audience.partition("/")[0] if conn.grants else ""
            # Service Bus's words, for SAS rules and Entra roles alike
            raise Unauthorized(
                f"Unauthorized access. '{right}' claim(s) are required to perform this operation. "
                f"Resource: 'sb://{host}/{address}'.",
                entity=address,
            )

    def _put_token(self, link: Link, data: bytes) -> None:
        request = Message()
        request.decode(data)
        props: dict[Any, Any] = dict(request.properties or {})
        reply = Message()
        reply.correlation_id = request.id
        name = str(props.get("name", ""))
        try:
            if str(props.get("operation")) != "put-token":
                raise TokenError("unsupported $cbs operation")
            token = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
            kind = str(props.get("type", ""))
            is_sas = token.startswith("SharedAccessSignature ")
            # The two token types of Service Bus's CBS. A SAS token also comes as "jwt":
            # azure-servicebus (pyamqp) puts every key's token so, and Service Bus takes it.
            if kind == SAS_TOKEN_TYPE and not is_sas:
                raise TokenError(f"a '{SAS_TOKEN_TYPE}' token must be a SharedAccessSignature")
            if kind not in (SAS_TOKEN_TYPE, JWT_TOKEN_TYPE):
                raise TokenError(f"unsupported token type {kind!r} (expected '{JWT_TOKEN_TYPE}' or '{SAS_TOKEN_TYPE}')")
            grant = validate(token, keys=self.keys, resource=name) if is_sas else self._jwt_grant(token, name)
            self._conn(link.connection).grants.append(grant)
            reply.properties = cast(Any, {"status-code": int32(202), "status-description": "Accepted"})
        except (TokenError, EntraError) as exc:
            log.info("refused a token for %s: %s", name, exc)
            reply.properties = cast(Any, {"status-code": int32(401), "status-description": f"Unauthorized: {exc}"})
        conn = self._conn(link.connection)
        if conn.cbs_sender is None:
            return
        out = self._out.get(conn.cbs_sender)
        if out is not None:
            out.pending_replies.append(reply)
            self._send_replies(out)

    def _jwt_grant(self, token: str, name: str) -> Grant:
        """An Entra ID token for the resource ``name`` (the SDK names ``sb://host/entity``, no port):
        its principal's roles, namespace-wide, decide what it may do there."""
        if self.issuer is None:
            raise EntraError("this emulator accepts Entra ID tokens with --tls only")
        identity = self.issuer.validate(token)
        return Grant(resource_key(name), identity.expires, identity.principal.rights)

    def _manage(self, link: Link, data: bytes) -> None:
        request = Message()
        request.decode(data)
        handler = self._management[link]
        out = self._reply_link(link, request.reply_to)
        conn = self._conn(link.connection)
        address = handler.entity_path + MANAGEMENT_SUFFIX

        def check(operation: str) -> None:
            right = OPERATION_RIGHTS.get(operation)
            if right is not None:
                self._authorize(conn, address, right)

        # Locks taken through management (deferred messages) belong to the reply link.
        holder = self._associated(conn, request)
        reply = handler.handle(request, owner=out if out is not None else link, check=check, holder=holder)
        if out is not None:
            out.pending_replies.append(reply)
            self._send_replies(out)

    def _associated(self, conn: ConnectionState, request: Message) -> object | None:
        """The receiving link a request names in ``associated-link-name`` (the SDKs name their
        receiver's link): session operations need it to hold the session. A name with no open
        receiving link on this connection gives a holder of nothing (its session is not held by
        it); no name gives None (any holder will do)."""
        props: dict[Any, Any] = dict(request.properties or {})
        name = props.get(ASSOCIATED_LINK_NAME, props.get(ASSOCIATED_LINK_NAME.encode()))
        if name is None:
            return None
        name = bytes(name).decode() if isinstance(name, (bytes, memoryview)) else str(name)
        for other in conn.links:
            if other.is_sender and other.name == name and other in self._out:
                return self._out[other]
        return _NO_LINK

    def _reply_link(self, link: Link, reply_to: str | None) -> OutLink | None:
        """The client's receiving link that the reply goes to.

        Microsoft's request-response spec: the request's ``reply-to`` names the address of the
        client's receiving node, i.e. the *target* of its receiving link (the JS SDK uses a unique
        address per link; the Python SDK uses the entity's ``$management`` path for both ends).
        Without a reply-to, or when no link targets it, the link reading from this node's address
        is used (older clients). A link on the request link's own session wins a tie."""
        conn = self._conns.get(link.connection)
        senders = [other for other in (conn.links if conn else ()) if other.is_sender and other in self._out]
        if reply_to:
            want = normalise_address(reply_to).lower()
            found = self._same_session_first(
                link, [o for o in senders if normalise_address(o.remote_target.address).lower() == want]
            )
            if found is not None:
                return found
        want = normalise_address(reply_to) if reply_to else normalise_address(link.remote_target.address)
        return self._same_session_first(
            link, [o for o in senders if normalise_address(o.remote_source.address).lower() == want.lower()]
        )

    def _same_session_first(self, link: Link, candidates: list[Link]) -> OutLink | None:
        for other in candidates:
            if other.session == link.session:
                return self._out[other]
        return self._out[candidates[-1]] if candidates else None

    def _send_replies(self, out: OutLink) -> None:
        link = out.link
        while out.pending_replies and link.credit > 0:
            reply = out.pending_replies.popleft()
            delivery = link.delivery(cast(str, uuid.uuid4().bytes))
            link.send(reply.encode())
            link.advance()
            delivery.settle()
