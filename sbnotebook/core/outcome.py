"""The one answer to "what happened to each message?".

Every operation that acts on messages (send, schedule, complete, abandon, dead-letter, defer,
renew, resubmit, discard, purge, process, the Spark write and settle) returns a :class:`Report`:
one :class:`Outcome` per message (message id, sequence number, outcome, error), the same summary
line, the same pandas view, and the same ``raise_for_failures()``.

Failures are always kept in full. Successes are kept up to ``max_details`` (then only counted),
so a million-message send does not hold a million objects. Counts are always complete: summaries,
``ok`` and totals come from them. Code that needs every outcome (which rows were confirmed) reads
``every()``, which refuses a Report that only counted some; the operations whose input is already
held per message (a LockedBatch's settlements, a copy-then-complete, a schedule) keep them all.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import SbError
from .renames import renamed

PROBLEMS = frozenset({"failed", "lock_lost", "duplicated", "not_found", "left"})
"""The outcomes that mean a message did not end up where it was asked to go (``Report.failures``)."""
MAX_DETAILS = 10_000
OUTCOME_COLUMNS = (
    "index",
    "message_id",
    "sequence_number",
    "outcome",
    "error",
    "condition",
    "tracking_id",
    "retryable",
    "attempts",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one message.

    ``outcome`` is a past-tense word: sent, scheduled, cancelled, completed, abandoned,
    dead_lettered, deferred, released, renewed, resubmitted, discarded, purged, skipped,
    already_settled; or a problem: failed, lock_lost, duplicated (copy sent, original not
    completed), not_found, left (asked to remove it, and it is still there: ``error`` says why)."""

    message_id: str | None
    sequence_number: int | None
    outcome: str
    error: str | None = None
    index: int | None = None  # position in the input, where the input was a list
    condition: str | None = None
    tracking_id: str | None = None
    retryable: bool | None = None
    attempts: int | None = None

    @property
    def ok(self) -> bool:
        return self.outcome not in PROBLEMS


