"""Reading the entity and sequence-number arguments the commands share.

An entity argument is ``ENTITY`` (the default connection's) or ``NAME:ENTITY`` (the connection
``%sb_connect --as NAME`` named): :func:`address` is the one place that reads it (the prefix with
``core.split_address``, the rest with ``EntityPath``). Every command's ``ENTITY`` goes through
:func:`bound_entity`, so its ``self.conn()`` is the named connection while it runs."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ... import core
from ...core import EntityPath, LiveConnection, SbError
from ..addresses import resolve

if TYPE_CHECKING:
    from .state import MagicsState


def address(self: MagicsState, text: str) -> tuple[str, LiveConnection]:
    """``ENTITY`` or ``NAME:ENTITY`` as (the entity, the live connection it belongs to). An unknown
    name or a colon in the wrong place fails in one line."""
    return resolve(text, self.conn, self.named)


@contextmanager
def bound_entity(self: MagicsState, args: argparse.Namespace) -> Iterator[None]:
    """While a command runs: its ``NAME:ENTITY`` argument becomes ENTITY (``args.address`` keeps what
    was typed), and ``self.conn()`` that name's connection (every command and the panels it opens
    pass ``self.conn()`` on)."""
    entity = getattr(args, "entity", None)
    if not isinstance(entity, str) or ":" not in entity:
        if isinstance(entity, str):
            args.address = entity
        yield
        return
    args.address = entity  # as typed: panels show it (and resolve what is typed into them later)
    args.entity, conn = address(self, entity)
    self.bound, self.bound_name = conn, core.split_address(entity)[0]
    try:
        yield
    finally:
        self.bound, self.bound_name = None, None


def shown(self: MagicsState, entity: object) -> str:
    """An entity as the command's lines name it: ``NAME:ENTITY`` while a command on a named
    connection runs (``orders`` alone would read as the default connection's), else as it is."""
    text = str(entity)
    return f"{self.bound_name}:{text}" if self.bound_name and ":" not in text else text


def batch_address(self: MagicsState, batch: core.LockedBatch) -> str:
    """A batch's entity as %sb_settle's lines name it: ``NAME:ENTITY`` for a batch received on a named
    connection (``%sb_receive prod:orders``), else ``ENTITY``."""
    if batch.connection is not self.connection:
        for name, conn in sorted(self.connections.items()):
            if conn is batch.connection:
                return f"{name}:{batch.entity}"
    return batch.entity


def label_report(self: MagicsState, report: core.Report) -> None:
    """A Report of a command on a named connection names NAME:ENTITY (and NAME:TARGET)."""
    if self.bound_name:
        report.entity = shown(self, report.entity)
        report.target = shown(self, report.target) if report.target else report.target


def relabel(self: MagicsState, text: str, entity: str) -> str:
    """``text`` (a line from core) with ``entity`` named ``NAME:ENTITY`` while a command on a named
    connection runs."""
    return named_in(text, self.bound_name, entity) if self.bound_name else text


def named_in(text: str, name: str, entity: str) -> str:
    """``text`` with each mention of ``entity``'s queue or topic (alone, quoted, or with its
    subscription or dead-letter path) as ``name:ENTITY``."""
    try:
        base = EntityPath.parse(entity).name
    except SbError:
        return text
    pattern = re.compile(rf"(?<![\w:/$.-]){re.escape(base)}(?![\w.-])")
    return pattern.sub(lambda m: f"{name}:{m.group(0)}", text)


def with_dlq(entity: str, dlq: bool) -> EntityPath:
    """The command's entity, parsed once (the command passes the path on): with ``--dlq``, its
    dead-letter queue."""
    path = EntityPath.parse(entity)
    return path.dead_letter if dlq else path


def sequence_numbers(text: str, option: str = "--sequence-numbers") -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"{option} takes sequence numbers such as 41,42, not {text!r}.") from None


def check_exists(entity: str, connection: LiveConnection) -> None:
    """A misspelled entity fails now, in one line (not at the first send). Other admin errors (no
    Manage right) are left to the send itself."""
    try:
        core.counts(str(EntityPath.parse(entity).parent), connection=connection)
    except core.EntityNotFoundError:
        raise
    except SbError:
        return
