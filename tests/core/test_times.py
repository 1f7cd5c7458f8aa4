"""The kit's one time grammar (``core.parse_time``, docs/names.md Times; issue 59): ISO 8601 without
a zone is UTC whatever the kernel's zone, a datetime is converted to UTC, an age (``2h``) looks back
and ``+2h`` forward (each only where its direction is asked for), epoch seconds are taken nowhere,
and every refusal is one line naming the forms. The instants the commands act on are checked against
the broker's times in tests/notebook/test_times.py and tests/spark/test_source.py."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from sbnotebook import core
from sbnotebook.core import FUTURE_TIME_FORMS, TIME_FORMS, InvalidInputError, parse_time, utc
from sbnotebook.core.operations.window import enqueued_window
from sbnotebook.emulator import Emulator
from tests import windows

NOW = dt.datetime(2026, 11, 25, 15, 0, tzinfo=dt.UTC)
new_york = windows.new_york  # the fixture: the process's local zone is New York's


def test_iso_text_and_datetimes_mean_utc_in_a_non_utc_kernel(new_york: None) -> None:
    at_two = dt.datetime(2026, 11, 25, 14, 0, tzinfo=dt.UTC)
    for future in (False, True):  # an absolute time is the same whichever way the parameter points
        assert parse_time("2026-11-25T14:00", future=future, now=NOW) == at_two
        assert parse_time("2026-11-25T14:00Z", future=future) == at_two
        assert parse_time("2026-11-25T15:00+01:00", future=future) == at_two
        assert parse_time(" 2026-11-25 14:00 ", future=future) == at_two
        assert parse_time(dt.datetime(2026, 11, 25, 14, 0), future=future) == at_two  # naive: UTC
        assert parse_time(dt.datetime(2026, 11, 25, 9, 0, tzinfo=ZoneInfo("America/New_York"))) == at_two
    assert parse_time("2026-11-25", now=NOW) == dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    assert parse_time("2026-11-25T14:00").tzinfo is dt.UTC


def test_an_age_looks_back_and_a_plus_looks_forward() -> None:
    assert parse_time("90s", now=NOW) == NOW - dt.timedelta(seconds=90)
    assert parse_time("2h", now=NOW) == parse_time("120m", now=NOW) == parse_time(dt.timedelta(hours=2), now=NOW)
    assert parse_time("1d", now=NOW) == parse_time("24H", now=NOW) == NOW - dt.timedelta(days=1)
    assert parse_time("1.5h", now=NOW) == NOW - dt.timedelta(minutes=90)
    assert parse_time("+2h", future=True, now=NOW) == NOW + dt.timedelta(hours=2)
    assert parse_time("+30m", future=True, now=NOW) == parse_time(dt.timedelta(minutes=30), future=True, now=NOW)
    assert parse_time("+90s", future=True, now=NOW) - parse_time("90s", now=NOW) == dt.timedelta(seconds=180)


@pytest.mark.parametrize(
    ("given", "future", "says"),
    [
        ("soon", False, "'soon'."),
        ("-2h", False, "(an age has no sign: 2h ago is 2h)."),  # %sb_sessions' old way to look back
        ("+2h", False, "(that is in the future: 2h ago is 2h)."),
        ("2h", True, "(2h from now is +2h)."),  # an age where a time to come is asked for
        ("-2h", True, "(2h from now is +2h)."),
        ("500ms", False, "'500ms'."),
        ("PT2H", False, "'PT2H'."),
        ("1764028800", False, "(seconds since the epoch are taken nowhere: 1764028800 is 2025-11-25T00:00:00Z)."),
        ("1e30", True, "'1e30'."),
        (1764028800, False, ", or a datetime; not 1764028800."),
        (None, True, ", or a datetime; not None."),
    ],
)
def test_a_wrong_time_is_one_line_naming_the_forms(given: object, future: bool, says: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        parse_time(given, future=future, name="enqueued_after", now=NOW)  # type: ignore[arg-type]
    text = str(refused.value)
    forms = FUTURE_TIME_FORMS if future else TIME_FORMS
    assert text.startswith(f"enqueued_after takes {forms}") and text.endswith(says) and "\n" not in text


def test_a_negative_timedelta_is_refused_either_way() -> None:
    with pytest.raises(InvalidInputError, match=r"^remind_at: a timedelta is 0 or more \(that long from now\)"):
        parse_time(dt.timedelta(hours=-1), future=True, name="remind_at")
    with pytest.raises(InvalidInputError, match=r"that long ago"):
        parse_time(dt.timedelta(seconds=-1))


def test_the_forms_say_what_the_grammar_takes() -> None:
    """Each example a refusal names is taken (the forms cannot promise what the grammar refuses)."""
    for example in ("2026-11-25T14:00", "90s", "30m", "2h", "1d"):
        assert example in TIME_FORMS
        parse_time(example)
    for example in ("2026-11-25T14:00", "+90s", "+30m", "+2h", "+1d"):
        assert example in FUTURE_TIME_FORMS
        parse_time(example, future=True)


def test_utc_is_aware_and_converted() -> None:
    assert utc(dt.datetime(2026, 11, 25, 14, 0)) == dt.datetime(2026, 11, 25, 14, 0, tzinfo=dt.UTC)
    converted = utc(dt.datetime(2026, 11, 25, 15, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))))
    assert (converted, converted.tzinfo) == (dt.datetime(2026, 11, 25, 14, 0, tzinfo=dt.UTC), dt.UTC)


def test_a_window_takes_both_ages_from_one_now() -> None:
    window = enqueued_window("2h", "1h", now=NOW)
    assert window is not None
    assert (window.after, window.before) == (NOW - dt.timedelta(hours=2), NOW - dt.timedelta(hours=1))
    with pytest.raises(InvalidInputError, match="must be before enqueued_before"):
        enqueued_window("1h", "2h")
    with pytest.raises(InvalidInputError, match=r"^enqueued_before takes .*not '\+1h'"):
        enqueued_window("2h", "+1h")
    assert enqueued_window(None, None) is None


def test_the_core_functions_taking_a_time_to_come_read_the_same_grammar(emulator: Emulator) -> None:
    """A bad ``schedule_at`` is refused in one line before anything is sent; a good one is the
    instant the broker reports."""
    cs = emulator.connection_string
    for call in (
        lambda: core.schedule("q", ["m"], "2h", connection=cs),
        lambda: core.send("q", ["m"], schedule_at="2h", connection=cs),
    ):
        with pytest.raises(InvalidInputError, match=r"^schedule_at takes .*not '2h' \(2h from now is \+2h\)\.$"):
            call()
    assert emulator.broker.counts("q")["scheduled"] == 0
    at = "2026-12-01T09:00"
    [done] = core.schedule("q", ["m"], at, connection=cs)
    [record] = core.peek("q", connection=cs).records
    assert done.outcome == "scheduled" and record["scheduled_enqueue_time"] == parse_time(at)
