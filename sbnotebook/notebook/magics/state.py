"""What a command family needs from the magics object, so the family modules type ``self`` without
importing the ``SbMagics`` class that registers them (no import circle)."""

from __future__ import annotations

import datetime as dt
from abc import abstractmethod
from typing import Any, NoReturn, Protocol

from ... import core
from ...core import LiveConnection, LockedBatch
from .sdklogs import SdkLogSummary
from .settings import MagicsSettings


class NameCache(Protocol):
    """What commands tell Tab completion (completion.Completer; named here, not imported: no circle)."""

    def names_of(self, conn: LiveConnection) -> Any: ...


class MagicsState(MagicsSettings):
    """The settings (inherited, declared once in settings.py) and shared state of ``SbMagics``
    (sbmagics.py) that commands read and change. ``SbMagics`` derives from it.

    A base class, not a Protocol: a Protocol cannot inherit the settings' traits (its bases must be
    protocols), so it would have to repeat each setting. The state below is only declared here
    (``SbMagics.__init__`` sets it); the methods are abstract, so mypy still checks that ``SbMagics``
    has each of them, with a signature that fits."""

    shell: Any
    connection: LiveConnection | None  # from %sb_connect; every command and panel uses it
    connections: dict[str, LiveConnection]  # from %sb_connect --as NAME: NAME:ENTITY
    bound: LiveConnection | None  # a command's NAME:ENTITY connection, while it runs
    bound_name: str | None  # ... and that NAME (its lines say NAME:ENTITY)
    completer: NameCache | None  # Tab completion, once %load_ext installed it
    connect_failed: str | None  # why the last %sb_connect failed: commands fail until one works
    batches: list[LockedBatch]
    samples: dict[str, list[tuple[dt.datetime, core.EntityCounts]]]
    sdk_logs: SdkLogSummary

    @abstractmethod
    def conn(self) -> LiveConnection: ...

    @abstractmethod
    def named(self, name: str) -> LiveConnection: ...

    @abstractmethod
    def ask(self, question: str, expected: str) -> None: ...

    @abstractmethod
    def batch(self, name: str | None) -> LockedBatch: ...

    @abstractmethod
    def fail(self, exc: BaseException) -> NoReturn: ...
