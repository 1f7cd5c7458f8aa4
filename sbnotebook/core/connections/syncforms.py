"""The sync form of an async operation, written once: the async function holds the body and the
explicit keyword signature; its sync form runs it on the live connection's event loop. And
``with_arguments_of``: a function that reads another's arguments, with that one's signature.

``help()``, ``inspect.signature`` and IPython's keyword completion follow ``__wrapped__`` to the
async function's signature, and mypy sees the same parameters (a ``ParamSpec``)."""

from __future__ import annotations

import functools
import inspect
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


def with_arguments_of(
    operation: Callable[P, Any],
) -> Callable[[Callable[[dict[str, Any]], R]], Callable[P, R]]:
    """``read(arguments)``, taking ``operation``'s arguments (``arguments``: each by name, defaults
    filled in, refused as a call of ``operation`` would refuse them): its signature (help,
    ``inspect.signature``, type checkers) with ``read``'s name, documentation and return type."""
    signature = inspect.signature(operation)

    def decorate(read: Callable[[dict[str, Any]], R]) -> Callable[P, R]:
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            given = signature.bind(*args, **kwargs)
            given.apply_defaults()
            return read(given.arguments)

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(call, attribute, getattr(read, attribute))
        returns = inspect.signature(read).return_annotation
        call.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
        return call

    return decorate
