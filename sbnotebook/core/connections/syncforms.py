"""Functions made from an operation, so that its signature is written once, on its own ``def``.

``copy = sync_form(acopy)``: ``acopy`` run to its end from the calling thread (a notebook cell), on
the connection its ``connection`` keyword names; named ``copy`` (``acopy`` less its ``a``), with
``acopy``'s signature and docstring (help(), ``inspect.signature`` and IPython's completion follow
``__wrapped__``; mypy follows the ``ParamSpec``). ``copy_record = taking_arguments_of(acopy,
_copy_record)``: a function with ``acopy``'s signature whose body, ``_copy_record`` (its name less the
``_``, its docstring), reads the arguments by name with their defaults filled in.

Either takes the operation's old keywords (``renames.py``) in the caller's thread and says them
under its own name (``core.copy(limit=)``, not ``core.acopy(limit=)``). The API reference reads the
source without importing it: tools/griffe_forms.py gives either assignment its operation's
parameters there.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from ..renames import typed_as
from .registry import live

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

ASYNC_PREFIX = "a"  # acopy is copy's async form: one letter, as Python's own aiter/anext


def _named(fn: Callable[..., Any], name: str) -> None:
    fn.__name__ = fn.__qualname__ = name  # a module's function (typed_as and help() read these)


def sync_form(afn: Callable[P, Coroutine[Any, Any, R]], *, grace: float = 0.0) -> Callable[P, R]:
    """``afn`` run to its end from the calling thread, on the connection named by its ``connection``
    keyword (the default connection when not given). ``grace``: seconds an interrupted call waits for
    the cancelled work's clean-up (``LoopThread.run``)."""
    if not afn.__name__.startswith(ASYNC_PREFIX):
        raise TypeError(f"{afn.__qualname__}: an async operation's name starts with {ASYNC_PREFIX!r} (acopy, copy)")
    body: Any = afn
    adjusts = getattr(afn, "__adjusts__", ())  # its old keywords (renames.py)

    @functools.wraps(afn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        for adjust in adjusts:  # here: a warning names the caller's line
            adjust(kwargs, where)
        conn = live(kwargs.pop("connection", None))  # type: ignore[arg-type]
        result: R = conn.run(body(*args, connection=conn, **kwargs), grace=grace)
        return result

    _named(run, afn.__name__.removeprefix(ASYNC_PREFIX))
    where = typed_as(run)
    return run


def taking_arguments_of(operation: Callable[P, Any], body: Callable[[dict[str, Any]], T]) -> Callable[P, T]:
    """A function with ``operation``'s signature that calls ``body`` with the arguments by name, the
    defaults filled in; named and documented by ``body`` (``_copy_record`` makes ``copy_record``)."""
    signature = inspect.signature(operation)
    adjusts = getattr(operation, "__adjusts__", ())

    @functools.wraps(body)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        for adjust in adjusts:
            adjust(kwargs, where)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(bound.arguments)

    _named(call, body.__name__.removeprefix("_"))
    call.__signature__ = signature  # type: ignore[attr-defined]
    if hasattr(operation, "__renamed__"):  # the old keywords it takes (tests/project/surface.py reads them)
        call.__renamed__ = operation.__renamed__  # type: ignore[attr-defined]
    where = typed_as(call)
    return call
