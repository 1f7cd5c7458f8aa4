"""One port, three protocols: tell AMQP from HTTP by the first bytes a client sends.

AMQP clients open with ``AMQP`` + protocol id; HTTP clients with a method name.
An HTTP request is either a WebSocket upgrade (AMQP inside, see ``websocket.py``)
or a call to the administration API (handed to ``admin.py``'s handlers).
"""

from __future__ import annotations

AMQP = "amqp"
HTTP = "http"
MORE = "more"
_METHODS = (b"GET ", b"PUT ", b"POST ", b"DELETE ", b"HEAD ", b"OPTIONS ", b"PATCH ")
MAX_HEAD = 64 * 1024


def classify(buf: bytes) -> str:
    """AMQP, HTTP, or MORE (too few bytes to tell). Anything else is left to proton to refuse."""
    if buf[:4] == b"AMQP"[: len(buf)] and len(buf) < 4:
        return MORE
    for method in _METHODS:
        if buf.startswith(method):
            return HTTP
        if method.startswith(buf):
            return MORE
    return AMQP


def parse_head(buf: bytes) -> tuple[str, str, dict[str, str], int] | None:
    """(method, path, lower-cased headers, length of the head) once the head is complete, else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise ValueError("HTTP request head too large")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise ValueError("malformed HTTP request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers, end + 4


WEBSOCKET_PATH = "/$servicebus/websocket"


def is_upgrade(path: str, headers: dict[str, str]) -> bool:
    """A WebSocket upgrade to Service Bus's AMQP path (``websocket.py`` answers it)."""
    return (
        path.split("?", 1)[0].lower() == WEBSOCKET_PATH.lower()
        and headers.get("upgrade", "").lower() == "websocket"
        and "sec-websocket-key" in headers
    )
