"""``--rate`` on the commands that move messages: %sb_resubmit, %sb_copy, %sb_import and %%sb_send
read it with core's one grammar (a wrong one is one line naming the forms), and each run keeps to it
on the broker (its enqueued times, tests/core/incidents/test_replay_rate.py's checks). And the brake
of %sb_resubmit and %sb_copy: stopped, it says the line that goes on, and that line moves the rest;
their canary says its fate and asks before the rest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.notebook.magics.progress import time_left
from tests import shell
from tests.core.incidents import test_brake as brake
from tests.core.incidents import test_copy_brake as copy_brake
from tests.core.incidents.test_replay_rate import dead_letters, enqueued, steady
from tests.helpers import magic_fails
from tests.interrupting import TOPOLOGY, exactly_once, where_each_is
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb
N, RATE = 300, 200.0


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY) as emu:  # the system clock: the broker stamps the enqueued times
        yield emu
        core.close_all()


@pytest.mark.parametrize(
    "command",
    ["sb_resubmit q --yes", "sb_copy q/$deadletterqueue plain --yes", "sb_import plain x.jsonl", "sb_send plain"],
)
@pytest.mark.parametrize("rate", ["200", "200/h", "fast", "0/s"])
def test_a_wrong_rate_is_one_line_naming_the_forms(ip: Any, sb: SbMagics, command: str, rate: str) -> None:
    cell = "[1]" if command.startswith("sb_send") else None
    said = magic_fails(ip, f"{command} --rate {rate}", cell)
    assert f"argument --rate: takes {core.RATE_FORMS}" in said and repr(rate) in said, said


@pytest.mark.parametrize("command", ["sb_resubmit q --yes", "sb_copy q/$deadletterqueue plain --yes"])
def test_watch_without_a_threshold_is_refused_before_anything_moves(
    ip: Any, sb: SbMagics, emulator: Emulator, command: str
) -> None:
    """--watch says where a brake looks, not when it stops: alone, it is core.Brake's one refusal."""
    dead_letters(emulator, 3)
    said = magic_fails(ip, f"{command} --watch plain")
    assert "A Brake stops on stop_if_dead_letters= or stop_if_active=" in said, said
    assert len(core.scan_records("q/$deadletterqueue", connection=emulator.connection_string)) == 3
    assert core.scan_records("plain", connection=emulator.connection_string) == []


def test_time_left_is_said_at_the_rate_so_far() -> None:
    assert time_left(2000, 1000, 200.0) == ", about 5 s left"
    assert time_left(60000, 0, 200.0) == ", about 5 min left"
    assert time_left(None, 10, 200.0) == time_left(100, 100, 200.0) == time_left(100, 0, 0.0) == ""


def test_resubmit_copy_import_and_send_keep_to_the_rate_on_the_broker(
    ip: Any, sb: SbMagics, emulator: Emulator, tmp_path: Path
) -> None:
    dead_letters(emulator, N)
    copied = line(ip, "sb_copy q/$deadletterqueue plain --rate 200/s --yes")
    assert copied.ok and copied.count("sent") == N, copied
    steady(enqueued(emulator, "plain"), RATE)
    export = tmp_path / "plain.jsonl"
    core.export_jsonl("plain", export, connection=emulator.connection_string)
    core.purge("plain", connection=emulator.connection_string)

    report = line(ip, "sb_resubmit q --rate 12000/m --yes")
    assert report.ok and report.count("resubmitted") == N, report
    exactly_once(where_each_is(emulator), N)
    steady(enqueued(emulator, "q"), RATE)

    imported = line(ip, f"sb_import plain {export} --rate 200/s")
    assert imported.ok and imported.count("sent") == N, imported
    steady(enqueued(emulator, "plain"), RATE)
    core.purge("plain", connection=emulator.connection_string)

    sent = ip.run_cell_magic("sb_send", "plain --rate 200/s", f"list(range({N}))")
    assert sent.ok and sent.count("sent") == N, sent
    steady(enqueued(emulator, "plain"), RATE)


def test_a_resubmit_stopped_by_its_brake_says_the_line_that_goes_on(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    brake.dead_letters(emulator)
    typed = "sb_resubmit q --target plain --rate 50/s --stop-if-dead-letters 20 --watch-interval 0.2 --yes"
    with brake.Consumer(emulator):
        said = magic_fails(ip, typed)
        brake.wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)
    out = capsys.readouterr().out
    report = ip.user_ns["sb_last_report"]
    assert core.braked(report) and said.startswith("%sb_resubmit: "), said
    moved = report.count("resubmitted")
    again = typed.removeprefix("sb_resubmit ") + " --resume"
    assert (
        f"Stopped by the brake: {moved} moved, {report.stats['came_back']} came back. To go on: %sb_resubmit {again}"
        in out
    )
    brake.exactly_once(brake.places(emulator))

    rest = line(ip, f"sb_resubmit {again}")  # the line it said; the consumer is gone: nothing comes back
    assert rest.ok and rest.count("resubmitted") == brake.N - moved, rest
    found = brake.places(emulator)
    brake.exactly_once(found)
    assert not found["source"]


