"""The sync form of an async operation, written once: the async function holds the body and the
explicit keyword signature; its sync form runs it on the live connection's event loop.

``help()``, ``inspect.signature`` and IPython's keyword completion follow ``__wrapped__`` to the
async function's signature, and mypy sees the same parameters (a ``ParamSpec``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from .registry import live

P = ParamSpec("P")
R = TypeVar("R")


def sync_form(afn: Callable[P, Coroutine[Any, Any, R]], doc: str, *, grace: float = 0.0) -> Callable[P, R]:
    """``afn`` run to its end from the calling thread (a notebook cell), on the connection named by
    its ``connection`` keyword (the default connection when not given). ``grace``: seconds an
    interrupted call waits for the cancelled work's clean-up (``LoopThread.run``)."""
    body: Any = afn

    @functools.wraps(afn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        conn = live(kwargs.pop("connection", None))  # type: ignore[arg-type]
        result: R = conn.run(body(*args, connection=conn, **kwargs), grace=grace)
        return result

    run.__name__ = run.__qualname__ = afn.__name__.removeprefix("a")
    run.__doc__ = doc
    return run
