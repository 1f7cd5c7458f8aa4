"""``--servicebus-live``: the same tests on a real namespace, as the SDK's own live tests run.

Every queue and topic of a test's topology is created with a unique name (``orders-1a2b3c4d``),
its subscriptions and rules inside it, through the administration API, and deleted after the test,
also when the test fails. Only properties that differ from Service Bus's defaults are sent, so a
Basic or Standard namespace takes what it can (a premium-only property is refused by the service,
with its own words). The same code runs against the embedded emulator's administration API in the
kit's own tests (``tests/testing/test_plugin_live.py``); a real namespace is not reachable there.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from sbnotebook.emulator.topology import EntityProperties, QueueConfig, RuleConfig, Topology

from .model import Namespace

log = logging.getLogger("sbnotebook.testing")

_DURATIONS = ("lock_duration", "default_message_ttl", "duplicate_detection_window")
# EntityProperties field -> the admin client's keyword
_KEYWORDS = {
    "lock_duration": "lock_duration",
    "max_delivery_count": "max_delivery_count",
    "default_message_ttl": "default_message_time_to_live",
    "dead_lettering_on_message_expiration": "dead_lettering_on_message_expiration",
    "requires_duplicate_detection": "requires_duplicate_detection",
    "duplicate_detection_window": "duplicate_detection_history_time_window",
    "requires_session": "requires_session",
    "forward_to": "forward_to",
    "forward_dead_lettered_messages_to": "forward_dead_lettered_messages_to",
    "max_message_size": "max_message_size_in_kilobytes",
    "enable_partitioning": "enable_partitioning",
}
_TOPIC_FIELDS = (
    "default_message_ttl",
    "requires_duplicate_detection",
    "duplicate_detection_window",
    "max_message_size",
    "enable_partitioning",
)
_SUBSCRIPTION_FIELDS = (
    "lock_duration",
    "requires_session",
    "default_message_ttl",
    "dead_lettering_on_message_expiration",
    "max_delivery_count",
    "forward_to",
    "forward_dead_lettered_messages_to",
)
_CORRELATION = {
    "CorrelationId": "correlation_id",
    "Label": "label",
    "Subject": "label",
    "ContentType": "content_type",
    "MessageId": "message_id",
    "ReplyTo": "reply_to",
    "ReplyToSessionId": "reply_to_session_id",
    "SessionId": "session_id",
    "To": "to",
    "Properties": "properties",
}


def unique_names(topology: Topology, suffix: str) -> dict[str, str]:
    """Queues and topics get the suffix; subscriptions live inside their (unique) topic."""
    names = [q.name for q in topology.queues] + [t.name for t in topology.topics]
    return {name: f"{name}-{suffix}" for name in names}


def entity_keywords(props: EntityProperties, fields: tuple[str, ...], names: Mapping[str, str]) -> dict[str, Any]:
    """The admin client's keywords for the properties that differ from Service Bus's defaults;
    forwarding targets by their unique names."""
    default = EntityProperties()
    lowered = {k.lower(): v for k, v in names.items()}
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(props, name)
        if value == getattr(default, name):
            continue
        if name in _DURATIONS:
            value = datetime.timedelta(seconds=value)
        elif name == "max_message_size":
            value = value // 1024
        elif name in ("forward_to", "forward_dead_lettered_messages_to"):
            value = lowered.get(value.lower(), value)
        out[_KEYWORDS[name]] = value
    if "duplicate_detection_history_time_window" in out and not props.requires_duplicate_detection:
        del out["duplicate_detection_history_time_window"]  # the service refuses a window without detection
    return out


def sdk_rule(rule: RuleConfig) -> dict[str, Any]:
    """A topology's rule as the SDK administration client's ``create_rule`` takes it."""
    from sbnotebook.core import rule_arguments

    action, action_parameters = rule.action or None, rule.action_parameters
    if rule.filter_type == "Correlation":
        correlation = {_CORRELATION[k]: v for k, v in rule.correlation.items() if k in _CORRELATION}
        return rule_arguments(correlation=correlation, action=action, action_parameters=action_parameters)
    return rule_arguments(
        sql=rule.sql_expression, sql_parameters=rule.parameters, action=action, action_parameters=action_parameters
    )


def _queue_order(queues: list[QueueConfig]) -> list[QueueConfig]:
    """Forwarding targets before the queues that forward to them (the service checks they exist)."""
    queue_names = {q.name.lower() for q in queues}
    done: set[str] = set()
    ordered: list[QueueConfig] = []
    pending = list(queues)
    while pending:
        ready = [
            q
            for q in pending
            if all(
                t is None or t.lower() not in queue_names or t.lower() in done
                for t in (q.properties.forward_to, q.properties.forward_dead_lettered_messages_to)
            )
        ]
        if not ready:  # a forwarding cycle: the service refuses it, and says so
            ready = pending[:1]
        for q in ready:
            ordered.append(q)
            done.add(q.name.lower())
            pending.remove(q)
    return ordered


def create_entities(admin: Any, topology: Topology, names: Mapping[str, str], created: list[str]) -> None:
    """Create the topology's entities under ``names``; each name is added to ``created`` as soon as
    the service has it, so a failure half-way still deletes what was made."""
    queue_fields = tuple(_KEYWORDS)
    for topic in topology.topics:
        admin.create_topic(names[topic.name], **entity_keywords(topic.properties, _TOPIC_FIELDS, names))
        created.append(names[topic.name])
    for queue in _queue_order(topology.queues):
        admin.create_queue(names[queue.name], **entity_keywords(queue.properties, queue_fields, names))
        created.append(names[queue.name])
    for topic in topology.topics:
        for sub in topic.subscriptions:
            admin.create_subscription(
                names[topic.name], sub.name, **entity_keywords(sub.properties, _SUBSCRIPTION_FIELDS, names)
            )
            if sub.rules:  # the rules replace the $Default rule (true filter) the service creates
                for rule in sub.rules:
                    admin.create_rule(names[topic.name], sub.name, rule.name, **sdk_rule(rule))
                if all(r.name != "$Default" for r in sub.rules):
                    admin.delete_rule(names[topic.name], sub.name, "$Default")


def delete_entities(admin: Any, created: list[str]) -> list[str]:
    """Delete what was created, newest first (a topic takes its subscriptions with it). Returns
    what could not be deleted, with why; tries every one."""
    from sbnotebook.core import is_entity_not_found

    failed: list[str] = []
    for name in reversed(created):
        try:
            try:
                admin.delete_queue(name)
            except Exception as exc:
                if not is_entity_not_found(exc):  # not a queue: a topic, or nothing
                    raise
                admin.delete_topic(name)
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed


class LiveNamespace:
    """The real namespace of ``SERVICEBUS_CONNECTION_STRING`` (shared access key) or
    ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE`` (Entra ID: azure-identity's ``DefaultAzureCredential``)."""

    def __init__(self, connection_string: str | None, fully_qualified_namespace: str) -> None:
        self.connection_string = connection_string
        self.fully_qualified_namespace = fully_qualified_namespace
        if connection_string is not None:
            from sbnotebook.core import resolve  # the kit's one connection-string grammar

            self.fully_qualified_namespace = resolve(connection_string).fully_qualified_namespace
        self._credentials: dict[bool, Any] = {}
        self._admin: Any = None

    def __repr__(self) -> str:  # never the key
        return f"<LiveNamespace {self.fully_qualified_namespace}>"

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> LiveNamespace:
        conn = env.get("SERVICEBUS_CONNECTION_STRING") or None
        return cls(conn, env.get("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE", ""))

    def credential(self, aio: bool = False) -> Any:
        """DefaultAzureCredential as the kit makes it (``core.default_credential``), one per kind."""
        from sbnotebook.core import default_credential

        if aio not in self._credentials:
            self._credentials[aio] = default_credential(aio=aio)
        return self._credentials[aio]

    def admin_client(self, *, aio: bool = False, **kwargs: Any) -> Any:
        """The SDK's administration client (an emulator's connection string: its plain HTTP API)."""
        from sbnotebook.core import sdk_admin_client

        if self.connection_string is not None:
            return sdk_admin_client(self.connection_string, aio=aio, **kwargs)
        return sdk_admin_client(
            fully_qualified_namespace=self.fully_qualified_namespace, credential=self.credential(aio), aio=aio, **kwargs
        )

    @contextlib.contextmanager
    def entities(self, topology: Topology, suffix: str) -> Iterator[Namespace]:
        if self._admin is None:
            self._admin = self.admin_client()
        names = unique_names(topology, suffix)
        created: list[str] = []
        try:
            create_entities(self._admin, topology, names, created)
            yield Namespace(
                connection_string=self.connection_string,
                fully_qualified_namespace=self.fully_qualified_namespace,
                names=names,
                credential=None if self.connection_string is not None else self.credential,
                _admin_factory=self.admin_client,
            )
        finally:
            failed = delete_entities(self._admin, created)
            if failed:
                raise RuntimeError("could not delete the test's live entities: " + "; ".join(failed))

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        for aio, credential in list(self._credentials.items()):
            if not aio:  # an async credential closes on its loop; the session's loop is gone by now
                credential.close()
        self._credentials.clear()
