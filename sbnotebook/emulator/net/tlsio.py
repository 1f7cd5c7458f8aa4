"""TLS on the emulator's port, ended on the event loop: no thread per connection.

A ``TlsSocket`` wraps an accepted socket: ciphertext read from it goes into an ``ssl.MemoryBIO``, an
``ssl.SSLObject`` turns it into plain bytes (or the next handshake message), and what the SSLObject
writes goes out from a second MemoryBIO. The loop uses it as a plain non-blocking socket (``recv``,
``send``; the handshake happens inside the first ``recv`` calls), so AMQP, WebSocket and HTTP are
told apart by their first plain bytes as on a plain port. The administration API's thread, handed
an HTTPS connection, uses its blocking face (``settimeout``, ``makefile``, ``sendall``). A client
that does not open with a TLS handshake fails it and is closed: nothing is served in the clear, as
on Service Bus's 5671 and 443.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
from typing import Any

CHUNK = 256 * 1024  # plain bytes encrypted per send: a full socket holds back at most this much


class TlsSocket:
    """The server side of one TLS connection over ``sock``, without a thread of its own."""

    __slots__ = ("__weakref__", "_eof", "_in", "_out", "_tls", "handshaken", "sock", "unsent")

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=True)
        self.handshaken = False
        self.unsent = bytearray()  # ciphertext the socket has not taken yet
        self._eof = False  # the client's close_notify (or end of stream) came

    def fileno(self) -> int:
        return self.sock.fileno()

    # ------------------------------------------------------ the loop's face (non-blocking)

    def recv(self, size: int) -> bytes:
        """Plain bytes, b"" once the stream ends; BlockingIOError while none are ready (the handshake
        is under way or a record is incomplete); ssl.SSLError (an OSError) when the TLS fails."""
        if self._eof:
            return b""
        data = self.sock.recv(size)  # BlockingIOError passes to the caller, as from a socket
        if not data:
            return b""
        self._in.write(data)
        plain = self._decrypt()
        self.flush()  # handshake replies, alerts, session tickets
        if plain is None:
            raise BlockingIOError
        return plain

    def _decrypt(self) -> bytes | None:
        if not self.handshaken:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return None
            self.handshaken = True
        pieces: list[bytes] = []
        while True:
            try:
                piece = self._tls.read(CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                piece = b""
            if not piece:
                self._eof = True
                break
            pieces.append(piece)
        if pieces:
            return b"".join(pieces)
        return b"" if self._eof else None

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Encrypt up to CHUNK bytes of ``data`` (how many is returned); BlockingIOError while earlier
        ciphertext still waits for the socket."""
        if self.unsent and not self.flush():
            raise BlockingIOError
        part = memoryview(data)[:CHUNK]
        self._tls.write(part)
        self.flush()
        return len(part)

    def flush(self) -> bool:
        """Give the socket what the SSLObject wrote; True when nothing is left waiting."""
        pending = self._out.read()
        if pending:
            self.unsent += pending
        while self.unsent:
            try:
                sent = self.sock.send(self.unsent)
            except (BlockingIOError, InterruptedError):
                return False
            del self.unsent[:sent]
        return True

    def close(self) -> None:
        """Say close_notify if the socket takes it now, then close."""
        if self.handshaken:
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                self._tls.unwrap()
            with contextlib.suppress(OSError):
                self.flush()
        self.sock.close()

    # --------------------------------------------- the admin API thread's face (blocking)

    def setblocking(self, flag: bool) -> None:
        self.sock.setblocking(flag)

    def settimeout(self, seconds: float | None) -> None:
        self.sock.settimeout(seconds)

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        self._tls.write(data)
        self._send_blocking()

    def _send_blocking(self) -> None:
        self.unsent += self._out.read()
        if self.unsent:
            self.sock.sendall(self.unsent)
            self.unsent.clear()

    def makefile(self, mode: str = "rb", buffering: int = -1) -> io.BufferedReader:
        """The plain stream for reading (``http.server`` reads requests from it; it writes with ``sendall``)."""
        if mode != "rb":
            raise ValueError("a TlsSocket is read as a binary file only; write with sendall")
        return io.BufferedReader(_PlainReader(self), buffering if buffering > 0 else io.DEFAULT_BUFFER_SIZE)

    def read_into(self, buffer: memoryview) -> int:
        """Blocking: plain bytes into ``buffer`` (0 at the end of the stream)."""
        while not self._eof:
            try:
                count: Any = self._tls.read(len(buffer), buffer)  # typeshed says bytes; with a buffer it is a count
                return int(count)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                break
            self._send_blocking()  # whatever the SSLObject has to say first (a key update's answer)
            data = self.sock.recv(CHUNK)  # TimeoutError after the socket's timeout, as http.server expects
            if not data:
                break
            self._in.write(data)
        self._eof = True
        return 0


class _PlainReader(io.RawIOBase):
    def __init__(self, tls: TlsSocket) -> None:
        self._tls = tls

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self._tls.read_into(memoryview(buffer).cast("B"))
