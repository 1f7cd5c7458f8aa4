"""The ``sys.`` properties of a Service Bus message, as filters read them and actions write them.

Microsoft's "SQL filter syntax" page: ``sys`` names "a public property name of the BrokeredMessage
class"; "An attempt to evaluate a non-existent system property throws a FilterException": so a name
not listed here is refused when the rule is compiled. The filter-examples page: "Use system property
names from Azure.Messaging.ServiceBus.ServiceBusMessage in your filters. Subject ... maps to Label",
hence the aliases. Names are case-insensitive ("Property names are case-insensitive").
"""

from __future__ import annotations

# The message's broker properties ("Messages, payloads, and serialization") by their canonical
# name: True when a sender (or an action's SET) may change them, False when the broker sets them.
SYSTEM_PROPERTIES: dict[str, bool] = {
    "ContentType": True,
    "CorrelationId": True,
    "DeadLetterSource": False,
    "DeliveryCount": False,
    "EnqueuedSequenceNumber": False,
    "EnqueuedTimeUtc": False,
    "ExpiresAtUtc": False,
    "ForcePersistence": True,
    "Label": True,
    "LockedUntilUtc": False,
    "LockToken": False,
    "MessageId": True,
    "PartitionKey": True,
    "ReplyTo": True,
    "ReplyToSessionId": True,
    "ScheduledEnqueueTimeUtc": True,
    "SequenceNumber": False,
    "SessionId": True,
    "Size": False,
    "State": False,
    "TimeToLive": True,
    "To": True,
    "ViaPartitionKey": True,
}
# ServiceBusMessage's names for the same properties.
_ALIASES = {
    "Subject": "Label",
    "ScheduledEnqueueTime": "ScheduledEnqueueTimeUtc",
    "TransactionPartitionKey": "ViaPartitionKey",
}
_BY_LOWER = {name.lower(): name for name in SYSTEM_PROPERTIES} | {a.lower(): n for a, n in _ALIASES.items()}


def system_property(name: str) -> str | None:
    """The canonical name of ``sys.<name>`` (any case, aliases resolved); None if there is none."""
    return _BY_LOWER.get(name.lower())
