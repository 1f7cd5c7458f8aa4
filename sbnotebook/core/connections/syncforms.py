"""The sync form of an async operation, and a function that takes another's arguments: each a
``def`` with its own signature and docstring, which help(), IPython's completion and the API
reference (read from the source, without importing it) all show.

``@sync_form(aoperation)`` on a ``def`` whose body never runs: the ``def`` declares the sync form
(name, signature, docstring), the async function holds the body. ``@arguments_of(operation)`` on a
``def`` that takes ``operation``'s arguments. Either checks, as the module loads, that the
signature is the operation's (mypy checks the types too, through the ``ParamSpec``): the two
cannot drift apart."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from .registry import live

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def check_same_parameters(declared: Callable[..., Any], operation: Callable[..., Any]) -> None:
    """Raise ``TypeError`` unless ``declared`` takes exactly ``operation``'s parameters: names,
    kinds, defaults and annotations (``inspect.signature``, which follows ``__wrapped__``)."""
    mine, theirs = inspect.signature(declared).parameters, inspect.signature(operation).parameters
    if list(mine.values()) != list(theirs.values()):
        differ = [n for n in dict.fromkeys([*mine, *theirs]) if mine.get(n) != theirs.get(n)]
        raise TypeError(
            f"{declared.__qualname__} must take {operation.__qualname__}'s parameters; they differ at "
            + ", ".join(f"{n} ({mine.get(n)} here, {theirs.get(n)} there)" for n in differ)
        )


def sync_form(
    afn: Callable[P, Coroutine[Any, Any, R]], *, grace: float = 0.0
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """The decorated ``def`` becomes ``afn`` run to its end from the calling thread (a notebook
    cell), on the connection named by its ``connection`` keyword (the default connection when not
    given). The ``def`` gives the name, signature (``afn``'s, checked) and docstring; its body never
    runs. ``grace``: seconds an interrupted call waits for the cancelled work's clean-up
    (``LoopThread.run``)."""

    def decorate(declared: Callable[P, R]) -> Callable[P, R]:
        check_same_parameters(declared, afn)
        body: Any = afn

        @functools.wraps(declared)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            conn = live(kwargs.pop("connection", None))  # type: ignore[arg-type]
            result: R = conn.run(body(*args, connection=conn, **kwargs), grace=grace)
            return result

        # The sync form stands for its async operation (help() and inspect.signature follow it).
        run.__wrapped__ = afn  # type: ignore[assignment]
        return run

    return decorate


def arguments_of(operation: Callable[P, Any]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """The decorated ``def`` takes ``operation``'s arguments: checked, and returned as it is."""

    def decorate(fn: Callable[P, T]) -> Callable[P, T]:
        check_same_parameters(fn, operation)
        return fn

    return decorate
