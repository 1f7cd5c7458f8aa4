"""%sb_copy with a glob, as typed: 'prod:orders*' home: and the dead-letter form, one Report with a
line per entity, missing targets refused by name or made with --create."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core import Report
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.core.incidents.test_copy_many import _active, _bodies, home, prod
from tests.helpers import magic_fails
from tests.shell import line
from tests.windows import broker, naive_utc_text

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


def test_sb_copy_of_a_glob_with_a_window(ip: Any, sb: SbMagics, prod: Emulator, home: Emulator, capsys: Any) -> None:
    """Each matching queue's messages enqueued in the window, counted and copied; no other."""
    t_mid = dt.datetime.now(dt.UTC)
    time.sleep(0.1)
    late = {"orders-eu": 3, "orders-us": 4}
    with ServiceBusClient.from_connection_string(prod.connection_string) as client:
        for name, n in late.items():
            with client.get_queue_sender(name) as sender:
                sender.send_messages([ServiceBusMessage(f"{name} late {i}") for i in range(n)])
        at_prod = {name: broker(client, name) for name in late}
    report = line(ip, f"sb_copy 'prod:orders*' home: --create --yes --enqueued-after {naive_utc_text(t_mid)}")
    printed = capsys.readouterr().out
    assert "prod:orders-eu -> home:orders-eu: 3 message(s)" in printed, printed
    assert "home:orders-us: 4 message(s) (made from the source's description)" in printed
    assert "Copy 2 entities (enqueued from " in printed
    assert isinstance(report, Report) and report.count("sent") == 7
    for name in late:
        assert _bodies(home, name) == sorted(p.body for p in at_prod[name] if p.enqueued >= t_mid)
