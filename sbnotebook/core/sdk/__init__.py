"""The SDK seam: the only modules of the kit that import ``azure.*`` (at run time; the embedded
emulator's Entra ID tenant aside, which imports nothing of the kit: tests/project/test_structure.py).

``api.py`` holds the SDK's public names the kit uses (classes, constants, exceptions); ``failures.py``
says what an exception the SDK raised means (translated into the kit's ``errors.py``, classified:
a lost connection, a lost lock, a missing right); ``admin.py`` makes the administration client;
``websockets.py`` the options for AMQP over WebSockets; ``clients.py`` the SDK's own clients for code
that speaks the SDK itself (the pytest plugin, the demo's independent check). The rest of
this package reaches into the SDK's private API, one concern a module, because the public SDK has no
call for a few things Service Bus itself offers and the kit needs them. Each pins the SDK lines it
relies on:

- ``receiver.py``, the receiver: many locks settled or renewed in one request, a lock given back
  (``released``) or abandoned with properties (``modified``), the link credit a receive left unused
  taken back or drained, delivery tags forgotten;
- ``opening.py``, a handler's open and close: opened without the SDK's 50 ms sleeps with the
  ``$management`` link attached in the same flight, closed without waiting out the keep-alive, a
  session given back a moment ago accepted again (pinned: ``POLLING_OPENS``);
- ``management.py``, management-only handlers: sessions listed on a handler kept open, messages
  deleted on the server without receiving them (``batch-delete-messages``);
- ``messages.py``, messages and batches: a message added to a batch with one encoding, a
  ``ServiceBusMessage`` made without its property setters, the SDK's tracing on for the kit's traced
  connections only (pinned: ``BATCH_ADD_SOURCE``,
  ``BATCH_ENCODE_SOURCE``, ``TRACE_SOURCE``, ``WRAP_SOURCE``);
- ``encoded.py``, typed values: the encoded bytes of each message received or peeked kept beside
  the SDK's decoded values (pinned: ``DECODE_CALLS``), and typed values handed to its encoder, so a
  copy keeps every AMQP type;
- ``spares.py``, AMQP connections opened ahead of need, their session begun and CBS links
  attached, lent to the next link (pinned: ``SPARE_OPEN_TAIL``).

``USED_BY`` lists the private names each part uses, and ``PRIVATE_NAMES`` all of them, once each.
``tests/core/test_boundary.py`` fails when an installed SDK renames any of them, when a part's code
uses a listed name no longer or a private one its entry does not list, and when any other module of
the kit uses one: an upgrade breaks one test instead of silently slowing every settlement.
The range of SDK versions this is tested with is pinned in ``pyproject.toml``.
"""

from __future__ import annotations

