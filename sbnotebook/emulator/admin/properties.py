"""What a queue's, topic's or subscription's description (the body of a create or update) sets.

Every element the SDKs send is either kept (and reported back by ``atom.py``), ignored because it is
a figure Service Bus computes (counts, sizes, times), or refused with a 400, as Service Bus refuses
what it does not take: nothing is dropped silently. An update replaces the description, as Service
Bus's does (an element left out takes its default: the SDK leaves out ``forward_to=None`` to clear
forwarding); what cannot change after creation keeps its value when left out. Range checks are in
``limits.py``; shared access policies in ``policyxml.py``.
"""

from __future__ import annotations

import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from ..topology import INFINITE_TTL, EntityProperties, TopologyError, parse_duration
from .limits import BadDescription, check_changes

# element -> (EntityProperties field, how its text reads)
Reader = Callable[[str, str], Any]


def _bool(text: str, element: str) -> bool:
    if text not in ("true", "false"):
        raise BadDescription(f"The value '{text}' of {element} is not a boolean (true or false).")
    return text == "true"


def _int(text: str, element: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadDescription(f"The value '{text}' of {element} is not a whole number.") from None


def _duration(text: str, element: str) -> float:
    if text.startswith("P10675199D"):  # TimeSpan.MaxValue as the SDKs write it: never
        return INFINITE_TTL
    try:
        return parse_duration(text, where=element)
    except TopologyError:
        raise BadDescription(f"The value '{text}' of {element} is not an ISO 8601 duration such as 'PT1M'.") from None


def _text(text: str, element: str) -> str | None:
    return text or None


def _entity_name(text: str, element: str) -> str | None:
    """ForwardTo arrives as a full address (``sb://ns/queue``, as the SDKs send it) or a bare name."""
    if "://" in text:
        text = urllib.parse.urlparse(text).path
    return text.strip("/") or None


_READERS: dict[str, tuple[str, Reader]] = {
    "LockDuration": ("lock_duration", _duration),
    "MaxDeliveryCount": ("max_delivery_count", _int),
    "DefaultMessageTimeToLive": ("default_message_ttl", _duration),
    "DeadLetteringOnMessageExpiration": ("dead_lettering_on_message_expiration", _bool),
    "DeadLetteringOnFilterEvaluationExceptions": ("dead_lettering_on_filter_evaluation_exceptions", _bool),
    "RequiresDuplicateDetection": ("requires_duplicate_detection", _bool),
    "DuplicateDetectionHistoryTimeWindow": ("duplicate_detection_window", _duration),
    "RequiresSession": ("requires_session", _bool),
    "ForwardTo": ("forward_to", _entity_name),
    "ForwardDeadLetteredMessagesTo": ("forward_dead_lettered_messages_to", _entity_name),
    "MaxMessageSizeInKilobytes": ("max_message_size", lambda text, el: _int(text, el) * 1024),
    "Status": ("status", lambda text, el: text),
    "AutoDeleteOnIdle": ("auto_delete_on_idle", _duration),
    "EnableBatchedOperations": ("enable_batched_operations", _bool),
    "UserMetadata": ("user_metadata", _text),
    "MaxSizeInMegabytes": ("max_size_in_megabytes", _int),
    "EnableExpress": ("enable_express", _bool),
    "EnablePartitioning": ("enable_partitioning", _bool),
    "SupportOrdering": ("support_ordering", _bool),
    "FilteringMessagesBeforePublishing": ("filtering_messages_before_publishing", _bool),
}

_COMMON = {"DefaultMessageTimeToLive", "EnableBatchedOperations", "Status", "AutoDeleteOnIdle", "UserMetadata"}
# What each kind keeps (AuthorizationRules and DefaultRuleDescription are read by their own modules)
KEPT: dict[str, set[str]] = {
    "Queue": _COMMON
    | {
        "LockDuration",
        "MaxDeliveryCount",
        "DeadLetteringOnMessageExpiration",
        "RequiresDuplicateDetection",
        "DuplicateDetectionHistoryTimeWindow",
        "RequiresSession",
        "ForwardTo",
        "ForwardDeadLetteredMessagesTo",
        "MaxMessageSizeInKilobytes",
        "MaxSizeInMegabytes",
        "EnableExpress",
        "EnablePartitioning",
    },
    "Topic": _COMMON
    | {
        "RequiresDuplicateDetection",
        "DuplicateDetectionHistoryTimeWindow",
        "MaxMessageSizeInKilobytes",
        "MaxSizeInMegabytes",
        "EnableExpress",
        "EnablePartitioning",
        "SupportOrdering",
        "FilteringMessagesBeforePublishing",
    },
    "Subscription": _COMMON
    | {
        "LockDuration",
        "MaxDeliveryCount",
        "DeadLetteringOnMessageExpiration",
        "DeadLetteringOnFilterEvaluationExceptions",
        "RequiresSession",
        "ForwardTo",
        "ForwardDeadLetteredMessagesTo",
    },
}
# Figures Service Bus computes: an update sends back what a get returned; Service Bus ignores them
_COMPUTED = {"SizeInBytes", "MessageCount", "CreatedAt", "UpdatedAt", "AccessedAt", "CountDetails"}
_COMPUTED |= {"EntityAvailabilityStatus", "MessageCountDetails"}
READ_ONLY: dict[str, set[str]] = {
    "Queue": _COMPUTED | {"IsAnonymousAccessible", "SupportOrdering"},  # a queue's ordering follows partitioning
    "Topic": _COMPUTED
    | {"IsAnonymousAccessible", "SubscriptionCount", "SqlFilterCount", "CorrelationFilterCount"}
    | {"EnableSubscriptionPartitioning"},
    "Subscription": _COMPUTED,
}
OWN_MODULES = {
    "Queue": {"AuthorizationRules"},  # policyxml.py
    "Topic": {"AuthorizationRules"},
    "Subscription": {"DefaultRuleDescription"},  # entities.py, rulexml.py
}
# Fixed at creation: an update that leaves them out keeps them (one that changes them is refused)
FIXED = ("requires_session", "requires_duplicate_detection", "enable_partitioning", "max_message_size")


def local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def entity_properties(
    kind: str, desc: ET.Element, current: EntityProperties | None = None, *, policies: tuple[Any, ...] = ()
) -> EntityProperties:
    """The properties a description of a ``kind`` ("Queue", "Topic", "Subscription") gives: for a
    new entity (``current`` None) or in place of ``current`` (an update). ``policies``: the
    entity's shared access policies, read by ``policyxml.py``."""
    fields = {local_name(child.tag): child for child in desc}
    unknown = sorted(set(fields) - KEPT[kind] - READ_ONLY[kind] - OWN_MODULES[kind])
    if unknown:
        raise BadDescription(
            f"The entity description of type '{kind}Description' has unsupported properties: {', '.join(unknown)}."
        )
    props = EntityProperties()
    if current is not None:
        for name in FIXED:
            setattr(props, name, getattr(current, name))
    for element in sorted(KEPT[kind] & set(fields)):
        attr, read = _READERS[element]
        setattr(props, attr, read((fields[element].text or "").strip(), element))
    props.policies = policies
    check_changes(kind, props, current)
    return props
