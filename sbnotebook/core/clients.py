"""Opening SDK senders and receivers for an EntityPath."""

from __future__ import annotations

from typing import Any

from .entities import EntityPath
from .errors import EntityNameError


def sub_queue_of(path: EntityPath) -> Any:
    from azure.servicebus import ServiceBusSubQueue

    if path.sub_queue == "dead_letter":
        return ServiceBusSubQueue.DEAD_LETTER
    if path.sub_queue == "transfer_dead_letter":
        return ServiceBusSubQueue.TRANSFER_DEAD_LETTER
    return None


def receiver(client: Any, path: EntityPath, **kwargs: Any) -> Any:
    """A sync or async SDK receiver for a queue, subscription or dead-letter queue."""
    sub_queue = sub_queue_of(path)
    if sub_queue is not None:
        kwargs["sub_queue"] = sub_queue
    if path.subscription is not None:
        return client.get_subscription_receiver(path.name, path.subscription, **kwargs)
    return client.get_queue_receiver(path.name, **kwargs)


def sender(client: Any, path: EntityPath, **kwargs: Any) -> Any:
    """A sender for a queue or topic (senders cannot target subscriptions or dead-letter queues)."""
    if path.subscription is not None or path.sub_queue is not None:
        raise EntityNameError(
            f"Cannot send to '{path}': send to a queue or a topic. To put a message back from a "
            "subscription's dead-letter queue without fanning out, resubmit to a queue that the "
            "subscription forwards from, or use resubmit(..., target=...)."
        )
    return client.get_queue_sender(path.name, **kwargs)
