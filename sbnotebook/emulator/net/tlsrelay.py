"""TLS on the emulator's port: each connection's TLS is ended on a thread of its own.

The broker's loop sees only plain bytes: after the handshake, the decrypted stream is handed to
it through a socket pair, and the loop tells AMQP, WebSocket and HTTP apart as on a plain port.
A client that does not open with a TLS handshake (plain AMQP, plain HTTP) is closed: on a TLS
port nothing is ever served in the clear, as on Service Bus's 5671 and 443.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable

log = logging.getLogger("sbnotebook.emulator")

HANDSHAKE_TIMEOUT = 10.0  # seconds a client has to complete the TLS handshake
CHUNK = 256 * 1024


class TlsRelay:
    """Ends TLS for accepted sockets and hands the plain side to ``adopt`` (the loop's sniffer)."""

    def __init__(self, context: ssl.SSLContext, adopt: Callable[[socket.socket], None]) -> None:
        self.context = context
        self.adopt = adopt

    def __call__(self, sock: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(sock,), name="sbnotebook-tls", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self.context.wrap_bio(incoming, outgoing, server_side=True)
        try:
            sock.setblocking(True)
            sock.settimeout(HANDSHAKE_TIMEOUT)
            if not _handshake(sock, tls, incoming, outgoing):
                sock.close()
                return
            sock.settimeout(None)
        except (OSError, ssl.SSLError) as exc:
            log.info("TLS handshake refused: %s", getattr(exc, "reason", None) or exc.__class__.__name__)
            sock.close()
            return
        inner, outer = socket.socketpair()
        lock = threading.Lock()  # one SSL object, two directions: OpenSSL wants them serialised
        send_lock = threading.Lock()
        self.adopt(inner)
        threading.Thread(
            target=_to_broker,
            args=(sock, outer, tls, incoming, outgoing, lock, send_lock),
            name="sbnotebook-tls-in",
            daemon=True,
        ).start()
        _to_client(sock, outer, tls, outgoing, lock, send_lock)


def _flush(sock: socket.socket, outgoing: ssl.MemoryBIO, send_lock: threading.Lock, data: bytes = b"") -> None:
    data += outgoing.read()
    if data:
        with send_lock:
            sock.sendall(data)


def _handshake(sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> bool:
    while True:
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            pending = outgoing.read()
            if pending:
                sock.sendall(pending)
            data = sock.recv(CHUNK)
            if not data:
                return False
            incoming.write(data)
            continue
        pending = outgoing.read()
        if pending:
            sock.sendall(pending)
        return True


def _to_broker(
    sock: socket.socket,
    outer: socket.socket,
    tls: ssl.SSLObject,
    incoming: ssl.MemoryBIO,
    outgoing: ssl.MemoryBIO,
    lock: threading.Lock,
    send_lock: threading.Lock,
) -> None:
    """Client -> decrypt -> broker."""
    try:
        data = b""  # first round: what arrived with the end of the handshake is already in ``incoming``
        while True:
            plain: list[bytes] = []
            with lock:
                incoming.write(data)
                while True:
                    try:
                        piece = tls.read(CHUNK)
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:
                        piece = b""
                    if not piece:
                        break
                    plain.append(piece)
                reply = outgoing.read()  # TLS's own messages (alerts, key updates)
            if reply:
                with send_lock:
                    sock.sendall(reply)
            if plain:
                outer.sendall(b"".join(plain))
            data = sock.recv(CHUNK)
            if not data:
                break
    except (OSError, ssl.SSLError):
        pass  # the client went away or broke the TLS stream: the broker sees the connection end
    finally:
        with contextlib.suppress(OSError):
            outer.shutdown(socket.SHUT_WR)


def _to_client(
    sock: socket.socket,
    outer: socket.socket,
    tls: ssl.SSLObject,
    outgoing: ssl.MemoryBIO,
    lock: threading.Lock,
    send_lock: threading.Lock,
) -> None:
    """Broker -> encrypt -> client. Ends (and closes both sides) when the broker closes."""
    try:
        while True:
            data = outer.recv(CHUNK)
            if not data:
                break
            with lock:
                tls.write(data)
                encrypted = outgoing.read()
            with send_lock:
                sock.sendall(encrypted)
    except (OSError, ssl.SSLError):
        pass  # the client went away: the broker's side is closed below
    finally:
        with contextlib.suppress(OSError, ssl.SSLError):
            with lock:
                tls.unwrap()
            _flush(sock, outgoing, send_lock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        outer.close()
