"""pytest plugin ``servicebus``: a Service Bus namespace for any project's tests, no Docker.

Registered by the package (entry point ``pytest11``); ``-p no:servicebus`` turns it off. Loading it
imports pytest and this module only: the emulator, the SDK and the rest load inside the fixtures,
when a test asks for one (``sbnotebook/testing/``), so an unrelated test run pays nothing.

Fixtures (each test gets a fresh namespace: nothing one test sends is seen by the next):

- ``servicebus_namespace``: the namespace (connection string, entity names, ``client()``,
  ``admin_client()``); works in every mode.
- ``servicebus_emulator``: the running ``sbnotebook.emulator.Emulator`` with its fault controls
  (``reject_sends``, ``lose_locks``, ``lose_session_locks``, ``drop_connections_after``, ``slow_down``, ``latency_ms``)
  and its clock (``now()``, ``advance()``); skipped under ``--servicebus-live``.
- ``servicebus_connection_string``, ``servicebus_client`` (a sync ``ServiceBusClient``, closed
  after the test), ``servicebus_admin_client``.
- ``servicebus_spans``: the OpenTelemetry spans that ended during the test (the kit's, the SDK's, the
  in-process emulator's), in memory, filtered with ``find(name, message_id=, trace_id=)``; needs
  opentelemetry-sdk (``sbnotebook/testing/spans.py``: one global tracer provider per session).

Entities come from the marker ``@pytest.mark.servicebus_topology(queues=[...], topics={...},
config="Config.json")``; a manual clock (time moves only with ``advance()``) from
``@pytest.mark.servicebus_clock("manual")``, skipped under ``--servicebus-live``. Options:
``--servicebus-latency-ms N``, ``--servicebus-tls``,
``--servicebus-max-connections N``, ``--servicebus-live``. docs/testing.md has the
details and examples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover - types only, never imported at run time
    from sbnotebook.testing.model import Namespace
    from sbnotebook.testing.namespace import SessionResources
    from sbnotebook.testing.spans import Spans

__all__ = [
    "LIVE_ENV",
    "servicebus_admin_client",
    "servicebus_client",
    "servicebus_connection_string",
    "servicebus_emulator",
    "servicebus_namespace",
    "servicebus_spans",
]

LIVE_ENV = ("SERVICEBUS_CONNECTION_STRING", "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE")
"""Where ``--servicebus-live`` finds the real namespace: a connection string, or a fully qualified
namespace signed in to with Entra ID; one of them must be set."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's command-line options (``--servicebus-...``), in a group of their own."""
    group = parser.getgroup("servicebus", "Service Bus namespace for tests (sbnotebook)")
    group.addoption(
        "--servicebus-latency-ms",
        type=float,
        default=0.0,
        metavar="N",
        help="delay every reply of the embedded Service Bus emulator by N ms (80 models Azure)",
    )
    group.addoption(
        "--servicebus-tls",
        action="store_true",
        default=False,
        help="serve the emulator over TLS (the SDK's production path), its CA trusted for each test",
    )
    group.addoption(
        "--servicebus-max-connections",
        type=int,
        default=None,
        metavar="N",
        help="AMQP connections each test's emulator accepts at once (default 5000, Service Bus Standard's): "
        "a test that leaks clients fails with amqp:resource-limit-exceeded, as it would on Azure",
    )
    group.addoption(
        "--servicebus-live",
        action="store_true",
        default=False,
        help="run against the real namespace in SERVICEBUS_CONNECTION_STRING or "
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE: entities created with unique names and deleted after",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the plugin's markers, and refuse options that do not go together (or a live run with
    no namespace to run on) before any test starts."""
    config.addinivalue_line(
        "markers",
        "servicebus_topology(queues=None, topics=None, config=None): the entities of the test's "
        "Service Bus namespace (sbnotebook plugin; see docs/testing.md)",
    )
    config.addinivalue_line(
        "markers",
        "servicebus_clock(kind): 'manual' gives the test's emulator a clock that moves only with "
        "servicebus_emulator.advance(...) (sbnotebook plugin; skipped under --servicebus-live)",
    )
    live = config.getoption("servicebus_live", False)
    if not live:
        if config.getoption("servicebus_latency_ms", 0.0) < 0:
            raise pytest.UsageError("--servicebus-latency-ms cannot be negative")
        cap = config.getoption("servicebus_max_connections", None)
        if cap is not None and cap < 1:
            raise pytest.UsageError("--servicebus-max-connections must be at least 1")
        return
    if config.getoption("servicebus_max_connections", None) is not None:
        raise pytest.UsageError("--servicebus-max-connections is for the emulator; a live namespace has its own cap")
    if config.getoption("servicebus_latency_ms", 0.0):
        raise pytest.UsageError(
            "--servicebus-latency-ms needs the embedded emulator; it has no effect with --servicebus-live"
        )
    if config.getoption("servicebus_tls", False):
        raise pytest.UsageError("--servicebus-tls is for the emulator; a live namespace is always TLS")
    if not any(os.environ.get(name) for name in LIVE_ENV):
        raise pytest.UsageError(f"--servicebus-live needs {' or '.join(LIVE_ENV)} set")


@pytest.fixture(scope="session")
def _servicebus_session(request: pytest.FixtureRequest) -> Iterator[SessionResources]:
    """What the session's namespaces share: a temporary folder for the TLS CA (made once), the live
    namespace's settings. Removed at the end of the session, also after a failure or Ctrl-C."""
    from sbnotebook.testing.namespace import SessionResources

    resources = SessionResources.from_config(request.config)
    try:
        yield resources
    finally:
        resources.close()


