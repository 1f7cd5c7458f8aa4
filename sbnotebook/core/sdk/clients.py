"""The SDK's own clients, for code that speaks the SDK itself.

The kit's operations go through a live connection (``core.connect``); code that hands a user the
SDK's objects (the pytest plugin's ``servicebus_client`` and ``servicebus_admin_client``, a check
that reads the broker on a client of its own) makes them here, so no module outside this package
imports ``azure.*``: ``sdk_client``, ``sdk_admin_client`` (an emulator's connection string gets
``admin.emulator_admin_client``, plain HTTP on the emulator's port) and ``rule_arguments`` (a
rule's filter and action as the administration client's ``create_rule`` takes them, the one place
the kit builds them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..connection_string import canonical, names_the_emulator
from .admin import emulator_admin_client
from .api import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    ServiceBusClient,
    SqlRuleAction,
    SqlRuleFilter,
    async_admin_client_class,
    async_client_class,
)


def _for(
    sync_type: Any,
    async_type: Any,
    connection_string: str | None,
    fully_qualified_namespace: str | None,
    credential: Any,
    aio: bool,
    options: dict[str, Any],
) -> Any:
    client_type = async_type() if aio else sync_type
    if connection_string is not None:
        return client_type.from_connection_string(canonical(connection_string), **options)
    if not fully_qualified_namespace or credential is None:
        raise ValueError("give a connection string, or a fully qualified namespace and a token credential")
    return client_type(fully_qualified_namespace, credential, **options)


def sdk_client(
    connection_string: str | None = None,
    *,
    fully_qualified_namespace: str | None = None,
    credential: Any = None,
    aio: bool = False,
    **options: Any,
) -> Any:
    """The SDK's ``ServiceBusClient`` (``aio=True``: ``azure.servicebus.aio.ServiceBusClient``) for a
    connection string, or for a namespace's host name and a token credential; ``options`` go to the
    SDK as they are (``connection_verify=``, ``custom_endpoint_address=``, ...). For code that uses
    the SDK itself: the kit's own operations take ``connection=`` instead."""
    return _for(
        ServiceBusClient, async_client_class, connection_string, fully_qualified_namespace, credential, aio, options
    )


def sdk_admin_client(
    connection_string: str | None = None,
    *,
    fully_qualified_namespace: str | None = None,
    credential: Any = None,
    aio: bool = False,
    **options: Any,
) -> Any:
    """The SDK's ``ServiceBusAdministrationClient`` (``aio=True``: the async one) for a connection
    string, or for a namespace's host name and a token credential; ``options`` go to the SDK as they
    are. A connection string with ``UseDevelopmentEmulator=true`` gets the emulator's administration
    API, which is plain HTTP on its port (:func:`emulator_admin_client`): the SDK's client alone
    always speaks HTTPS."""
    if connection_string is not None and names_the_emulator(connection_string):
        return emulator_admin_client(connection_string, aio=aio, **options)
    return _for(
        ServiceBusAdministrationClient,
        async_admin_client_class,
        connection_string,
        fully_qualified_namespace,
        credential,
        aio,
        options,
    )


def rule_arguments(
    *,
    sql: str | None = None,
    correlation: Mapping[str, Any] | None = None,
    action: str | None = None,
    sql_parameters: Mapping[str, Any] | None = None,
    action_parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A subscription rule's ``filter`` and ``action``, as the SDK administration client's
    ``create_rule(topic, subscription, name, **rule_arguments(...))`` takes them: a SQL filter
    (``sql``, with ``sql_parameters``) or a correlation filter (``correlation``: the SDK's keywords,
    ``correlation_id``, ``label``, ..., ``properties``), and an optional SQL action (``action``, with
    ``action_parameters``)."""
    if (sql is None) == (correlation is None):
        raise ValueError("a rule takes a SQL filter or a correlation filter (one of them)")
    if correlation is not None:
        rule_filter: Any = CorrelationRuleFilter(**correlation)
    else:
        rule_filter = SqlRuleFilter(sql, parameters=dict(sql_parameters or {}) or None)
    rule_action = SqlRuleAction(action, parameters=dict(action_parameters or {}) or None) if action else None
    return {"filter": rule_filter, "action": rule_action}
