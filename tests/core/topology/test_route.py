"""core.route against the broker: 1,000 generated messages sent with the SDK to a topic of 20
subscriptions and 50 rules (tests/core/topology/routed_topic.py) and to a queue; route's answer for
the queue's messages equals what each subscription received (read with the SDK), message by message,
the properties the actions set included, whether route reads the rules from the administration API
or from the topology exported as Config.json, and the messages from the queue or a JSONL export."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.core.topology.evaluator import SYSTEM_FIELDS, user_properties
from sbnotebook.core.topology.route import messages_of
from sbnotebook.emulator import Emulator
from tests.core.topology.routed_topic import SUBSCRIPTIONS, make_topic, messages

pytestmark = pytest.mark.timeout(600)

COMPARED = ("MessageId", "Label", "To", "ReplyTo", "CorrelationId", "ContentType")
Copy = str  # one copy's properties, as a sortable text
Routing = dict[str, list[Copy]]  # '<subscription>/<message id>' -> its copies


def _copy(user: Mapping[str, Any], system: Mapping[str, Any]) -> Copy:
    return repr(sorted(user.items(), key=repr)) + repr([(n, system.get(n)) for n in COMPARED])


def delivered(emulator: Emulator, topic: str) -> Routing:
    """What each subscription holds, read with the SDK (through the kit's typed reading)."""
    out: Routing = {}
    for sub in SUBSCRIPTIONS:
        records, _ = messages_of(f"{topic}/subscriptions/{sub}", connection=emulator.connection_string)
        for r in records:
            system = {name: r.get(field) for name, field in SYSTEM_FIELDS.items()}
            out.setdefault(f"{sub}/{r['message_id']}", []).append(_copy(user_properties(r), system))
    return {k: sorted(v) for k, v in out.items()}


def answered(result: core.RouteResult) -> Routing:
    out: Routing = {}
    for r in result.routed:
        for d in r.deliveries:
            system = {"MessageId": r.message_id, **d.system_properties}
            out.setdefault(f"{r.subscription}/{r.message_id}", []).append(_copy(d.application_properties, system))
    return {k: sorted(v) for k, v in out.items()}


def differences(want: Routing, got: Routing) -> dict[str, Any]:
    return {k: (want.get(k), got.get(k)) for k in want.keys() | got.keys() if want.get(k) != got.get(k)}


def _send(client: ServiceBusClient, entity: str, topic: bool) -> None:
    sender = client.get_topic_sender(entity) if topic else client.get_queue_sender(entity)
    with sender:
        batch = messages()
        for start in range(0, len(batch), 200):
            sender.send_messages(batch[start : start + 200])


def _why_nots(results: Iterable[core.RouteResult]) -> list[tuple[str, ...]]:
    return [r.why_not for result in results for r in result.routed]


def test_route_equals_what_the_broker_delivered(
    emulator: Emulator, admin: ServiceBusAdministrationClient, client: ServiceBusClient, tmp_path: Path
) -> None:
    make_topic(admin, "routed")
    admin.create_queue("src")
    _send(client, "routed", topic=True)
    _send(client, "src", topic=False)
    cs = emulator.connection_string
    broker = delivered(emulator, "routed")
    assert sum(len(v) for v in broker.values()) > 2000  # the messages fan out, actions' copies included

    from_admin = core.route("routed", "src", connection=cs)
    assert from_admin.messages == 1000 and len(from_admin.subscriptions) == 20
    assert differences(broker, answered(from_admin)) == {}

    config = tmp_path / "Config.json"
    core.export_topology(config, entities="routed", connection=cs)
    from_file = core.route("routed", "src", topology=config, connection=cs)
    assert differences(broker, answered(from_file)) == {}

    export = tmp_path / "src.jsonl"
    core.export_jsonl("src", export, connection=cs)
    from_export = core.route("routed", export, topology=config)
    assert differences(broker, answered(from_export)) == {}
    assert _why_nots([from_admin]) == _why_nots([from_file]) == _why_nots([from_export])

    # The comparison can fail: one message missing from one subscription, one action's property changed.
    answer = answered(from_admin)
    some = next(k for k in answer if k.startswith("s15/"))
    assert differences(broker, {k: v for k, v in answer.items() if k != some}) != {}
    bumped = {k: [c.replace("'bumped'", "'bumpe'") for c in v] for k, v in answer.items()}
    assert differences(broker, bumped) != {}
