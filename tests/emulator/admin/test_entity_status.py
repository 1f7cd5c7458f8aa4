"""An entity's Status, set through the administration API, is what the broker does: Disabled
refuses sending and receiving, SendDisabled sending, ReceiveDisabled receiving, with Service Bus's
``com.microsoft:entity-disabled`` (the SDK's MessagingEntityDisabledError) and words."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityDisabledError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.emulator import Emulator
from tests.helpers import send


def _set(admin: ServiceBusAdministrationClient, status: str) -> None:
    admin.update_queue(admin.get_queue("q"), status=status)


def _can_send(client: ServiceBusClient) -> bool:
    try:
        send(client, "q", "probe")
    except MessagingEntityDisabledError as exc:
        assert "is currently disabled" in str(exc)
        return False
    return True


def _can_receive(client: ServiceBusClient) -> bool:
    try:
        with client.get_queue_receiver("q", max_wait_time=1) as r:
            for m in r.receive_messages(max_message_count=1, max_wait_time=1):
                r.complete_message(m)
    except MessagingEntityDisabledError as exc:
        assert "is currently disabled" in str(exc)
        return False
    return True


@pytest.mark.parametrize(
    ("status", "sends", "receives"),
    [
        ("Active", True, True),
        ("SendDisabled", False, True),
        ("ReceiveDisabled", True, False),
        ("Disabled", False, False),
    ],
)
def test_a_queue_s_status_decides_what_it_takes(
    emulator: Emulator,
    admin: ServiceBusAdministrationClient,
    quick_client: ServiceBusClient,
    status: str,
    sends: bool,
    receives: bool,
) -> None:
    send(quick_client, "q", "waiting")
    _set(admin, status)
    assert admin.get_queue("q").status == status
    assert (_can_send(quick_client), _can_receive(quick_client)) == (sends, receives)
    assert emulator.broker.counts("q")["active"] == 1 + sends - receives
    _set(admin, "Active")  # enabled again: both work
    assert (_can_send(quick_client), _can_receive(quick_client)) == (True, True)


def test_a_send_disabled_topic_refuses_with_service_bus_s_words(
    admin: ServiceBusAdministrationClient, quick_client: ServiceBusClient
) -> None:
    admin.update_topic(admin.get_topic("t"), status="SendDisabled")
    with pytest.raises(
        MessagingEntityDisabledError, match=r"'testns:Topic:t' is currently disabled for Send operations"
    ):
        with quick_client.get_topic_sender("t") as s:
            s.send_messages(ServiceBusMessage("no"))
