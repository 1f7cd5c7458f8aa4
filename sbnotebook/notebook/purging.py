"""What a purge or a cancel-scheduled will remove, counted first (for the confirmation), then done
with the core (``core.purge``, ``core.cancel_scheduled``). Shared by %sb_purge, %sb_cancel_scheduled
and the purge panel; nothing here imports IPython or ipywidgets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import core
from ..core import (
    EntityPath,
    InvalidInputError,
    LiveConnection,
    Report,
    SbError,
    requires_sessions,
)
from .cells import parse_numbers

KINDS = ("active", "deferred", "scheduled", "dlq")
SESSIONS_LIMIT = 1_000_000  # every session: a purge goes through all of them


@dataclass
class PurgePlan:
    """The kinds of messages to remove from one queue or subscription, and how many there are."""

    entity: str  # the queue or subscription (never its DLQ: "dlq" is a kind)
    kinds: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)  # sessions another receiver holds: not counted, not purged
    sessions: tuple[str, ...] | None = None  # only these sessions (session-enabled entities)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        parts = [f"{self.counts[k]} {'dead-lettered' if k == 'dlq' else k}" for k in self.kinds]
        where = self.entity + (f" (session {', '.join(map(repr, self.sessions))})" if self.sessions else "")
        text = f"Purge {where}: {', '.join(parts)} message(s), {self.total} in all"
        if "active" in self.kinds and "deferred" not in self.kinds:
            text += " (deferred messages stay: add --deferred)"
        if self.held:
            names = ", ".join(repr(h) for h in self.held[:5]) + (", ..." if len(self.held) > 5 else "")
            # Named sessions are counted by scanning each: a held one not at all. Listed ones: the
            # entity's counts include their active messages, only their deferred ones are missing.
            missing = "what they hold is" if self.sessions else "their deferred messages are"
            text += (
                f". {len(self.held)} session(s) held by another receiver ({names}): the purge leaves them as"
                f" they are, and {missing} not counted"
            )
        return text + "."

    def run(self, progress: Callable[[Report], None] | None = None, *, connection: LiveConnection) -> list[Report]:
        """One Report per entity purged: the entity itself, then its dead-letter queue (each only
        when the count found something to remove there)."""
        reports = []
        own = {k for k in ("active", "deferred", "scheduled") if k in self.kinds and self.counts.get(k, 1)}
        if own:
            reports.append(
                core.purge(
                    self.entity,
                    include_active="active" in own,
                    include_deferred="deferred" in own,
                    include_scheduled="scheduled" in own,
                    session_ids=self.sessions,
                    progress=progress,
                    connection=connection,
                )
            )
        if "dlq" in self.kinds and self.counts.get("dlq", 1):
            dlq = str(EntityPath.parse(self.entity).dead_letter)
            reports.append(core.purge(dlq, progress=progress, connection=connection))
        return reports


def plan_purge(
    entity: str, kinds: tuple[str, ...], *, sessions: tuple[str, ...] | None = None, connection: LiveConnection
) -> PurgePlan:
    """Count what a purge of these kinds would remove: counts from the administration API, deferred
    messages by scanning (Service Bus counts them as active). With ``sessions``, only those sessions
    of a session-enabled entity, counted by scanning each."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise InvalidInputError(f"Purge kinds are {', '.join(KINDS)}; not {sorted(unknown) or 'none'}.")
    path = EntityPath.parse(entity)
    if sessions is not None:
        if path.sub_queue is not None or "dlq" in kinds:
            raise InvalidInputError("A dead-letter queue has no sessions: purge it without naming sessions.")
        return _plan_sessions(path, kinds, sessions, connection)
    if path.sub_queue is not None:
        path, kinds = path.parent, ("dlq",)
    counts = core.counts(str(path), connection=connection)
    deferred = 0
    held: list[str] = []
    if {"active", "deferred", "scheduled"} & set(kinds):  # on a session entity this also finds held sessions
        deferred, held = _deferred(path, connection)
    found = {"active": counts.active - deferred, "deferred": deferred, "scheduled": counts.scheduled}
    found["dlq"] = counts.dead_letter
    ordered = tuple(k for k in KINDS if k in kinds)
    return PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, held)


def _plan_sessions(
    path: EntityPath, kinds: tuple[str, ...], sessions: tuple[str, ...], connection: LiveConnection
) -> PurgePlan:
    """Named sessions, each scanned through its lock: Service Bus counts per entity, not per session."""
    if not sessions or not all(sessions):
        raise InvalidInputError("Name one or more sessions, such as --session-ids a,b.")
    if not core.entity_properties(str(path), connection=connection).get("requires_session"):
        raise InvalidInputError(f"{path} does not require sessions: purge it without naming sessions.")

    seen = core.count_session_states(str(path), sessions, connection=connection)
    found = {kind: seen.total(kind) for kind in ("active", "deferred", "scheduled")}
    ordered = tuple(k for k in KINDS if k in kinds)
    return PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, seen.held, tuple(sessions))


def _deferred(path: EntityPath, connection: LiveConnection) -> tuple[int, list[str]]:
    """How many messages are deferred (Service Bus counts them as active), and which sessions could
    not be looked at. A session-enabled entity is scanned session by session."""
    try:
        return len(core.sequence_numbers(str(path), states=["deferred"], connection=connection)), []
    except SbError as exc:
        if not requires_sessions(exc):
            raise

    listed = core.list_sessions(str(path), details=False, limit=SESSIONS_LIMIT, connection=connection)
    seen = core.count_session_states(str(path), [s.session_id for s in listed], connection=connection)
    return seen.total("deferred"), seen.held


def scheduled_to_cancel(entity: str, which: str, *, connection: LiveConnection) -> list[int]:
    """'all' (every scheduled message, found with the scanner) or sequence numbers and ranges
    such as 12,15-20."""
    if which.strip().lower() == "all":
        return core.sequence_numbers(entity, states=["scheduled"], connection=connection)
    numbers = parse_numbers(which, "sequence number", "'all' or 12,15-20")
    if not numbers:
        raise InvalidInputError("Say which scheduled messages: 'all' or sequence numbers such as 12,15-20.")
    return numbers
