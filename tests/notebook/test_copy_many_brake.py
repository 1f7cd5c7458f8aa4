"""%sb_copy of a glob with the brake and the canary, as typed (issue 62): stopped by the brake, it says
the line that goes on, and that line copies the rest; its canary copies K over the entities, says
their fate, then asks before the rest. The broker read as in tests/core/incidents/test_copy_many_brake.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.core.incidents.test_copy_many_brake import (
    EACH,
    LIMIT,
    QUEUES,
    RATE,
    consumers,
    copied_once,
    home,
    places,
    prod,
)
from tests.helpers import magic_fails
from tests.shell import answer, line

ip = shell.ip
__all__ = ["home", "prod"]  # the fixtures, from the core tests
TOTAL = EACH * len(QUEUES)


@pytest.fixture
def sb(ip: Any, prod: Emulator, home: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    ip.run_line_magic("sb_connect", f"--as prod {prod.connection_string}")
    ip.run_line_magic("sb_connect", f"--as home {home.connection_string}")
    capsys.readouterr()
    yield magics
    unload_ipython_extension(ip)


def sent(report: core.Report) -> dict[str, int]:
    return {str(p.entity).removeprefix("prod:"): p.count("sent") for p in report.parts}


def test_a_glob_copy_stopped_by_its_brake_says_the_line_that_goes_on(
    ip: Any, sb: SbMagics, prod: Emulator, home: Emulator, capsys: Any
) -> None:
    typed = f"sb_copy 'prod:orders-*' home: --rate {RATE} --stop-if-dead-letters {LIMIT} --watch-interval 0.2 --yes"
    with consumers(home):
        said = magic_fails(ip, typed)
    out = capsys.readouterr().out
    report = ip.user_ns["sb_last_report"]
    assert core.braked(report) and said.startswith("%sb_copy: "), said
    assert [p.entity for p in report.parts] == ["prod:orders-a", "prod:orders-b"], report  # orders-c not begun
    copied, came_back = report.count("sent"), report.stats["came_back"]
    assert f"Stopped by the brake: {copied} copied, {came_back} came back (the entities after it not begun). " in out
    assert f"To go on: %{typed}\n" in out
    copied_once(places(prod, home), sent(report))

    # The line it said, the consumers gone: without the brake, and without the rate the brake's test
    # needed (the rest at 10/s is 15 s of waiting).
    rest = line(ip, typed.replace(f" --stop-if-dead-letters {LIMIT}", "").replace(f" --rate {RATE}", ""))
    assert rest.ok and rest.count("sent") == TOTAL - copied, rest
    copied_once(places(prod, home), dict.fromkeys(QUEUES, EACH))


@pytest.mark.parametrize("reply", ["copy", "no"])
def test_a_glob_canary_says_its_fate_then_asks_before_it_copies_the_rest(
    ip: Any, sb: SbMagics, prod: Emulator, home: Emulator, capsys: Any, monkeypatch: pytest.MonkeyPatch, reply: str
) -> None:
    asked = answer(monkeypatch, reply)
    k = EACH + 10  # orders-a whole, 10 of orders-b: 30 + 4 of them bad
    typed = f"sb_copy 'prod:orders-*' home: --canary {k} --canary-timeout 30 --watch-interval 0.1 --yes"
    with consumers(home):
        report = line(ip, typed)
    (question,) = asked  # --yes answered the first question; the canary's is asked all the same
    assert f"The canary's {k} at home: {k - 34} settled, 34 dead-lettered, 0 not yet taken." in question, question
    assert f"Copy the other {TOTAL - k}?" in question
    if reply == "copy":
        assert report.ok and report.count("sent") == TOTAL - k, report
        copied_once(places(prod, home), dict.fromkeys(QUEUES, EACH))
        return
    assert report.stats["canary"]["dead_lettered"] == 34 and sent(report) == {"orders-a": EACH, "orders-b": 10}
    copied_once(places(prod, home), {"orders-a": EACH, "orders-b": 10})
    again = typed.replace(f" --canary {k}", "")
    assert f"Nothing more copied. To go on: %{again}\n" in capsys.readouterr().out
    rest = line(ip, again)  # the line it said: the rest, nothing twice
    assert rest.ok and rest.count("sent") == TOTAL - k, rest
    copied_once(places(prod, home), dict.fromkeys(QUEUES, EACH))
