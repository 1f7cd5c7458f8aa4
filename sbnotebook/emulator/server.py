"""Run the broker: in-process (``Emulator``) or as a command-line server."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, cast

from proton.reactor import ApplicationEvent, Container, EventInjector

from .amqp import BrokerHandler
from .broker import Broker
from .clock import Clock
from .sas import DEFAULT_KEY, DEFAULT_KEY_NAME
from .topology import Topology, default_topology

log = logging.getLogger("sbnotebook.emulator")
LISTEN_BACKLOG = 512


class _QuietDisconnects(logging.Filter):
    """proton logs a client hanging up as an ERROR; for a broker that is routine."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("Couldn't send" in text or "Couldn't recv" in text)


_proton_log = logging.getLogger("proton")
if not any(isinstance(f, _QuietDisconnects) for f in _proton_log.filters):
    _proton_log.addFilter(_QuietDisconnects())


def load_topology(config: str | Path | dict[str, Any] | Topology | None) -> Topology:
    if config is None:
        return default_topology()
    if isinstance(config, Topology):
        return config
    if isinstance(config, dict):
        return Topology.from_dict(config)
    return Topology.from_file(config)


def connection_string(host: str, port: int, key_name: str, key: str) -> str:
    return (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName={key_name};SharedAccessKey={key};UseDevelopmentEmulator=true"
    )


class Emulator:
    """An embedded Service Bus emulator serving AMQP on ``host:port``.

    >>> with Emulator(port=0) as emu:
    ...     client = ServiceBusClient.from_connection_string(emu.connection_string)
    """

    def __init__(
        self,
        config: str | Path | dict[str, Any] | Topology | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        key: str = DEFAULT_KEY,
        key_name: str = DEFAULT_KEY_NAME,
        clock: Clock | None = None,
    ) -> None:
        self.topology = load_topology(config)
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        self._key = key
        self._key_name = key_name
        self.broker = Broker(self.topology, clock)
        self._handler = BrokerHandler(self.broker, {key_name: key})
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None
        self._injector: EventInjector | None = None
        self._acceptor: Any = None

    def __repr__(self) -> str:
        state = f"{self.host}:{self.port}" if self.port else "not started"
        return f"<Emulator {state}>"  # never the key

    @property
    def connection_string(self) -> str:
        if self.port is None:
            raise RuntimeError("the emulator is not running; call start() or use it as a context manager")
        return connection_string(self.host, self.port, self._key_name, self._key)

    def start(self, timeout: float = 10.0) -> Emulator:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="sbnotebook-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the emulator did not start in time")
        if self._error is not None:
            raise RuntimeError(f"the emulator failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        try:
            container = Container(self._handler)
            container.container_id = "sbnotebook-emulator"
            self._acceptor = container.acceptor(self.host, cast(Any, self._requested_port))
            sock = self._acceptor._selectable._delegate
            sock.listen(LISTEN_BACKLOG)
            self.port = sock.getsockname()[1]
            self._injector = EventInjector()
            container.selectable(self._injector)
            self._handler.on_stop_requested = self._shutdown
            self._ready.set()
            container.run()
        except BaseException as exc:  # surfaced to start() or logged
            self._error = exc
            log.exception("emulator stopped with an error")
        finally:
            self._ready.set()
            self._stopped.set()

    def _shutdown(self, container: Any) -> None:
        self._handler.stopping = True
        if self._acceptor is not None:
            self._acceptor.close()
        if self._injector is not None:
            self._injector.close()
        container.stop()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        if self._injector is not None and not self._stopped.is_set():
            self._injector.trigger(ApplicationEvent("sb_stop"))
        self._thread.join(timeout)
        self._thread = None

    def wait(self) -> None:
        """Block until the emulator stops."""
        self._stopped.wait()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
