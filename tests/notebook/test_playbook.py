"""%sb_playbook: the plan shown (nothing touched), the run asked first and done, read from the broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import emulator_config
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb
PLAYBOOK = """\
playbook: nb
entities: [q]
rules:
  - name: old-schema
    when: {where: "body_json.version < 2"}
    do: park
    to: parked
audit: audit
"""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(emulator_config("nb", {"q": {}, "parked": {}}), clock="manual") as emu:
        cs = emu.connection_string
        core.send("q", [f'{{"version": 1, "n": {i}}}' for i in range(3)] + ['{"version": 2}'], connection=cs)
        with core.receive("q", max_messages=4, wait_seconds=5, connection=cs) as batch:
            assert batch.dead_letter(reason="SchemaError", description="version 1").ok
        yield emu
        core.close_all()


def test_the_plan_then_the_run_asked_first(
    ip: Any, sb: SbMagics, emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = tmp_path / "nb.yaml"
    path.write_text(PLAYBOOK, encoding="utf-8")
    plan = line(ip, f"sb_playbook {path}")
    assert plan.by_rule() == {"old-schema": 3, "(no rule)": 1}
    assert emulator.broker.counts("q")["dead_letter"] == 4 and emulator.broker.counts("parked")["active"] == 0
    asked = answer(monkeypatch, "run")
    done = line(ip, f"sb_playbook {path} --run")
    assert asked and "Run playbook nb: 3 message(s)" in asked[0], asked
    assert done.exit_code == 0 and done.counts["parked"] == 3, done
    assert emulator.broker.counts("q")["dead_letter"] == 1 and emulator.broker.counts("parked")["active"] == 3
    assert "3 parked" in capsys.readouterr().out.strip().splitlines()[-1]
