"""A failing %sb_* command fails its cell, in one line, so Run All, nbmake and a scheduled job stop
there (IPython's convention: a ``UsageError`` prints one line and the cell fails). Driven through a
real IPython shell (``run_cell``: the cell's status) and a real kernel (nbclient, as nbmake and
Databricks jobs run notebooks)."""

from __future__ import annotations

import builtins
from typing import Any

import nbformat
import pytest
from azure.servicebus import ServiceBusClient
from IPython.core.error import UsageError
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from sbnotebook.core import EntityNotFoundError, counts
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import send

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def failed_cell(ip: Any, source: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``source`` as a cell; it must fail with a UsageError shown as one line (after what the
    command printed before failing, if anything), which is returned."""
    result = ip.run_cell(source)
    out, err = capsys.readouterr()
    assert not result.success, f"the cell succeeded: {out}{err}"
    error = result.error_in_exec
    assert isinstance(error, UsageError), repr(error)
    shown = (out + err).strip()
    assert "Traceback" not in shown, shown
    rendered = error._render_traceback_() if hasattr(error, "_render_traceback_") else [f"UsageError: {error}"]
    assert len(rendered) == 1 and "\n" not in rendered[0] and shown.endswith(rendered[0]), (rendered, shown)
    return str(rendered[0])


def test_unknown_entity_and_missing_argument_fail_the_cell(
    ip: Any, sb: SbMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = failed_cell(ip, "%sb_peek no-such-queue", capsys)
    assert shown.startswith("EntityNotFoundError:") and "no-such-queue" in shown
    shown = failed_cell(ip, "%sb_peek", capsys)
    assert "%sb_peek: the following arguments are required: entity" in shown
    shown = failed_cell(ip, "%sb_receive no-such-queue", capsys)
    assert shown.startswith("EntityNotFoundError:") and "no-such-queue" in shown
    shown = failed_cell(ip, "%sb_send q", capsys)  # the cell magic used as a line magic
    assert "is a cell magic" in shown
    assert ip.run_cell("%sb_peek -h").success  # help is not a failure


def test_full_tracebacks_is_a_config_setting_that_raises_the_original(
    ip: Any, sb: SbMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ip.run_cell("%config SbMagics.full_tracebacks = True").success
    assert sb.full_tracebacks
    result = ip.run_cell("%sb_peek no-such-queue")
    assert isinstance(result.error_in_exec, EntityNotFoundError)
    assert "Traceback" in "".join(capsys.readouterr())
    ip.run_cell("%config SbMagics.full_tracebacks = False")


def test_a_declined_confirmation_fails_the_cell_and_changes_nothing(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    send(client, "q", "a", "b")
    monkeypatch.setattr(builtins, "input", lambda prompt="": "no")
    shown = failed_cell(ip, "%sb_purge q", capsys)
    assert shown.startswith("nothing done:") and "'purge'" in shown
    assert counts("q", connection=sb.conn()).active == 2

    def no_stdin(prompt: str = "") -> str:  # a scheduled job: no one to ask
        from IPython.core.error import StdinNotImplementedError

        raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")

    monkeypatch.setattr(builtins, "input", no_stdin)
    shown = failed_cell(ip, "%sb_receive q --mode receive-and-delete", capsys)
    assert shown.startswith("nothing done:") and "--yes" in shown
    assert counts("q", connection=sb.conn()).active == 2


def test_after_a_failed_connect_no_command_falls_back_to_the_emulator(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", "a")
    ip.user_ns["refused"] = emulator.connection_string.replace("SAS_KEY_VALUE", "Zm9vYmFyc2VjcmV0a2V5")
    shown = failed_cell(ip, "%sb_connect $refused", capsys)
    assert "refused" in shown.lower() and "Zm9vYmFyc2VjcmV0a2V5" not in shown
    # Neither the previous namespace nor the embedded emulator: the command fails until a connect works.
    for command in ("%sb_peek q", "%sb_entities", "%sb_receive q"):
        shown = failed_cell(ip, command, capsys)
        assert "%sb_connect" in shown and "Using the embedded" not in shown, shown
    assert ip.run_cell(f"%sb_connect {emulator.connection_string}").success
    assert ip.run_cell("%sb_peek q").success
    assert "1 messages from q" in capsys.readouterr().out


def test_a_notebook_stops_at_the_failed_magic(emulator: Emulator, client: ServiceBusClient) -> None:
    """As nbmake and Databricks jobs run notebooks: the failed magic's cell raises, later cells do
    not run (the message the last cell would send never reaches the broker)."""
    cells = [
        "%load_ext sbnotebook",
        f"%sb_connect {emulator.connection_string}",
        "%%sb_send q\n" + '{"n": 1}',
        "%sb_peek no-such-queue",
        "%%sb_send q\n" + '{"n": 2}',
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    runner = NotebookClient(nb, timeout=60, kernel_name="python3")
    with pytest.raises(CellExecutionError) as info:
        runner.execute()
    assert "EntityNotFoundError" in str(info.value) and "no-such-queue" in str(info.value)
    assert [cell.execution_count for cell in nb.cells] == [1, 2, 3, 4, None]
    failed = nb.cells[3].outputs
    assert [o["output_type"] for o in failed] == ["error"] and len(failed[0]["traceback"]) == 1
    assert counts("q", connection=emulator.connection_string).active == 1  # the last cell never ran


def test_a_job_cannot_answer_a_confirmation_so_the_notebook_stops_there(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A kernel run by nbclient (as a job) has no input: a purge without --yes fails its cell with
    'nothing done', and the purge after it never runs."""
    send(client, "q", "keep me")
    cells = [
        "%load_ext sbnotebook",
        f"%sb_connect {emulator.connection_string}",
        "%sb_purge q",
        "%sb_purge q --yes",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    with pytest.raises(CellExecutionError) as info:
        NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    assert "nothing done:" in str(info.value) and "--yes" in str(info.value)
    assert [cell.execution_count for cell in nb.cells] == [1, 2, 3, None]
    assert counts("q", connection=emulator.connection_string).active == 1


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("%sb_peek q -n 0", "-n/--max-messages"),
        ("%sb_peek q --max-scanned -1", "--max-scanned"),
        ("%sb_receive q -n 0", "-n/--max-messages"),
        ("%sb_receive q --wait-seconds -1", "--wait-seconds"),
        ("%sb_browse q --page-size 0", "--page-size"),
        ("%sb_dlq q --summary -n 0", "-n/--max-messages"),
        ("%sb_stats q --samples 0", "--samples"),
        ("%sb_stats q --interval -1", "--interval"),
        ("%sb_stats q -n 0", "-n/--max-messages"),
        ("%sb_sessions sq --max-sessions 0", "--max-sessions"),
        ("%sb_sessions sq --max-counted -1", "--max-counted"),
        ("%sb_resubmit q --max-messages 0", "-n/--max-messages"),
        ("%sb_resubmit q --preview -1", "--preview"),
        ("%sb_import q nofile.jsonl --max-in-flight 0", "--max-in-flight"),
        ("%%sb_send q --max-in-flight 0\n" + '{"n": 1}', "--max-in-flight"),
        ("%%sb_send q --max-in-flight -3\n" + '{"n": 1}', "--max-in-flight"),
    ],
)
def test_nonsense_options_are_refused_naming_the_option(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any, command: str, option: str
) -> None:
    shown = failed_cell(ip, command, capsys)
    assert f"argument {option}: must be " in shown and shown.count("\n") == 0, shown
    assert counts("q", connection=sb.conn()).active == 0  # nothing was sent with a replaced value


