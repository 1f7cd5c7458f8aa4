"""What a ``where`` could not evaluate, said rather than hidden.

A search (``compile_where``) or a caller's function is run per message. A message it raises on (a
number compared with the string ``"n/a"``, ``len()`` of a number) is not a match, and is counted,
grouped by the error, with the first such message's sequence number: every command that takes a
``where`` says how many could not be evaluated, and the core results carry the same counts
(``PeekPage.unevaluated``, a Report's ``stats["unevaluated"]``). An expression that raised on every
message it was run on is a mistake, not an empty answer: ``check()`` raises :class:`WhereFailed`,
naming the error and an example message, so the cell fails and nothing is acted on.

A field a message does not have is not an error (search.py's "missing": comparisons are false).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError, SbError

Record = dict[str, Any]
MAX_KINDS = 10  # distinct errors kept apart; the rest are counted together
OTHER = "other errors"
EXAMPLE_LENGTH = 120  # characters of the example message's body shown


class WhereFailed(InvalidInputError):
    """The ``where`` raised on every message it was run on: nothing matched because nothing could be
    evaluated (a mistake in the expression, not an empty answer)."""


class NotAMatch(SbError, TypeError):
    """Raised by search.py's "missing" where raising is its way of not matching (iterating a field
    the message does not have): a non-match, not an error to count."""


@dataclass
class Unevaluated:
    """One kind of error: how many messages raised it, and the first of them."""

    count: int
    sequence_number: int | None
    example: str


def _example(record: Record) -> str:
    body = record.get("body_text")
    text = body if isinstance(body, str) else repr(record.get("body"))
    text = " ".join(text.split())
    return text if len(text) <= EXAMPLE_LENGTH else text[: EXAMPLE_LENGTH - 1] + "…"


class Where:
    """A ``where`` that counts what it could not evaluate. Called like the predicate it wraps."""

    def __init__(
        self,
        test: Callable[[Record], bool],
        text: str | None = None,
        on_names: Callable[[Record, Mapping[str, Any]], bool] | None = None,
    ) -> None:
        self.test = test
        self.text = text  # the expression as typed (None: a function)
        # A search's own test of a record's names built already (search.namespace): several searches
        # over one message (a playbook's rules) build them once, not once each.
        self.on_names = on_names
        self.evaluated = 0
        self.matched = 0
        self.errors: dict[str, Unevaluated] = {}

    def __call__(self, record: Record, names: Mapping[str, Any] | None = None) -> bool:
        """Whether ``record`` matches. ``names``: its search names, built already (``namespace(record,
        signature=True)``); used by a search, ignored by a function."""
        self.evaluated += 1
        try:
            ok = bool(self.test(record) if names is None or self.on_names is None else self.on_names(record, names))
        except (SbError, NotAMatch):
            raise
        except Exception as exc:
            self._count(exc, record)
            return False
        self.matched += ok
        return ok

    def probe(self, record: Record) -> None:
        """Run on ``record`` without counting: a misspelt name fails now (``InvalidInputError``), not at
        the first message (a tail's may come in an hour); anything else it raises is the record's."""
        try:
            self.test(record)
        except SbError:
            raise
        except Exception:  # an empty record raises where a message would not: not a mistake
            pass

    def _count(self, exc: Exception, record: Record) -> None:
        kind = f"{type(exc).__name__}: {exc}"
        if kind not in self.errors and len(self.errors) >= MAX_KINDS:
            kind = OTHER
        found = self.errors.get(kind)
        if found is None:
            seq = record.get("sequence_number")
            self.errors[kind] = Unevaluated(1, int(seq) if seq is not None else None, _example(record))
        else:
            found.count += 1

    @property
    def unevaluated(self) -> int:
        """Messages the ``where`` raised on (a message run on twice counts twice)."""
        return sum(u.count for u in self.errors.values())

    def by_error(self) -> dict[str, int]:
        """How many messages raised each error, the most common first."""
        return dict(sorted(((k, u.count) for k, u in self.errors.items()), key=lambda kv: -kv[1]))

    @property
    def failed_everywhere(self) -> bool:
        return self.evaluated > 0 and self.matched == 0 and self.unevaluated == self.evaluated

    def name(self) -> str:
        return repr(self.text) if self.text is not None else "the where function"

    def check(self) -> None:
        """Raise :class:`WhereFailed` when the ``where`` raised on every message it was run on."""
        if not self.failed_everywhere:
            return
        kind, first = next(iter(sorted(self.errors.items(), key=lambda kv: -kv[1].count)))
        raise WhereFailed(
            f"The search {self.name()} could not be evaluated on any of the {self.evaluated} message(s) it was "
            f"run on: {kind} (for example sequence number {first.sequence_number}: {first.example}). "
            "Nothing matched, so nothing was done."
        )

    def describe(self) -> str | None:
        """``3 message(s) could not be evaluated by ...: 2 TypeError: ... (first: sequence number 7); ...``,
        or None when every message was evaluated."""
        if not self.errors:
            return None
        parts = [
            f"{u.count} {kind} (first: sequence number {u.sequence_number})"
            for kind, u in sorted(self.errors.items(), key=lambda kv: -kv[1].count)
        ]
        return f"{self.unevaluated} message(s) could not be evaluated by {self.name()}: " + "; ".join(parts)

    def stats(self) -> dict[str, Any]:
        """The counts a Report carries (its ``stats``): unevaluated, and by error."""
        return {"unevaluated": self.unevaluated, "unevaluated_by_error": self.by_error()}