# The SDK's private names each part uses: part -> owner (a dotted path inside the SDK) -> attributes.
# tests/core/test_boundary.py checks each part's code against its entry, both ways.
USED_BY: dict[str, dict[str, str]] = {
    "receiver": {
        "azure.servicebus.aio._servicebus_receiver_async.ServiceBusReceiver": (
            "_settle_message_via_mgmt_link _renew_locks _handler _receive_mode _build_received_message _open"
            " _receive_context"
        ),
        "azure.servicebus.aio._base_handler_async.BaseHandler": "_check_live _handle_exception",
        "azure.servicebus._common.constants": "MESSAGE_MGMT_SETTLEMENT_TERM_MAP MGMT_RESPONSE_MESSAGE_EXPIRATION",
        "azure.servicebus._common.message.ServiceBusReceivedMessage": (
            "_delivery_id _delivery_tag _settled _expiry _is_peeked_message"
        ),
        "azure.servicebus._pyamqp.aio._client_async.ReceiveClientAsync": (
            "settle_messages_async _link _received_messages"
        ),
        "azure.servicebus._pyamqp.aio._link_async.Link": "current_link_credit flow _incoming_flow",
        "azure.servicebus._pyamqp.aio._receiver_async.ReceiverLink": "_received_delivery_tags",
        "azure.servicebus._pyamqp.aio._client_async.AMQPClientAsync": "_connection",
        "azure.servicebus._pyamqp.aio._connection_async.Connection": "listen",
    },
    "opening": {
        "azure.servicebus.aio._servicebus_receiver_async.ServiceBusReceiver": "_handler _create_handler _session_id",
        "azure.servicebus._pyamqp.aio._client_async.AMQPClientAsync": (
            "_connection _keep_alive_thread _mgmt_links auth_complete_async client_ready_async _socket_timeout _session"
        ),
        "azure.servicebus.aio._servicebus_sender_async.ServiceBusSender": "_handler _create_handler",
        "azure.servicebus.aio._session_browser_async._SessionBrowserAsync": "_create_handler",
        "azure.servicebus.aio._base_handler_async.BaseHandler": "_mgmt_target _config _entity_path",
        "azure.servicebus._pyamqp.aio._management_operation_async": "ManagementOperation",
        "azure.servicebus._pyamqp.aio._management_operation_async.ManagementOperation": "ready",
        "azure.servicebus._pyamqp.aio._connection_async.Connection": "listen",
    },
    "management": {
        "azure.servicebus.aio._servicebus_client_async.ServiceBusClient": "_create_session_browser",
        "azure.servicebus.aio._session_browser_async._SessionBrowserAsync": (
            "_mgmt_request_response_with_retry _amqp_transport"
        ),
        "azure.servicebus._session_browser": "_page_request_body _to_last_updated_ms _PAGE_SIZE",
        "azure.servicebus._common.mgmt_handlers": "list_sessions_op",
        "azure.servicebus._common.constants": (
            "REQUEST_RESPONSE_GET_MESSAGE_SESSIONS_OPERATION MGMT_RESPONSE_MESSAGE_ERROR_CONDITION"
        ),
        "azure.servicebus._servicebus_receiver.ServiceBusReceiver": "_mgmt_request_response_with_retry _amqp_transport",
        "azure.servicebus.aio._servicebus_receiver_async.ServiceBusReceiver": (
            "_amqp_transport _mgmt_request_response_with_retry"
        ),
        "azure.servicebus._transport._pyamqp_transport.PyamqpTransport": (
            "AMQP_INT_VALUE AMQP_TIMESTAMP_VALUE handle_amqp_mgmt_error"
        ),
    },
    "messages": {
        "azure.servicebus._common.message.ServiceBusMessageBatch": (
            "_add _amqp_transport _tracing_attributes _message _messages _size _count"
        ),
        "azure.servicebus._common.constants": "_BATCH_MESSAGE_OVERHEAD_COST",
        "azure.servicebus._common.tracing": "trace_message",
        "azure.servicebus._common.utils": "transform_outbound_messages",
        "azure.servicebus._pyamqp._encode": "encode_payload",
        "azure.servicebus._pyamqp.utils": "add_batch get_message_encoded_size",
        "azure.servicebus._transport._pyamqp_transport.PyamqpTransport": "set_batch_envelope_properties",
        "azure.servicebus._common.message.ServiceBusMessage": "_raw_amqp_message",
        "azure.core.settings.PrioritizedSetting": "_default",  # the kit's span type as the tracing default
    },
    "encoded": {
        "azure.servicebus._pyamqp.message": "Message",
        "azure.servicebus._pyamqp.types": "AMQPTypes",  # and its TYPE and VALUE keys
        "azure.servicebus._common.message.ServiceBusReceivedMessage": "_message",
    },
    "spares": {
        "azure.servicebus.aio._servicebus_receiver_async.ServiceBusReceiver": (
            "_handler _amqp_transport _create_handler"
        ),
        "azure.servicebus._pyamqp.aio._client_async.AMQPClientAsync": (
            "_connection _keep_alive_thread _socket_timeout open_async _keep_alive_async _hostname _use_tls "
            "_transport_type _custom_endpoint_address _http_proxy _max_frame_size _channel_max _idle_timeout "
            "_incoming_window _outgoing_window _auth _auth_timeout _ssl_opts _properties _network_trace "
            "_network_trace_params _cbs_authenticator _keep_alive_interval _session _shutdown"
        ),
        "azure.servicebus.aio._session_browser_async._SessionBrowserAsync": "_amqp_transport",
        "azure.servicebus.aio._base_handler_async.BaseHandler": "_config _credential",
        "azure.servicebus._pyamqp.aio._connection_async.Connection": "listen create_session _error _container_id",
        "azure.servicebus._pyamqp.aio._cbs_async": "CBSAuthenticator",
        "azure.servicebus._pyamqp.constants": "CbsState CbsAuthState ConnectionState AUTH_TYPE_CBS",
        "azure.servicebus._pyamqp.aio._cbs_async.CBSAuthenticator": (
            "auth_state handle_token _expires_on _auth _auth_timeout"
        ),
        "azure.servicebus._pyamqp.error": "TokenAuthFailure",
        "azure.servicebus.aio._async_utils": "create_authentication",
        "azure.servicebus._transport._pyamqp_transport.PyamqpTransport": "create_servicebus_exception",
        "azure.servicebus._common.constants": "TOKEN_TYPE_SASTOKEN",
        "azure.servicebus.aio._transport._pyamqp_transport_async.PyamqpTransportAsync": "create_token_auth_async",
    },
}
# (owner, attribute) pairs: every part's names, once each.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys(
        (owner, name) for owners in USED_BY.values() for owner, names in owners.items() for name in names.split()
    )
)
