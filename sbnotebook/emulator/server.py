"""Run the broker: in-process (``Emulator``) or as a command-line server."""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from .admin.api import AdminServer
from .amqp.handler import BrokerHandler
from .amqp.terms import MAX_FRAME_SIZE, TICK_SECONDS
from .broker.clock import Clock, ClockKind, make_clock
from .endpoints import (
    advertised_host,
    choose_key,
    connection_string,
    is_loopback,
    load_topology,
    server_certificate,
    tenant_id,
)
from .journey.queries import JourneyAnswer, JourneyQuery, answer
from .net.limits import MAX_CONNECTIONS, Deadlines
from .net.loop import EventLoop
from .oldnames import deprecated, renamed
from .persistence.durability import compact, compact_if_large, open_broker
from .persistence.journal import Journal
from .security.entra import AsyncEmulatorCredential, EmulatorCredential, Issuer, Principal, role_name
from .security.sas import DEFAULT_KEY_NAME, KeyRing, Policy, new_key, rights_of
from .security.tls import ServerCertificate
from .timekeeping import Timekeeping
from .topology import Topology

log = logging.getLogger("sbnotebook.emulator")
LISTEN_BACKLOG = 512
DETACH_WAIT = 5.0  # seconds a DELETE of the administration API waits for its links to be detached


