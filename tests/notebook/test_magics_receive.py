"""%sb_receive, %sb_settle and %sb_send, driven through a real IPython shell against the embedded emulator."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import LockedBatch, Report, counts
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import (
    drain,
    magic_fails,
    send,
)
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


# ------------------------------------------------------------------ receive and settle


def test_receive_then_settle_rows_by_number(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    send(client, "q", *[f"m{i}" for i in range(5)])
    batch = line(ip, "sb_receive q -n 5")
    assert isinstance(batch, LockedBatch) and len(batch) == 5
    assert "5 messages locked from q" in capsys.readouterr().out
    assert "<table" in batch._repr_html_()
    done = line(ip, "sb_settle complete 0,1")
    assert done["outcome"].tolist() == ["completed", "completed"] and done["index"].tolist() == [0, 1]
    assert "complete q: 2 completed of 2" in capsys.readouterr().out
    line(ip, "sb_settle dead-letter 2 --reason bad-total --description 'total < 0'")
    line(ip, "sb_settle defer 3")
    line(ip, "sb_settle abandon 4")
    again = line(ip, "sb_settle complete 0")
    assert again["outcome"].tolist() == ["already_settled"]
    assert "Row 9 is not in this batch" in magic_fails(ip, "sb_settle complete 9")
    dlq = line(ip, "sb_peek q --dlq")
    assert dlq[["body_text", "dead_letter_reason", "dead_letter_error_description"]].values.tolist() == [
        ["m2", "bad-total", "total < 0"]
    ]
    left = line(ip, "sb_peek q")
    assert dict(zip(left["body_text"], left["state"], strict=True)) == {"m3": "deferred", "m4": "active"}
    deferred = line(ip, "sb_receive q --sequence-numbers 4")
    assert [r["body_text"] for r in deferred.records] == ["m3"]
    assert "'nope' is not a variable holding a locked batch" in magic_fails(ip, "sb_settle complete 0 --batch nope")
    ip.user_ns["held"] = deferred
    line(ip, "sb_settle complete all --batch held --yes")
    assert counts("q", connection=sb.conn()).active == 1


def test_settle_all_asks_first_and_says_which_rows(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    send(client, "q", "a", "b", "c")
    line(ip, "sb_receive q -n 3")
    assert "Say which rows" in magic_fails(ip, "sb_settle complete")
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_settle complete all") == "nothing done: 'yes' was not typed (--yes skips the question)."
    assert asked
    answer(monkeypatch, "yes")
    assert line(ip, "sb_settle complete all")["outcome"].tolist() == ["completed"] * 3
    assert drain(client, "q", wait=0.5) == []


@pytest.mark.servicebus_clock("manual")  # the lock lapses when the test says, not by a race with a loaded machine
def test_a_lost_lock_shows_as_lost(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any, emulator: Emulator
) -> None:
    send(client, "short", "slow")
    ip.run_line_magic("config", "SbMagics.max_renewal_seconds = 0")
    line(ip, "sb_receive short -n 1")
    emulator.advance(1.6)  # past the 1 s lock, not renewed
    shown = magic_fails(ip, "sb_settle complete 0")  # a lost lock fails the cell: Run All stops there
    assert shown == "%sb_settle: 1 lock-lost of 1 (the report above; it is also in sb_last_report)", shown
    result = ip.user_ns["sb_last_report"].to_pandas()
    assert result["outcome"].tolist() == ["lock_lost"] and result["error"].notna().all()
    out = capsys.readouterr().out
    assert "1 lock-lost of 1" in out and "[1 rows x 9 columns]" in out  # the summary, then the table as returned


def test_receive_and_delete_asks_unless_yes(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    send(client, "q", "a", "b")
    answer(monkeypatch, "n")
    assert magic_fails(ip, "sb_receive q --mode receive-and-delete").startswith("nothing done: 'delete' was not typed")
    assert counts("q", connection=sb.conn()).active == 2
    batch = line(ip, "sb_receive q --mode receive-and-delete --yes -n 5 --wait-seconds 30")  # ends at the 2
    assert len(batch) == 2 and "received and deleted" in capsys.readouterr().out
    assert counts("q", connection=sb.conn()).active == 0
    assert "already removed" in magic_fails(ip, "sb_settle complete 0")


def test_receive_from_an_empty_queue_says_so(ip: Any, sb: SbMagics, capsys: Any) -> None:
    batch = line(ip, "sb_receive q --wait-seconds 0.2")
    assert len(batch) == 0 and "No messages arrived from q" in capsys.readouterr().out


def test_session_receive_shows_the_session_lock_and_close_lets_it_go(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    with client.get_queue_sender("sq") as s:
        s.send_messages([ServiceBusMessage(f"m{i}", session_id="s-1") for i in range(2)])
    batch = line(ip, "sb_receive sq --session-id s-1 -n 2 --wait-seconds 30")
    out, err = capsys.readouterr()
    assert isinstance(batch, LockedBatch) and len(batch) == 2 and not err
    assert "2 messages locked from sq (locks" in out and "Traceback" not in out
    # The session lock (2 s), not the message locks (LockDuration 30 s); how much of it is left
    # depends on how fast the machine got here, so only that it is the session's.
    assert all(s is not None and s <= 2 for s in batch.seconds_left())
    line(ip, "sb_settle close")
    again = line(ip, "sb_receive sq --session-id s-1 -n 2 --wait-seconds 30")  # the session was let go: it can be taken
    assert len(again) == 2
    line(ip, "sb_settle complete all --yes")
    line(ip, "sb_settle close")
    assert len(line(ip, "sb_peek sq --session-id s-1")) == 0


@pytest.mark.servicebus_clock("manual")  # the lock lapses when the test says, not by a race with a loaded machine
def test_settle_all_after_lock_expiry_reports_the_lost_locks_and_summarises_sdk_logs(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any, emulator: Emulator
) -> None:
    import logging

    send(client, "short", "a", "b", "c")
    ip.run_line_magic("config", "SbMagics.max_renewal_seconds = 0")
    line(ip, "sb_receive short -n 3")
    emulator.advance(1.6)  # past the 1 s lock, not renewed
    assert magic_fails(ip, "sb_settle complete 0").startswith("%sb_settle: 1 lock-lost of 1 ")
    assert ip.user_ns["sb_last_report"].to_pandas()["outcome"].tolist() == ["lock_lost"]
    capsys.readouterr()
    # What the SDK's own loggers write when a link fails (an error with its traceback), from its thread.
    try:
        raise RuntimeError("link detached")
    except RuntimeError:
        logging.getLogger("azure.servicebus._pyamqp.aio._link_async").error("Link failed", exc_info=True)
    assert magic_fails(ip, "sb_settle complete all --yes").startswith("%sb_settle: 3 lock-lost of 3 ")
    done = ip.user_ns["sb_last_report"].to_pandas()
    assert done["outcome"].tolist() == ["lock_lost"] * 3 and done["index"].tolist() == [0, 1, 2]
    out, err = capsys.readouterr()
    assert "3 lock-lost of 3" in out and "of 0" not in out
    assert "Traceback" not in out + err and "the Azure SDK logged 1 warning(s) (last: Link failed)" in err
    assert err.count("\n") == 1
    assert magic_fails(ip, "sb_settle complete all --yes").startswith("%sb_settle: 3 lock-lost of 3 ")
    again = ip.user_ns["sb_last_report"].to_pandas()
    assert again["outcome"].tolist() == ["lock_lost"] * 3  # still said, never "0 of 0"
    assert "of 0" not in capsys.readouterr().out


def test_receive_deferred_unknown_number_is_one_quick_line(
    ip: Any, sb: SbMagics, capsys: Any, emulator: Emulator
) -> None:
    shown = magic_fails(ip, "sb_receive q --sequence-numbers 999")
    # Quick: asked once, not retried with the SDK's backoff (about 10 s); counted at the broker, not timed.
    assert emulator.requests["com.microsoft:receive-by-sequence-number"] == 1
    assert "No deferred message with sequence number 999 in q" in shown and not capsys.readouterr().err
    assert "b'" not in shown and 'b"' not in shown


# ------------------------------------------------------------------ send


def test_send_json_lines_array_and_python_expression(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    report = ip.run_cell_magic("sb_send", "q", '{"n": 1}\n\n{"n": 2}\n')
    assert isinstance(report, Report) and report.ok and report.count("sent") == 2
    ip.run_cell_magic("sb_send", "q --max-in-flight 2", '[{"n": 3}, {"n": 4}, {"n": 5}]')
    ip.user_ns["frame"] = pd.DataFrame({"body": ['{"n": 6}', '{"n": 7}'], "subject": ["s", "s"]})
    ip.run_cell_magic("sb_send", "q", "frame")
    one_each = ip.run_cell_magic("sb_send", "q --one-per-send", "[{'n': i} for i in range(8, 10)]")
    assert one_each.stats["operations"] == 2  # one message per send operation (without: one operation)
    got = drain(client, "q")
    assert [str(m) for m in got] == [f'{{"n": {i}}}' for i in range(1, 10)]
    assert [m.subject for m in got][5:7] == ["s", "s"]


def test_send_reports_bad_json_by_line_and_sends_nothing(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    assert "Line 3 is not valid JSON" in magic_fails(ip, "sb_send q", '{"n": 1}\n{"n": 2}\n{"n": 3,\n{"n": 4}')
    assert "Line 2 is not valid JSON" in magic_fails(ip, "sb_send q --format json", '[{"n": 1},\n {"n": 2}\n')
    assert "NameError" in magic_fails(ip, "sb_send q", "undefined_name_here")
    assert "The cell is empty" in magic_fails(ip, "sb_send q", "   \n")
    assert drain(client, "q", wait=0.5) == []


def test_send_schedules_and_reports_failures(ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any) -> None:
    report = ip.run_cell_magic("sb_send", "q --schedule-at +1h", '{"later": true}')
    assert report.ok and counts("q", connection=sb.conn()).scheduled == 1
    refused = magic_fails(ip, "sb_send q --schedule-at tomorrow", "[1]")
    assert refused == f"sbnotebook: %sb_send: --schedule-at takes {core.FUTURE_TIME_FORMS}; not 'tomorrow'.", refused
    shown = magic_fails(ip, "sb_send tiny", '{"big": "' + "x" * 6000 + '"}\n{"small": 1}')
    assert shown == "%sb_send: 1 failed, 1 sent of 2 (the report above; it is also in sb_last_report)", shown
    report = ip.user_ns["sb_last_report"]
    out = capsys.readouterr().out
    assert report.count("sent") == 1 and report.failed == 1 and "1 FAILED" in out
    (failure,) = report.failures
    assert failure.index == 0 and failure.condition and "send tiny:" in out and "1 sent" in out
