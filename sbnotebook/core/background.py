"""One background event loop per process for objects that outlive a call (locked batches):
their async SDK receivers and lock-renewal tasks live here, while notebook code stays synchronous."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="sbnotebook-loop", daemon=True)
                thread.start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the background loop and wait for its result."""
        if _on_loop(self._loop):
            raise RuntimeError("BackgroundLoop.run() called from its own thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Start a coroutine on the background loop without waiting (returns a concurrent Future)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


def _on_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    if loop is None:
        return False
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


background = BackgroundLoop()
