"""Old names kept for one release: each still works, and says once per process what replaced it.

docs/names.md is the table of the names (one per idea, the same words in magics, ``core``, Spark
options and settings) and of the old names kept until ``REMOVED_IN``; tests/project/test_names.py checks it
against the code. A ``FutureWarning``, not a ``DeprecationWarning``: Python shows it to the person
running a notebook or a job, who is the one who has to change the name (a DeprecationWarning is
hidden outside ``__main__``).
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

REMOVED_IN = "0.3.0"
P = ParamSpec("P")
R = TypeVar("R")

WARNED: set[str] = set()  # the old names said in this process: each is said once
_lock = threading.Lock()


def deprecated(old: str, new: str, *, stacklevel: int = 2) -> None:
    """Say once per process that ``old`` is now ``new`` (one line: the old name, the new one, when the
    old one goes)."""
    with _lock:
        if old in WARNED:
            return
        WARNED.add(old)
    warnings.warn(
        f"{old} is deprecated: use {new} ({old} goes in sbnotebook {REMOVED_IN}; docs/names.md)",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )


def no_effect(old: str, why: str, *, stacklevel: int = 2) -> None:
    """Say once per process that ``old`` is still accepted but does nothing now, and why."""
    with _lock:
        if old in WARNED:
            return
        WARNED.add(old)
    warnings.warn(
        f"{old} has no effect: {why} ({old} goes in sbnotebook {REMOVED_IN})", FutureWarning, stacklevel=stacklevel + 1
    )


def typed_as(fn: Callable[..., Any]) -> str:
    """How a user types the function (or the class, for its ``__init__``): ``core.peek``,
    ``sbspark.settle``, ``TriagePanel``, ``Emulator``."""
    name = fn.__qualname__.removesuffix(".__init__")
    if fn.__module__.startswith("sbnotebook.core"):
        return f"core.{name}"
    if fn.__module__.startswith("sbnotebook.spark"):
        return f"sbspark.{name}"
    return name


Adjust = Callable[[dict[str, Any], str], None]
"""Turns a call's old keywords into the new ones in place, saying each under ``where`` (how the user
typed the function). A function made from another (syncforms.py) applies the other's
``__adjusts__`` in its caller's frame, under its own name."""


def _adjusting(fn: Callable[P, R], adjust: Adjust, renamed: dict[str, str]) -> Callable[P, R]:
    """``fn`` with its keywords adjusted first; a coroutine function stays one. The adjustment is
    kept (``__adjusts__``, outermost first) and the old names it takes (``__renamed__``, read by
    tests/project/test_names.py); the signature shown (help, ``inspect.signature``) is ``fn``'s."""
    where = typed_as(fn)
    call: Any
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Any:
            adjust(kwargs, where)
            return await fn(*args, **kwargs)

    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            adjust(kwargs, where)
            return fn(*args, **kwargs)

    call.__adjusts__ = (adjust, *getattr(fn, "__adjusts__", ()))
    call.__renamed__ = {**getattr(fn, "__renamed__", {}), **renamed}
    return cast(Callable[P, R], call)


def renamed(**old_to_new: str | tuple[str, Callable[[Any], Any]]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function's keywords renamed: ``@renamed(count="max_messages")`` takes ``count=`` as
    ``max_messages=`` with a warning, and refuses both at once. A new name that says the opposite
    takes the old value turned: ``@renamed(batch=("one_per_send", operator.not_))``. The signature
    shown (help, ``inspect.signature``) is the new one; a coroutine function stays one. A class's
    ``__init__`` can be renamed so too (``Cls.__init__ = renamed(...)(Cls.__init__)``)."""
    turns = {old: (new, None) if isinstance(new, str) else new for old, new in old_to_new.items()}

    def moved(kwargs: dict[str, Any], where: str) -> None:
        for old, (new, turn) in turns.items():
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{where}() takes {new}= (not also {old}=, its old name)")
                value = kwargs.pop(old)
                kwargs[new] = value if turn is None else turn(value)
                # A turned value is said as it now reads: batch=False is one_per_send=True.
                said = f"{new}=" if turn is None else f"{new}={kwargs[new]!r}"
                deprecated(f"{where}({old}=)", f"{where}({said})", stacklevel=3)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _adjusting(fn, moved, {old: new for old, (new, _) in turns.items()})

    return decorate


def gathered(
    **new_to_old: tuple[tuple[str, ...], Callable[..., Any], type | None],
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Keywords gathered into one value: ``@gathered(brake=(("stop_if_dead_letters", ...), brake_of,
    None))`` takes each old keyword with a warning and passes ``brake=brake_of(brake, **the old ones
    given)``. The third: the type of the new keyword's own old form (``canary=20``, an ``int``), said
    with a warning and turned by the fold too. An old keyword beside a new value is refused. The
    signature shown is the new one."""

    def gather(kwargs: dict[str, Any], where: str) -> None:
        for new, (olds, fold, old_form) in new_to_old.items():
            given = {old: kwargs.pop(old) for old in olds if old in kwargs}
            value = kwargs.get(new)
            was_old = old_form is not None and isinstance(value, old_form) and not isinstance(value, bool)
            if given and value is not None and not was_old:
                raise TypeError(f"{where}() takes {new}= (not also {', '.join(given)}=, the old form)")
            for old in given:
                deprecated(f"{where}({old}=)", f"{where}({new}={new.title()}(...))", stacklevel=3)
            if was_old:
                deprecated(f"{where}({new}=N)", f"{where}({new}={new.title()}(N))", stacklevel=3)
            if given or was_old:
                kwargs[new] = fold(value, **given)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _adjusting(fn, gather, {o: new for new, (olds, *_) in new_to_old.items() for o in olds})

    return decorate
