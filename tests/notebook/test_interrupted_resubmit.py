"""%sb_resubmit of 1,000 dead letters interrupted between a batch's copies confirmed and its originals
completed (a real SIGINT, at that state of the broker: tests/interrupting.py): the cell shows the
Report, says what to type next and fails in one line (Run All stops there); the broker, read through
the SDK, holds each message once, none locked, as many moved as the Report says; ``--resume`` moves
the rest once, and after that there is nothing to resume. ``--max-in-flight`` reaches the run (of
%sb_discard too)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import magic_fails
from tests.interrupting import TOPOLOGY, InterruptWhen, N, between_copy_and_complete, dead_letters, exactly_once
from tests.interrupting import where_each_is as places_of
from tests.shell import line
from tests.waiting import wait_until

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """The namespace of the interrupted moves, on a manual clock (no lock lapses): what ``sb`` connects to."""
    with Emulator(TOPOLOGY, clock="manual") as emu:
        yield emu
        core.close_all()


def test_an_interrupted_resubmit_shows_its_report_fails_the_cell_and_resume_moves_the_rest(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    dead_letters(emulator)
    with InterruptWhen(emulator, between_copy_and_complete("q", N)) as interrupt:
        said = magic_fails(ip, "sb_resubmit q --yes --max-in-flight 4")
    out = capsys.readouterr().out
    assert interrupt.fired and interrupt.acknowledged
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)  # given back (released)
    places = places_of(emulator)
    exactly_once(places)
    moved = sum(places["queue"].values())
    assert 50 <= moved < N  # the batch between copy and completion was completed, the rest not begun
    # The Report on screen, then what to type, then the one line that fails the cell.
    report = ip.user_ns["sb_last_report"]
    assert core.interrupted(report) and report.count("resubmitted") == report.total == moved, report
    assert report.stats["workers"] == 4  # --max-in-flight 4, not SbMagics.max_in_flight
    assert f"resubmit q/$deadletterqueue -> q: {moved} resubmitted of {moved}" in out and "ERRORS: interrupted" in out
    assert "Interrupted: the same command with --resume moves the rest (nothing is moved twice)." in out
    assert (
        said
        == f"%sb_resubmit: {moved} resubmitted of {moved}, 1 ERROR (the report above; it is also in sb_last_report)"
    )

    rest = line(ip, "sb_resubmit q --resume --yes")
    out = capsys.readouterr().out
    assert f"Resuming: {moved} message(s) moved before." in out and f"Resubmit {N - moved} message(s)" in out
    assert rest.ok and rest.count("resubmitted") == N - moved, rest
    places = places_of(emulator)
    exactly_once(places)
    assert sum(places["queue"].values()) == N and not places["dlq"]
    assert magic_fails(ip, "sb_resubmit q --resume --yes").startswith("sbnotebook: Nothing to resume: no resubmit")


def test_discard_takes_max_in_flight(ip: Any, sb: SbMagics, emulator: Emulator) -> None:
    """``--max-in-flight`` reaches the discard's run (its batches on their way at once: its workers)."""
    dead_letters(emulator, 200)
    report = line(ip, "sb_discard q --dlq --yes --max-in-flight 2")
    assert report.ok and report.count("discarded") == 200 and report.stats["workers"] == 2, report
