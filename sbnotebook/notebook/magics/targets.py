"""Reading the entity and sequence-number arguments the commands share.

An entity argument is ``ENTITY`` (the default connection's) or ``NAME:ENTITY`` (the connection
``%sb_connect --as NAME`` named): :func:`address` is the one place that reads it (the prefix with
``core.split_address``, the rest with ``EntityPath``). Every command's ``ENTITY`` goes through
:func:`bound_entity`, so its ``self.conn()`` is the named connection while it runs."""

from __future__ import annotations

import argparse
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
    self.bound = conn
    try:
        yield
    finally:
        self.bound = None


def with_dlq(entity: str, dlq: bool) -> EntityPath:
    """The command's entity, parsed once (the command passes the path on): with ``--dlq``, its
    dead-letter queue."""
    path = EntityPath.parse(entity)
    return path.dead_letter if dlq else path


def sequence_numbers(text: str, option: str = "--deferred") -> list[int]:
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
