"""What a purge or a cancel-scheduled will remove, counted first (for the confirmation), then done
with the core (``core.purge``, ``core.cancel_scheduled``). Shared by %sb_purge, %sb_cancel_scheduled
and the purge panel; nothing here imports IPython or ipywidgets.

The counts come from the administration API, which needs the Manage right. A key without it (an
application's Listen and Send key) is refused there (Unauthorized) although it may purge: then the
entity is counted by peeking (``core.scan``), which the confirmation and each Report say, and the
refusal is logged once. A session-enabled entity is the exception: Service Bus peeks it only session
by session and does not list sessions holding nothing but deferred or scheduled messages, so neither
the count before nor the check of what a purge leaves (``core.purge`` asks the administration API
there) can be done without Manage; its purge is refused before anything is removed, unless its
sessions are named (each is then counted by peeking through its lock, before and after)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import core
from ..core import (
    ConfigurationError,
    EntityPath,
    InvalidInputError,
    LiveConnection,
    Report,
    SbError,
    TimeWindow,
    is_unauthorized,
    requires_sessions,
)
from .cells import parse_numbers

log = logging.getLogger("sbnotebook.notebook.purging")

KINDS = ("active", "deferred", "scheduled", "dlq")
SESSIONS_LIMIT = 1_000_000  # every session: a purge goes through all of them
OWN = ("active", "deferred", "scheduled")  # the kinds an entity holds itself (not its DLQ)
# What a peek sees and what it may see that a purge does not remove (Service Bus's "message browsing"):
# said in the confirmation whenever the count came from peeking.
BY_PEEK = (
    "Counted by peeking: the key has no 'Manage' right, so the administration API refused its counts. A peek"
    " also sees messages another receiver holds locked (the purge cannot remove those: it reports them left)"
    " and may see expired ones Service Bus has not yet removed (it drops or dead-letters those: not purged)"
)
BY_PEEK_NOTE = "counted before the purge by peeking: the key has no 'Manage' right (administration API refused)"


@dataclass
class PurgePlan:
    """The kinds of messages to remove from one queue or subscription, and how many there are."""

    entity: str  # the queue or subscription (never its DLQ: "dlq" is a kind)
    kinds: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)  # sessions another receiver holds: not counted, not purged
    sessions: tuple[str, ...] | None = None  # only these sessions (session-enabled entities)
    by_peek: bool = False  # counted by peeking: the administration API refused the key (no Manage)
    window: TimeWindow | None = None  # only messages enqueued within it (counted by peeking its numbers)
    active_total: dict[str, int | None] = field(default_factory=dict)  # active messages in all, per entity

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
        if self.by_peek:
            text += f". {BY_PEEK}"
        if self.window is not None:
            text += f". {self.window_path()}"
        return text + "."

    def window_path(self) -> str:
        """Which way a windowed purge takes, and what that costs (core/incidents/purge/window.py)."""
        w = self.window
        assert w is not None
        text = f"Only messages {w.describe()}, counted by peeking the window's sequence numbers (found by a search)"
        if not {"active", "dlq"} & set(self.kinds):
            return text
        if w.after is None:
            return text + (
                ". Active ones are deleted on the server (batch delete, with the window's end as its cut-off):"
                " none received or locked"
            )
        totals = [n for n in self.active_total.values() if n is not None]
        inside = sum(self.counts.get(k, 0) for k in ("active", "dlq"))
        others = f"up to {max(sum(totals) - inside, 0)}" if totals else "the"
        return text + (
            ". Batch delete cannot select by a start time, so active ones are received with a peek-lock and"
            f" completed: {others} other active message(s) before the window's end are locked while the purge"
            " passes them and given back (released: their delivery count is not raised), a receive of each"
        )

    def run(self, progress: Callable[[Report], None] | None = None, *, connection: LiveConnection) -> list[Report]:
        """One Report per entity purged: the entity itself, then its dead-letter queue (each only
        when the count found something to remove there)."""
        reports = []
        own = {k for k in ("active", "deferred", "scheduled") if k in self.kinds and self.counts.get(k, 1)}
        if own:
            reports.append(
                core.purge(
                    self.entity,
                    active="active" in own,
                    deferred="deferred" in own,
                    scheduled="scheduled" in own,
                    session_ids=self.sessions,
                    progress=progress,
                    connection=connection,
                    **self._within(),
                )
            )
        if "dlq" in self.kinds and self.counts.get("dlq", 1):
            dlq = str(EntityPath.parse(self.entity).dead_letter)
            reports.append(core.purge(dlq, progress=progress, connection=connection, **self._within()))
        if self.by_peek:
            for report in reports:
                report.note(BY_PEEK_NOTE)
        return reports

    def _within(self) -> dict[str, Any]:
        w = self.window
        return {} if w is None else {"enqueued_after": w.after, "enqueued_before": w.before}


def plan_purge(
    entity: str,
    kinds: tuple[str, ...],
    *,
    sessions: tuple[str, ...] | None = None,
    connection: LiveConnection,
    window: TimeWindow | None = None,
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
    if window is not None:
        if sessions is not None:
            raise InvalidInputError("A purge of named sessions takes them whole: give --session-ids or a window.")
        return _plan_window(path, kinds, window, connection)
    try:
        counts = core.counts(str(path), connection=connection)
    except SbError as exc:
        if not is_unauthorized(exc):
            raise
        log.info("purge of %s: counting by peeking instead: %s", path, exc)
        return _plan_by_peek(path, kinds, connection)
    deferred = 0
    held: list[str] = []
    if {"active", "deferred", "scheduled"} & set(kinds):  # on a session entity this also finds held sessions
        deferred, held = _deferred(path, connection)
    found = {"active": counts.active - deferred, "deferred": deferred, "scheduled": counts.scheduled}
    found["dlq"] = counts.dead_letter
    ordered = tuple(k for k in KINDS if k in kinds)
    return PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, held)


def _plan_window(path: EntityPath, kinds: tuple[str, ...], window: TimeWindow, connection: LiveConnection) -> PurgePlan:
    """What a purge of ``window`` removes, counted by peeking only the window's sequence numbers."""
    ordered = tuple(k for k in KINDS if k in kinds)
    found: Counter[str] = Counter()
    if set(OWN) & set(kinds):
        found.update(r["state"] for page in core.scan_window(str(path), window, connection=connection) for r in page)
    if "dlq" in kinds:
        found["dlq"] = sum(len(page) for page in core.scan_window(str(path.dead_letter), window, connection=connection))
    plan = PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, window=window)
    try:
        counts = core.counts(str(path), connection=connection)
    except SbError as exc:
        if not is_unauthorized(exc):
            raise
        return plan  # no Manage: the question says "the other" messages without a number
    plan.active_total = {
        "active": counts.active if "active" in kinds else 0,
        "dlq": counts.dead_letter if "dlq" in kinds else 0,
    }
    return plan


