"""AMQP over WebSockets (RFC 6455), as Service Bus serves it at ``/$servicebus/websocket``.

The SDK's ``TransportType.AmqpOverWebsocket`` sends an HTTP upgrade asking for the
``AMQPWSB10`` subprotocol, then AMQP frames inside binary WebSocket messages. The
broker answers the upgrade, unwraps what arrives into one byte stream for proton,
and wraps what proton writes into unmasked binary frames.
"""

from __future__ import annotations

import base64
import hashlib
import struct

WEBSOCKET_PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA
MAX_FRAME = 16 * 1024 * 1024  # far above the AMQP frame size; bigger is an attack, not a client


class WebSocketError(ValueError):
    pass


def is_upgrade(path: str, headers: dict[str, str]) -> bool:
    return (
        path.split("?", 1)[0].lower() == WEBSOCKET_PATH.lower()
        and headers.get("upgrade", "").lower() == "websocket"
        and "sec-websocket-key" in headers
    )


def handshake_response(headers: dict[str, str]) -> bytes:
    """The 101 answer to an upgrade request, or a 400 if it does not ask for AMQP."""
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    if SUBPROTOCOL.lower() not in (p.lower() for p in offered):
        body = b"Service Bus speaks the AMQPWSB10 subprotocol only."
        return (
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].strip().encode() + _GUID).digest())
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: " + SUBPROTOCOL.encode() + b"\r\n\r\n"
    )


def frame(payload: bytes, opcode: int = OP_BINARY) -> bytes:
    """One final, unmasked frame (servers never mask)."""
    n = len(payload)
    first = bytes([0x80 | opcode])
    if n < 126:
        return first + bytes([n]) + payload
    if n < 65536:
        return first + b"\x7e" + struct.pack(">H", n) + payload
    return first + b"\x7f" + struct.pack(">Q", n) + payload


class WebSocketReader:
    """Turns the client's frames into the AMQP byte stream; collects control replies."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.replies: list[bytes] = []  # pongs and the closing frame, to send as they are
        self.closed = False

    def feed(self, data: bytes) -> bytes:
        """Add received bytes; return the application payload they complete."""
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        while True:
            parsed = self._parse(buf, pos)
            if parsed is None:
                break
            opcode, payload, pos = parsed
            if opcode in (OP_BINARY, OP_CONTINUATION, OP_TEXT):
                out += payload
            elif opcode == OP_PING:
                self.replies.append(frame(payload, OP_PONG))
            elif opcode == OP_CLOSE:
                if not self.closed:
                    self.replies.append(frame(payload[:2], OP_CLOSE))
                self.closed = True
                break
        del buf[:pos]
        return bytes(out)

    @staticmethod
    def _parse(buf: bytearray, pos: int) -> tuple[int, bytes, int] | None:
        if len(buf) - pos < 2:
            return None
        b0, b1 = buf[pos], buf[pos + 1]
        if b0 & 0x70:
            raise WebSocketError("reserved bits set")
        opcode = b0 & 0x0F
        if not b1 & 0x80:
            raise WebSocketError("client frames must be masked")
        n = b1 & 0x7F
        head = pos + 2
        if n == 126:
            if len(buf) - head < 2:
                return None
            n = struct.unpack_from(">H", buf, head)[0]
            head += 2
        elif n == 127:
            if len(buf) - head < 8:
                return None
            n = struct.unpack_from(">Q", buf, head)[0]
            head += 8
        if n > MAX_FRAME:
            raise WebSocketError("frame too large")
        end = head + 4 + n
        if len(buf) < end:
            return None
        mask = bytes(buf[head : head + 4])
        payload = _unmask(bytes(buf[head + 4 : end]), mask)
        return opcode, payload, end


def _unmask(data: bytes, mask: bytes) -> bytes:
    # XOR with the 4-byte key repeated, done on one big integer (fast in CPython).
    if not data:
        return data
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")
