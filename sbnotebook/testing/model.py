"""The namespace a test gets from the pytest plugin (emulated or live)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

FAULTS_NEED_EMULATOR = (
    "fault controls (reject_sends, lose_locks, lose_session_locks, drop_connections_after, slow_down, latency_ms) "
    "need the embedded emulator; --servicebus-live runs against a real Service Bus namespace"
)


@dataclass
class Namespace:
    """The test's namespace. ``name("orders")`` is the entity's real name (the same under the
    emulator; ``orders-1a2b3c4d`` under ``--servicebus-live``)."""

    connection_string: str | None
    fully_qualified_namespace: str
    names: dict[str, str]
    emulator: Any = None  # sbnotebook.emulator.Emulator; None under --servicebus-live
    client_options: dict[str, Any] = field(default_factory=dict)  # for ServiceBusClient(...)
    credential: Any = None  # live Entra ID (SERVICEBUS_FULLY_QUALIFIED_NAMESPACE) only
    _admin_factory: Any = None

    def __repr__(self) -> str:  # never the key
        kind = "emulator" if self.emulator is not None else "live"
        return f"<servicebus Namespace {kind} {self.fully_qualified_namespace} entities={sorted(self.names)}>"

    def name(self, entity: str) -> str:
        """The real name of ``entity``, as the test's ``servicebus_topology`` marker names it."""
        try:
            return self.names[entity]
        except KeyError:
            raise KeyError(
                f"{entity!r} is not in the test's servicebus_topology marker (it has {sorted(self.names)})"
            ) from None

    def client(self, *, aio: bool = False, **kwargs: Any) -> Any:
        """A ``ServiceBusClient`` (``aio=True``: ``azure.servicebus.aio.ServiceBusClient``) for this
        namespace, with what the mode needs (under ``--servicebus-tls``: the port and the CA)."""
        from sbnotebook.core import sdk_client

        options = {**self.client_options, **kwargs}
        if self.connection_string is not None:
            return sdk_client(self.connection_string, aio=aio, **options)
        credential = self.credential(aio) if callable(self.credential) else self.credential
        return sdk_client(
            fully_qualified_namespace=self.fully_qualified_namespace, credential=credential, aio=aio, **options
        )

    def now(self) -> datetime:
        """The namespace's time: the emulator's clock (manual or system); live, real time."""
        return self.emulator.now() if self.emulator is not None else datetime.now(UTC)

    def advance(self, by: timedelta | float | str) -> datetime:
        """Move the emulator's manual clock on (``@pytest.mark.servicebus_clock("manual")``) and fire
        what fell due before returning: ``timedelta``, seconds, or ``90s``/``10m``/``2h``/``1d``."""
        if self.emulator is None:
            from .clock import LIVE_ADVANCE

            raise RuntimeError(LIVE_ADVANCE)
        return self.emulator.advance(by)

    def admin_client(self, *, aio: bool = False, **kwargs: Any) -> Any:
        """A ``ServiceBusAdministrationClient`` (``aio=True``: the async one) for this namespace."""
        return self._admin_factory(aio=aio, **kwargs)
