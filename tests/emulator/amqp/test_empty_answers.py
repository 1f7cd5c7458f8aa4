"""Management requests that find nothing: status 204 *with* the error condition Service Bus sends.

Clients read the condition: ``@azure/service-bus``'s ``deleteMessages`` returns 0 only for 204 with
``com.microsoft:message-not-found`` and throws otherwise (tests/emulator/test_js_sdk.py runs it), and
azure-servicebus's ``mgmt_handlers`` says an empty session listing is 204 with
``com.microsoft:session-not-found``. Each request here goes through the real SDK's management link
(``_mgmt_request_response_with_retry``); the callback keeps the reply as it came, because the
Python SDK's own handlers take any 204 as "empty" and would hide a missing condition.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus._common.constants import MGMT_RESPONSE_MESSAGE_ERROR_CONDITION
from azure.servicebus.exceptions import MessageNotFoundError

from sbnotebook.emulator import Emulator
from tests.helpers import send


def _raw(handler: Any, operation: bytes, body: dict[str, Any]) -> tuple[int, str | None]:
    """Status code and error condition of one management reply, as the SDK received it."""

    def keep(status_code: int, message: Any, description: Any, **_: Any) -> tuple[int, str | None]:
        condition = (message.application_properties or {}).get(MGMT_RESPONSE_MESSAGE_ERROR_CONDITION)
        return status_code, condition.decode() if isinstance(condition, bytes) else condition

    return handler._mgmt_request_response_with_retry(operation, body, keep)  # type: ignore[no-any-return]


def _int(handler: Any, value: int) -> Any:
    return handler._amqp_transport.AMQP_INT_VALUE(value)


def _long(handler: Any, value: int) -> Any:
    return handler._amqp_transport.AMQP_LONG_VALUE(value)


def test_peek_of_an_empty_queue(client: ServiceBusClient) -> None:
    with client.get_queue_receiver("q") as r:
        body = {"from-sequence-number": _long(r, 1), "message-count": _int(r, 10)}
        assert _raw(r, b"com.microsoft:peek-message", body) == (204, "com.microsoft:message-not-found")
        assert r.peek_messages(max_message_count=10, sequence_number=1) == []


def test_peek_past_the_last_message(client: ServiceBusClient) -> None:
    send(client, "q", "only")
    with client.get_queue_receiver("q") as r:
        body = {"from-sequence-number": _long(r, 1), "message-count": _int(r, 10)}
        assert _raw(r, b"com.microsoft:peek-message", body)[0] == 200
        body = {"from-sequence-number": _long(r, 2), "message-count": _int(r, 10)}
        assert _raw(r, b"com.microsoft:peek-message", body) == (204, "com.microsoft:message-not-found")


def test_batch_delete_that_matches_nothing(emulator: Emulator, client: ServiceBusClient) -> None:
    with client.get_queue_receiver("q") as r:
        body = {"message-count": _int(r, 100)}
        assert _raw(r, b"com.microsoft:batch-delete-messages", body) == (204, "com.microsoft:message-not-found")
    send(client, "q", "a", "b")
    with client.get_queue_receiver("q") as r:
        assert _raw(r, b"com.microsoft:batch-delete-messages", {"message-count": _int(r, 100)}) == (200, None)
    assert emulator.broker.counts("q")["active"] == 0


def test_session_listing_with_no_sessions(client: ServiceBusClient) -> None:
    browser = client._create_session_browser("sq60")
    try:
        body = {
            "last-updated-time": browser._amqp_transport.AMQP_TIMESTAMP_VALUE(253402300800000),
            "skip": _int(browser, 0),
            "top": _int(browser, 100),
        }
        assert _raw(browser, b"com.microsoft:get-message-sessions", body) == (204, "com.microsoft:session-not-found")
    finally:
        browser.close()
    assert list(client.list_queue_sessions("sq60")) == []


def test_rule_listing_of_a_subscription_without_rules(emulator: Emulator, client: ServiceBusClient) -> None:
    emulator.broker.delete_rule(emulator.broker.resolve_source("t/subscriptions/all").entity, "$Default")
    with client.get_subscription_receiver("t", "all") as r:
        body = {"skip": _int(r, 0), "top": _int(r, 100)}
        assert _raw(r, b"com.microsoft:enumerate-rules", body) == (204, "com.microsoft:message-not-found")


def test_receive_by_unknown_sequence_number_is_404_not_204(quick_client: ServiceBusClient) -> None:
    """Asking for a message that is not there is an error, as in Service Bus: the SDK raises
    MessageNotFoundError (the emulator never answers it with an empty 204). Without retries: the SDK
    retries a not-found (10 s of backoff) before it raises."""
    with quick_client.get_queue_receiver("q") as r, pytest.raises(MessageNotFoundError):
        r.receive_deferred_messages([12345])
