"""Which rule handles a dead letter: the first whose ``when`` holds, once.

``when`` keys, each a test of the record (the one record schema): ``signature`` (the text ``%sb_dlq
--by signature`` shows, ``views/signatures.py``), ``reason``, ``description`` and ``subject`` are the
record's text or a glob of it (``*`` any text, ``?`` one character, everything else as it is:
signatures hold ``<NUM>`` and brackets); ``where`` is the search grammar of ``--where``;
``enqueued_after`` / ``enqueued_before`` the kit's one time grammar, taken once per plan or run (so
the plan and the run it leads to agree); ``properties`` equality, as ``props[NAME] == VALUE`` in a
search. A rule without ``when`` takes every message the rules above it left.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ...operations.window import enqueued_window
from ...views.search import MISSING, compile_where, namespace
from ...views.signatures import signature
from ...views.where import Where
from .schema import Rule

Record = dict[str, Any]
TEXT_FIELDS = {"reason": "dead_letter_reason", "description": "dead_letter_error_description", "subject": "subject"}


def glob(text: str) -> re.Pattern[str]:
    """``text`` as a whole-text pattern: ``*`` any text, ``?`` one character, the rest literal."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text), re.S)


class Seen:
    """A dead letter as the rules see it: its record, its signature and the names a search sees, each
    built once, when a rule first asks (four rules with a ``where`` parse the body once, not four times).
    Cached by hand: ``functools.cached_property`` takes a lock on every read in Python 3.11."""

    __slots__ = ("_names", "_signature", "record")

    def __init__(self, record: Record) -> None:
        self.record = record
        self._signature: Any = _UNSET  # None is a signature: a message without a reason
        self._names: dict[str, Any] | None = None

    @property
    def signature(self) -> str | None:
        if self._signature is _UNSET:
            self._signature = signature(self.record)
        return cast(str | None, self._signature)

    @property
    def names(self) -> dict[str, Any]:
        if self._names is None:
            self._names = namespace(self.record)
            self._names["signature"] = self.signature or MISSING
        return self._names


_UNSET = object()


@dataclass
class Selector:
    """One rule's ``when`` compiled: ``holds(record)``. ``where``: the search, kept to say what it
    could not evaluate (``Where.check`` / ``stats``)."""

    rule: Rule
    tests: list[Callable[[Seen], bool]]
    where: Where | None

    def holds(self, seen: Seen) -> bool:
        return all(test(seen) for test in self.tests)


def selector(rule: Rule, now: dt.datetime) -> Selector:
    """``rule``'s ``when`` compiled, its ages taken from ``now``."""
    when = rule.when
    tests: list[Callable[[Seen], bool]] = []
    if "signature" in when:
        tests.append(_text_test(glob(when["signature"]), lambda seen: seen.signature))
    for key, field in TEXT_FIELDS.items():
        if key in when:
            tests.append(_text_test(glob(when[key]), _field(field)))
    window = enqueued_window(when.get("enqueued_after"), when.get("enqueued_before"), now=now)
    if window is not None:
        tests.append(lambda seen: (at := seen.record.get("enqueued_time")) is not None and window.holds(at))
    expressions = [f"({when['where']})"] if "where" in when else []
    expressions += [f"props[{name!r}] == {value!r}" for name, value in when.get("properties", {}).items()]
    where = compile_where(" and ".join(expressions)) if expressions else None
    if where is not None:
        tests.append(lambda seen: where(seen.record, seen.names))
    return Selector(rule, tests, where)


def _field(name: str) -> Callable[[Seen], str | None]:
    return lambda seen: seen.record.get(name)


def _text_test(pattern: re.Pattern[str], text_of: Callable[[Seen], str | None]) -> Callable[[Seen], bool]:
    return lambda seen: pattern.fullmatch(text_of(seen) or "") is not None


def first_rule(selectors: Sequence[Selector], seen: Seen) -> Rule | None:
    """The rule that handles ``seen``: the first whose ``when`` holds; None when none does."""
    return next((s.rule for s in selectors if s.holds(seen)), None)
