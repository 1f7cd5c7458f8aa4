"""%sb_copy with a glob, as typed: 'prod:orders*' home: and the dead-letter form, one Report with a
line per entity, missing targets refused by name or made with --create."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook.core import Report
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.core.incidents.test_copy_many import _active, _bodies, home, prod
from tests.helpers import magic_fails
from tests.shell import line

ip = shell.ip
__all__ = ["home", "prod"]  # the fixtures, from the core tests


@pytest.fixture
def sb(
    ip: Any, emulator: Emulator, prod: Emulator, home: Emulator, capsys: pytest.CaptureFixture[str]
) -> Iterator[SbMagics]:
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    ip.run_line_magic("sb_connect", emulator.connection_string)
    ip.run_line_magic("sb_connect", f"--as prod {prod.connection_string}")
    ip.run_line_magic("sb_connect", f"--as home {home.connection_string}")
    capsys.readouterr()
    yield magics
    unload_ipython_extension(ip)


def test_sb_copy_of_a_glob(ip: Any, sb: SbMagics, prod: Emulator, home: Emulator, capsys: Any) -> None:
    assert "Not in home: orders-us" in magic_fails(ip, "sb_copy prod:orders* home: --yes")
    assert "give the target as NAME:" in magic_fails(ip, "sb_copy prod:orders* home:orders --yes")
    report = line(ip, "sb_copy 'prod:orders*/$deadletterqueue' home: --yes --create")
    printed = capsys.readouterr().out
    assert "prod:orders-eu/$deadletterqueue -> home:orders-eu: 4 message(s)" in printed
    assert "home:orders-us: 0 message(s) (made from the source's description)" in printed
    assert isinstance(report, Report) and report.count("sent") == 4 and len(report.parts) == 2
    assert str(report).splitlines()[1].startswith("  copy prod:orders-eu/$deadletterqueue -> home:orders-eu: 4 sent")
    assert _bodies(home, "orders-eu") == sorted(f"orders-eu {i}" for i in range(4))
    assert _active(emulator_admin_client(home.connection_string), "payments") == 0
