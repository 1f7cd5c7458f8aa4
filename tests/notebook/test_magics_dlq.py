"""%sb_dlq, %sb_stats and the panels the magics open, driven through a real IPython shell against the embedded
emulator."""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import (
    dead_letter,
    drain,
    interrupt_main_thread,
    python_sigint,
    send,
)
from tests.shell import line
from tests.waiting import HANG, settled

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


# ------------------------------------------------------------------ dlq and stats


def test_dlq_summary_by_reason(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    send(client, "q", *[f"m{i}" for i in range(5)])
    with client.get_queue_receiver("q") as r:
        for i, m in enumerate(r.receive_messages(max_message_count=5, max_wait_time=5)):
            r.dead_letter_message(m, reason="timeout" if i < 3 else "schema", error_description=f"d{i}")
    table = line(ip, "sb_dlq q --summary")
    assert table[["dead_letter_reason", "messages"]].values.tolist() == [["timeout", 3], ["schema", 2]]
    assert "5 dead-lettered messages in q by reason" in capsys.readouterr().out


def test_dlq_summary_counts_every_message_by_subject_and_an_interrupt_shows_partial_counts(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    """The summary counts the whole DLQ over the scanner (not the first 1,000); a real SIGINT (a
    kernel interrupt) while it counts stops the scan and shows the counts so far."""
    from sbnotebook.notebook.magics.progress import Progress
    from tests.core.operations.test_triage import fill_dlq

    fill_dlq(emulator.connection_string, 3_000)
    table = line(ip, "sb_dlq ttl-dl --summary --by subject")
    assert table[["subject", "messages"]].values.tolist() == [["s0", 1000], ["s1", 1000], ["s2", 1000]]
    assert "3,000 dead-lettered messages in ttl-dl by subject" in capsys.readouterr().out
    assert line(ip, "sb_dlq ttl-dl --summary -n 300")["messages"].tolist() == [300]
    # A limit counts the first 300 only: the last line must not read as the queue's size (it said "300 ...").
    assert (
        "The first 300 of 3,000 dead-lettered messages in ttl-dl by reason (--max-messages" in capsys.readouterr().out
    )

    settled(lambda: emulator.requests["peeked messages"])  # the windows the capped count left in flight
    emulator.latency_ms = 50  # windows in flight when the interrupt comes
    show = Progress.show

    def interrupt_at_the_first_count(progress: Progress, *args: Any, **kwargs: Any) -> None:
        """The first progress line of the count: a kernel interrupt then (SIGINT to the main thread,
        which runs the count), not a watcher thread racing a count that may end first."""
        show(progress, *args, **kwargs)
        if str(args[-1]).startswith("Counting") and not interrupted:
            interrupted.append(True)
            interrupt_main_thread()

    interrupted: list[bool] = []
    try:
        with python_sigint(), pytest.MonkeyPatch.context() as patch:
            patch.setattr(Progress, "show", interrupt_at_the_first_count)
            table = line(ip, "sb_dlq ttl-dl --summary")
    finally:
        emulator.latency_ms = 0
    out = capsys.readouterr().out
    assert "Interrupted: partial counts" in out and "stopped: partial counts" in out
    assert "of 3,000 dead-lettered messages in ttl-dl by reason (interrupted: the rest were not counted)" in out
    assert 0 < table["messages"].sum() < 3_000
    # A peek sent just before the interrupt may reach the emulator later: counted once they stop
    # coming; a scan left running would never stop (and fail there).
    settled(lambda: emulator.requests["com.microsoft:peek-message"])


def test_dlq_count_opens_the_panel_counting(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    send(client, "q", "a", "b")
    dead_letter(client, "q", 2, reason="broken")
    panel = line(ip, "sb_dlq q --count --by subject")
    assert isinstance(panel, TriagePanel) and panel.by.value == "subject"
    assert panel.wait(HANG) and panel.complete and panel.reasons == {"broken": 2}


def test_stats_collects_samples_into_a_figure(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    send(client, "q", "a", "b")
    fig = line(ip, "sb_stats q --samples 2 --interval 0.1")
    send(client, "q", "c")
    fig = line(ip, "sb_stats q")
    active = next(t for t in fig.data if t.name == "active")
    assert list(active.y) == [2, 2, 3]
    ages = next(t for t in fig.data if t.name == "age")
    assert len(ages.x) == 3 and min(ages.x) >= 0
    fig = line(ip, "sb_stats q --reset")
    assert len(next(t for t in fig.data if t.name == "active").y) == 1


# ------------------------------------------------------------------ panels


def test_panels_open_from_the_magics(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    from sbnotebook.notebook.widgets import MessageBrowser, SendPanel, SettlementPanel, TriagePanel

    send(client, "q", "a", "b")
    dead_letter(client, "q", 1, reason="broken")
    triage = line(ip, "sb_dlq q")
    assert isinstance(triage, TriagePanel) and triage.reasons == {"broken": 1}
    browser = line(ip, "sb_browse q --dlq")
    assert isinstance(browser, MessageBrowser)
    compose = line(ip, "sb_compose q")
    assert isinstance(compose, SendPanel)
    panel = line(ip, "sb_receive q --panel")
    assert isinstance(panel, SettlementPanel) and len(panel.batch) == 1
    # Every panel a magic opens works on the magics' one live connection.
    assert triage.connection is browser.connection is compose.connection is panel.batch.connection is sb.connection
    panel.act("complete", [0])
    assert drain(client, "q", wait=0.3) == []


def test_on_databricks_the_panels_lists_are_plain_unless_configured(
    sb: SbMagics, ip: Any, emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """anywidget-based widgets are not known to load on Databricks: the grid is opt-in there."""
    import ipywidgets as W

    from sbnotebook.notebook.widgets import MessageBrowser, grid

    monkeypatch.setattr(grid, "_warned", False)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    send(client, "q", "one", "two")
    plain = MessageBrowser("q", connection=emulator.connection_string)
    assert isinstance(plain.rows.widget, W.SelectMultiple) and "on Databricks" in plain.rows.note
    assert len(plain.rows.widget.options) == 2
    ip.run_line_magic("config", "SbMagics.grid = 'itables'")
    assert plain.rows.is_grid is False and MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    ip.run_line_magic("config", "SbMagics.grid = 'plain'")
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION")
    assert not MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    ip.run_line_magic("config", "SbMagics.grid = 'auto'")
    assert MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    with pytest.raises(Exception, match="grid"):
        sb.grid = "fancy"