class _QuietDisconnects(logging.Filter):
    """proton logs a client hanging up as an ERROR; for a broker that is routine."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("Couldn't send" in text or "Couldn't recv" in text)


_proton_log = logging.getLogger("proton")
if not any(isinstance(f, _QuietDisconnects) for f in _proton_log.filters):
    _proton_log.addFilter(_QuietDisconnects())


class Emulator(Timekeeping):
    """An embedded Service Bus emulator serving AMQP on ``host:port``.

    >>> with Emulator(port=0) as emu:
    ...     client = ServiceBusClient.from_connection_string(emu.connection_string)
    """

    @renamed("Emulator", latency=("latency_ms", 1000.0))  # seconds, as the old name took them
    def __init__(
        self,
        config: str | Path | dict[str, Any] | Topology | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        key: str | None = None,
        key_name: str = DEFAULT_KEY_NAME,
        clock: Clock | ClockKind | None = None,
        latency_ms: float = 0.0,
        admin_port: int | Literal["auto"] | None = "auto",
        data_dir: str | Path | None = None,
        tls: bool = False,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        tls_dir: str | Path | None = None,
        principals: list[Principal | str] | None = None,
        tenant: str | None = None,
        max_connections: int = MAX_CONNECTIONS,
        deadlines: Deadlines | None = None,
    ) -> None:
        """``tls=True``: AMQP, WebSockets and the admin API over TLS on the one port (nothing in the
        clear), with a certificate from a local CA made under ``tls_dir`` (default: ``data_dir``/tls,
        else a temporary folder), or ``tls_cert``/``tls_key`` given.

        With TLS the emulator is also an Entra ID authority (``entra_authority``, ``tenant``) for
        ``principals`` (``Principal`` or ``"CLIENT_ID:SECRET:ROLE[,ROLE]"``) and those of the topology
        file; ``credential(roles=[...])`` gives tests a token credential directly.

        ``clock="manual"``: the broker's time starts at real now and moves only with ``advance()``
        (timekeeping.py); default the system clock.

        ``max_connections`` AMQP connections at once (Service Bus's 5,000); ``deadlines`` for peers
        that stall (net/limits.py; docs/emulator.md, "Connections")."""
        self.topology = load_topology(config)
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        # On loopback the published default key; on any other interface never (a random one)
        key = choose_key(host, key)
        self._key = key
        self._key_name = key_name
        self._journal = Journal(data_dir) if data_dir is not None else None
        self.broker = open_broker(self.topology, make_clock(clock), self._journal)
        self._tls: ServerCertificate | None = None
        self.issuer: Issuer | None = None
        if tls:
            self._tls = server_certificate(tls_cert, tls_key, tls_dir, data_dir)
            declared = [p if isinstance(p, Principal) else Principal.parse(p) for p in principals or ()]
            self.issuer = Issuer(tenant or tenant_id(self._tls), self.topology.principals + declared)
        elif principals or tenant:
            raise ValueError("Entra ID principals need TLS (tls=True, --tls): tokens are never sent in the clear")
        # The root policy and the namespace's policies of the topology file; queues' and topics'
        # policies are kept by the broker's entities (the topology's, and the administration API's)
        namespace_policies = [p for p in self.topology.policies if p.entity is None]
        self.keys = KeyRing([Policy(key_name, key, key), *namespace_policies], entities=self.broker)
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self.deadlines = deadlines or Deadlines()
        self._max_connections = max_connections
        self._handler = BrokerHandler(self.broker, self.keys, self.issuer, self.deadlines)
        self._thread: threading.Thread | None = None
        self._loop: EventLoop | None = None
        self.stopped = threading.Event()
        self._latency = latency_ms / 1000.0  # seconds, as the event loop and the admin API count them
        if tls:
            admin_port = None  # the one port serves HTTPS; a second plain-HTTP port would undo that
        self._admin_requested = admin_port
        self._admin: AdminServer | None = None  # the API on a port of its own (optional)
        # the API (and the Entra authority) on the AMQP port (always)
        self._api = AdminServer(self.broker, self.keys, issuer=self.issuer)
        self._api.clock = self  # /$emulator/clock: --advance and --status from another process
        self._api.on_delete = self._detach_deleted
        self.admin_port: int | None = None

    def __repr__(self) -> str:
        state = f"{self.host}:{self.port}" if self.port else "not started"
        return f"<Emulator {state}>"  # never the key

    @property
    def connection_string(self) -> str:
        if self.port is None:
            raise RuntimeError("the emulator is not running; call start() or use it as a context manager")
        return connection_string(self.address, self.port, self._key_name, self._key, tls=self._tls is not None)

    def policy_connection_string(self, key_name: str, entity: str | None = None, *, secondary: bool = False) -> str:
        """The connection string of a shared access policy: of ``entity`` (a queue or topic, with
        ``EntityPath``) or of the namespace; its primary key, or ``secondary``."""
        if self.port is None:
            raise RuntimeError("the emulator is not running; call start() or use it as a context manager")
        policy = self.keys.get(key_name, entity)
        if policy is None:
            where = f"the entity {entity!r}" if entity is not None else "the namespace"
            raise KeyError(f"{where} has no policy {key_name!r}")
        key = policy.secondary_key if secondary else policy.primary_key
        return connection_string(
            self.address, self.port, key_name, key, tls=self._tls is not None, entity=policy.entity
        )

    def add_policy(
        self, key_name: str, rights: list[str], entity: str | None = None, *, key: str | None = None
    ) -> Policy:
        """Declare a shared access policy now (as ``AuthorizationRules`` in the topology file), of
        ``entity`` (a queue or topic that exists: it keeps the policy, replacing its rule of that
        name) or of the namespace, with ``rights`` (Send, Listen, Manage)."""
        if entity is not None and "/" in entity.strip("/"):
            raise ValueError(f"{entity!r}: policies belong to queues and topics (a subscription uses its topic's)")
        primary = key if key is not None else new_key()
        policy = Policy(key_name, primary, new_key(), rights_of(rights), entity)
        if entity is None:
            self.keys.add(policy)
        else:  # the entity keeps it (replacing one of the same name), as a rule added through the API
            others = [p for p in self.broker.policies_of(entity) if p.name != key_name]
            self.broker.set_policies(entity, [*others, policy])
        return policy

    @property
    def policies(self) -> list[Policy]:
        """Every shared access policy, the root one first (keys are not in their reprs)."""
        return self.keys.policies()

    @property
    def address(self) -> str:
        """The host name clients dial (``localhost`` on loopback under TLS: the certificate's name)."""
        if self._tls is not None and is_loopback(self.host):
            return "localhost"
        return advertised_host(self.host)

    @property
    def tls(self) -> bool:
        return self._tls is not None

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate clients trust (``connection_verify=emu.ca_file``); None without TLS
        or with a certificate of one's own."""
        return self._tls.ca_file if self._tls is not None else None

    @property
    def tenant(self) -> str | None:
        """The Entra ID tenant id (``AZURE_TENANT_ID``); None without TLS."""
        return self.issuer.tenant if self.issuer is not None else None

    @property
    def entra_authority(self) -> str | None:
        """The authority to give azure-identity (``authority=``, ``AZURE_AUTHORITY_HOST``), with
        ``disable_instance_discovery=True``; None without TLS."""
        return self.admin_url if self.issuer is not None else None

    def add_principal(self, client_id: str, secret: str, roles: list[str]) -> Principal:
        """Declare a service principal now (as ``--principal CLIENT_ID:SECRET:ROLE,...``)."""
        if self.issuer is None:
            raise RuntimeError("Entra ID needs an emulator with tls=True")
        return self.issuer.add(Principal(client_id, secret, tuple(role_name(r) for r in roles)))

    def credential(self, roles: list[str], *, aio: bool = False, lifetime: float = 3600.0) -> Any:
        """An azure-core ``TokenCredential`` (``aio=True``: ``AsyncTokenCredential``) for a new
        service principal holding ``roles`` (Owner, Sender, Receiver or the full role names).
        ``lifetime`` (seconds; negative: already expired) is how long each token is valid."""
        if self.issuer is None or self.port is None:
            raise RuntimeError("Entra ID needs a running emulator with tls=True")
        principal = self.add_principal(str(uuid.uuid4()), secrets.token_urlsafe(24), roles)
        sync = EmulatorCredential(self.issuer, principal, self.admin_url, lifetime)
        return AsyncEmulatorCredential(sync) if aio else sync

    def start(self, timeout: float = 10.0) -> Emulator:
        if self._thread is not None:
            return self
        self._loop = EventLoop(
            self._handler,
            self.host,
            self._requested_port,
            backlog=LISTEN_BACKLOG,
            tick=TICK_SECONDS,
            max_frame_size=MAX_FRAME_SIZE,
            http=self._api.serve_connection,
            tls=self._tls.context() if self._tls is not None else None,
            max_connections=self._max_connections,
            deadlines=self.deadlines,
        )
        self._api.status = self._loop.status  # GET /$emulator/status: what --status shows
        self._loop.latency = self._latency
        self._api.latency = self._latency
        self.port = self._loop.port
        if self._admin_requested is not None:
            self._admin = self._start_admin(self._admin_requested)
            self._admin.clock = self
            self._admin.on_delete = self._detach_deleted
            self._admin.start()
            self.admin_port = self._admin.port
        self.stopped.clear()
        self._thread = threading.Thread(target=self._run, name="sbnotebook-emulator", daemon=True)
        self._thread.start()
        # Stop before proton's own exit handler frees the handles of every proton object: a broker
        # thread still running after that aborts the interpreter ("ffi.from_handle() ... garbage").
        # Exit handlers run last-registered first, and proton registers its handler on import.
        atexit.register(self.stop)
        return self

    def _start_admin(self, requested: int | Literal["auto"]) -> AdminServer:
        """ "auto": the AMQP port + 1 (what clients given only a connection string assume), else any free port."""
        keys = self.keys
        if requested != "auto":
            return AdminServer(self.broker, keys, self.host, requested)
        assert self.port is not None
        try:
            return AdminServer(self.broker, keys, self.host, self.port + 1)
        except OSError:
            return AdminServer(self.broker, keys, self.host, 0)

    def _run(self) -> None:
        assert self._loop is not None
        try:
            self._loop.run()
        except BaseException:
            log.exception("emulator stopped with an error")
        finally:
            self.stopped.set()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the broker's thread (for changes made while clients are connected)."""
        if self._loop is None:
            fn()
        else:
            self._loop.call_soon(fn)

    def _detach_deleted(self) -> None:
        """Detach the links of entities just deleted, on the broker's thread, and wait (bounded) for
        it: the administration API answers a DELETE after its entity's links are detached."""
        done = threading.Event()

        def detach() -> None:
            try:
                self._handler.flush()  # flush detaches the links of deleted entities first
            finally:
                done.set()

        loop, thread = self._loop, self._thread
        if loop is None or threading.current_thread() is thread:
            return  # not serving (no links), or on the loop already (its next flush detaches them)
        loop.call_soon(detach)
        done.wait(DETACH_WAIT)

    @property
    def max_connections(self) -> int:
        """The connection cap (``--max-connections``)."""
        return self._max_connections

    @property
    def connections(self) -> int:
        """AMQP connections open now, counted against ``max_connections`` (0 when not running)."""
        loop = self._loop
        return loop.amqp_connections if loop is not None else 0

    @property
    def admin_url(self) -> str:
        """The administration API, served on the AMQP port itself (as Service Bus serves it on 443)."""
        if self.port is None:
            raise RuntimeError("the emulator is not running; call start() or use it as a context manager")
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{self.address}:{self.port}"

    # ------------------------------------------------------- fault injection

    @property
    def requests(self) -> Counter[str]:
        """Requests served so far: management operations by name (``com.microsoft:peek-message``),
        ``admin GET``/``admin PUT``/... for the administration API, and ``peeked messages``. Tests read
        it to count an action's round trips; ``requests.clear()`` starts again."""
        return self.broker.requests

    @property
    def latency_ms(self) -> float:
        """Milliseconds added to every broker reply (simulated network distance), as the command
        line's --latency-ms; settable while the emulator runs."""
        return self._latency * 1000.0

    @latency_ms.setter
    def latency_ms(self, ms: float) -> None:
        if ms < 0:
            raise ValueError("latency_ms cannot be negative")
        seconds = ms / 1000.0
        self._latency = seconds
        self._api.latency = seconds
        loop = self._loop
        if loop is not None:
            self.call_soon(lambda: setattr(loop, "latency", seconds))

    def _old_latency(self) -> float:
        deprecated("Emulator.latency", "Emulator.latency_ms")
        return self._latency

    def _set_old_latency(self, seconds: float) -> None:
        deprecated("Emulator.latency", "Emulator.latency_ms")
        self.latency_ms = seconds * 1000.0

    _old_latency.__renamed_to__ = "latency_ms"  # type: ignore[attr-defined]  # read by tests/project/surface.py
    # The old name, in seconds, kept for one release (docs/names.md): it says once what replaced it.
    latency = property(_old_latency, _set_old_latency)

    def journey(self, entity: str, **message: Any) -> JourneyAnswer:
        """One message's journey through the broker, oldest first: ``message`` names it by one of
        ``message_id``, ``sequence_number``, ``trace_id`` (and ``limit`` caps the rows; journey/queries.py)."""
        return answer(self.broker.journey, JourneyQuery(entity, **message))

    def reject_sends(self, entity: str, count: int = 1, condition: str = "server-busy") -> None:
        """Refuse the next ``count`` sends to ``entity`` with ``condition``
        (server-busy, quota-exceeded, entity-disabled, timeout), each with a tracking id."""
        self.broker.resolve_target(entity)
        with self.broker.lock:
            self.broker.faults.reject_sends(entity, count, condition)

    def lose_locks(self, entity: str) -> int:
        """Drop every lock on a queue or subscription now, as a service update does."""
        lost = self.broker.lose_locks(entity)
        self.call_soon(self._handler.flush)
        return lost

    def lose_session_locks(self, entity: str) -> int:
        """End every session lock held on a session-enabled queue or subscription now, as when a
        lock lapses early: settling fails with SessionLockLostError, and so do the holder's renew,
        get/set state and receive deferred messages; the next receive detaches."""
        lost = self.broker.lose_session_locks(entity)
        self.call_soon(self._handler.flush)
        return lost

    def drop_connections_after(self, entity: str, deliveries: int) -> None:
        """Abruptly close any receiving connection on ``entity`` once it has had ``deliveries``."""
        with self.broker.lock:
            self.broker.faults.of(entity).drop_after = deliveries

    @renamed("Emulator.slow_down", seconds=("latency_ms", 1000.0))
    def slow_down(self, entity: str, _seconds: float | None = None, *, latency_ms: float | None = None) -> None:
        """Add ``latency_ms`` milliseconds to every reply on connections that attach to ``entity``
        from now on (as the command line's ``--slow ENTITY=MS``)."""
        if _seconds is not None:  # the old call, slow_down(entity, seconds): kept for one release
            if latency_ms is not None:
                raise TypeError("Emulator.slow_down() takes latency_ms= (not also seconds, its old form)")
            deprecated("Emulator.slow_down(entity, seconds)", "Emulator.slow_down(entity, latency_ms=MS)", stacklevel=3)
            latency_ms = _seconds * 1000.0
        if latency_ms is None or latency_ms < 0:
            raise ValueError(f"slow_down takes latency_ms=, 0 or more milliseconds, not {latency_ms!r}")
        with self.broker.lock:
            self.broker.faults.of(entity).delay = latency_ms / 1000.0

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None or self._loop is None:
            return
        atexit.unregister(self.stop)
        self._loop.stop()
        if self._admin is not None:
            self._admin.stop()
            self._admin = None
        self._thread.join(timeout)
        self._thread = None
        self._loop = None
        if self._journal is not None:
            with self.broker.lock:
                self._journal.flush()
                compact_if_large(self.broker, self._journal)  # the next start-up reads a snapshot

    def compact(self) -> int:
        """Fold the data directory's journal into a snapshot of every live message now (``--data-dir``
        only); returns how many messages it holds. Stopping does it when the journal's tail is large."""
        if self._journal is None:
            raise ValueError("compact() needs a data directory (data_dir=...)")
        with self.broker.lock:
            return compact(self.broker, self._journal)

    def wait(self) -> None:
        """Block until the emulator stops."""
        self.stopped.wait()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
