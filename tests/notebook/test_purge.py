"""%sb_purge, %sb_cancel_scheduled and the purge panel: counted, confirmed, reported per outcome."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import Report
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.notebook.magics.progress import Progress
from tests import shell
from tests.helpers import (
    fill_every_kind,
    lose_the_session_lock_after_two_deferred,
    magic_fails,
    one_active_three_deferred_in_session_d,
    send,
)
from tests.shell import answer, line

purge_module = importlib.import_module("sbnotebook.core.incidents.purge.api")  # core.purge is the function
purge_magic = importlib.import_module("sbnotebook.notebook.magics.purge")
ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded
LAST = "(the report above; it is also in sb_last_report)"


def _left(sb: SbMagics) -> dict[str, int]:
    states = [r["state"] for r in core.scan_records("q", connection=sb.conn())]
    dlq = len(core.scan_records("q/$deadletterqueue", connection=sb.conn()))
    return {s: states.count(s) for s in ("active", "deferred", "scheduled")} | {"dlq": dlq}


def test_purge_counts_first_asks_and_removes_only_what_was_named(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    fill_every_kind(client, "q")
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_purge q") == "nothing done: 'purge' was not typed (--yes skips the question)."
    out = capsys.readouterr().out
    assert "Purge q: 3 active message(s), 3 in all (deferred messages stay: add --deferred)." in out
    assert asked and "Type 'purge'" in asked[0]
    assert _left(sb) == {"active": 3, "deferred": 2, "scheduled": 2, "dlq": 1}
    answer(monkeypatch, "purge")
    report = line(ip, "sb_purge q")
    assert isinstance(report, Report) and report.count("purged") == 3
    assert "purge q: 3 purged of 3" in capsys.readouterr().out
    assert _left(sb) == {"active": 0, "deferred": 2, "scheduled": 2, "dlq": 1}
    report = line(ip, "sb_purge q --deferred --yes")
    assert report.count("purged") == 2 and _left(sb) == {"active": 0, "deferred": 0, "scheduled": 2, "dlq": 1}
    reports = line(ip, "sb_purge q --scheduled --dlq --yes")
    assert [r.entity for r in reports] == ["q", "q/$deadletterqueue"] and [r.count("purged") for r in reports] == [2, 1]
    assert _left(sb) == {"active": 0, "deferred": 0, "scheduled": 0, "dlq": 0}
    capsys.readouterr()
    assert line(ip, "sb_purge q --all") is None  # nothing there: nothing asked
    assert "Nothing to purge" in capsys.readouterr().out


def test_purge_all_and_a_dlq_path(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    fill_every_kind(client, "q")
    line(ip, "sb_purge q/$deadletterqueue --yes")
    assert "Purge q: 1 dead-lettered message(s)" in capsys.readouterr().out
    report = line(ip, "sb_purge q --all --yes")  # the DLQ is empty now: one report, for q
    assert isinstance(report, Report) and report.count("purged") == 7
    assert _left(sb) == {"active": 0, "deferred": 0, "scheduled": 0, "dlq": 0}
    assert magic_fails(ip, "sb_purge nosuch --yes").startswith("EntityNotFoundError")


def test_cancel_scheduled_by_numbers_and_all(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    first, second = fill_every_kind(client, "q")
    answer(monkeypatch, "nope")
    assert magic_fails(ip, f"sb_cancel_scheduled q {first}").startswith("nothing done: 'cancel' was not typed")
    assert f"Cancel 1 scheduled message(s) of q: {first}." in capsys.readouterr().out
    assert _left(sb)["scheduled"] == 2
    answer(monkeypatch, "cancel")
    report = line(ip, f"sb_cancel_scheduled q {first}")
    assert report.count("cancelled") == 1 and _left(sb)["scheduled"] == 1
    assert "cancel-scheduled q: 1 cancelled of 1" in capsys.readouterr().out
    report = line(ip, "sb_cancel_scheduled q all --yes")
    assert [o.sequence_number for o in report.outcomes] == [second] and _left(sb)["scheduled"] == 0
    line(ip, "sb_cancel_scheduled q all")
    assert "No scheduled messages in q" in capsys.readouterr().out
    assert "is not a sequence number or range" in magic_fails(ip, "sb_cancel_scheduled q 5-x")


def test_purge_panel_counts_then_waits_for_the_typed_word(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    from sbnotebook.core import InvalidInputError
    from sbnotebook.notebook.widgets.purge import PurgePanel

    first, _ = fill_every_kind(client, "q")
    panel = line(ip, "sb_purge q --panel")
    assert isinstance(panel, PurgePanel) and panel.connection is sb.connection
    panel.kinds["dlq"].value = True
    panel.ask_purge()
    assert panel.confirm_row.layout.display == "flex" and "3 active" in panel.confirm_row.question.value
    assert "1 dead-lettered" in panel.confirm_row.question.value
    with pytest.raises(InvalidInputError):
        panel.confirm("yes")
    assert _left(sb)["active"] == 3  # a wrong word removes nothing
    reports = panel.confirm("purge")
    assert [r.count("purged") for r in reports] == [3, 1] and panel.progress.value == panel.progress.max
    assert "3 purged" in panel.status.value and panel.confirm_row.layout.display == "none"
    panel.which.value = str(first)
    panel.cancel_scheduled_button.click()
    panel.confirm_row.box.value = "cancel"
    panel.confirm_row.confirm_button.click()
    assert _left(sb) == {"active": 0, "deferred": 2, "scheduled": 1, "dlq": 0}
    panel.ask_purge()  # only active ticked, none left: says so and asks nothing
    assert "Nothing to purge" in panel.status.value and panel.pending is None


def test_a_purge_that_leaves_locked_messages_does_not_say_all_purged(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    """50 messages, 5 locked by another receiver: the last line says 45 purged, 5 left and why
    (it said "45 purged of 45 ... (all purged)"), and the cell fails, so Run All and a job stop
    there; the Report is shown in full and kept in sb_last_report."""
    send(client, "q", *[f"m{i}" for i in range(50)])
    ip.user_ns.pop("sb_last_report", None)
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        held = r.receive_messages(max_message_count=5, max_wait_time=3)
        assert len(held) == 5
        shown = magic_fails(ip, "sb_purge q --yes")
        out = capsys.readouterr().out
        assert _left(sb)["active"] == 5  # the broker's truth, apart from the report
        for m in held:
            r.complete_message(m)
    assert shown == "%sb_purge: 45 purged, 5 left of 50 (the report above; it is also in sb_last_report)", shown
    report = ip.user_ns["sb_last_report"]
    assert isinstance(report, Report) and report.count("purged") == 45 and report.count("left") == 5
    assert not report.ok and {o.sequence_number for o in report.failures} == {m.sequence_number for m in held}
    assert "45 purged, 5 left of 50" in out and "5 left: locked by another receiver (purge again after" in out
    assert "(5 left)" in out and "all purged" not in out
    # one line per message left, with why (the progress table), then the Report as the cell shows it
    lines = out.strip().splitlines()
    assert lines[-2].endswith(": left: locked by another receiver") and lines[-1] == repr(report), lines[-2:]


def test_purge_of_a_session_enabled_queue_goes_session_by_session_and_names_held_sessions(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    with client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(b, session_id=sid) for sid, b in [("a", "a1"), ("a", "a2"), ("c", "c1")]])
    with client.get_queue_receiver("sq60", session_id="a", max_wait_time=3) as r:
        (first,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.defer_message(first)
    with client.get_queue_receiver("sq60", session_id="c", max_wait_time=1):  # another receiver holds c
        answer(monkeypatch, "no")
        assert magic_fails(ip, "sb_purge sq60 --active --deferred").startswith("nothing done:")
        out = capsys.readouterr().out
        assert "Purge sq60: 2 active, 1 deferred message(s), 3 in all." in out
        assert "1 session(s) held by another receiver ('c'): the purge leaves them as they are" in out
        shown = magic_fails(ip, "sb_purge sq60 --active --deferred --yes")
    # The session another receiver holds is not purged: its message, counted by the broker after
    # the purge, is left with that reason (no made-up failed outcome for the session): the last
    # line does not say all were purged, and the cell fails.
    assert shown.startswith("%sb_purge: 2 purged, 1 left of 3 (the report above"), shown
    report = ip.user_ns["sb_last_report"]
    assert report.counts == {"purged": 2, "left": 1}
    out = capsys.readouterr().out
    assert "2 purged, 1 left of 3" in out and "(1 left)" in out and "all purged" not in out
    assert "held by another receiver ('c'" in str(report.failures[0].error)
    assert str(report.failures[0].error) in out  # the whole reason, also in a plain terminal
    states = [m["state"] for m in core.scan_records("sq60", session_id="c", connection=sb.conn())]
    assert states == ["active"]


def test_purge_of_named_sessions_counts_them_by_scanning_and_removes_only_them(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """A session holding nothing but deferred messages is not listed by Service Bus: --session-ids
    names it. The confirmation counts that session only; other sessions stay."""
    with client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(b, session_id=sid) for sid, b in [("a", "a1"), ("d", "d1"), ("d", "d2")]])
    with client.get_queue_receiver("sq60", session_id="d", max_wait_time=3) as r:
        for m in r.receive_messages(max_message_count=2, max_wait_time=3):
            r.defer_message(m)
    answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_purge sq60 --all --session-ids d").startswith("nothing done:")
    out = capsys.readouterr().out
    assert "Purge sq60 (session 'd'): 0 active, 2 deferred, 0 scheduled message(s), 2 in all." in out
    report = line(ip, "sb_purge sq60 --deferred --session-ids d --yes")
    assert report.count("purged") == 2 and report.ok
    assert [m["body_text"] for m in core.scan_records("sq60", session_id="a", connection=sb.conn())] == ["a1"]
    assert [m["body_text"] for m in core.scan_records("sq60", session_id="d", connection=sb.conn())] == []
    capsys.readouterr()
    assert "q does not require sessions: purge it without naming sessions." in magic_fails(
        ip, "sb_purge q --session-ids d --yes"
    )
    assert "A dead-letter queue has no sessions" in magic_fails(ip, "sb_purge sq60 --dlq --session-ids d --yes")


def test_a_purge_whose_session_lock_is_lost_fails_the_cell_and_says_what_was_left_and_why(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Session 'd' of sq loses its lock while %sb_purge fetches its deferred messages (the emulator's
    lose_session_locks, fired from the command's own progress line): 4 counted, 3 purged, 1 left
    with the session's failure as the reason. The cell fails (Run All and a job stop there), the
    printed report says 1 left and why, and the broker still holds the message."""
    monkeypatch.setattr(purge_module, "BY_SEQUENCE", 2)  # the deferred ones fetched 2 at a time
    one_active_three_deferred_in_session_d(client)
    lost: list[int] = []
    lose = lose_the_session_lock_after_two_deferred(emulator, lost)

    class LosingProgress(Progress):
        def update(self, report: Report) -> None:
            super().update(report)
            lose(report)

    monkeypatch.setattr(purge_magic, "Progress", LosingProgress)
    ip.user_ns.pop("sb_last_report", None)
    shown = magic_fails(ip, "sb_purge sq --active --deferred --yes")
    assert lost == [1]
    assert shown == f"%sb_purge: 3 purged, 1 left of 4 {LAST}", shown
    out = capsys.readouterr().out
    assert "Purge sq: 1 active, 3 deferred message(s), 4 in all." in out
    report = ip.user_ns["sb_last_report"]
    assert isinstance(report, Report) and report.counts == {"purged": 3, "left": 1} and not report.ok
    (left,) = report.failures
    why = str(left.error)
    assert "in session(s) whose purge failed (session 'd' not purged (or not all of it): " in why, why
    assert "lock" in why.lower()
    assert "3 purged, 1 left of 4" in out and "(1 left)" in out and "all purged" not in out
    assert why in out  # the whole reason, also in a plain terminal
    # the broker, read apart from the report: the third deferred message is still there
    assert emulator.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
    assert [m["body_text"] for m in core.scan_records("sq", session_id="d", connection=sb.conn())] == ["d2"]
    # With a key that may not Manage, %sb_purge cannot count a session-enabled entity (the
    # administration API; a peek there needs a session, and sessions holding only deferred messages
    # are not listed), nor could the purge count what it left: the cell fails naming the right and
    # the way out, before anything is removed.
    emulator.add_policy("app", ["Listen", "Send"], "sq")
    line(ip, f"sb_connect {emulator.policy_connection_string('app', 'sq')}")
    shown = magic_fails(ip, "sb_purge sq --active --deferred --yes")
    assert "'Manage' right" in shown and "--session-ids" in shown and "Nothing was removed" in shown, shown
    assert emulator.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
    # Named sessions need no Manage: whether sq requires sessions is asked with a peek, the session is
    # counted and checked after through its lock, as with Manage.
    capsys.readouterr()
    report = line(ip, "sb_purge sq --deferred --session-ids d --yes")
    assert "Purge sq (session 'd'): 1 deferred message(s), 1 in all." in capsys.readouterr().out
    assert report.counts == {"purged": 1} and report.ok
    assert emulator.broker.counts("sq") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_a_named_session_held_by_another_receiver_is_not_called_all_purged(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    """--session-ids a,c while another receiver holds c: a is purged, c cannot be read, so what it
    holds is not counted and the report has an error instead of a 'left' outcome. Every outcome is
    'purged', yet neither the printed line nor the cell's failure may read as complete."""
    with client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(b, session_id=sid) for sid, b in [("a", "a1"), ("c", "c1")]])
    with client.get_queue_receiver("sq60", session_id="c", max_wait_time=1):  # another receiver holds c
        shown = magic_fails(ip, "sb_purge sq60 --active --session-ids a,c --yes")
    out = capsys.readouterr().out
    # c cannot be scanned: its active message is not in the count either (it said "their deferred
    # messages are not counted")
    assert "Purge sq60 (session 'a', 'c'): 1 active message(s), 1 in all (deferred messages stay: add" in out
    assert "1 session(s) held by another receiver ('c'): the purge leaves them as they are, and what they" in out
    assert "and what they hold is not counted." in out, out
    report = ip.user_ns["sb_last_report"]
    assert report.counts == {"purged": 1} and not report.ok
    (error,) = report.errors
    assert error.startswith("session 'c' is held by another receiver: not purged, and what it holds not counted")
    # The line said "(all purged)" beside [ERRORS: ...], and the cell's failure "1 purged of 1"
    assert shown == f"%sb_purge: 1 purged of 1, 1 ERROR {LAST}", shown
    assert "purge sq60: 1 purged of 1 in " in out and f"[ERRORS: {error}] (1 ERROR)" in out, out
    assert "all purged" not in out, out
    states = [m["state"] for m in core.scan_records("sq60", session_id="c", connection=sb.conn())]
    assert states == ["active"]  # the broker still holds c's message
    assert core.scan_records("sq60", session_id="a", connection=sb.conn()) == []
