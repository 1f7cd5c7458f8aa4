"""A fresh namespace per test: an in-process emulator of its own, or uniquely named live entities.

Why an emulator per test and not one server per session with a reset between tests: an
``Emulator`` runs in this process on a thread, and starting and stopping one (admin API on the AMQP
port only) costs about a millisecond (docs/testing.md has the measurement), so there is nothing to
pool; and a test's namespace on a port of its own means a client a test forgot to close can never
reach the next test's namespace.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.emulator import MAX_CONNECTIONS, Emulator, Topology, TopologyError

from .clock import LIVE_SKIP, clock_of
from .model import FAULTS_NEED_EMULATOR, Namespace
from .topology import marker_topology

log = logging.getLogger("sbnotebook.testing")

CA_SETTINGS = ("SBNOTEBOOK_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
STOP_TIMEOUT = 10.0


class SessionResources:
    """What one pytest session's namespaces share, removed when it ends: a temporary folder (the
    TLS CA, made once and trusted per test) and, live, the namespace's admin client."""

    def __init__(self, *, latency: float, tls: bool, live: bool, max_connections: int | None = None) -> None:
        self.latency = latency
        self.tls = tls
        self.live = live
        self.max_connections = max_connections  # None: the emulator's default (Service Bus's 5,000)
        self._folder: Path | None = None
        self._ca_bundle: Path | None = None
        self.live_namespace: Any = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> SessionResources:
        resources = cls(
            latency=float(config.getoption("servicebus_latency_ms", 0.0) or 0.0) / 1000.0,
            tls=bool(config.getoption("servicebus_tls", False)),
            live=bool(config.getoption("servicebus_live", False)),
            max_connections=config.getoption("servicebus_max_connections", None),
        )
        if resources.live:
            from .live import LiveNamespace

            resources.live_namespace = LiveNamespace.from_environment(os.environ)
        return resources

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="sbnotebook-pytest-"))
            atexit.register(self._remove_folder)  # a session torn down abnormally still leaves nothing
        return self._folder

    def ca_bundle(self, ca_file: Path) -> Path:
        """The CAs trusted before (the files ``CA_SETTINGS`` named, else certifi's, the SDK's
        default) plus the emulator's: trusting the emulator for a test must not stop the test
        reaching anything else over TLS (a corporate proxy's CA stays trusted)."""
        if self._ca_bundle is None:
            before = list(dict.fromkeys(os.environ[s] for s in CA_SETTINGS if os.environ.get(s)))
            if not before:
                import certifi  # the SDK's dependency

                before = [certifi.where()]
            parts = [Path(p).read_text(encoding="utf-8", errors="replace") for p in before if Path(p).is_file()]
            bundle = self.folder / "ca-bundle.pem"
            bundle.write_text("\n".join([*parts, ca_file.read_text()]))
            self._ca_bundle = bundle
        return self._ca_bundle

    def _remove_folder(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def close(self) -> None:
        if self.live_namespace is not None:
            self.live_namespace.close()
        self._remove_folder()
        atexit.unregister(self._remove_folder)


def topology_for(marker: pytest.Mark | None, node: pytest.Item) -> Topology:
    base = Path(node.path).parent
    try:
        if marker is None:
            return marker_topology((), {}, base)
        return marker_topology(marker.args, dict(marker.kwargs), base)
    except TopologyError as exc:
        problem = str(exc)
    pytest.fail(
        problem if problem.startswith("servicebus_topology") else f"servicebus_topology: {problem}", pytrace=False
    )


@contextlib.contextmanager
def open_namespace(resources: SessionResources, marker: pytest.Mark | None, node: pytest.Item) -> Iterator[Namespace]:
    topology = topology_for(marker, node)
    clock = clock_of(node)
    if resources.live_namespace is not None:
        if topology.faults or topology.principals:
            pytest.skip(f"the topology declares Faults or Principals: {FAULTS_NEED_EMULATOR}")
        if clock == "manual":
            pytest.skip(LIVE_SKIP)
        with resources.live_namespace.entities(topology, uuid.uuid4().hex[:8]) as namespace:
            yield namespace
        return
    with _emulated(resources, topology, clock) as namespace:
        yield namespace


@contextlib.contextmanager
def _emulated(resources: SessionResources, topology: Topology, clock: str) -> Iterator[Namespace]:
    # admin_port=None: the admin API stays on the AMQP port (what the connection string names); a
    # second listening port would cost ~50 ms a test to shut down and serve nothing more.
    tls_dir = resources.folder / "tls" if resources.tls else None
    emulator = Emulator(
        topology,
        admin_port=None,
        latency_ms=resources.latency * 1000.0,
        tls=resources.tls,
        tls_dir=tls_dir,
        clock="manual" if clock == "manual" else "system",
        max_connections=resources.max_connections or MAX_CONNECTIONS,
    )
    emulator.start()
    saved: dict[str, str | None] = {}
    try:
        names = {q.name: q.name for q in topology.queues} | {t.name: t.name for t in topology.topics}
        namespace = Namespace(
            connection_string=emulator.connection_string,
            fully_qualified_namespace=f"{emulator.address}:{emulator.port}",
            names=names,
            emulator=emulator,
        )
        bundle: str | None = None
        if emulator.ca_file is not None:
            bundle = str(resources.ca_bundle(emulator.ca_file))
            for setting in CA_SETTINGS:  # the admin clients (requests, aiohttp) and the kit's core
                saved[setting] = os.environ.get(setting)
                os.environ[setting] = bundle
            namespace.client_options = _tls_client_options(emulator, bundle)
        namespace._admin_factory = _emulator_admin_factory(namespace, bundle)
        yield namespace
    finally:
        _close_kit_connections()
        emulator.stop(STOP_TIMEOUT)
        for setting, value in saved.items():
            if value is None:
                os.environ.pop(setting, None)
            else:
                os.environ[setting] = value
    if not emulator.stopped.is_set():
        raise RuntimeError(f"the test's Service Bus emulator did not stop within {STOP_TIMEOUT:g} s")


def _tls_client_options(emulator: Emulator, ca: str) -> dict[str, Any]:
    """Over TLS the SDK dials 5671 unless told the port: the endpoint again, plain AMQP over TLS."""
    from sbnotebook.core import tls_port_options

    return {**tls_port_options(f"{emulator.address}:{emulator.port}"), "connection_verify": ca}


def _emulator_admin_factory(namespace: Namespace, ca: str | None) -> Any:
    conn = namespace.connection_string
    assert conn is not None

    def make(*, aio: bool = False, **kwargs: Any) -> Any:
        from sbnotebook.core import sdk_admin_client

        # Without TLS the connection string says UseDevelopmentEmulator=true: the API in plain HTTP on the AMQP port.
        trust = {"connection_verify": ca} if ca else {}
        return sdk_admin_client(conn, aio=aio, **trust, **kwargs)

    return make


def _close_kit_connections() -> None:
    """A test that used the kit's own library (``core.connect``) leaves live connections in its
    registry: close them before their broker goes. Only if the test loaded the core at all."""
    core = sys.modules.get("sbnotebook.core")
    if core is not None:
        core.close_all()
