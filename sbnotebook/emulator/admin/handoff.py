"""HTTP connections the AMQP port hands to the administration API (plain, or TLS ended by the loop:
``net/tlsio.py``): each is served on a thread of its own, as ``http.server`` serves, with the bytes
the port read to tell HTTP from AMQP put back in front. At most ``MAX_HANDED_OFF`` at once: the
next is answered 503 (the SDK's admin client retries it) so that HTTP clients cannot make the
emulator hold a thread each without bound."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("sbnotebook.emulator")

MAX_HANDED_OFF = 64
KEEP_ALIVE = 300.0  # seconds an idle keep-alive connection (or a stalled request) holds its thread
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class HandoffServer:
    """What a request handler needs of its server when the AMQP listener accepted the socket, and
    the threads serving such connections."""

    def __init__(self, handler: Callable[[Any, Any, Any], Any]) -> None:
        self._handler = handler
        self.prefixes: dict[object, bytes] = {}
        self._slots = threading.BoundedSemaphore(MAX_HANDED_OFF)

    def serve(self, sock: Any, prefix: bytes) -> None:
        """Serve one HTTP connection (keep-alive included) on a thread of its own."""
        if not self._slots.acquire(blocking=False):
            log.warning("administration API: %d connections already open; answered 503", MAX_HANDED_OFF)
            with contextlib.suppress(OSError):
                sock.settimeout(2)
                sock.sendall(BUSY)
            with contextlib.suppress(OSError):
                sock.close()
            return
        threading.Thread(target=self._run, args=(sock, prefix), name="sbnotebook-admin-conn", daemon=True).start()

    def _run(self, sock: Any, prefix: bytes) -> None:
        key = ("amqp-port", id(sock))  # stands in for the client address
        self.prefixes[key] = prefix
        try:
            sock.settimeout(KEEP_ALIVE)
            self._handler(sock, key, self)
        except OSError:
            pass
        except Exception:
            log.exception("admin request failed")
        finally:
            self.prefixes.pop(key, None)
            with contextlib.suppress(OSError):
                sock.close()
            self._slots.release()


class Prefixed(io.RawIOBase):
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
