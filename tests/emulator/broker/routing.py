"""What a topic's subscriptions received, read with the SDK, beside what the SQL evaluator says
they should hold (for the rule tests of this folder): message by message, application and
``sys.`` properties included."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from sbnotebook.sqlrules.context import MessageProperties
from sbnotebook.sqlrules.correlation import CorrelationFilter
from sbnotebook.sqlrules.sqlaction import SqlAction
from sbnotebook.sqlrules.sqlfilter import SqlFilter

# sys. property -> the SDK message's attribute
SDK_FIELDS = {
    "Label": "subject",
    "MessageId": "message_id",
    "CorrelationId": "correlation_id",
    "To": "to",
    "ReplyTo": "reply_to",
    "SessionId": "session_id",
    "ReplyToSessionId": "reply_to_session_id",
    "ContentType": "content_type",
}
TAG = "doc_tag"  # each message's own name, in an application property no rule reads
Received = tuple[dict[str, Any], dict[str, Any]]  # (application properties, sys. properties)


@dataclass
class Sent:
    """A message as the test sends it (its MessageId is its tag unless it says otherwise) and as
    the evaluator reads it (``user_values``: the properties as the evaluator's types, when the
    SDK is given them in another form)."""

    tag: str
    user: dict[str, Any]
    system: dict[str, Any] = field(default_factory=dict)
    user_values: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.system = {"MessageId": self.tag, **self.system}

    def sdk(self) -> ServiceBusMessage:
        kwargs = {SDK_FIELDS[name]: value for name, value in self.system.items()}
        properties: dict[Any, Any] = {**self.user, TAG: self.tag}
        return ServiceBusMessage(self.tag, application_properties=properties, **kwargs)

    def properties(self) -> MessageProperties:
        return MessageProperties(self.user if self.user_values is None else self.user_values, self.system)


@dataclass
class Expected:
    """A subscription's rules as the evaluator compiles them: (name, filter, action or None)."""

    rules: list[tuple[str, SqlFilter | CorrelationFilter, SqlAction | None]]

    def copies(self, sent: Sent) -> list[Received]:
        """Service Bus's copies (topic-filters page): "All rules without actions are combined using
        an OR condition and result in a single message"; "Each rule with an action produces a copy
        of the message. This message has a property called RuleName"."""
        out: list[Received] = []
        plain = [name for name, flt, action in self.rules if action is None and flt.matches(sent.properties())]
        if plain:
            out.append(_as_received(sent.properties()))
        for name, flt, action in self.rules:
            if action is not None and flt.matches(sent.properties()):
                props = sent.properties()
                action.apply(props)
                props.set_user("RuleName", name)
                out.append(_as_received(props))
        return out


def as_sdk_reads(value: Any) -> Any:
    """A value of the evaluator's as the SDK decodes it (text as bytes, a timestamp in milliseconds)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    return value


def _as_received(props: MessageProperties) -> Received:
    user = {k: as_sdk_reads(v) for k, v in props.user_properties.items()}
    return user, {name: props.system_properties.get(name) for name in SDK_FIELDS}


def received(msg: ServiceBusReceivedMessage) -> tuple[str, Received]:
    """(tag, (application properties but the tag, sys. properties)) of a received message."""
    sent: dict[Any, Any] = dict(msg.application_properties or {})
    props = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in sent.items()}
    tag = props.pop(TAG)
    system = {name: getattr(msg, attr) for name, attr in SDK_FIELDS.items()}
    return (tag.decode() if isinstance(tag, bytes) else tag), (props, system)


def peek_all(client: ServiceBusClient, topic: str, subscription: str) -> list[ServiceBusReceivedMessage]:
    with client.get_subscription_receiver(topic, subscription) as receiver:
        out: list[ServiceBusReceivedMessage] = []
        start = 0
        while batch := receiver.peek_messages(max_message_count=250, sequence_number=start):
            out += batch
            start = (batch[-1].sequence_number or 0) + 1
        return out


def _key(copy: Received) -> str:
    return repr(sorted(copy[0].items(), key=repr)) + repr(sorted(copy[1].items()))


def differences(expected: dict[str, list[Received]], got: dict[str, list[Received]]) -> dict[str, Any]:
    """Per '<subscription>/<tag>': the copies expected and those received, where they differ."""
    out = {}
    for key in expected.keys() | got.keys():
        want = sorted(expected.get(key, []), key=_key)
        have = sorted(got.get(key, []), key=_key)
        if want != have:
            out[key] = {"expected": want, "received": have}
    return out


def routing(
    client: ServiceBusClient, topic: str, subscriptions: dict[str, Expected], messages: list[Sent]
) -> tuple[dict[str, list[Received]], dict[str, list[Received]]]:
    """(expected, received): per '<subscription>/<tag>', the copies of that message in that subscription."""
    expected: dict[str, list[Received]] = {}
    for sub, rules in subscriptions.items():
        for sent in messages:
            if copies := rules.copies(sent):
                expected[f"{sub}/{sent.tag}"] = copies
    got: dict[str, list[Received]] = {}
    for sub in subscriptions:
        for msg in peek_all(client, topic, sub):
            tag, copy = received(msg)
            got.setdefault(f"{sub}/{tag}", []).append(copy)
    return expected, got
