"""Run the async API from synchronous code, including inside a notebook's running event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="sbnotebook-sync")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` when no loop is running here; otherwise on a worker thread with its own loop
    (Jupyter's kernel already runs one, so ``asyncio.run`` would refuse)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _pool.submit(asyncio.run, coro).result()
