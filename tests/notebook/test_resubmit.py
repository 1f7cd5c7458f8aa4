"""%sb_resubmit with edits: body patch and property edits, previewed as a diff, confirmed, applied
through core.resubmit's edit hook (copy first, complete second)."""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import Report
from sbnotebook.notebook.edits import MessageEdit, diff, parse_property
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import magic_fails
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def _dead_letter(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage(
                    '{"order": 1, "total": -5, "debug": true}',
                    subject="order",
                    application_properties={"priority": 3, "debug": "x", "region": "eu"},
                ),
                ServiceBusMessage('{"order": 2, "total": 7}', subject="order"),
                ServiceBusMessage("not json", subject="note"),
            ]
        )
    with client.get_queue_receiver("q") as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=5)
        for m in got:
            r.dead_letter_message(m, reason="bad-total" if "total" in str(m) else "other")


def test_edit_and_its_diff() -> None:
    record = {
        "sequence_number": 4,
        "body_text": '{"a": 1, "b": 2}',
        "application_properties": {"x": "1", "gone": "y"},
        "subject": "s",
        "partition_key": "p-1",
        "session_id": "p-1",
    }
    edit = MessageEdit(patch={"a": None, "c": 3}, set_properties={"x": 2}, remove_properties=["gone"], session_id="p-2")
    after = edit(record)
    assert after["body_text"] == '{"b": 2, "c": 3}' and after["application_properties"] == {"x": 2}
    assert after["partition_key"] == after["session_id"] == "p-2"
    text = diff(record, edit)
    assert "#4 property x: '1' -> 2" in text and "#4 property gone: 'y' -> (removed)" in text
    assert '-  "a": 1,' in text and '+  "c": 3' in text and "#4 session_id: 'p-1' -> 'p-2'" in text
    assert parse_property("n:=3") == ("n", 3) and parse_property("n=3") == ("n", "3")
    assert MessageEdit().empty and MessageEdit().describe() == "unchanged"


def test_resubmit_previews_the_diff_asks_and_applies_body_and_property_edits(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _dead_letter(client)
    command = (
        'sb_resubmit q --where \'dead_letter_reason == "bad-total"\' --patch \'{"total": 0, "debug": null}\' '
        "--prop retried=yes --prop attempt:=2 --remove-prop debug --subject fixed --ttl 1h"
    )
    answer(monkeypatch, "no")
    assert magic_fails(ip, command).startswith("nothing done: 'resubmit' was not typed")
    out = capsys.readouterr().out
    assert "Resubmit 2 message(s) from q/$deadletterqueue to q" in out
    assert '-  "total": -5,' in out and '+  "total": 0' in out and "property debug: 'x' -> (removed)" in out
    assert "subject: 'order' -> 'fixed'" in out and "property attempt: None -> 2" in out
    assert len(core.scan_records("q/$deadletterqueue", connection=sb.conn())) == 3  # nothing moved
    answer(monkeypatch, "resubmit")
    report = line(ip, command)
    assert isinstance(report, Report) and report.count("resubmitted") == 2
    assert "resubmitted" in capsys.readouterr().out
    with client.get_queue_receiver("q", max_wait_time=1) as r:
        got = {m.sequence_number: m for m in r.peek_messages(max_message_count=10)}
    first, second = sorted(got.values(), key=lambda m: m.sequence_number)
    assert str(first) == '{"order": 1, "total": 0}' and str(second) == '{"order": 2, "total": 0}'
    props = {k.decode(): v for k, v in first.application_properties.items()}
    assert props["priority"] == 3  # untouched properties keep their type
    assert props["attempt"] == 2 and props["retried"] in ("yes", b"yes") and "debug" not in props
    assert "DeadLetterReason" not in props and first.subject == "fixed"
    assert first.time_to_live is not None and first.time_to_live.total_seconds() == 3600
    (left,) = core.scan_records("q/$deadletterqueue", connection=sb.conn())
    assert left["body_text"] == "not json"  # not selected: still there, no delivery counted
    assert left["delivery_count"] == 0


def test_resubmit_without_edits_and_user_errors(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    _dead_letter(client)
    assert "--patch takes a JSON merge patch" in magic_fails(ip, "sb_resubmit q --patch '{broken'")
    assert "NAME=VALUE" in magic_fails(ip, "sb_resubmit q --prop novalue")
    assert "--ttl takes a duration" in magic_fails(ip, "sb_resubmit q --ttl soon")
    line(ip, "sb_resubmit q --where 'subject == \"none\"'")
    assert "Nothing to resubmit in q/$deadletterqueue matching --where." in capsys.readouterr().out
    report = line(ip, "sb_resubmit q/$deadletterqueue --max-messages 1 --yes")
    out = capsys.readouterr().out
    assert "edit: unchanged" in out and "--- " not in out and report.count("resubmitted") == 1
    assert len(core.scan_records("q/$deadletterqueue", connection=sb.conn())) == 2
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("fan"))
    with client.get_subscription_receiver("t", "all") as r:
        for m in r.receive_messages(max_message_count=1, max_wait_time=5):
            r.dead_letter_message(m, reason="x")
    # No safe default target: said before anything moves.
    assert "explicit target" in magic_fails(ip, "sb_resubmit t/subscriptions/all --yes")
    assert len(core.scan_records("t/subscriptions/all/$deadletterqueue", connection=sb.conn())) == 1
