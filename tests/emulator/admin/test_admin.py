"""The administration API through the SDK's ServiceBusAdministrationClient."""

from __future__ import annotations

import datetime as dt
import urllib.request
from urllib.error import HTTPError

import pytest
from azure.core.exceptions import ClientAuthenticationError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import CorrelationRuleFilter, ServiceBusAdministrationClient, SqlRuleFilter

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from tests.helpers import drain, send


def test_runtime_counts_match_the_broker(client: ServiceBusClient, admin: ServiceBusAdministrationClient) -> None:
    """Rule: runtime properties report active, dead-letter and scheduled counts as they are now."""
    send(client, "q", "a", "b", "c")
    with client.get_queue_sender("q") as s:
        s.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.dead_letter_message(m, reason="x")
    props = admin.get_queue_runtime_properties("q")
    assert props.active_message_count == 2
    assert props.dead_letter_message_count == 1
    assert props.scheduled_message_count == 1
    assert props.transfer_message_count == 0
    assert props.total_message_count == 4
    assert props.size_in_bytes > 0
    drain(client, "q")
    assert admin.get_queue_runtime_properties("q").active_message_count == 0


def test_queue_properties_come_from_the_topology(admin: ServiceBusAdministrationClient) -> None:
    q = admin.get_queue("short")
    assert q.lock_duration == dt.timedelta(seconds=1)
    assert q.max_delivery_count == 3
    d = admin.get_queue("dedup")
    assert d.requires_duplicate_detection is True
    assert d.duplicate_detection_history_time_window == dt.timedelta(minutes=10)
    assert admin.get_queue("fwd-src").forward_to.rstrip("/").endswith("fwd-dst")
    assert admin.get_queue("sq").requires_session is True


def test_create_use_update_delete_a_queue(
    admin: ServiceBusAdministrationClient, quick_client: ServiceBusClient
) -> None:
    admin.create_queue("made", lock_duration=dt.timedelta(seconds=20), max_delivery_count=4)
    with pytest.raises(ResourceExistsError):
        admin.create_queue("made")
    send(quick_client, "made", "hello")
    assert admin.get_queue_runtime_properties("made").active_message_count == 1
    q = admin.get_queue("made")
    q.max_delivery_count = 7
    admin.update_queue(q)
    assert admin.get_queue("made").max_delivery_count == 7
    assert "made" in [x.name for x in admin.list_queues()]
    admin.delete_queue("made")
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("made")


def test_topics_subscriptions_and_rules(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    admin.create_topic("news")
    admin.create_subscription("news", "sport")
    admin.delete_rule("news", "sport", "$Default")
    admin.create_rule("news", "sport", "sql", filter=SqlRuleFilter("kind = 'sport'"))
    admin.create_rule("news", "sport", "corr", filter=CorrelationRuleFilter(label="urgent"))
    rules = {r.name: r for r in admin.list_rules("news", "sport")}
    assert set(rules) == {"sql", "corr"}
    assert rules["sql"].filter.sql_expression == "kind = 'sport'"
    assert rules["corr"].filter.label == "urgent"
    with client.get_topic_sender("news") as s:
        s.send_messages(
            [
                ServiceBusMessage("match-sql", application_properties={"kind": "sport"}),
                ServiceBusMessage("match-corr", subject="urgent"),
                ServiceBusMessage("neither"),
            ]
        )
    assert admin.get_subscription_runtime_properties("news", "sport").active_message_count == 2
    assert admin.get_topic_runtime_properties("news").subscription_count == 1
    assert [s.name for s in admin.list_subscriptions("news")] == ["sport"]
    admin.delete_subscription("news", "sport")
    admin.delete_topic("news")
    assert "news" not in [t.name for t in admin.list_topics()]


def test_subscription_dead_letter_count(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("x"))
    with client.get_subscription_receiver("t", "all", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.dead_letter_message(m)
    props = admin.get_subscription_runtime_properties("t", "all")
    assert (props.active_message_count, props.dead_letter_message_count) == (0, 1)
    with client.get_subscription_receiver("t", "all", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as d:
        assert len(d.peek_messages(max_message_count=5, sequence_number=1)) == 1


def test_list_paging_and_namespace(admin: ServiceBusAdministrationClient) -> None:
    for i in range(120):
        admin.create_queue(f"bulk-{i:03d}")
    names = [q.name for q in admin.list_queues()]
    assert len([n for n in names if n.startswith("bulk-")]) == 120
    ns = admin.get_namespace_properties()
    assert ns.name == "testns" and ns.messaging_sku == "Standard"


def test_requests_without_a_valid_token_are_refused(emulator: Emulator) -> None:
    """Rule: the administration API requires a valid SAS token (401 otherwise)."""
    with pytest.raises(HTTPError) as err:
        urllib.request.urlopen(f"{emulator.admin_url}/q?api-version=2021-05", timeout=5)
    assert err.value.code == 401
    bad = emulator.connection_string.replace("SAS_KEY_VALUE", "wrong")
    assert emulator.admin_port is not None
    with emulator_admin_client(bad, port=emulator.admin_port) as admin:
        with pytest.raises(ClientAuthenticationError):
            admin.get_queue("q")
