"""What the panel tests start from: dead letters with reasons and descriptions."""

from __future__ import annotations

import json

from azure.servicebus import ServiceBusClient

from tests.helpers import send


def dead_letter(client: ServiceBusClient, queue: str, reasons: list[str], bodies: list[str] | None = None) -> None:
    bodies = bodies or [json.dumps({"n": i, "currency": "usd"}) for i in range(len(reasons))]
    send(client, queue, *bodies)
    with client.get_queue_receiver(queue) as r:
        got = r.receive_messages(max_message_count=len(reasons), max_wait_time=5)
        for m, reason in zip(got, reasons, strict=True):
            r.dead_letter_message(m, reason=reason, error_description=f"{reason} happened")
