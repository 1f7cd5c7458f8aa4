"""The kit's one time grammar (docs/names.md, Times): every magic, core function, panel and Spark
option that takes a time reads it with ``parse_time``, and every time the kit hands on is aware and
in UTC (``utc``).

A time is a ``datetime`` (without a zone: UTC; with one: converted), ISO 8601 text (without a zone:
UTC, never the kernel's local zone), or, relative to now:

- where it points into the past (``enqueued_after``, ``updated_after``): an age, ``90s``, ``30m``,
  ``2h``, ``1d`` (or a ``timedelta``), that long ago;
- where it points into the future (``schedule_at``, ``remind_at``): ``+90s``, ``+30m``, ``+2h``,
  ``+1d`` (or a ``timedelta``), that long from now.

Seconds since the epoch are taken nowhere: a bare number reads as an age without its unit as well as
an instant, and ISO 8601 says the instant without doubt.

And how long a piece of work has run (``Timed``: ``elapsed`` and a rate, for the kit's long-running
views, ``tail.Tail`` and ``triage.GroupCounts``), written once.
"""

from __future__ import annotations

import datetime as dt
import re
import time

from .errors import InvalidInputError

When = str | dt.datetime | dt.timedelta
"""What a parameter taking a time accepts (``parse_time``)."""

_ISO_EXAMPLE = "ISO 8601 (2026-11-25T14:00; without a zone, UTC)"
TIME_FORMS = f"{_ISO_EXAMPLE} or an age: 90s, 30m, 2h, 1d (that long ago)"
"""The forms a time in the past takes, as every help text and refusal says them."""
FUTURE_TIME_FORMS = f"{_ISO_EXAMPLE} or +90s, +30m, +2h, +1d (that long from now)"
"""The forms a time in the future takes (``--schedule-at``, ``schedule_at=``), as said everywhere."""

_RELATIVE = re.compile(r"^([+-]?)(\d+(?:\.\d+)?)\s*([smhd])$", re.I)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")


def utc(value: dt.datetime) -> dt.datetime:
    """``value`` aware and in UTC: without a zone it is UTC (as Service Bus's times and Spark's
    options), with one it is converted."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def parse_time(value: When, *, future: bool = False, name: str = "time", now: dt.datetime | None = None) -> dt.datetime:
    """The instant ``value`` means, aware and in UTC (the module docstring gives the grammar).

    ``future``: the parameter points into the future, so a relative time is ``+2h`` (that long from
    now) instead of an age (``2h``, that long ago). A ``timedelta`` is measured from ``now`` the same
    way. ``name`` is what the refusal calls the value (``enqueued_after``, ``--schedule-at``): one
    line, an ``InvalidInputError``, naming the forms. ``now`` defaults to the machine's clock.
    """
    forms = FUTURE_TIME_FORMS if future else TIME_FORMS
    if isinstance(value, dt.datetime):
        return utc(value)
    now = utc(now) if now is not None else dt.datetime.now(dt.UTC)
    if isinstance(value, dt.timedelta):
        if value < dt.timedelta(0):
            raise InvalidInputError(f"{name}: a timedelta is 0 or more ({_relative_word(future)}), not {value}.")
        return now + value if future else now - value
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} takes {forms}, or a datetime; not {value!r}.")
    text = value.strip()
    relative = _RELATIVE.match(text)
    if relative:
        sign, amount, unit = relative.groups()
        if sign == ("+" if future else ""):
            span = dt.timedelta(seconds=float(amount) * _SECONDS[unit.lower()])
            return now + span if future else now - span
        raise InvalidInputError(f"{name} takes {forms}; not {value!r}{_hint(sign, amount + unit, future)}.")
    try:
        return utc(dt.datetime.fromisoformat(text))
    except ValueError:
        raise InvalidInputError(f"{name} takes {forms}; not {value!r}{_epoch_hint(text)}.") from None


def _epoch_hint(text: str) -> str:
    """For a bare number: the ISO 8601 time it would be as seconds since the epoch (taken nowhere)."""
    if not _NUMBER.match(text):
        return ""
    try:
        instant = dt.datetime.fromtimestamp(float(text), dt.UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return " (seconds since the epoch are taken nowhere)"
    return f" (seconds since the epoch are taken nowhere: {text} is {instant})"


def _relative_word(future: bool) -> str:
    return "that long from now" if future else "that long ago"


def _hint(sign: str, span: str, future: bool) -> str:
    """What to write instead of a relative time with the wrong sign."""
    if future:
        return f" ({span} from now is +{span})"
    if sign == "+":
        return f" (that is in the future: {span} ago is {span})"
    return f" (an age has no sign: {span} ago is {span})"


class Timed:
    """``elapsed`` and ``per_second`` for a class that sets ``started`` and ``finished``
    (``time.monotonic()``; ``finished`` is None while the work runs)."""

    started: float
    finished: float | None

    @property
    def elapsed(self) -> float:
        """Seconds from the start to now, or to the finish once finished."""
        return (self.finished if self.finished is not None else time.monotonic()) - self.started

    def per_second(self, n: int) -> float:
        """``n`` (messages, polls) per second of ``elapsed`` (0 before any time has passed)."""
        elapsed = self.elapsed
        return n / elapsed if elapsed > 0 else 0.0
