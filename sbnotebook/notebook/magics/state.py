"""What a command family needs from the magics object: a small protocol, so the family modules
type ``self`` without importing the ``SbMagics`` class that registers them (no import circle)."""

from __future__ import annotations

import datetime as dt
from typing import Any, NoReturn, Protocol

from ... import core
from ...core import LiveConnection, LockedBatch
from .sdklogs import SdkLogSummary


class NameCache(Protocol):
    """What commands tell Tab completion (completion.Completer; named here, not imported: no circle)."""

    def names_of(self, conn: LiveConnection) -> Any: ...


class MagicsState(Protocol):
    """The settings and shared state of ``SbMagics`` (sbmagics.py) that commands read and change."""

    peek_max_messages: int
    receive_max_messages: int
    max_in_flight: int
    wait_seconds: float
    max_renewal: float
    tail_interval: float
    full_tracebacks: bool
    confirm: bool
    websockets: bool
    grid: str
    shell: Any
    connection: LiveConnection | None
    connections: dict[str, LiveConnection]
    bound: LiveConnection | None
    bound_name: str | None
    completer: NameCache | None
    connect_failed: str | None
    batches: list[LockedBatch]
    samples: dict[str, list[tuple[dt.datetime, core.EntityCounts]]]
    sdk_logs: SdkLogSummary

    def conn(self) -> LiveConnection: ...

    def named(self, name: str) -> LiveConnection: ...

    def ask(self, question: str, expected: str) -> None: ...

    def batch(self, name: str | None) -> LockedBatch: ...

    def fail(self, exc: BaseException) -> NoReturn: ...
