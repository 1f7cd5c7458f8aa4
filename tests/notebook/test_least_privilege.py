"""The magics with a least-privilege key (an entity's Listen-only or Send-only policy): what the key
allows works; what it does not fails the cell with one line naming the missing right."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from tests.conftest import entity_keys_emulator
from tests.helpers import magic_fails


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    return globalipapp.start_ipython() or globalipapp.get_ipython()


@pytest.fixture
def emu(ip: Any) -> Iterator[Emulator]:
    with entity_keys_emulator() as emulator:
        unload_ipython_extension(ip)
        load_ipython_extension(ip)
        yield emulator
        unload_ipython_extension(ip)


def test_listen_only_key_peeks_and_cannot_send(ip: Any, emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("sb_connect", emu.connection_string)  # the root key
    ip.run_cell_magic("sb_send", "q", '["first", "second"]')
    ip.run_line_magic("sb_connect", emu.policy_connection_string("reader", "q"))
    peeked = ip.run_line_magic("sb_peek", "q")
    assert len(peeked) == 2
    shown = magic_fails(ip, "sb_send q", '["not allowed"]')
    assert "'Send' right" in shown and "SharedAccessKey" not in shown
    assert emu.broker.counts("q")["active"] == 2
    assert "'Manage' right" in magic_fails(ip, "sb_stats q")  # counts come from the administration API


def test_send_only_key_sends_and_cannot_peek(ip: Any, emu: Emulator) -> None:
    ip.run_line_magic("sb_connect", emu.policy_connection_string("writer", "q"))
    ip.run_cell_magic("sb_send", "q", "[1, 2, 3]")
    assert emu.broker.counts("q")["active"] == 3
    assert "'Listen' right" in magic_fails(ip, "sb_peek q")
    assert "'Listen' right" in magic_fails(ip, "sb_browse q")  # the panel opens on a peek
    assert emu.broker.counts("q")["active"] == 3
