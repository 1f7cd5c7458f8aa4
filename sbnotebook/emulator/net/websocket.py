"""AMQP over WebSockets (RFC 6455), as Service Bus serves it at ``/$servicebus/websocket``.

The SDK's ``TransportType.AmqpOverWebsocket`` sends an HTTP upgrade asking for the
``AMQPWSB10`` subprotocol, then AMQP frames inside binary WebSocket messages. ``wsproto``
(sans-IO) checks the upgrade and does the framing: fragmented messages, pings, the close
handshake, the masking rules and the refusal of malformed frames (a close frame with the
RFC's code, then the socket closes). This module answers the upgrade, turns what arrives into
one byte stream for proton, and wraps what proton writes into binary messages. The event loop
imports it on the first upgrade (``frontdoor.is_upgrade`` says which requests are upgrades).
"""

from __future__ import annotations

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import RemoteProtocolError

SUBPROTOCOL = "AMQPWSB10"


class WebSocket:
    """The server side of one AMQP-over-WebSocket connection.

    ``out`` collects what must go to the client as it is (the 101 or the refusal, pongs, the
    closing frame); ``closed`` says no more input is taken (close handshake done, or the client
    broke the protocol) and proton's tail should close.
    """

    __slots__ = ("_ws", "closed", "out")

    def __init__(self) -> None:
        self._ws = WSConnection(ConnectionType.SERVER)
        self.out = bytearray()
        self.closed = False

    def handshake(self, head: bytes) -> bool:
        """Answer the upgrade request's head: True when accepted; False when refused (then close)."""
        try:
            self._ws.receive_data(head)
            request = next((e for e in self._ws.events() if isinstance(e, Request)), None)
        except RemoteProtocolError as exc:  # not a valid upgrade (version, headers): wsproto says how to refuse
            hint = exc.event_hint if isinstance(exc.event_hint, RejectConnection) else RejectConnection()
            self.out += self._ws.send(hint)
            self.closed = True
            return False
        offered = {p.lower(): p for p in request.subprotocols} if request is not None else {}
        if SUBPROTOCOL.lower() not in offered:
            body = b"Service Bus speaks the AMQPWSB10 subprotocol only."
            headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
            self.out += self._ws.send(RejectConnection(status_code=400, headers=headers, has_body=True))
            self.out += self._ws.send(RejectData(data=body, body_finished=True))
            self.closed = True
            return False
        self.out += self._ws.send(AcceptConnection(subprotocol=offered[SUBPROTOCOL.lower()]))
        return True

    def feed(self, data: bytes) -> bytes:
        """Add received bytes; return the AMQP bytes they complete."""
        if self.closed:
            return b""
        ws = self._ws
        ws.receive_data(data)
        amqp = bytearray()
        for event in ws.events():
            if isinstance(event, BytesMessage):
                amqp += event.data
            elif isinstance(event, Ping):
                self.out += ws.send(event.response())
            elif isinstance(event, CloseConnection):
                # The client's close (answered with its code), or a protocol error wsproto found
                # (1002, 1007 ...: said in a close frame). Either way, no more input.
                self._close(event.response())
                break
            elif isinstance(event, TextMessage):  # AMQPWSB10 carries binary messages only
                self._close(CloseConnection(code=CloseReason.UNSUPPORTED_DATA, reason="binary messages only"))
                break
        return bytes(amqp)

    def _close(self, event: CloseConnection) -> None:
        if self._ws.state in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING):
            self.out += self._ws.send(event)
        self.closed = True

    def wrap(self, data: bytes) -> bytes:
        """Proton's output as one binary message; nothing once the close handshake began."""
        if self._ws.state is not ConnectionState.OPEN:
            return b""
        return self._ws.send(BytesMessage(data=data))
