"""Issue 53 from the notebook: ``--enqueued-after`` / ``--enqueued-before`` on %sb_peek, %sb_dlq,
%sb_export, %sb_copy, %sb_resubmit, %sb_purge and %sb_discard act on exactly the window (a batch
sharing the boundary time, a kernel whose local zone is not UTC), agreeing with the core functions;
%sb_discard removes exactly what it selects and asks first; a ``--where`` that fails is said. The
broker's state is read with the SDK's own peek and the administration API's counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.core import Report
from sbnotebook.notebook.magics import SbMagics
from tests import shell, windows
from tests.helpers import dead_letter, magic_fails, send
from tests.shell import answer, line
from tests.windows import bodies, broker, first_time, groups, naive_utc_text

new_york = windows.new_york  # the fixture: the kernel's local zone is New York's
ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded
DLQ = "deadletter"  # the SDK's sub_queue for a dead-letter queue


def test_each_reading_command_takes_exactly_the_window_in_a_non_utc_kernel(
    ip: Any, sb: SbMagics, client: ServiceBusClient, new_york: None, tmp_path: Path, capsys: Any
) -> None:
    cs = sb.conn()
    state = groups(client)
    dead_letter(client, "q", 30, "bad")  # the dead-letter queue keeps the enqueued times
    tb, tc = first_time(state, "b"), first_time(state, "c")
    b, c = naive_utc_text(tb), naive_utc_text(tc)  # typed without a zone: UTC, not New York's time
    window = f"--enqueued-after {b} --enqueued-before {c}"
    frame = line(ip, f"sb_peek q --dlq -n 100 {window}")
    expected = bodies(state, tb, tc)
    assert sorted(frame["body_text"]) == expected == [f"b{i}" for i in range(10)]
    core_page = core.peek("q/$deadletterqueue", enqueued_after=b, enqueued_before=c, connection=cs)
    assert sorted(r["body_text"] for r in core_page.records) == expected  # core agrees with the magic
    assert "10 messages from q/$deadletterqueue (enqueued from" in capsys.readouterr().out
    assert sorted(line(ip, f"sb_peek q --dlq -n 100 --enqueued-after {b}")["body_text"]) == bodies(state, after=tb)
    assert sorted(line(ip, "sb_peek q --dlq -n 100 --enqueued-after 1h")["body_text"]) == bodies(state)  # an age
    table = line(ip, f"sb_dlq q --summary {window}")
    assert dict(zip(table["dead_letter_reason"], table["messages"], strict=True)) == {"bad": 10}
    assert "10 dead-lettered messages in q (enqueued from" in capsys.readouterr().out
    line(ip, f"sb_export q {tmp_path / 'b.jsonl'} --dlq {window}")
    assert sorted(r["body_text"] for r in core.read_jsonl(tmp_path / "b.jsonl")) == expected
    report = line(ip, f"sb_copy q/$deadletterqueue fwd-dst {window} --yes")
    assert isinstance(report, Report) and report.count("sent") == 10
    assert sorted(p.body for p in broker(client, "fwd-dst")) == expected
    assert len(broker(client, sub_queue=DLQ)) == 30  # a copy leaves the source as it was
    report = line(ip, f"sb_resubmit q {window} --yes")
    assert report.count("resubmitted") == 10 and sorted(p.body for p in broker(client)) == expected
    left = broker(client, sub_queue=DLQ)
    assert sorted(p.body for p in left) == bodies(state, before=tb) + bodies(state, after=tc)
    assert {p.sequence_number for p in left} == {p.sequence_number for p in state if p.body[0] in "ac"}


def test_discard_asks_with_the_count_and_the_others_fate_then_removes_exactly_the_selection(
    ip: Any,
    sb: SbMagics,
    client: ServiceBusClient,
    admin: ServiceBusAdministrationClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    new_york: None,
) -> None:
    state = groups(client, names="abc")
    tb, tc = first_time(state, "b"), first_time(state, "c")
    command = f"sb_discard q --enqueued-after {naive_utc_text(tb)} --where 'body_text != \"c5\"'"
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, command).startswith("nothing done: 'discard' was not typed")
    out = capsys.readouterr().out
    assert "Discard 19 active message(s) of q matching --where (enqueued from" in out
    assert "up to 11 other active message(s) before the last match are locked" in asked[0]
    assert "their delivery count is not raised" in asked[0]
    assert len(broker(client)) == 30  # declined: nothing removed
    answer(monkeypatch, "discard")
    report = line(ip, command)
    left = broker(client)
    assert report.ok and report.count("discarded") == 19 == 30 - len(left)
    assert admin.get_queue_runtime_properties("q").active_message_count == 11
    assert sorted(p.body for p in left) == [*bodies(state, before=tb), "c5"]
    assert all(p.delivery_count == 0 for p in left)  # given back, no delivery counted
    assert {p.sequence_number for p in left} == {p.sequence_number for p in state if p.body[0] == "a" or p.body == "c5"}
    line(ip, f"sb_discard q --enqueued-after {naive_utc_text(tb)} --enqueued-before {naive_utc_text(tc)} --yes")
    assert "Nothing to discard in q (enqueued from" in capsys.readouterr().out and len(broker(client)) == 11


def test_a_windowed_purge_says_its_path_and_removes_only_the_window(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any, new_york: None
) -> None:
    state = groups(client, names="abc")
    tb, tc = first_time(state, "b"), first_time(state, "c")
    asked = answer(monkeypatch, "purge")
    report = line(ip, f"sb_purge q --enqueued-before {naive_utc_text(tb)}")
    out = capsys.readouterr().out
    assert "Purge q: 10 active message(s), 10 in all" in out and "deleted on the server (batch delete" in out
    assert asked and report.count("purged") == 10 and sorted(p.body for p in broker(client)) == bodies(state, after=tb)
    report = line(ip, f"sb_purge q --enqueued-after {naive_utc_text(tc)} --yes")
    out = capsys.readouterr().out
    assert "received with a peek-lock" in out and "up to 10 other active message(s)" in out
    left = broker(client)
    assert report.count("purged") == 10 and sorted(p.body for p in left) == bodies(state, tb, tc)
    assert all(p.delivery_count == 0 for p in left)
    assert "give the window without --panel" in magic_fails(ip, "sb_purge q --panel --enqueued-after 1h")
    refused = magic_fails(ip, "sb_purge q --enqueued-after soon --yes")
    assert refused == f"sbnotebook: %sb_purge: --enqueued-after takes {core.TIME_FORMS}; not 'soon'.", refused
    assert len(broker(client)) == 10


def test_a_search_that_fails_everywhere_fails_every_command_in_one_line_and_on_some_is_counted(
    ip: Any, sb: SbMagics, client: ServiceBusClient, tmp_path: Path, capsys: Any
) -> None:
    send(client, "q", *[json.dumps({"n": i, "amount": 5 if i % 2 else "n/a"}) for i in range(4)])
    dead_letter(client, "q", 4, "bad")
    bad = "--where 'len(body_json.n) > 1'"
    for command in (
        f"sb_peek q --dlq {bad}",
        f"sb_export q {tmp_path / 'x.jsonl'} --dlq {bad}",
        f"sb_copy q/$deadletterqueue fwd-dst {bad} --yes",
        f"sb_resubmit q {bad} --yes",
        f"sb_discard q --dlq {bad} --yes",
    ):
        said = magic_fails(ip, command)
        assert "TypeError: object of type 'int' has no len()" in said, (command, said)
        assert 'for example sequence number 1: {"n": 0' in said, (command, said)
    assert len(broker(client, sub_queue=DLQ)) == 4 and broker(client, "fwd-dst") == []  # nothing done
    assert not (tmp_path / "x.jsonl").exists()
    capsys.readouterr()
    frame = line(ip, "sb_peek q --dlq -n 100 --where 'body_json.amount > 1'")
    out = capsys.readouterr().out
    assert len(frame) == 2 and "2 of 4 scanned messages matched" in out
    assert "Note: 2 message(s) could not be evaluated by 'body_json.amount > 1': 2 TypeError: '>' not" in out
    report = line(ip, "sb_discard q --dlq --where 'body_json.amount > 1' --yes")
    assert report.count("discarded") == 2 and report.stats["unevaluated"] == 2
    assert "2 message(s) could not be evaluated" in capsys.readouterr().out
    assert sorted(json.loads(p.body)["n"] for p in broker(client, sub_queue=DLQ)) == [0, 2]


def test_a_tail_whose_search_fails_on_every_message_fails_its_cell(
    ip: Any, sb: SbMagics, client: ServiceBusClient
) -> None:
    send(client, "q", '{"n": 1}', '{"n": 2}')  # there before, shown from number 1 by the first poll: no race
    said = magic_fails(ip, "sb_tail q --seconds 0.5 --from-sequence-number 1 --where 'len(body_json.n) > 1'")
    assert "could not be evaluated on any of the 2 message(s)" in said and "TypeError" in said
