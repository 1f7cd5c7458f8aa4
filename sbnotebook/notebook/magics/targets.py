"""Reading the entity and sequence-number arguments the commands share."""

from __future__ import annotations

from IPython.core.error import UsageError

from ... import core
from ...core import EntityPath, LiveConnection, SbError


def with_dlq(entity: str, dlq: bool) -> str:
    path = EntityPath.parse(entity)
    return str(EntityPath(path.name, path.subscription, "dead_letter")) if dlq else str(path)


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
