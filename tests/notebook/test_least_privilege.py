"""The magics with a least-privilege key (an entity's Listen-only or Send-only policy): what the key
allows works; what it does not fails the cell with one line naming the missing right."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import Report
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics.progress import Progress
from sbnotebook.notebook.purging import BY_PEEK, BY_PEEK_NOTE
from tests.conftest import entity_keys_emulator
from tests.helpers import (
    QuickCloseClient,
    a_listed_and_an_unlisted_session,
    dead_letter,
    fill_every_kind,
    magic_fails,
    send,
)
from tests.shell import answer

LAST = "(the report above; it is also in sb_last_report)"


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    return globalipapp.start_ipython() or globalipapp.get_ipython()


@pytest.fixture
def emu(ip: Any) -> Iterator[Emulator]:
    with entity_keys_emulator() as emulator:
        unload_ipython_extension(ip)
        load_ipython_extension(ip)
        yield emulator
        unload_ipython_extension(ip)


def test_listen_only_key_peeks_and_cannot_send(ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("sb_connect", emu.connection_string)  # the root key
    ip.run_cell_magic("sb_send", "q", '["first", "second"]')
    ip.run_line_magic("sb_connect", emu.policy_connection_string("reader", "q"))
    peeked = ip.run_line_magic("sb_peek", "q")
    assert len(peeked) == 2
    shown = magic_fails(ip, "sb_send q", '["not allowed"]')
    assert "'Send' right" in shown and "SharedAccessKey" not in shown
    assert emu.broker.counts("q")["active"] == 2
    assert "'Manage' right" in magic_fails(ip, "sb_stats q")  # counts come from the administration API


def test_send_only_key_sends_and_cannot_peek(ip: Any, emu: Emulator) -> None:
    ip.run_line_magic("sb_connect", emu.policy_connection_string("writer", "q"))
    ip.run_cell_magic("sb_send", "q", "[1, 2, 3]")
    assert emu.broker.counts("q")["active"] == 3
    assert "'Listen' right" in magic_fails(ip, "sb_peek q")
    assert "'Listen' right" in magic_fails(ip, "sb_browse q")  # the panel opens on a peek
    assert emu.broker.counts("q")["active"] == 3


def _fill(emu: Emulator) -> None:
    """q, with the root key: 3 active, 2 deferred, 2 scheduled (an hour ahead), 1 dead-lettered."""
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        fill_every_kind(client, "q")
    assert emu.broker.counts("q") == {"active": 3, "deferred": 2, "scheduled": 2, "dead_letter": 1}


def _printed(ip: Any, capsys: pytest.CaptureFixture[str], magic: str, line: str) -> tuple[Any, str]:
    """What a line magic returns, and what it printed (alone: earlier output is read away first)."""
    capsys.readouterr()
    returned = ip.run_line_magic(magic, line)
    return returned, capsys.readouterr().out


def _app_key(ip: Any, emu: Emulator) -> None:
    """Connect with q's Listen and Send key, as an application's: no Manage right."""
    emu.add_policy("app", ["Listen", "Send"], "q")
    ip.run_line_magic("sb_connect", emu.policy_connection_string("app", "q"))


def test_listen_send_key_purges_counting_by_peek_and_says_so(
    ip: Any, emu: Emulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """The administration API refuses the key (no Manage), so %sb_purge counts by peeking, says so in
    the confirmation and the Report, and purges; the broker, read apart, holds only the DLQ's message.
    (It failed the cell naming the Manage right, although core.purge works with this key.)"""
    _fill(emu)
    _app_key(ip, emu)
    capsys.readouterr()
    assert "'Manage' right" in magic_fails(ip, "sb_stats q")  # the administration API refuses this key
    caplog.set_level(logging.INFO, logger="sbnotebook")
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_purge q --active --deferred --scheduled").startswith("nothing done: 'purge' was not")
    out = capsys.readouterr().out
    assert f"Purge q: 3 active, 2 deferred, 2 scheduled message(s), 7 in all. {BY_PEEK}." in out, out
    assert asked == ["This removes 7 messages from q for good. Type 'purge' to go on: "], asked
    assert emu.broker.counts("q") == {"active": 3, "deferred": 2, "scheduled": 2, "dead_letter": 1}  # declined
    why = [r.getMessage() for r in caplog.records if "counting by peeking instead: " in r.getMessage()]
    assert len(why) == 1 and "'Manage' right" in why[0] and "SharedAccessKey=" not in why[0], why  # once, with why

    answer(monkeypatch, "purge")
    report = ip.run_line_magic("sb_purge", "q --active --deferred --scheduled")
    assert isinstance(report, Report) and report.counts == {"purged": 7} and report.ok, report
    assert BY_PEEK_NOTE in report.notes
    out = capsys.readouterr().out
    assert "purge q: 7 purged of 7" in out and BY_PEEK_NOTE in out and "(all purged)" in out, out
    # the broker, read apart from the report: everything asked for is gone, the DLQ was not asked for
    assert emu.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}


def test_listen_send_key_purges_the_dead_letter_queue_counting_by_peek(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(emu)
    _app_key(ip, emu)
    report, out = _printed(ip, capsys, "sb_purge", "q/$deadletterqueue --yes")
    assert f"Purge q: 1 dead-lettered message(s), 1 in all. {BY_PEEK}." in out, out
    assert report.entity == "q/$deadletterqueue" and report.counts == {"purged": 1} and BY_PEEK_NOTE in report.notes
    assert emu.broker.counts("q") == {"active": 3, "deferred": 2, "scheduled": 2, "dead_letter": 0}
    reports = ip.run_line_magic("sb_purge", "q --all --yes")  # --dlq among others: nothing left there
    assert isinstance(reports, Report) and reports.counts == {"purged": 7}
    assert emu.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    assert ip.run_line_magic("sb_purge", "q --dlq") is None
    assert f"Nothing to purge: Purge q: 0 dead-lettered message(s), 0 in all. {BY_PEEK}." in capsys.readouterr().out


def test_a_message_locked_by_another_receiver_is_counted_by_peek_and_reported_left(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """A peek sees a message another receiver holds locked: counted (the confirmation says the purge
    cannot remove it), left by the purge, and the cell fails saying so."""
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        send(client, "q", "m1", "m2")
        _app_key(ip, emu)
        with client.get_queue_receiver("q") as other:
            (held,) = other.receive_messages(max_message_count=1, max_wait_time=5)
            capsys.readouterr()
            shown = magic_fails(ip, "sb_purge q --yes")
            out = capsys.readouterr().out
            assert f"Purge q: 2 active message(s), 2 in all (deferred messages stay: add --deferred). {BY_PEEK}." in out
            assert shown == f"%sb_purge: 1 purged, 1 left of 2 {LAST}", shown
            assert emu.broker.counts("q")["active"] == 1
            other.complete_message(held)
    assert emu.broker.counts("q")["active"] == 0


def test_a_key_without_listen_or_manage_cannot_purge_and_removes_nothing(ip: Any, emu: Emulator) -> None:
    _fill(emu)
    ip.run_line_magic("sb_connect", emu.policy_connection_string("writer", "q"))  # Send only
    for command in ("sb_purge q --yes", "sb_purge q --all --yes", "sb_purge q/$deadletterqueue --yes"):
        shown = magic_fails(ip, command)
        assert "'Listen' right" in shown and "SharedAccessKey" not in shown, shown
    assert emu.broker.counts("q") == {"active": 3, "deferred": 2, "scheduled": 2, "dead_letter": 1}


def test_a_namespace_listen_send_key_purges_a_subscription_and_its_dlq_counting_by_peek(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """A namespace policy (no EntityPath) with Listen and Send: a subscription and its DLQ, counted by
    peeking (a subscription has no scheduled messages of its own: its topic holds them)."""
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        with client.get_topic_sender("t") as s:
            s.send_messages([ServiceBusMessage(b) for b in ("a", "b", "c")])
        with client.get_subscription_receiver("t", "all") as r:
            (bad,) = r.receive_messages(max_message_count=1, max_wait_time=5)
            r.dead_letter_message(bad, reason="bad")
    assert emu.broker.counts("t/subscriptions/all") == {"active": 2, "deferred": 0, "scheduled": 0, "dead_letter": 1}
    emu.add_policy("ns-app", ["Listen", "Send"])
    ip.run_line_magic("sb_connect", emu.policy_connection_string("ns-app"))
    reports, out = _printed(ip, capsys, "sb_purge", "t/subscriptions/all --all --yes")
    counted = "2 active, 0 deferred, 0 scheduled, 1 dead-lettered message(s), 3 in all"
    assert f"Purge t/subscriptions/all: {counted}. {BY_PEEK}." in out, out
    assert [(r.entity, r.counts) for r in reports] == [
        ("t/subscriptions/all", {"purged": 2}),
        ("t/subscriptions/all/$deadletterqueue", {"purged": 1}),
    ]
    assert all(BY_PEEK_NOTE in r.notes and r.ok for r in reports)
    assert emu.broker.counts("t/subscriptions/all") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_a_core_session_purge_nothing_could_count_after_is_not_called_all_purged(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """%sb_purge refuses a session-enabled entity to a key without Manage before removing anything
    (test_purge), but core.purge, called with such a key, purges the listed sessions and cannot count
    what is left: the notebook's line for that report must not say "all purged" (it did: the report
    had only a note). The broker, read apart, still holds the unlisted session's deferred message."""
    emu.add_policy("app", ["Listen", "Send"], "sq")
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        a_listed_and_an_unlisted_session(client)
    report = core.purge("sq", connection=emu.policy_connection_string("app", "sq"))
    assert report.counts == {"purged": 2} and not report.ok, report
    capsys.readouterr()
    Progress("sq", "Purging", "purged").finish(report)
    out = capsys.readouterr().out
    assert "purge sq: 2 purged of 2 in " in out and "(1 ERROR)" in out and "all purged" not in out, out
    assert emu.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}


