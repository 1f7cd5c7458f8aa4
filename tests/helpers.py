"""Small helpers for driving the SDK in tests."""

from __future__ import annotations

import time
from collections.abc import Callable

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus import ServiceBusReceiveMode as Mode


def send(client: ServiceBusClient, queue: str, *bodies: str, **kwargs: object) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(b, **kwargs) for b in bodies])  # type: ignore[arg-type]


def drain(
    client: ServiceBusClient, queue: str, *, sub_queue: str | None = None, wait: float = 1.0
) -> list[ServiceBusReceivedMessage]:
    """Receive-and-delete everything there is (what is left in an entity)."""
    out: list[ServiceBusReceivedMessage] = []
    with client.get_queue_receiver(
        queue, sub_queue=sub_queue, receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=wait
    ) as receiver:
        while True:
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=wait)
            if not batch:
                return out
            out.extend(batch)


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")