@dataclass
class Report:
    """Per-message outcomes of one operation, with a one-line summary (its repr)."""

    operation: str  # send, complete, resubmit, purge, ...
    entity: str
    target: str | None = None
    elapsed: float = 0.0
    retries: int = 0
    notes: list[str] = field(default_factory=list)  # degraded paths taken, and why
    # Work that failed although every message was settled as asked (a handler that raised or returned
    # nonsense): each makes ``ok`` False and shows in the summary, so a settled message never reads as done.
    errors: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)  # operation-specific figures (operations, peak in flight)
    # One operation over many entities (a glob copy): each entity's own Report, merged into this one.
    parts: list[Report] = field(default_factory=list)
    max_details: int = MAX_DETAILS
    # Told of every outcome as it is added, for work that must follow each message past the detail
    # limit (a resumable import's progress marker); None: nobody listens.
    listener: Callable[[Outcome], None] | None = field(default=None, repr=False, compare=False)
    _outcomes: list[Outcome] = field(default_factory=list, repr=False)
    _counts: Counter[str] = field(default_factory=Counter, repr=False)

    # ------------------------------------------------------------ building

    def add(self, outcome: Outcome) -> Outcome:
        self._counts[outcome.outcome] += 1
        if not outcome.ok or len(self._outcomes) < self.max_details:
            self._outcomes.append(outcome)
        if self.listener is not None:
            self.listener(outcome)
        return outcome

    def add_counted(self, outcome: str, n: int) -> None:
        """Count ``n`` successes whose details are not known here (e.g. summed from Spark tasks)."""
        if outcome in PROBLEMS:
            raise ValueError("problems are always kept in detail: add() them")
        self._counts[outcome] += n

    def extend(self, outcomes: Any) -> None:
        for o in outcomes:
            self.add(o)

    def note(self, text: str) -> None:
        """Record a degraded path (slower or partial) so the summary shows it."""
        if text not in self.notes:
            self.notes.append(text)

    def error(self, text: str) -> None:
        """Record work that failed for messages whose settlement went as planned (``ok`` turns False)."""
        if text not in self.errors:
            self.errors.append(text)

    def merge(self, other: Report) -> None:
        for o in other._outcomes:
            self.add(o)
        missing = other._counts - Counter(o.outcome for o in other._outcomes)
        self._counts.update(missing)  # counted but not kept in detail over there
        self.retries += other.retries
        for n in other.notes:
            self.note(n)
        for e in other.errors:
            self.error(e)

    # ------------------------------------------------------------- reading

    @property
    def outcomes(self) -> list[Outcome]:
        return list(self._outcomes)

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def count(self, outcome: str) -> int:
        return self._counts.get(outcome, 0)

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self._outcomes if not o.ok]

    @property
    def failed(self) -> int:
        return sum(n for k, n in self._counts.items() if k in PROBLEMS)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.errors

    @property
    def rate(self) -> float:
        """Messages per second over the whole operation."""
        return self.total / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def detailed(self) -> bool:
        """True when every outcome is kept (not only counted)."""
        return len(self._outcomes) == self.total

    def every(self) -> list[Outcome]:
        """Every outcome, for code that must see each one; raises when some were only counted (past
        ``max_details``), so a caller never mistakes part of the outcomes for all of them."""
        if not self.detailed:
            raise RuntimeError(
                f"this {self.operation} report keeps {len(self._outcomes)} of its {self.total} outcomes in"
                " detail (max_details); create it with a max_details that covers its input"
            )
        return list(self._outcomes)

    def __iter__(self) -> Iterator[Outcome]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return self.total

    def of(self, *, index: int | None = None, sequence_number: int | None = None) -> Outcome | None:
        """The outcome for an input position or a sequence number (None when not kept)."""
        for o in self._outcomes:
            if (index is not None and o.index == index) or (
                sequence_number is not None and o.sequence_number == sequence_number
            ):
                return o
        return None

    def tally(self) -> str:
        """``45 purged, 5 left``: each outcome's count, largest first ("" when there is none)."""
        return ", ".join(f"{n} {k.replace('_', '-')}" for k, n in sorted(self._counts.items(), key=lambda kv: -kv[1]))

    def summary(self) -> str:
        where = f"{self.entity} -> {self.target}" if self.target else self.entity
        # With errors and no outcome, the work could not be done: not "nothing to do"
        line = f"{self.operation} {where}: " + (self.tally() or ("nothing done" if self.errors else "nothing to do"))
        line += f" of {self.total} in {self.elapsed:.2f} s"
        if self.retries:
            line += f", {self.retries} retries"
        if self.errors:
            line += " [ERRORS: " + "; ".join(self.errors) + "]"
        if self.parts:
            line += f" ({len(self.parts)} entities)"
        if self.notes:
            line += " [" + "; ".join(self.notes) + "]"
        return line

    def lines(self) -> list[str]:
        """The summary, then a line per entity when it covers many (``parts``)."""
        return [self.summary(), *(f"  {p.summary()}" for p in self.parts)]

    def __repr__(self) -> str:
        return f"<Report {self.summary()}>"

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_pandas(self) -> Any:
        """One row per kept outcome, in the columns of ``OUTCOME_COLUMNS``."""
        import pandas as pd

        frame = pd.DataFrame([asdict(o) for o in self._outcomes], columns=list(OUTCOME_COLUMNS))
        for col in ("index", "sequence_number", "attempts"):
            frame[col] = frame[col].astype("Int64")
        return frame

    def _repr_html_(self) -> str:
        head = "<br>".join(html.escape(line) for line in self.lines())
        head = f"<p>{head}</p>"
        failures = self.failures
        if not failures:
            return head
        import pandas as pd

        rows = pd.DataFrame([asdict(o) for o in failures[:50]], columns=list(OUTCOME_COLUMNS))
        return head + rows.to_html(index=False, notebook=True)

    def raise_for_failures(self) -> Report:
        """Raise an SbError naming the first failure when any message failed; else return self."""
        failures = self.failures
        if self.errors and not (failures or self.failed):
            raise SbError(f"{self.operation} {self.entity}: " + "; ".join(self.errors))
        if failures or self.failed:
            first = failures[0] if failures else None
            raise SbError(
                f"{self.failed} of {self.total} messages failed ({self.operation} {self.entity})"
                + (f"; first: {first.error}" if first and first.error else ""),
                tracking_id=first.tracking_id if first else None,
                condition=first.condition if first else None,
                retryable=bool(first.retryable) if first else False,
            )
        return self


# The old keyword (docs/names.md), kept for one release: it says once what replaced it.
Report.__init__ = renamed(detail_limit="max_details")(Report.__init__)  # type: ignore[method-assign]
