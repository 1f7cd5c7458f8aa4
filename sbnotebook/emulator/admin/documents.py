"""Queues, topics and subscriptions as Service Bus describes them in the administration API: every
property the entity keeps (``properties.py`` reads them), its shared access policies, and its
counts read from the broker at the moment of the request.

``host`` is the namespace as the caller addressed it: a forwarding target is written as Service Bus
writes it, ``sb://{host}/{entity}``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from ..broker.entities import Queue, Subscription, Topic
from ..broker.model import MessageState
from ..topology import INFINITE_TTL, EntityProperties, format_duration
from .policyxml import authorization_rules_xml

SB = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
SB_COUNTS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
STARTED = datetime.now(UTC)
NEVER = "P10675199DT2H48M5.4775807S"  # TimeSpan.MaxValue, as Service Bus writes it


def stamp(dt: datetime = STARTED) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def xml_bool(v: bool) -> str:
    return "true" if v else "false"


def element(name: str, value: Any) -> str:
    if value is None or value == "":
        return ""
    return f"<{name}>{escape(str(value))}</{name}>"


def _span(seconds: float) -> str:
    return NEVER if seconds >= INFINITE_TTL else format_duration(seconds)


def _address(host: str, name: str | None) -> str | None:
    return f"sb://{host}/{name}" if name else None


def _count_details(active: int, dead: int, scheduled: int) -> str:
    d = "d2p1"
    return (
        f'<CountDetails xmlns:{d}="{SB_COUNTS}">'
        f"<{d}:ActiveMessageCount>{active}</{d}:ActiveMessageCount>"
        f"<{d}:DeadLetterMessageCount>{dead}</{d}:DeadLetterMessageCount>"
        f"<{d}:ScheduledMessageCount>{scheduled}</{d}:ScheduledMessageCount>"
        f"<{d}:TransferMessageCount>0</{d}:TransferMessageCount>"
        f"<{d}:TransferDeadLetterMessageCount>0</{d}:TransferDeadLetterMessageCount>"
        "</CountDetails>"
    )


def _receivable_counts(entity: Queue | Subscription) -> tuple[int, int, int, int, int]:
    store = entity.store
    active = len(store) - store.count(MessageState.SCHEDULED)
    scheduled = store.count(MessageState.SCHEDULED)
    dead = len(entity.dead_letter)
    size = store.size_bytes + entity.dead_letter.size_bytes
    return active, dead, scheduled, active + dead + scheduled, size


def _times(created: datetime) -> str:
    return f"<CreatedAt>{stamp(created)}</CreatedAt><UpdatedAt>{stamp()}</UpdatedAt><AccessedAt>{stamp()}</AccessedAt>"


def _tail(p: EntityProperties) -> str:
    """What a queue and a topic both end with (after the counts)."""
    return (
        f"<AutoDeleteOnIdle>{_span(p.auto_delete_on_idle)}</AutoDeleteOnIdle>"
        f"<EnablePartitioning>{xml_bool(p.enable_partitioning)}</EnablePartitioning>"
        "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"
        f"<EnableExpress>{xml_bool(p.enable_express)}</EnableExpress>"
    )


def queue_xml(q: Queue, host: str) -> str:
    p = q.props
    active, dead, scheduled, total, size = _receivable_counts(q)
    return (
        f'<QueueDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<LockDuration>{format_duration(p.lock_duration)}</LockDuration>"
        f"<MaxSizeInMegabytes>{p.max_size_in_megabytes}</MaxSizeInMegabytes>"
        f"<RequiresDuplicateDetection>{xml_bool(p.requires_duplicate_detection)}</RequiresDuplicateDetection>"
        f"<RequiresSession>{xml_bool(p.requires_session)}</RequiresSession>"
        f"<DefaultMessageTimeToLive>{_span(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        f"<DeadLetteringOnMessageExpiration>{xml_bool(p.dead_lettering_on_message_expiration)}"
        "</DeadLetteringOnMessageExpiration>"
        f"<DuplicateDetectionHistoryTimeWindow>{format_duration(p.duplicate_detection_window)}"
        "</DuplicateDetectionHistoryTimeWindow>"
        f"<MaxDeliveryCount>{p.max_delivery_count}</MaxDeliveryCount>"
        f"<EnableBatchedOperations>{xml_bool(p.enable_batched_operations)}</EnableBatchedOperations>"
        f"<SizeInBytes>{size}</SizeInBytes><MessageCount>{total}</MessageCount>"
        f"<IsAnonymousAccessible>false</IsAnonymousAccessible>{authorization_rules_xml(p.policies, STARTED)}"
        f"<Status>{p.status}</Status>{_times(q.created_at)}"
        # as Service Bus reports it: a partitioned queue does not keep order
        f"<SupportOrdering>{xml_bool(not p.enable_partitioning)}</SupportOrdering>"
        f"{_count_details(active, dead, scheduled)}{_tail(p)}"
        f"{element('ForwardTo', _address(host, p.forward_to))}{element('UserMetadata', p.user_metadata)}"
        f"{element('ForwardDeadLetteredMessagesTo', _address(host, p.forward_dead_lettered_messages_to))}"
        f"<MaxMessageSizeInKilobytes>{p.max_message_size // 1024}</MaxMessageSizeInKilobytes>"
        "</QueueDescription>"
    )


def topic_xml(t: Topic, host: str) -> str:
    p = t.props
    scheduled = len(t.scheduled)
    # Across all subscriptions, as Service Bus counts them: true/false filters are SQL filters.
    rules = [r.config for s in t.subscriptions.values() for r in s.rules]
    sql_filters = sum(1 for r in rules if r.filter_type != "Correlation")
    return (
        f'<TopicDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<DefaultMessageTimeToLive>{_span(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        f"<MaxSizeInMegabytes>{p.max_size_in_megabytes}</MaxSizeInMegabytes>"
        f"<RequiresDuplicateDetection>{xml_bool(p.requires_duplicate_detection)}</RequiresDuplicateDetection>"
        f"<DuplicateDetectionHistoryTimeWindow>{format_duration(p.duplicate_detection_window)}"
        "</DuplicateDetectionHistoryTimeWindow>"
        f"<EnableBatchedOperations>{xml_bool(p.enable_batched_operations)}</EnableBatchedOperations>"
        f"<SizeInBytes>{t.scheduled.size_bytes}</SizeInBytes>"
        f"<FilteringMessagesBeforePublishing>{xml_bool(p.filtering_messages_before_publishing)}"
        "</FilteringMessagesBeforePublishing>"
        f"<IsAnonymousAccessible>false</IsAnonymousAccessible>{authorization_rules_xml(p.policies, STARTED)}"
        f"<Status>{p.status}</Status>{_times(t.created_at)}"
        f"<SupportOrdering>{xml_bool(p.support_ordering)}</SupportOrdering>"
        f"{_count_details(0, 0, scheduled)}"
        f"<SubscriptionCount>{len(t.subscriptions)}</SubscriptionCount>"
        f"<SqlFilterCount>{sql_filters}</SqlFilterCount>"
        f"<CorrelationFilterCount>{len(rules) - sql_filters}</CorrelationFilterCount>"
        f"{_tail(p)}{element('UserMetadata', p.user_metadata)}"
        f"<MaxMessageSizeInKilobytes>{p.max_message_size // 1024}</MaxMessageSizeInKilobytes>"
        "</TopicDescription>"
    )


def subscription_xml(s: Subscription, host: str) -> str:
    p = s.props
    active, dead, scheduled, total, _ = _receivable_counts(s)
    return (
        f'<SubscriptionDescription xmlns="{SB}" xmlns:i="{XSI}">'
        f"<LockDuration>{format_duration(p.lock_duration)}</LockDuration>"
        f"<RequiresSession>{xml_bool(p.requires_session)}</RequiresSession>"
        f"<DefaultMessageTimeToLive>{_span(p.default_message_ttl)}</DefaultMessageTimeToLive>"
        f"<DeadLetteringOnMessageExpiration>{xml_bool(p.dead_lettering_on_message_expiration)}"
        "</DeadLetteringOnMessageExpiration>"
        f"<DeadLetteringOnFilterEvaluationExceptions>{xml_bool(p.dead_lettering_on_filter_evaluation_exceptions)}"
        "</DeadLetteringOnFilterEvaluationExceptions>"
        f"<MessageCount>{total}</MessageCount>"
        f"<MaxDeliveryCount>{p.max_delivery_count}</MaxDeliveryCount>"
        f"<EnableBatchedOperations>{xml_bool(p.enable_batched_operations)}</EnableBatchedOperations>"
        f"<Status>{p.status}</Status>{element('ForwardTo', _address(host, p.forward_to))}{_times(s.created_at)}"
        f"{_count_details(active, dead, scheduled)}"
        f"{element('ForwardDeadLetteredMessagesTo', _address(host, p.forward_dead_lettered_messages_to))}"
        f"<AutoDeleteOnIdle>{_span(p.auto_delete_on_idle)}</AutoDeleteOnIdle>"
        "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"
        f"{element('UserMetadata', p.user_metadata)}"
        "</SubscriptionDescription>"
    )


def entity_xml(entity: Queue | Topic, host: str) -> str:
    return queue_xml(entity, host) if isinstance(entity, Queue) else topic_xml(entity, host)
