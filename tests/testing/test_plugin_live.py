"""``--servicebus-live`` without Azure: its code path (unique entities created and deleted through
the administration API) run against an embedded emulator's API, which is the ATOM API the SDK's
admin client speaks to Service Bus. A real namespace is not reachable from the test machine."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusMessage

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator, Topology
from sbnotebook.testing.live import create_entities, delete_entities, unique_names
from tests.helpers import QuickCloseClient
from tests.testing.sessions import RECORD, records, run

EMPTY = {"UserConfig": {"Namespaces": [{"Name": "live-stand-in"}]}}


@pytest.fixture
def stand_in() -> Iterator[Emulator]:
    """The 'real namespace': an emulator with no entities of its own."""
    with Emulator(EMPTY) as emu:
        yield emu


def test_a_live_run_creates_unique_entities_and_deletes_them(
    stand_in: Emulator, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(RECORD)
    monkeypatch.setenv("SB_RECORD", str(pytester.path / "record.jsonl"))
    monkeypatch.setenv("SERVICEBUS_CONNECTION_STRING", stand_in.connection_string)
    pytester.makepyfile(
        """
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

pytestmark = pytest.mark.servicebus_topology(
    queues={"orders": {"max_delivery_count": 3}},
    topics={"events": {"audit": None, "eu": {"sql_filter": "region = 'eu'"}}},
)

def test_send_and_receive(servicebus_namespace, servicebus_client, servicebus_admin_client):
    orders, events = servicebus_namespace.name("orders"), servicebus_namespace.name("events")
    record(orders=orders, events=events)
    assert orders.startswith("orders-") and events.startswith("events-")
    assert servicebus_admin_client.get_queue(orders).max_delivery_count == 3
    with servicebus_client.get_topic_sender(events) as sender:
        sender.send_messages([ServiceBusMessage("eu", application_properties={"region": "eu"}),
                              ServiceBusMessage("us", application_properties={"region": "us"})])
    with servicebus_client.get_subscription_receiver(events, "eu", max_wait_time=5) as receiver:
        assert [str(m) for m in receiver.receive_messages(max_message_count=5, max_wait_time=30)] == ["eu"]

def test_fails_and_still_cleans_up(servicebus_namespace):
    record(orders=servicebus_namespace.name("orders"), events=servicebus_namespace.name("events"))
    assert False

def test_needs_faults(servicebus_emulator):
    servicebus_emulator.reject_sends("orders")
"""
    )
    result = run(pytester, "--servicebus-live", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*fault controls*need the embedded emulator*--servicebus-live*"])
    seen = records(pytester.path / "record.jsonl")
    assert len(seen) == 2 and seen[0]["orders"] != seen[1]["orders"]  # unique per test
    # each test created its queue and topic on the 'real' namespace and deleted them after
    assert stand_in.broker.entities == []
    assert stand_in.requests["admin DELETE"] >= 6  # 3 tests x (queue, topic); the $Default rule of eu too


def test_entities_with_properties_forwarding_and_rules(stand_in: Emulator) -> None:
    topology = Topology.from_dict(
        {
            "UserConfig": {
                "Namespaces": [
                    {
                        "Name": "ns",
                        "Queues": [
                            {"Name": "source", "Properties": {"ForwardTo": "target", "LockDuration": "PT10S"}},
                            {"Name": "target", "Properties": {"RequiresSession": False, "MaxDeliveryCount": 4}},
                            {
                                "Name": "dedup",
                                "Properties": {
                                    "RequiresDuplicateDetection": True,
                                    "DuplicateDetectionHistoryTimeWindow": "PT2M",
                                    "DefaultMessageTimeToLive": "PT1H",
                                },
                            },
                        ],
                        "Topics": [
                            {
                                "Name": "events",
                                "Subscriptions": [
                                    {"Name": "sessions", "Properties": {"RequiresSession": True}},
                                    {
                                        "Name": "eu",
                                        "Rules": [
                                            {
                                                "Name": "eu",
                                                "Properties": {
                                                    "FilterType": "Correlation",
                                                    "CorrelationFilter": {"Label": "order", "Properties": {"r": "eu"}},
                                                    "Action": {"SqlExpression": "SET routed = 'yes'"},
                                                },
                                            }
                                        ],
                                    },
                                    {"Name": "to-queue", "Properties": {"ForwardTo": "target"}},
                                ],
                            }
                        ],
                    }
                ]
            }
        }
    )
    names = unique_names(topology, "abc123")
    created: list[str] = []
    with emulator_admin_client(stand_in.connection_string) as admin:
        create_entities(admin, topology, names, created)
        assert sorted(created) == sorted(names.values())
        source = admin.get_queue("source-abc123")
        assert source.forward_to.endswith("target-abc123") and source.lock_duration == datetime.timedelta(seconds=10)
        assert admin.get_queue("target-abc123").max_delivery_count == 4
        dedup = admin.get_queue("dedup-abc123")
        assert dedup.requires_duplicate_detection
        assert dedup.duplicate_detection_history_time_window == datetime.timedelta(minutes=2)
        assert dedup.default_message_time_to_live == datetime.timedelta(hours=1)
        assert admin.get_subscription("events-abc123", "sessions").requires_session
        assert [r.name for r in admin.list_rules("events-abc123", "eu")] == ["eu"]
        assert admin.get_subscription("events-abc123", "to-queue").forward_to.endswith("target-abc123")
        with QuickCloseClient.from_connection_string(stand_in.connection_string) as client:
            with client.get_topic_sender("events-abc123") as sender:
                sender.send_messages(ServiceBusMessage("o", subject="order", application_properties={"r": "eu"}))
            with client.get_subscription_receiver("events-abc123", "eu", max_wait_time=5) as receiver:
                [got] = receiver.receive_messages(max_wait_time=5)
                assert got.application_properties[b"routed"] == b"yes"
                receiver.complete_message(got)
        assert stand_in.broker.counts("target-abc123")["active"] == 1  # forwarded from to-queue
        assert delete_entities(admin, created) == []
    assert stand_in.broker.entities == []


def test_a_failed_delete_is_reported_not_swallowed(stand_in: Emulator) -> None:
    with emulator_admin_client(stand_in.connection_string) as admin:
        failed = delete_entities(admin, ["never-created"])
    assert len(failed) == 1 and failed[0].startswith("never-created: ResourceNotFoundError")
