"""%sb_topology export, on this connection and on a named one, as a user types it: the file starts an
emulator with the same entities (read back through the administration API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.core.topology.test_topology_export import EMPTY, build_rich_namespace, namespace
from tests.helpers import magic_fails
from tests.shell import line, loaded

ip = shell.ip


@pytest.fixture
def prod() -> Iterator[Emulator]:
    with Emulator(EMPTY) as emu:
        build_rich_namespace(emulator_admin_client(emu.connection_string))
        yield emu


@pytest.fixture
def sb(ip: Any, emulator: Emulator, prod: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    with loaded(ip, capsys, emulator.connection_string, f"--as prod {prod.connection_string}") as magics:
        yield magics


def test_sb_topology_exports_this_connection_and_a_named_one(
    ip: Any, sb: SbMagics, emulator: Emulator, prod: Emulator, tmp_path: Path, capsys: Any
) -> None:
    here, there = tmp_path / "here.json", tmp_path / "prod.json"
    line(ip, f"sb_topology export {here}")
    assert "Exported 13 queues, 2 topics" in capsys.readouterr().out
    line(ip, f"sb_topology export prod: {there} --entities 'orders*'")
    printed = capsys.readouterr().out
    assert "Exported 3 queues, 0 topics" in printed and "forwarding targets of matching entities: audit" in printed
    assert [q["Name"] for q in json.loads(there.read_text())["UserConfig"]["Namespaces"][0]["Queues"]] == [
        "audit",
        "orders",
        "orders-sessions",
    ]
    with Emulator(str(here)) as home:
        assert namespace(emulator_admin_client(home.connection_string)) == namespace(
            emulator_admin_client(emulator.connection_string)
        )
    assert "No connection named 'nope'" in magic_fails(ip, f"sb_topology export nope: {there}")
    assert "Give the file" in magic_fails(ip, "sb_topology export prod:")
