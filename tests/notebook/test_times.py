"""One time grammar (issue 59, docs/names.md Times): the same text means the same instant in
%sb_peek, %sb_sessions, ``core.peek``, ``core.list_sessions`` and the sessions panel, and a time to
come the same in %%sb_send, ``core.send`` and the send panel's Schedule box; each is checked against
the times the broker itself reports. (The message browser and the triage panel take no times; the
Spark read is tests/spark/test_source.py's.)

The emulator runs on a manual clock started ``BACK`` seconds before real now, so messages and session
states sit at two known times in the past without a sleep: the old ones at the clock's start, the
new ones ``STEP`` later. ``AGE`` ago lies between them while the test runs for less than
``BACK - STEP`` ... ``AGE`` seconds (checked: a machine that slow fails saying so). A session's lock
is 5 minutes here: the SDK refuses a session operation whose lock ends before the machine's own now,
and the clock is behind it."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import close_all
from sbnotebook.emulator import Emulator, ManualClock
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.notebook.widgets import SendPanel
from sbnotebook.notebook.widgets.sessions import SessionsPanel
from tests import shell
from tests.helpers import emulator_config, send
from tests.shell import line
from tests.windows import broker, naive_utc_text

ip, sb = shell.ip, shell.sb
BACK, STEP, AGE = 200.0, 180.0, "2m"  # old at -200 s, new at -20 s, the age at -120 s
TOPOLOGY = emulator_config("times", {"q": {}, "later": {}, "carts": {"RequiresSession": True, "LockDuration": "PT5M"}})


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """The test's emulator, its clock ``BACK`` seconds behind real time (this module's own)."""
    with Emulator(TOPOLOGY, clock=ManualClock(time.time() - BACK)) as emu:
        yield emu
        close_all()


def place(emulator: Emulator, client: ServiceBusClient) -> tuple[dt.datetime, dt.datetime]:
    """'old' (a message in q, the state of session s-old in carts) at the clock's start, 'new' ``STEP``
    later; returns the two times as the broker reports them (its peek, its clock)."""
    cs = emulator.connection_string
    states = []
    for name in ("old", "new"):
        send(client, "q", name)
        core.set_session_state("carts", f"s-{name}", name, connection=cs)
        states.append(emulator.now())  # the broker's clock: the state's time (it moves only when advanced)
        if name == "old":
            emulator.advance(STEP)
    enqueued = {p.body: p.enqueued for p in broker(client)}
    whole_ms = [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in states]  # as messages report
    assert [enqueued["old"], enqueued["new"]] == whole_ms  # the messages and the states share the two times
    return enqueued["old"], enqueued["new"]


def test_the_same_past_time_selects_the_same_messages_and_sessions_everywhere(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient
) -> None:
    cs = emulator.connection_string
    old, new = place(emulator, client)
    middle = old + (new - old) / 2
    east = middle.astimezone(dt.timezone(dt.timedelta(hours=5)))  # an aware datetime in another zone
    for given in (AGE, naive_utc_text(middle), middle.isoformat(), east):
        cut = core.parse_time(given)
        assert old < cut < new, f"{given!r} is {cut}, not between {old} and {new}: the test ran too slowly"
        if isinstance(given, str):  # a magic takes text
            assert list(line(ip, f"sb_peek q --enqueued-after {given}")["body_text"]) == ["new"]
            assert list(line(ip, f"sb_peek q --enqueued-before {given}")["body_text"]) == ["old"]
            assert list(line(ip, f"sb_sessions carts --ids-only --updated-after {given}")["session_id"]) == ["s-new"]
        assert [r["body_text"] for r in core.peek("q", enqueued_after=given, connection=cs).records] == ["new"]
        sessions = core.list_sessions("carts", updated_after=given, details=False, connection=cs)
        assert [s.session_id for s in sessions] == ["s-new"]
        panel = SessionsPanel("carts", updated_after=given, connection=cs)
        assert [s.session_id for s in panel.sessions] == ["s-new"] and panel.updated_after is not None
        assert old < panel.updated_after < new
    assert sorted(line(ip, "sb_sessions carts --ids-only")["session_id"]) == ["s-new", "s-old"]  # both, unbounded


def scheduled_for(client: ServiceBusClient) -> dict[str, dt.datetime]:
    """Each scheduled message of 'later' (by body) and the time the broker holds it for."""
    with client.get_queue_receiver("later") as receiver:
        found = receiver.peek_messages(max_message_count=100)
    return {str(m): core.utc(m.scheduled_enqueue_time_utc) for m in found if m.scheduled_enqueue_time_utc}


def test_the_same_time_to_come_schedules_for_the_same_instant_everywhere(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient
) -> None:
    cs = emulator.connection_string
    panel = SendPanel("later", connection=cs)
    panel.content_type.value = "text/plain"
    panel.body.value, panel.schedule.value = "panel", "+2m"
    started = dt.datetime.now(dt.UTC)
    ip.run_cell_magic("sb_send", "later --schedule-at +2m", '"magic"')
    core.send("later", ["core"], schedule_at="+2m", connection=cs)
    core.schedule("later", ["schedule"], "+2m", connection=cs)
    report = panel.send()
    ended = dt.datetime.now(dt.UTC)
    assert report is not None and report.ok
    held = scheduled_for(client)
    assert sorted(held) == ["core", "magic", "panel", "schedule"]
    millisecond = dt.timedelta(milliseconds=1)  # the broker keeps whole milliseconds
    for body, at in held.items():
        assert started + dt.timedelta(minutes=2) - millisecond <= at <= ended + dt.timedelta(minutes=2), body
    exact = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).replace(microsecond=0)
    ip.run_cell_magic("sb_send", f"later --schedule-at {naive_utc_text(exact)}", '"iso"')
    panel.body.value, panel.schedule.value = "panel-iso", exact.isoformat()
    assert panel.send() is not None
    held = scheduled_for(client)
    assert (held["iso"], held["panel-iso"]) == (exact, exact)
    panel.schedule.value = "2m"  # an age where a time to come is asked for: said in the panel, nothing sent
    assert panel.send() is None and "2m from now is +2m" in panel.status.value
    assert len(scheduled_for(client)) == 6
