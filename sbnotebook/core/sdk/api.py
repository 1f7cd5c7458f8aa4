"""The SDK's public names the kit uses, imported in this one module.

The rest of ``sbnotebook.core`` takes SDK classes, constants and exceptions from here, never from
``azure.*`` itself, and the layers above take what they need from ``sbnotebook.core``: an SDK
upgrade that moves or renames a public name is mended here. The SDK's private names have their own
parts of this package (``__init__.py`` lists them). The async client and ``azure-identity`` (an
optional dependency) are imported when first asked for, as before: ``import sbnotebook.core`` does
not load the SDK's async stack or aiohttp.
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.servicebus import NEXT_AVAILABLE_SESSION as _NEXT_AVAILABLE_SESSION
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
    TransportType,
)
from azure.servicebus import exceptions as sdk_errors
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

NEXT_AVAILABLE_SESSION = _NEXT_AVAILABLE_SESSION
"""The SDK's own value, passed on: ``receive(entity, session_id=NEXT_AVAILABLE_SESSION)`` takes
whichever session is free."""

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "AmqpAnnotatedMessage",
    "AmqpMessageBodyType",
    "AzureError",
    "CorrelationRuleFilter",
    "FalseRuleFilter",
    "MessageLockLostError",
    "MessageSizeExceededError",
    "ResourceNotFoundError",
    "ServiceBusAdministrationClient",
    "ServiceBusClient",
    "ServiceBusCommunicationError",
    "ServiceBusConnectionError",
    "ServiceBusError",
    "ServiceBusMessage",
    "ServiceBusReceiveMode",
    "ServiceBusSubQueue",
    "SessionCannotBeLockedError",
    "SessionLockLostError",
    "SqlRuleAction",
    "SqlRuleFilter",
    "TransportType",
    "TrueRuleFilter",
    "async_admin_client_class",
    "async_client_class",
    "default_azure_credential",
    "sdk_errors",
]


def async_client_class() -> Any:
    """``azure.servicebus.aio.ServiceBusClient``, imported on first use (it brings the async stack)."""
    from azure.servicebus.aio import ServiceBusClient

    return ServiceBusClient


def async_admin_client_class() -> Any:
    """``azure.servicebus.aio.management.ServiceBusAdministrationClient``, imported on first use (it
    brings aiohttp)."""
    from azure.servicebus.aio.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient


def default_azure_credential(*, aio: bool, **options: Any) -> Any:
    """``DefaultAzureCredential``, sync or async. Raises ImportError without ``azure-identity``
    (an optional dependency: the caller says how to install it)."""
    if aio:
        from azure.identity.aio import DefaultAzureCredential as AsyncCredential

        return AsyncCredential(**options)
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(**options)
