"""Creating and updating queues, topics and subscriptions from the descriptions the SDKs send
(``PUT``; an update carries ``If-Match: *``). The broker's lock is held by the caller (``api.py``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from ..broker.broker import Broker, Queue, Subscription, Topic
from ..topology import QueueConfig, SubscriptionConfig, TopicConfig
from .limits import refuse
from .policyxml import policies_from
from .properties import entity_properties, local_name
from .rulexml import rule_config_from

_KINDS = {"QueueDescription": "Queue", "TopicDescription": "Topic"}


def _child(desc: ET.Element, name: str) -> ET.Element | None:
    return next((child for child in desc if local_name(child.tag) == name), None)


def put_entity(b: Broker, name: str, desc: ET.Element, update: bool) -> tuple[int, Queue | Topic]:
    """Create (201) or update (200) a queue or topic; its policies and properties as described."""
    kind = _KINDS.get(local_name(desc.tag))
    if kind is None:
        raise refuse(f"Cannot create or update a queue or topic from a {local_name(desc.tag)}.")
    rules = _child(desc, "AuthorizationRules")
    now = datetime.now(UTC)
    if update:
        entity = b.entity(name)
        if entity.kind != kind.lower():
            raise refuse(f"'{entity.name}' is a {entity.kind}: it cannot be updated from a {kind}Description.")
        policies = policies_from(rules, entity.name, entity.props.policies, now)
        b.update_properties(entity, entity_properties(kind, desc, entity.props, policies=policies))
        return 200, entity
    props = entity_properties(kind, desc, policies=policies_from(rules, name, (), now))
    created = b.add_queue(QueueConfig(name, props)) if kind == "Queue" else b.add_topic(TopicConfig(name, props))
    return 201, created


def put_subscription(b: Broker, topic: str, name: str, desc: ET.Element, update: bool) -> tuple[int, Subscription]:
    """Create (201, with the described default rule if any) or update (200) a subscription."""
    if local_name(desc.tag) != "SubscriptionDescription":
        raise refuse(f"Cannot create or update a subscription from a {local_name(desc.tag)}.")
    default_rule = _child(desc, "DefaultRuleDescription")
    if update:
        sub = b.subscription(topic, name)
        if default_rule is not None:
            raise refuse("DefaultRuleDescription is taken when a subscription is created; update its rules instead.")
        b.update_properties(sub, entity_properties("Subscription", desc, sub.props))
        return 200, sub
    rules = []
    if default_rule is not None:
        rule_name = _child(default_rule, "Name")
        rules.append(rule_config_from((rule_name.text if rule_name is not None else None) or "$Default", default_rule))
    props = entity_properties("Subscription", desc)
    return 201, b.add_subscription(topic, SubscriptionConfig(name, props, rules))
