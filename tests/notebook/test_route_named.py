"""%sb_route with named connections (``%sb_connect --as prod``): the topic's rules read through
``NAME:TOPIC``'s administration API, the messages through ``NAME:ENTITY``'s (or the default
connection's, whatever the topic's is), the answers checked against what prod's broker delivered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import magic_fails
from tests.notebook.test_route import _orders
from tests.shell import line, loaded

ip = shell.ip


@pytest.fixture
def prod() -> Iterator[Emulator]:
    with Emulator(TEST_TOPOLOGY) as emu:
        yield emu


@pytest.fixture
def sb(ip: Any, emulator: Emulator, prod: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    with loaded(ip, capsys, emulator.connection_string, f"--as prod {prod.connection_string}") as magics:
        yield magics


def _matched(frame: Any) -> list[list[str]]:
    return frame[frame.matched][["message_id", "subscription"]].values.tolist()


def test_the_topic_and_the_messages_each_through_its_own_connection(
    ip: Any,
    sb: SbMagics,
    prod: Emulator,
    admin: ServiceBusAdministrationClient,
    client: ServiceBusClient,
    capsys: Any,
) -> None:
    # prod: the topic orders (eu: region IN ('eu', 'uk'); big: total > 100) and orders-audit, 16 and 17 sent to both.
    with (
        emulator_admin_client(prod.connection_string) as prod_admin,
        ServiceBusClient.from_connection_string(prod.connection_string) as prod_client,
    ):
        _orders(prod_admin, prod_client)
        with prod_client.get_subscription_receiver("orders", "eu") as r:
            delivered_eu = [m.message_id for m in r.peek_messages(10)]
        with prod_client.get_subscription_receiver("orders", "big") as r:
            delivered_big = [m.message_id for m in r.peek_messages(10)]
    assert (delivered_eu, delivered_big) == (["16"], ["17"])
    # The default connection: no topic orders, and its own orders-audit holding 18 (uk, 7).
    admin.create_queue("orders-audit")
    with client.get_queue_sender("orders-audit") as sender:
        sender.send_messages(
            ServiceBusMessage("{}", message_id="18", application_properties={"region": "uk", "total": 7})
        )

    both_prod = line(ip, "sb_route prod:orders prod:orders-audit")
    assert _matched(both_prod) == [["16", "eu"], ["17", "big"]]  # as prod's broker delivered
    printed = capsys.readouterr().out
    assert "big: does not get it\n      big: total > 100 is false: user.total was 50" in printed

    # The rules are prod's, the messages the default connection's (an unnamed SOURCE stays the default's).
    mixed = line(ip, "sb_route prod:orders orders-audit")
    assert _matched(mixed) == [["18", "eu"]]
    line(ip, "sb_route prod:orders prod:orders-audit --summary")
    printed = capsys.readouterr().out
    assert "2 messages from prod:orders-audit sent to prod:orders (rules from the administration API)" in printed

    # The prefix is what reads prod: the default connection has no topic orders, and an unknown name is one line.
    assert "orders" in magic_fails(ip, "sb_route orders prod:orders-audit")
    assert "No connection named 'nope'" in magic_fails(ip, "sb_route nope:orders orders-audit")
    assert "No connection named 'nope'" in magic_fails(ip, "sb_route prod:orders nope:orders-audit")