def _plan_sessions(
    path: EntityPath, kinds: tuple[str, ...], sessions: tuple[str, ...], connection: LiveConnection
) -> PurgePlan:
    """Named sessions, each scanned through its lock: Service Bus counts per entity, not per session."""
    if not sessions or not all(sessions):
        raise InvalidInputError("Name one or more sessions, such as --session-ids a,b.")
    if not _requires_sessions(path, connection):
        raise InvalidInputError(f"{path} does not require sessions: purge it without naming sessions.")

    seen = core.count_session_states(str(path), sessions, connection=connection)
    found = {kind: seen.total(kind) for kind in ("active", "deferred", "scheduled")}
    ordered = tuple(k for k in KINDS if k in kinds)
    return PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, seen.held, tuple(sessions))


def _requires_sessions(path: EntityPath, connection: LiveConnection) -> bool:
    """From the entity's properties, or, where the administration API refuses the key (no Manage),
    from one peek: Service Bus refuses a peek without a session on a session-enabled entity."""
    try:
        return bool(core.entity_properties(str(path), connection=connection).get("requires_session"))
    except SbError as exc:
        if not is_unauthorized(exc):
            raise
        log.info("purge of %s: asking a peek whether it requires sessions: %s", path, exc)
    try:
        core.peek_numbers(str(path), max_messages=1, connection=connection)
    except SbError as exc:
        if requires_sessions(exc):
            return True
        raise
    return False


def _plan_by_peek(path: EntityPath, kinds: tuple[str, ...], connection: LiveConnection) -> PurgePlan:
    """Count with the scanner what the administration API refused to count: the entity's own kinds
    in one scan (a peek sees every message in it: locked, deferred, scheduled), its DLQ in another."""
    ordered = tuple(k for k in KINDS if k in kinds)
    own = [k for k in OWN if k in kinds]
    found: Counter[str] = Counter()
    if own:
        try:
            found.update(r["state"] for page in core.scan(str(path), states=own, connection=connection) for r in page)
        except SbError as exc:
            if not requires_sessions(exc):
                raise
            raise ConfigurationError(
                f"Access refused ({path}): the administration API needs the 'Manage' right to count a session-enabled"
                " entity for a purge, and the key has none: Service Bus"
                " peeks such an entity only session by session and does not list sessions holding nothing but"
                " deferred or scheduled messages, so neither what a purge would remove nor what it leaves can be"
                " counted. Name the sessions to purge (--session-ids a,b: each is counted by peeking through its"
                " lock, before and after), or use a key with Manage. Nothing was removed."
            ) from None
    if "dlq" in kinds:
        found["dlq"] = len(core.sequence_numbers(str(path.dead_letter), connection=connection))
    return PurgePlan(str(path), ordered, {k: found[k] for k in ordered}, by_peek=True)


def _deferred(path: EntityPath, connection: LiveConnection) -> tuple[int, list[str]]:
    """How many messages are deferred (Service Bus counts them as active), and which sessions could
    not be looked at. A session-enabled entity is scanned session by session."""
    try:
        return len(core.sequence_numbers(str(path), states=["deferred"], connection=connection)), []
    except SbError as exc:
        if not requires_sessions(exc):
            raise

    listed = core.list_sessions(str(path), details=False, max_sessions=SESSIONS_LIMIT, connection=connection)
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
