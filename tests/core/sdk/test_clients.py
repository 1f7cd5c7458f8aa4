"""The SDK's own clients from core's public names (``core/sdk/clients.py``): what the pytest plugin
and the demo hand out or read with, so that no module outside ``core/sdk/`` imports ``azure.*``.
Each against the emulator, read back on another client."""

from __future__ import annotations

import asyncio

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.emulator import Emulator


def test_sdk_client_sends_and_peeks_sync_and_async(emulator: Emulator) -> None:
    with core.sdk_client(emulator.connection_string) as client, client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("sync"))

    async def peek() -> list[str]:
        async with core.sdk_client(emulator.connection_string, aio=True) as client:
            async with client.get_queue_receiver("q") as receiver:
                return [str(m) for m in await receiver.peek_messages(max_message_count=10)]

    assert asyncio.run(peek()) == ["sync"]
    assert emulator.broker.counts("q")["active"] == 1


def test_sdk_client_needs_a_connection_string_or_a_namespace_and_a_credential() -> None:
    with pytest.raises(ValueError, match="connection string, or a fully qualified namespace"):
        core.sdk_client(fully_qualified_namespace="contoso.servicebus.windows.net")


def test_sdk_admin_client_reaches_the_emulators_plain_http_api(emulator: Emulator) -> None:
    """An emulator's string (UseDevelopmentEmulator=true) gets the plain HTTP transport; the SDK's
    client alone speaks HTTPS to that port and fails."""
    with core.sdk_admin_client(emulator.connection_string) as admin:
        assert admin.get_queue("q").name == "q"
    alone = ServiceBusAdministrationClient.from_connection_string(
        emulator.connection_string, retry_total=0, connection_timeout=5
    )
    with alone, pytest.raises(Exception) as refused:
        alone.get_queue("q")
    assert not core.is_entity_not_found(refused.value)  # it never reached the API


def test_async_sdk_admin_client(emulator: Emulator) -> None:
    async def names() -> list[str]:
        async with core.sdk_admin_client(emulator.connection_string, aio=True) as admin:
            return [q.name async for q in admin.list_queues()]

    assert "q" in asyncio.run(names())


def test_an_entity_the_admin_api_does_not_have_is_not_found(emulator: Emulator) -> None:
    with core.sdk_admin_client(emulator.connection_string, retry_total=0) as admin:
        with pytest.raises(Exception) as missing:
            admin.get_queue_runtime_properties("no-such-queue")
    assert core.is_entity_not_found(missing.value)
    assert not core.is_entity_not_found(ValueError("no-such-queue not found"))  # by type, not by text


def test_rule_arguments_make_the_rules_the_admin_client_creates(emulator: Emulator) -> None:
    with core.sdk_admin_client(emulator.connection_string) as admin:
        admin.create_topic("t-rules")
        admin.create_subscription("t-rules", "s")
        admin.create_rule(
            "t-rules",
            "s",
            "sql",
            **core.rule_arguments(
                sql="n > @min", sql_parameters={"@min": 2}, action="SET tag = @t", action_parameters={"@t": "x"}
            ),
        )
        admin.create_rule("t-rules", "s", "corr", **core.rule_arguments(correlation={"label": "order"}))
        rules = {r.name: r for r in admin.list_rules("t-rules", "s")}
    assert rules["sql"].filter.sql_expression == "n > @min" and rules["sql"].filter.parameters == {"@min": 2}
    assert rules["sql"].action.sql_expression == "SET tag = @t" and rules["sql"].action.parameters == {"@t": "x"}
    assert rules["corr"].filter.label == "order" and rules["corr"].action is None
    for wrong in ({}, {"sql": "1=1", "correlation": {"label": "x"}}):
        with pytest.raises(ValueError, match="SQL filter or a correlation filter"):
            core.rule_arguments(**wrong)  # type: ignore[arg-type]


def test_tls_port_options_name_the_port_for_a_host_with_one() -> None:
    options = core.tls_port_options("localhost:5300")
    assert options["custom_endpoint_address"] == "sb://localhost:5300"
    assert options["transport_type"].name == "Amqp"  # with the endpoint alone the SDK would use WebSockets
    assert core.tls_port_options("contoso.servicebus.windows.net") == {}
