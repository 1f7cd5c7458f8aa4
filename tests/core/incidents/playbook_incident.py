"""An incident on the emulator, for the playbook tests and tutorial 12: two queues and a topic
subscription, four failure signatures, more than 1,000 dead letters, each kind told by its message
id's prefix (what the tests count the broker's answer by, independently of the kit).

- ``t-``: TimeoutException (orders, payments): safe to resubmit once the fix is out;
- ``s-``: SchemaError, bodies of version 1 (orders, the subscription): parked;
- ``x-``: expired test traffic, dead-lettered by the broker (TTLExpiredException): discarded;
- ``v-``: ValidationError (orders, the subscription): no rule, left for a person.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, emulator_config

SUBSCRIPTION = "orders-topic/subscriptions/audit"
TOPOLOGY = emulator_config(
    "incident",
    {
        "orders": {"DeadLetteringOnMessageExpiration": True},
        "payments": {"DeadLetteringOnMessageExpiration": True},
        "retry": {},
        "parked": {},
    },
    [
        {
            "Name": "orders-topic",
            "Properties": {},
            "Subscriptions": [{"Name": "audit", "Properties": {"DeadLetteringOnMessageExpiration": True}}],
        }
    ],
)
# entity -> kind -> how many dead letters of that kind it holds
INCIDENT = {
    "orders": {"t": 300, "s": 150, "x": 100, "v": 50},
    "payments": {"t": 200, "x": 100},
    SUBSCRIPTION: {"s": 100, "v": 50},
}
WHY = {
    "t": ("TimeoutException", "call to inventory timed out after {n} ms"),
    "s": ("SchemaError", "order version 1 is not supported (order {n})"),
    "v": ("ValidationError", "customer 'c-{n}' is unknown"),
}
PLAYBOOK = """\
playbook: orders-incident
entities: [orders, payments, "orders-topic/subscriptions/*"]
rules:
  - name: timeouts
    when: {signature: "TimeoutException: call to inventory timed out after * ms"}
    do: resubmit
    target: retry
{timeouts}
  - name: old-schema
    when: {where: "body_json.version < 2"}
    do: park
    to: parked
  - name: test-traffic
    when: {reason: TTLExpiredException}
    do: discard
audit: audit
"""


def playbook_text(timeouts: str = "") -> str:
    """The incident's playbook; ``timeouts``: more lines for the timeouts rule (a rate, a brake)."""
    return PLAYBOOK.replace("{timeouts}\n", timeouts)


def _sender(client: Any, entity: str) -> Any:
    topic, _, _ = entity.partition("/subscriptions/")
    return client.get_topic_sender(topic) if topic != entity else client.get_queue_sender(entity)


def _receiver(client: Any, entity: str, **options: Any) -> Any:
    topic, _, sub = entity.partition("/subscriptions/")
    if sub:
        return client.get_subscription_receiver(topic, sub, **options)
    return client.get_queue_receiver(entity, **options)


def make_incident(emulator: Emulator) -> None:
    """``INCIDENT``'s dead letters, dead-lettered as consumers and the broker do (TTL for ``x-``)."""
    import datetime as dt

    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        for entity, kinds in INCIDENT.items():
            with _sender(client, entity) as sender:
                for kind, n in kinds.items():
                    ttl = {"time_to_live": dt.timedelta(seconds=1)} if kind == "x" else {}
                    messages = [
                        ServiceBusMessage(
                            json.dumps({"version": 1 if kind == "s" else 2, "n": i}),
                            message_id=f"{kind}-{entity.split('/')[0]}-{i}",
                            **ttl,
                        )
                        for i in range(n)
                    ]
                    for start in range(0, n, 200):
                        sender.send_messages(messages[start : start + 200])
            emulator.advance(2)  # the x- messages expire: the broker dead-letters them (TTLExpiredException)
            with _receiver(client, entity) as receiver:
                while True:
                    got = receiver.receive_messages(max_message_count=200, max_wait_time=1)
                    if not got:
                        break
                    for m in got:
                        reason, text = WHY[str(m.message_id)[0]]
                        receiver.dead_letter_message(
                            m, reason=reason, error_description=text.format(n=m.sequence_number)
                        )
    assert sum(dead_letter_kinds(emulator).values()) == sum(sum(k.values()) for k in INCIDENT.values())


def ids_in(emulator: Emulator, entity: str, dead_letter: bool = False) -> list[str]:
    """The message ids in ``entity`` (or its dead-letter queue), peeked through the SDK."""
    found: list[str] = []
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        sub_queue = {"sub_queue": ServiceBusSubQueue.DEAD_LETTER} if dead_letter else {}
        with _receiver(client, entity, **sub_queue) as receiver:
            after = 0
            while True:
                page = receiver.peek_messages(max_message_count=250, sequence_number=after + 1)
                if not page:
                    return found
                found += [str(m.message_id) for m in page]
                after = page[-1].sequence_number


def dead_letter_kinds(emulator: Emulator) -> Counter[tuple[str, str]]:
    """(entity, kind) -> dead letters of that kind there, read through the SDK."""
    return Counter((entity, i[0]) for entity in INCIDENT for i in ids_in(emulator, entity, dead_letter=True))