@pytest.mark.parametrize("reply", ["resubmit", "no"])
def test_a_canary_says_its_fate_then_asks_before_it_moves_the_rest(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any, monkeypatch: pytest.MonkeyPatch, reply: str
) -> None:
    brake.dead_letters(emulator)
    asked = answer(monkeypatch, reply)
    with brake.Consumer(emulator):
        report = line(ip, "sb_resubmit q --target plain --canary 20 --canary-timeout 30 --watch-interval 0.1 --yes")
        brake.wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)
    found = brake.places(emulator)
    brake.exactly_once(found)
    dead = sum(found["target dlq"].values())
    moved = dead + sum(found["target"].values())
    (question,) = asked  # --yes answered the first question; the canary's is asked all the same
    assert f"The canary's 20 at plain: {20 - 7} settled, 7 dead-lettered, 0 not yet taken." in question
    assert f"Move the other {brake.N - 20}?" in question
    if reply == "resubmit":
        assert moved == brake.N and report.ok and report.count("resubmitted") == brake.N - 20, report
    else:
        assert moved == 20 and report.stats["canary"]["dead_lettered"] == 7, report
        out = capsys.readouterr().out
        again = "sb_resubmit q --target plain --canary-timeout 30 --watch-interval 0.1 --yes --resume"
        assert f"Nothing more moved. To go on: %{again}" in out
        out_line = out.split("To go on: %")[1].splitlines()[0]
        rest = line(ip, out_line)  # the line it said: the rest, nothing twice
        assert rest.ok and rest.count("resubmitted") == brake.N - 20, rest
        brake.exactly_once(brake.places(emulator))


def test_a_copy_stopped_by_its_brake_says_the_line_that_goes_on(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    brake.dead_letters(emulator)
    typed = "sb_copy q/$deadletterqueue plain --rate 50/s --stop-if-dead-letters 20 --watch-interval 0.2 --yes"
    with brake.Consumer(emulator):
        said = magic_fails(ip, typed)
        brake.wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)
    out = capsys.readouterr().out
    report = ip.user_ns["sb_last_report"]
    assert core.braked(report) and said.startswith("%sb_copy: "), said
    copied = report.count("sent")
    came_back = report.stats["came_back"]
    assert f"Stopped by the brake: {copied} copied, {came_back} came back. To go on: %{typed}" in out
    copy_brake.copied_once(brake.places(emulator), copied)

    rest = line(ip, typed.replace(" --stop-if-dead-letters 20", ""))  # the consumer is gone: nothing comes back
    assert rest.ok and rest.count("sent") == brake.N - copied, rest
    copy_brake.copied_once(brake.places(emulator), brake.N)


@pytest.mark.parametrize("reply", ["copy", "no"])
def test_a_copy_canary_says_its_fate_then_asks_before_it_copies_the_rest(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any, monkeypatch: pytest.MonkeyPatch, reply: str
) -> None:
    brake.dead_letters(emulator)
    asked = answer(monkeypatch, reply)
    typed = "sb_copy q/$deadletterqueue plain --canary 20 --canary-timeout 30 --watch-interval 0.1 --yes"
    with brake.Consumer(emulator):
        report = line(ip, typed)
        brake.wait_until(lambda: emulator.broker.counts("plain")["active"] == 0)
    found = brake.places(emulator)
    copies = sum((found["target"] + found["target dlq"]).values())
    (question,) = asked  # --yes answered the first question; the canary's is asked all the same
    assert f"The canary's 20 at plain: {20 - 7} settled, 7 dead-lettered, 0 not yet taken." in question
    assert f"Copy the other {brake.N - 20}?" in question
    if reply == "copy":
        assert report.ok and report.count("sent") == brake.N - 20, report
        copy_brake.copied_once(found, brake.N)
    else:
        copy_brake.copied_once(found, 20)
        assert copies == 20 and report.stats["canary"]["dead_lettered"] == 7, report
        again = typed.replace(" --canary 20", "")
        assert f"Nothing more copied. To go on: %{again}" in capsys.readouterr().out
        rest = line(ip, again)  # the line it said: the rest, nothing twice
        assert rest.ok and rest.count("sent") == brake.N - 20, rest
        copy_brake.copied_once(brake.places(emulator), brake.N)
