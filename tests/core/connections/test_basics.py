"""Entity addressing, connection resolution and secret handling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core import ConfigurationError, EntityNameError, EntityPath, resolve
from sbnotebook.core.connections.connection import embedded
from tests.helpers import QuickCloseClient, refusal_test

CONN = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=SuperSecret123="


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", EntityPath("orders")),
        ("events/subscriptions/audit", EntityPath("events", "audit")),
        ("events/Subscriptions/audit", EntityPath("events", "audit")),
        ("orders/$deadletterqueue", EntityPath("orders", None, "dead_letter")),
        ("orders/$DeadLetterQueue", EntityPath("orders", None, "dead_letter")),
        ("orders/$dlq", EntityPath("orders", None, "dead_letter")),
        ("events/subscriptions/audit/$deadletterqueue", EntityPath("events", "audit", "dead_letter")),
        ("orders/$transfer/$deadletterqueue", EntityPath("orders", None, "transfer_dead_letter")),
        ("/orders/", EntityPath("orders")),
    ],
)
def test_entity_addresses(text: str, expected: EntityPath) -> None:
    assert EntityPath.parse(text) == expected
    assert EntityPath.parse(str(expected)) == expected  # round trip


test_malformed_addresses_are_explained = refusal_test(
    EntityPath.parse,
    EntityNameError,
    {
        "": "required",
        "a//b": "empty path segment",
        "events/audit": "not an entity address",
        "events/subscriptions": "not an entity address",
        "bad name!": "not a valid entity name",
    },
)


def test_resolution_order() -> None:
    assert resolve(CONN).kind == "connection-string"
    assert resolve(fully_qualified_namespace="ns.servicebus.windows.net").kind == "entra-id"
    env = {"SERVICEBUS_CONNECTION_STRING": CONN, "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "other.servicebus.windows.net"}
    # The string wins over the namespace.
    assert resolve(env=env).fully_qualified_namespace == "ns.servicebus.windows.net"
    assert resolve(env={"SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "other.servicebus.windows.net"}).kind == "entra-id"
    with pytest.raises(ConfigurationError, match="not both"):
        resolve(CONN, fully_qualified_namespace="x")


def test_no_configuration_starts_the_embedded_emulator_once() -> None:
    first = resolve(env={})
    second = resolve(env={})
    assert first.kind == "emulator" and first == second
    assert embedded.running is not None
    assert first.connection_string is not None
    with (
        QuickCloseClient.from_connection_string(first.connection_string) as client,
        client.get_queue_sender("orders") as sender,
    ):
        from azure.servicebus import ServiceBusMessage

        sender.send_messages(ServiceBusMessage("via the default"))
    assert core.peek("orders", connection=first).records[-1]["body_text"] == "via the default"


def test_secrets_never_appear_in_reprs_or_errors() -> None:
    conn = resolve(CONN)
    assert "SuperSecret123" not in repr(conn) and "SuperSecret123" not in str(conn)
    with pytest.raises(ConfigurationError) as err:
        resolve("Endpoint=sb://x;SharedAccessKey=SuperSecret123=")  # no key name
    assert "SuperSecret123" not in str(err.value)
    with pytest.raises(ConfigurationError) as err:
        resolve("SharedAccessKey=SuperSecret123;oops")
    assert "SuperSecret123" not in str(err.value)
    assert core.redact(f"failed for {CONN}") == (
        "failed for Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=***"
    )


def test_bad_connection_strings_say_what_is_missing() -> None:
    with pytest.raises(ConfigurationError, match="Endpoint"):
        resolve("SharedAccessKeyName=a;SharedAccessKey=b")
    with pytest.raises(ConfigurationError, match="not a Service Bus connection string"):
        resolve("hello")


def test_public_api_is_exported() -> None:
    for name in core.__all__:
        assert hasattr(core, name), name
    public = {n for n in dir(core) if not n.startswith("_")}
    assert set(core.__all__) <= public


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (core.entity_properties, "orders/$deadletterqueue is a dead-letter queue: manage orders instead."),
        (core.delete_entity, "orders/$deadletterqueue is a dead-letter queue: manage orders instead."),
        (core.list_sessions, "orders/$deadletterqueue is a dead-letter queue: sessions are listed on orders."),
    ],
)
def test_what_only_an_entity_has_is_refused_on_its_dead_letter_queue(call: Callable[..., Any], says: str) -> None:
    """Refused before any connection is made (the fake namespace is never dialled)."""
    with pytest.raises(core.InvalidInputError) as refused:
        call("orders/$deadletterqueue", connection=CONN)
    assert says in str(refused.value)
