"""Old names of the emulator's Python API, kept for one release: each still works and says once per
process (a ``FutureWarning``, one line) what replaced it. The same words as ``sbnotebook.core.renames``
(docs/names.md lists both), kept here because this package imports nothing from the rest of
sbnotebook. A duration's old name took seconds; its new one says its unit (``latency_ms``), so the
value is converted as it moves."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

REMOVED_IN = "0.3.0"
F = TypeVar("F", bound=Callable[..., Any])

WARNED: set[str] = set()  # the old names said in this process: each is said once
_lock = threading.Lock()


def deprecated(old: str, new: str, *, stacklevel: int = 2) -> None:
    """Say once per process that ``old`` is now ``new``."""
    with _lock:
        if old in WARNED:
            return
        WARNED.add(old)
    warnings.warn(
        f"{old} is deprecated: use {new} ({old} goes in sbnotebook {REMOVED_IN}; docs/names.md)",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )


def renamed(where: str, **old_to_new: tuple[str, float]) -> Callable[[F], F]:
    """Keywords renamed, each with the factor its value is multiplied by on the way (1000: seconds to
    milliseconds): ``@renamed("Emulator", latency=("latency_ms", 1000.0))``. Both at once is refused."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, (new, factor) in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{where}() takes {new}= (not also {old}=, its old name)")
                    deprecated(f"{where}({old}=)", f"{where}({new}=)", stacklevel=2)
                    kwargs[new] = kwargs.pop(old) * factor
            return fn(*args, **kwargs)

        call.__renamed__ = {old: new for old, (new, _) in old_to_new.items()}  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate
