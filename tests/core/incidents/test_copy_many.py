"""Many entities in one copy (issue 55, What to build 3): the queues a glob matches, or their
dead-letter queues, each copied into the queue of the same name of another namespace; the broker's
state read by the administration API and a second client, not the kit's report."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.core import close_all
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from tests.helpers import InterruptAtFirstProgress
from tests.interrupting import answered
from tests.windows import broker

EMPTY = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [], "Topics": []}]}}
SENT = {"orders-eu": 30, "orders-us": 300, "payments": 10}  # orders-us: several sends (an interrupt between)


@pytest.fixture
def prod() -> Iterator[Emulator]:
    """Production: orders-eu, orders-us (each with a few dead letters), payments, a topic orders-events."""
    with Emulator(EMPTY) as emu:
        admin = emulator_admin_client(emu.connection_string)
        admin.create_queue("orders-eu", max_delivery_count=3, lock_duration=core.duration("45s"))
        admin.create_queue("orders-us", forward_dead_lettered_messages_to="payments")
        admin.create_queue("payments")
        admin.create_topic("orders-events")
        admin.create_subscription("orders-events", "all")
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            for name, n in SENT.items():
                with client.get_queue_sender(name) as sender:
                    sender.send_messages(
                        [ServiceBusMessage(f"{name} {i}", application_properties={"i": i}) for i in range(n)]
                    )
            with client.get_queue_receiver("orders-eu") as receiver:
                for msg in receiver.receive_messages(max_message_count=4, max_wait_time=5):
                    receiver.dead_letter_message(msg, reason="bad")
        yield emu
        close_all()


@pytest.fixture
def home() -> Iterator[Emulator]:
    with Emulator(EMPTY) as emu:
        admin = emulator_admin_client(emu.connection_string)
        for name in ("orders-eu", "payments"):
            admin.create_queue(name)
        yield emu
        close_all()


def _active(admin: ServiceBusAdministrationClient, name: str) -> int:
    return int(admin.get_queue_runtime_properties(name).active_message_count)


def _bodies(emulator: Emulator, entity: str) -> list[str]:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(entity) as receiver:
            return sorted(str(m) for m in receiver.peek_messages(max_message_count=400))


def _copy_interrupted_in_orders_us(prod: Emulator, home: Emulator, **options: Any) -> dict[str, Any]:
    """``core.copy_many("orders*", ...)`` one send at a time, interrupted at the first progress of its
    second entity (orders-us); returns the connections, for the same call again."""
    hook = InterruptAtFirstProgress()

    def second_entity(match: Any, report: core.Report) -> None:
        if match.source.name == "orders-us":
            hook(report)

    kwargs: dict[str, Any] = {"source_connection": prod.connection_string, "connection": home.connection_string}
    with answered(hook):
        report = core.copy_many("orders*", max_in_flight=1, progress=second_entity, **options, **kwargs)
    # Its Report, not a KeyboardInterrupt: orders-eu copied, orders-us interrupted (what it sent confirmed).
    assert core.interrupted(report) and [p.entity for p in report.parts] == ["orders-eu", "orders-us"], report
    assert report.parts[0].ok and core.interrupted(report.parts[1])
    return kwargs


def test_a_glob_copy_fills_each_matching_entity_at_home_and_leaves_the_rest(prod: Emulator, home: Emulator) -> None:
    at_home, at_prod = emulator_admin_client(home.connection_string), emulator_admin_client(prod.connection_string)
    with pytest.raises(core.EntityNotFoundError, match="Not in the target namespace: orders-us"):
        core.copy_many("orders*", source_connection=prod.connection_string, connection=home.connection_string)
    assert _active(at_home, "orders-eu") == 0  # refused before anything was copied
    report = core.copy_many(
        "orders*", source_connection=prod.connection_string, connection=home.connection_string, create=True
    )
    assert [str(p.entity) for p in report.parts] == ["orders-eu", "orders-us"] and report.count("sent") == 326
    assert "orders-eu -> orders-eu: 26 sent" in str(report) and "topics matched but not copied" in str(report)
    for name in ("orders-eu", "orders-us"):
        assert _bodies(home, name) == _bodies(prod, name)
    assert _active(at_home, "payments") == 0  # not matched: untouched
    made = at_home.get_queue("orders-us")
    assert (
        made.forward_dead_lettered_messages_to.rsplit("/", 1)[-1] == "payments"
    )  # made from the source's description (Service Bus returns sb://host/payments)
    assert {n: _active(at_prod, n) for n in SENT} == {"orders-eu": 26, "orders-us": 300, "payments": 10}


def test_a_glob_of_dead_letter_queues_copies_each_into_its_queue_at_home(prod: Emulator, home: Emulator) -> None:
    report = core.copy_many(
        "orders*/$deadletterqueue",
        source_connection=prod.connection_string,
        connection=home.connection_string,
        create=True,
    )
    assert report.count("sent") == 4
    assert _bodies(home, "orders-eu") == sorted(f"orders-eu {i}" for i in range(4))
    assert _active(emulator_admin_client(home.connection_string), "orders-us") == 0


def test_an_interrupted_glob_copy_resumes_per_entity_without_duplicates(prod: Emulator, home: Emulator) -> None:
    """Interrupted in the second entity: the same call again skips the first (copied in full) and
    copies the rest of the second. Copies in flight at the interrupt are sent again with the same
    ids (as for one entity), so the target with duplicate detection holds each message once."""
    window = core.duration("10m")
    emulator_admin_client(home.connection_string).create_queue(
        "orders-us", requires_duplicate_detection=True, duplicate_detection_history_time_window=window
    )
    kwargs = _copy_interrupted_in_orders_us(prod, home, create=True)
    at_home = emulator_admin_client(home.connection_string)
    assert _active(at_home, "orders-eu") == 26 and _active(at_home, "orders-us") < 300
    again = core.copy_many("orders*", create=True, **kwargs)
    assert "copied in full by an earlier run" in str(again.parts[0])
    assert _active(at_home, "orders-eu") == 26 and _active(at_home, "orders-us") == 300
    assert _bodies(home, "orders-us") == _bodies(prod, "orders-us")


def test_a_glob_copy_takes_each_entity_s_window_and_resumes_with_the_same_instants(
    prod: Emulator, home: Emulator
) -> None:
    """A window on a glob: each entity's messages enqueued in it, no other. An age is read once, for
    every entity; interrupted, the same call again takes the instants the first run read it as (read
    anew, the window would start after every message sent late, and the rest would never come)."""
    t_mid = dt.datetime.now(dt.UTC)
    time.sleep(0.1)
    late = {"orders-eu": 5, "orders-us": 250}
    with ServiceBusClient.from_connection_string(prod.connection_string) as client:
        for name, n in late.items():
            with client.get_queue_sender(name) as sender:
                sender.send_messages([ServiceBusMessage(f"{name} late {i}") for i in range(n)])
    emulator_admin_client(home.connection_string).create_queue(
        "orders-us", requires_duplicate_detection=True, duplicate_detection_history_time_window=core.duration("10m")
    )
    age = dt.datetime.now(dt.UTC) - t_mid  # "that long ago": t_mid, read now
    kwargs = _copy_interrupted_in_orders_us(prod, home, enqueued_after=age)
    at_home = emulator_admin_client(home.connection_string)
    assert _active(at_home, "orders-eu") == 5 and _active(at_home, "orders-us") < 250
    time.sleep(0.2)  # the same age read now would start after every late message
    again = core.copy_many("orders*", enqueued_after=age, **kwargs)
    assert "copied in full by an earlier run" in str(again.parts[0])
    with ServiceBusClient.from_connection_string(prod.connection_string) as client:
        at_prod = {name: broker(client, name) for name in late}
    for name, n in late.items():
        in_window = sorted(p.body for p in at_prod[name] if p.enqueued >= t_mid)  # read from the source
        assert _bodies(home, name) == in_window == sorted(f"{name} late {i}" for i in range(n))
    assert _active(at_home, "payments") == 0