def test_settings_are_validated_when_set(ip: Any, sb: SbMagics, caplog: pytest.LogCaptureFixture) -> None:
    from traitlets import TraitError

    for setting in ("peek_max_messages", "receive_max_messages", "max_in_flight"):
        before = getattr(sb, setting)
        try:
            ip.run_cell(f"%config SbMagics.{setting} = 0")  # %config logs the refusal (IPython's own way)
        finally:
            ip.config.SbMagics.pop(setting, None)  # the shell keeps what %config was given, refused or not
        assert getattr(sb, setting) == before and "should not be less than 1" in caplog.text, setting
        with pytest.raises(TraitError):
            setattr(sb, setting, -1)
    for setting in ("wait_seconds", "max_renewal_seconds"):
        with pytest.raises(TraitError):
            setattr(sb, setting, -1.0)


def test_a_failed_named_connect_forgets_that_name_only(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", "a")
    assert ip.run_cell(f"%sb_connect --as other {emulator.connection_string}").success
    ip.user_ns["refused"] = emulator.connection_string.replace("SAS_KEY_VALUE", "Zm9vYmFyc2VjcmV0a2V5")
    failed_cell(ip, "%sb_connect --as other $refused", capsys)
    assert "No connection named 'other'" in failed_cell(ip, "%sb_peek other:q", capsys)
    assert ip.run_cell("%sb_peek q").success  # the default connection was not the one being replaced


# ------------------------------------------------ a Report that is not ok fails its cell

LAST = "(the report above; it is also in sb_last_report)"


def test_a_send_the_broker_refuses_fails_the_cell_and_keeps_its_report(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    """Per-message failures (the broker refuses the send: quota exceeded, not retried) are not an
    exception in core, but a cell whose messages did not all go must fail: the Report is shown,
    then the one line with its counts; the Report stays in sb_last_report."""
    ip.user_ns.pop("sb_last_report", None)
    emulator.reject_sends("q", 1, "quota-exceeded")
    shown = failed_cell(ip, '%%sb_send q\n{"n": 1}\n{"n": 2}', capsys)
    assert shown == f"%sb_send: 2 failed of 2 {LAST}", shown
    report = ip.user_ns["sb_last_report"]
    assert report.count("failed") == 2 and {o.condition for o in report.failures} == {"amqp:resource-limit-exceeded"}
    assert counts("q", connection=emulator.connection_string).active == 0  # the broker holds none of them


def test_lost_locks_fail_the_settle_cell(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", "a", "b", "c")
    assert ip.run_cell("%sb_receive q -n 3").success
    assert emulator.lose_locks("q") == 3  # as a service update does: the kernel still thinks they are held
    capsys.readouterr()
    shown = failed_cell(ip, "done = %sb_settle complete all --yes", capsys)
    assert shown == f"%sb_settle: 3 lock-lost of 3 {LAST}", shown
    assert "done" not in ip.user_ns  # nothing bound: the cell failed
    assert ip.user_ns["sb_last_report"].count("lock_lost") == 3
    # Nothing was completed: the broker gives the three again (read apart from the kit).
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        again = r.receive_messages(max_message_count=3, max_wait_time=3)
        assert sorted(str(m) for m in again) == ["a", "b", "c"]
        for m in again:
            r.complete_message(m)


def test_an_ok_report_returns_and_binds_as_before(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    from sbnotebook.core import Report

    send(client, "q", "a", "b")
    result = ip.run_cell("r = %sb_purge q --yes")
    assert result.success, capsys.readouterr()
    report = ip.user_ns["r"]
    assert isinstance(report, Report) and report.ok and report.count("purged") == 2
    assert ip.user_ns["sb_last_report"] is report
    assert counts("q", connection=sb.conn()).active == 0


def test_a_notebook_stops_at_a_purge_that_left_messages(emulator: Emulator, client: ServiceBusClient) -> None:
    """As a job runs it: 5 of 10 messages locked by a consumer still running; the purge removes 5,
    its cell fails with the counts after showing the Report, and the cell after it never runs."""
    send(client, "q", *[f"m{i}" for i in range(10)])
    cells = [
        "%load_ext sbnotebook",
        f"%sb_connect {emulator.connection_string}",
        "%sb_purge q --yes",
        "%%sb_send q\n" + '{"n": 2}',
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        held = r.receive_messages(max_message_count=5, max_wait_time=3)
        assert len(held) == 5
        with pytest.raises(CellExecutionError) as info:
            NotebookClient(nb, timeout=60, kernel_name="python3").execute()
        assert f"%sb_purge: 5 purged, 5 left of 10 {LAST}" in str(info.value)
        assert [cell.execution_count for cell in nb.cells] == [1, 2, 3, None]
        outputs = nb.cells[2].outputs
        assert outputs[-1]["output_type"] == "error" and len(outputs[-1]["traceback"]) == 1
        shown = "".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
        assert "<Report purge q: 5 purged, 5 left of 10" in shown  # the Report, shown before the failure
        assert counts("q", connection=emulator.connection_string).active == 5  # the broker's truth
        for m in held:
            r.complete_message(m)