def test_listen_send_key_resubmits_counting_by_scan_and_says_so(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """%sb_resubmit with a Listen and Send key of q (no Manage): the administration API refuses its
    count, so the DLQ is counted by scanning, which the output says with the refusal; the broker,
    read apart, has the two messages back in q and an empty DLQ."""
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        send(client, "q", "m0", "m1", "m2")
        dead_letter(client, "q", 2, "bad")
    assert emu.broker.counts("q") == {"active": 1, "deferred": 0, "scheduled": 0, "dead_letter": 2}
    _app_key(ip, emu)
    report, out = _printed(ip, capsys, "sb_resubmit", "q --yes")
    assert isinstance(report, Report) and report.counts == {"resubmitted": 2} and report.ok, report
    assert "(counting by scanning: the administration API said " in out and "'Manage' right" in out, out
    assert "Resubmit 2 message(s) from q/$deadletterqueue to q" in out and "SharedAccessKey=" not in out, out
    assert emu.broker.counts("q") == {"active": 3, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_a_namespace_listen_send_key_copies_counting_by_scan_and_says_so(
    ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """%sb_copy with a namespace Listen and Send key (no Manage): counted by scanning, said with the
    refusal, copied; the broker, read apart: the source untouched, the copies in the target."""
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        send(client, "q", "m0", "m1", "m2")
    emu.add_policy("ns-app", ["Listen", "Send"])
    ip.run_line_magic("sb_connect", emu.policy_connection_string("ns-app"))
    report, out = _printed(ip, capsys, "sb_copy", "q dl-target --yes")
    assert isinstance(report, Report) and report.counts == {"sent": 3} and report.ok, report
    assert "(counted by scanning: the administration API said " in out and "'Manage' right" in out, out
    assert "Copy 3 message(s) from q to dl-target" in out and "SharedAccessKey=" not in out, out
    assert emu.broker.counts("q")["active"] == 3 and emu.broker.counts("dl-target")["active"] == 3