@pytest.fixture
def servicebus_namespace(request: pytest.FixtureRequest, _servicebus_session: SessionResources) -> Iterator[Namespace]:
    """A fresh Service Bus namespace for this test, with the entities its ``servicebus_topology``
    marker names: an embedded emulator of its own, or (``--servicebus-live``) uniquely named
    entities on the real namespace, deleted after the test."""
    from sbnotebook.testing.namespace import open_namespace

    marker = request.node.get_closest_marker("servicebus_topology")
    with open_namespace(_servicebus_session, marker, request.node) as namespace:
        yield namespace


@pytest.fixture
def servicebus_emulator(servicebus_namespace: Namespace) -> Any:
    """The test's running ``Emulator``: fault controls, its clock (``now()``, ``advance()``) and the
    broker's own counts (``servicebus_emulator.broker.counts("orders")``). Skipped under
    ``--servicebus-live``."""
    if servicebus_namespace.emulator is None:
        from sbnotebook.testing.model import FAULTS_NEED_EMULATOR

        pytest.skip(FAULTS_NEED_EMULATOR)
    return servicebus_namespace.emulator


@pytest.fixture
def servicebus_connection_string(servicebus_namespace: Namespace) -> str:
    """The connection string of the test's namespace (``ServiceBusClient.from_connection_string``)."""
    if servicebus_namespace.connection_string is None:
        pytest.skip(
            "the live namespace is given by SERVICEBUS_FULLY_QUALIFIED_NAMESPACE (Entra ID): no connection string"
        )
    return servicebus_namespace.connection_string


@pytest.fixture
def servicebus_client(servicebus_namespace: Namespace) -> Iterator[Any]:
    """A sync ``azure.servicebus.ServiceBusClient`` for the test's namespace, closed after the test."""
    with servicebus_namespace.client() as client:
        yield client


@pytest.fixture
def servicebus_admin_client(servicebus_namespace: Namespace) -> Iterator[Any]:
    """A sync ``ServiceBusAdministrationClient`` for the test's namespace, closed after the test."""
    with servicebus_namespace.admin_client() as admin:
        yield admin


@pytest.fixture
def servicebus_spans() -> Iterator[Spans]:
    """The spans that end while the test runs (``sbnotebook.testing.spans.Spans``): ``find("sbnotebook.resubmit")``,
    ``find(message_id=...)``, ``find(trace_id=...)``. Skipped when opentelemetry-sdk is not installed."""
    pytest.importorskip("opentelemetry.sdk.trace", reason="servicebus_spans needs opentelemetry-sdk")
    from sbnotebook.testing.spans import recording

    with recording() as spans:
        yield spans
