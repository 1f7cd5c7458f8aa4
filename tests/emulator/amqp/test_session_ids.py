"""Session receivers: the session id must be a string, as Service Bus requires."""

from __future__ import annotations

import asyncio

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from sbnotebook.emulator import Emulator

pytestmark = pytest.mark.timeout(120)


def test_a_non_string_session_id_is_refused(quick_client: ServiceBusClient) -> None:
    with pytest.raises(ServiceBusError) as err:
        with quick_client.get_queue_receiver("sq", session_id=1, max_wait_time=2) as r:  # type: ignore[arg-type]
            r.receive_messages(max_wait_time=1)
    assert "session" in str(err.value).lower()


def test_a_string_session_id_still_works(client: ServiceBusClient) -> None:
    with client.get_queue_sender("sq") as s:
        s.send_messages(ServiceBusMessage("x", session_id="1"))
    with client.get_queue_receiver("sq", session_id="1", max_wait_time=5) as r:
        (m,) = r.receive_messages(max_wait_time=5)
        assert m.session_id == "1"
        r.complete_message(m)


def test_a_non_string_session_id_is_refused_async(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> None:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_receiver("sq", session_id=1, max_wait_time=2) as r:  # type: ignore[arg-type]
                await r.receive_messages(max_wait_time=1)

    with pytest.raises(ServiceBusError):
        asyncio.run(run())
