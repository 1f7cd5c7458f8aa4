"""The SDK boundary at management-only handlers: requests on ``$management`` with no sender or receiver.

- ``session_browser`` / ``session_id_page``: sessions listed on a handler the kit keeps open (the
  SDK's listing opens and closes one per call);
- ``management_handler`` / ``batch_delete``: messages deleted on the server without receiving them
  (``batch-delete-messages``: Service Bus's ``DeleteMessages``/``PurgeMessages`` in the .NET and JS
  SDKs; the Python SDK has no call for it).

What it reaches into: the client's ``_create_session_browser`` and the handlers' management request
(``_mgmt_request_response_with_retry``) with the SDK's own request bodies and reply handlers;
``sdk.USED_BY`` lists them. The handlers open without the
SDK's sleeps (``opening.py``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from ..times import utc
from .opening import without_sleeps

log = logging.getLogger("sbnotebook.core.sdk")


def session_browser(client: Any, topic_or_queue: str, subscription: str | None) -> Any:
    """The SDK's management-only handler for an entity (no sender or receiver link: Service Bus
    refuses a receiver without a session on a session-enabled entity, but not this). It opens on
    its first request (without the SDK's sleeps); the kit keeps it in a pool like a link."""
    return without_sleeps(client._create_session_browser(topic_or_queue, subscription_name=subscription))


async def session_id_page(browser: Any, updated_after: dt.datetime | None, skip: int) -> tuple[list[str], bool]:
    """One page of ``get-message-sessions`` (what ``list_queue_sessions`` sends), on a browser that
    stays open: the session ids, and whether more pages may follow."""
    from azure.servicebus._common import mgmt_handlers
    from azure.servicebus._common.constants import REQUEST_RESPONSE_GET_MESSAGE_SESSIONS_OPERATION
    from azure.servicebus._session_browser import _PAGE_SIZE, _page_request_body, _to_last_updated_ms

    body = _page_request_body(browser._amqp_transport, _to_last_updated_ms(updated_after), skip)
    page = await browser._mgmt_request_response_with_retry(
        REQUEST_RESPONSE_GET_MESSAGE_SESSIONS_OPERATION,
        body,
        mgmt_handlers.list_sessions_op,
        keep_alive_associated_link=False,
    )
    ids = [str(sid) for sid in page or []]
    return ids, len(ids) >= _PAGE_SIZE


BATCH_DELETE_OPERATION = b"com.microsoft:batch-delete-messages"
BATCH_DELETE_MAX = 4000  # per request on Premium (Standard: 500)


def management_handler(client: Any, path: Any) -> Any:
    """A management-only handler (no sender or receiver link, so it also works on a session-enabled
    entity) for an entity path, its dead-letter queue included (``path``: a ``core.EntityPath``).
    It opens on its first request; close it with :func:`close_now`."""
    name, subscription = path.handler_names()
    if subscription is None:
        return without_sleeps(client._create_session_browser(name))
    return without_sleeps(client._create_session_browser(name, subscription_name=subscription))


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MILLISECOND = dt.timedelta(milliseconds=1)


def cutoff_ms(before: dt.datetime) -> int:
    """``before`` in whole milliseconds since the epoch, rounded up: enqueued times are whole
    milliseconds, so "enqueued before" means the same at both precisions (a float's
    ``timestamp() * 1000`` can land a millisecond low and take in a message at the boundary)."""
    return -((EPOCH - utc(before)) // MILLISECOND)


def _batch_delete_request(
    handler: Any, count: int, before: dt.datetime | None, session_id: str | None
) -> tuple[bytes, dict[str, Any], Any]:
    transport = handler._amqp_transport
    body: dict[str, Any] = {"message-count": transport.AMQP_INT_VALUE(int(count))}
    if before is not None:
        body["enqueued-time-utc"] = transport.AMQP_TIMESTAMP_VALUE(cutoff_ms(before))
    if session_id is not None:
        body["session-id"] = session_id

    def deleted(status_code: int, message: Any, description: str, **_: Any) -> int:  # + amqp_transport
        if status_code == 200:
            value = transport.get_message_value(message) or {}
            return int(value.get(b"message-count", value.get("message-count", 0)))
        if status_code == 204:
            return 0  # nothing (left) to delete
        from azure.servicebus._common.constants import MGMT_RESPONSE_MESSAGE_ERROR_CONDITION

        condition = (message.application_properties or {}).get(MGMT_RESPONSE_MESSAGE_ERROR_CONDITION)
        transport.handle_amqp_mgmt_error(log, "Batch delete failed.", condition, description, status_code)
        raise AssertionError("unreachable: handle_amqp_mgmt_error raises")

    return BATCH_DELETE_OPERATION, body, deleted


async def batch_delete(
    handler: Any, count: int, *, before: dt.datetime | None = None, session_id: str | None = None
) -> int:
    """Delete up to ``count`` (at most 4,000) of the oldest messages enqueued before ``before``
    on the server, in one ``batch-delete-messages`` request on ``handler``'s management link (an
    async receiver, or :func:`management_handler`). Returns how many were deleted (0: none left).
    Service Bus skips locked messages."""
    operation, body, callback = _batch_delete_request(handler, count, before, session_id)
    return int(await handler._mgmt_request_response_with_retry(operation, body, callback))


def batch_delete_sync(
    receiver: Any, count: int, *, before: dt.datetime | None = None, session_id: str | None = None
) -> int:
    """:func:`batch_delete` on a synchronous receiver."""
    operation, body, callback = _batch_delete_request(receiver, count, before, session_id)
    return int(receiver._mgmt_request_response_with_retry(operation, body, callback))
