"""Small helpers for driving the SDK in tests."""

from __future__ import annotations

import ast
import collections
import contextlib
import datetime as dt
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
    TransportType,
)
from azure.servicebus import ServiceBusReceiveMode as Mode
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.core import EntityPath, entities


def emulator_config(
    namespace: str, queues: dict[str, dict[str, Any]], topics: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A topology in Microsoft's emulator config format (its Config.json): one namespace, its queues
    given as name -> ``Properties`` (the config's own property names), its topics as the config's
    entries (``Name``, ``Properties``, ``Subscriptions``)."""
    entry: dict[str, Any] = {
        "Name": namespace,
        "Queues": [{"Name": name, "Properties": properties} for name, properties in queues.items()],
    }
    if topics is not None:
        entry["Topics"] = topics
    return {"UserConfig": {"Namespaces": [entry]}}


class QuickCloseClient(ServiceBusClient):
    """The SDK's client, whose senders and receivers close at once. A sync handler's keep-alive
    thread sleeps in 1-second steps and ``close()`` joins it, so every ``with`` block on a handler
    ended with a wait of up to 1 s (0.5 s on average, hundreds of times in the suite). No test leaves
    a handler idle for the 30 s the keep-alive is for. The client does not pass ``keep_alive`` on
    to its handlers (the SDK reads it per handler), so it is given to each here.

    A receiver without prefetch (the default) keeps a keep-alive whatever it is given (azure-servicebus
    7.15: every 5 s it listens for messages to release), so its close still waited for the thread's
    sleep: about a sixth of the emulator tests' time. Its close leaves that thread to end on its own
    instead (``quick_close``)."""

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> ServiceBusSender:
        return super().get_queue_sender(queue_name, **{"keep_alive": 0, **kwargs})

    def get_queue_receiver(self, queue_name: str, **kwargs: Any) -> ServiceBusReceiver:
        return quick_close(super().get_queue_receiver(queue_name, **{"keep_alive": 0, **kwargs}))

    def get_topic_sender(self, topic_name: str, **kwargs: Any) -> ServiceBusSender:
        return super().get_topic_sender(topic_name, **{"keep_alive": 0, **kwargs})

    def get_subscription_receiver(self, topic_name: str, subscription_name: str, **kwargs: Any) -> ServiceBusReceiver:
        receiver = super().get_subscription_receiver(topic_name, subscription_name, **{"keep_alive": 0, **kwargs})
        return quick_close(receiver)


def quick_close(receiver: ServiceBusReceiver) -> ServiceBusReceiver:
    """``receiver``, whose close does not wait for its keep-alive thread. The SDK's close does all it
    did (releases what the link holds, detaches, ends the session, closes the connection) and then
    joins that thread, which wakes once a second and ends when it sees the handler shut: here the
    thread is let go just before, and ends by itself within the second. Nothing is sent differently."""
    close_handler = receiver._close_handler

    def close_without_joining_the_keep_alive() -> None:
        handler = receiver._handler
        if handler is not None:
            handler._keep_alive_thread = None
        close_handler()

    receiver._close_handler = close_without_joining_the_keep_alive  # type: ignore[method-assign]
    return receiver


# The plain SDK to a TLS emulator on this host, by transport: custom_endpoint_address alone would
# switch the SDK to WebSockets, so the transport is named too.
TLS_ENDPOINTS = {
    TransportType.Amqp: "sb://localhost:{port}",
    TransportType.AmqpOverWebsocket: "https://localhost:{port}",
}


def tls_client_options(port: int, ca: Path | None, transport: TransportType = TransportType.Amqp) -> dict[str, Any]:
    """The SDK client's standard options for a TLS emulator on ``localhost:port`` whose CA is
    ``ca``, without retries (a refusal arrives at once)."""
    assert ca is not None, "a TLS emulator has a CA file"
    return {
        "custom_endpoint_address": TLS_ENDPOINTS[transport].format(port=port),
        "transport_type": transport,
        "connection_verify": str(ca),
        "retry_total": 0,
    }


def send(client: ServiceBusClient, queue: str, *bodies: str, **kwargs: object) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(b, **kwargs) for b in bodies])  # type: ignore[arg-type]


def dead_letter(
    client: ServiceBusClient, queue: str, count: int, reason: str, error_description: str | None = None
) -> None:
    """Receive up to ``count`` messages from ``queue`` and dead-letter each with ``reason``."""
    with client.get_queue_receiver(queue) as receiver:
        for m in receiver.receive_messages(max_message_count=count, max_wait_time=5):
            receiver.dead_letter_message(m, reason=reason, error_description=error_description)


def fill_every_kind(client: ServiceBusClient, queue: str) -> list[int]:
    """``queue`` (empty): 3 active, 2 deferred, 2 scheduled (an hour ahead), 1 dead-lettered.
    Returns the scheduled messages' sequence numbers."""
    send(client, queue, *[f"m{i}" for i in range(6)])
    with client.get_queue_receiver(queue) as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=5)
        r.defer_message(got[0])
        r.defer_message(got[1])
        r.dead_letter_message(got[2], reason="bad")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender(queue) as s:
        return list(s.schedule_messages([ServiceBusMessage("s1"), ServiceBusMessage("s2")], later))


def drain(
    client: ServiceBusClient, queue: str, *, sub_queue: str | None = None, wait: float = 1.0
) -> list[ServiceBusReceivedMessage]:
    """Receive-and-delete everything there is (what is left in an entity)."""
    out: list[ServiceBusReceivedMessage] = []
    with client.get_queue_receiver(
        queue, sub_queue=sub_queue, receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=wait
    ) as receiver:
        while True:
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=wait)
            if not batch:
                return out
            out.extend(batch)


def subscription_with_one_rule(
    admin: ServiceBusAdministrationClient, topic: str, subscription: str, rule: str, **rule_options: Any
) -> None:
    """Create ``subscription`` with ``rule`` as its only rule: a new subscription comes with the
    ``$Default`` rule (1=1, every message), which is deleted first."""
    admin.create_subscription(topic, subscription)
    admin.delete_rule(topic, subscription, "$Default")
    admin.create_rule(topic, subscription, rule, **rule_options)


def refusal_test(parse: Callable[[str], object], error: type[Exception], says: dict[str, str]) -> Callable[..., None]:
    """A test with one case per input of ``says``: ``parse(given)`` raises ``error``, its message matching
    the pattern given for that input (``pytest.raises(match=...)``: a regular expression search). Assign
    it to a ``test_`` name of a test module: pytest names the test by that name, a case by its input and
    pattern (as ``parametrize`` over pairs would)."""

    @pytest.mark.parametrize(("given", "pattern"), list(says.items()))
    def test(given: str, pattern: str) -> None:
        with pytest.raises(error, match=pattern):
            parse(given)

    return test


def names_in(tree: ast.AST) -> set[str]:
    """The names code mentions: names, attributes, imported names (not words in strings)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found.update(alias.name for alias in node.names)
    return found


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def stream_to_parquet(spark: Any, where: Any, **options: Any) -> Any:
    """Run a `servicebus` stream with these options into Parquet under ``where`` (a pathlib.Path)
    with Trigger.AvailableNow, to the end; the rows written (sequence_number, body_text). On pyspark
    4.0 a run takes one micro-batch and its batch is completed only when a later run plans (docs/spark.md,
    "On pyspark 4.0"), so it runs again on the same checkpoint until a run writes nothing more: that
    run completes the last batch, as a run on 4.1+ does by itself."""
    from sbnotebook.spark.streaming import ADMISSION_CONTROL

    written = -1
    for _ in range(50):
        query = (
            spark.readStream.format("servicebus")
            .options(**options)
            .load()
            .select("sequence_number", "body_text")
            .writeStream.format("parquet")
            .option("path", str(where / "sink"))
            .option("checkpointLocation", str(where / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        rows = spark.read.parquet(str(where / "sink"))
        if ADMISSION_CONTROL or rows.count() == written:
            return rows
        written = rows.count()
    raise AssertionError(f"the stream still wrote more rows after 50 runs ({written})")


def rss_growth_during(work: Callable[[], Any]) -> tuple[Any, int]:
    """Run ``work`` while sampling this process's RSS every 20 ms: (its result, peak - start)."""
    me = psutil.Process()
    start = peak = me.memory_info().rss
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.02):
            peak = max(peak, me.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = work()
    finally:
        stop.set()
        sampler.join()
    return result, max(peak, me.memory_info().rss) - start


def interrupt_main_thread() -> None:
    """SIGINT, as the kernel's interrupt button sends it, aimed at the main thread: the thread that
    waits for the call. Sent to the process, the system may hand it to another thread (one that has
    none pending), and the main thread, blocked on a lock, would not wake to raise it."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


@contextmanager
def python_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread (Python's own handler), as in a kernel,
    whatever an earlier test in this process installed: a local SparkContext sets a handler that
    calls its JVM first and stays after the session stops (suspected, not shown, in a full run
    where both interrupted-purge tests never saw their KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class InterruptAtFirstProgress:
    """A ``progress`` hook that interrupts the cell at its first call, as the kernel's interrupt
    button does (SIGINT, aimed at the main thread), and holds the connection's thread there until the cell has
    seen the KeyboardInterrupt: the interrupt lands at a known point, with work in flight, however
    loaded the machine (a watcher thread polling the broker was once starved for seconds).
    Use: ``with hook.interrupting(): core.op(..., progress=hook)``."""

    def __init__(self) -> None:
        self.seen = threading.Event()

    def __call__(self, report: Any) -> None:
        if not self.seen.is_set():
            interrupt_main_thread()
            self.seen.wait(timeout=30)

    @contextmanager
    def interrupting(self) -> Iterator[None]:
        with python_sigint(), pytest.raises(KeyboardInterrupt):
            try:
                yield
            finally:
                self.seen.set()


@contextmanager
def databricks_secret(ip: Any, scope: str, key: str, value: str) -> Iterator[None]:
    """A stand-in for Databricks' ``dbutils`` in the shell's namespace while the block runs, holding one
    secret: ``dbutils.secrets.get(scope, key)`` returns ``value``; asking for another fails the test."""
    held = (scope, key)

    class Secrets:
        def get(self, scope: str, key: str) -> str:  # Databricks' parameter names: the kit passes them
            assert (scope, key) == held
            return value

    class DbUtils:
        secrets = Secrets()

    ip.user_ns["dbutils"] = DbUtils()
    try:
        yield
    finally:
        del ip.user_ns["dbutils"]


def magic_fails(ip: Any, text: str, cell: str | None = None) -> str:
    """Run ``%text`` (``%%text`` with ``cell``), which must fail as a failed command fails its cell:
    a UsageError shown as one line, returned (what IPython prints instead of a traceback)."""
    from IPython.core.error import UsageError

    name, _, rest = text.partition(" ")
    with pytest.raises(UsageError) as info:
        if cell is None:
            ip.run_line_magic(name, rest)
        else:
            ip.run_cell_magic(name, rest, cell)
    error = info.value
    rendered = error._render_traceback_() if hasattr(error, "_render_traceback_") else [f"UsageError: {error}"]
    assert len(rendered) == 1 and "\n" not in rendered[0], rendered
    return str(rendered[0])


def counted_parses(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Every ``EntityPath.parse`` of a name from now on (until the test ends), counted by the line that
    called it; a path already parsed is passed through, not parsed again, and not counted."""
    parsed: collections.Counter[str] = collections.Counter()
    parse = entities.EntityPath.parse.__func__  # type: ignore[attr-defined]

    def counting(cls: type[EntityPath], text: str | EntityPath) -> EntityPath:
        if isinstance(text, str):
            caller = traceback.extract_stack(limit=2)[0]
            parsed[f"{Path(caller.filename).name}:{caller.lineno}"] += 1
        return parse(cls, text)

    monkeypatch.setattr(entities.EntityPath, "parse", classmethod(counting))
    return parsed


def counted_peeks(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every peek the emulator's broker answers from now on (until the test ends), as (from sequence
    number, count): what a planner costs, counted at the broker."""
    peeks: list[tuple[int, int]] = []
    real = emulator.broker.peek

    def counted(source: Any, from_sequence_number: int, count: int, session_id: str | None = None) -> Any:
        peeks.append((from_sequence_number, count))
        return real(source, from_sequence_number, count, session_id)

    monkeypatch.setattr(emulator.broker, "peek", counted)
    return peeks


class HttpOnlyProxy:
    """A stand-in for a firewall that lets only HTTP(S) out: forwards HTTP (WebSocket upgrades, the
    admin API) to the emulator and closes a connection that opens with the AMQP header. A test behind
    it passes only if every AMQP byte travelled inside WebSockets (tests/core/connections/test_websockets.py)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.blocked = 0  # connections that opened with the AMQP header
        self.forwarded = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        first = b""
        with contextlib.suppress(OSError):
            while len(first) < 4 and (chunk := client.recv(4 - len(first))):
                first += chunk
        if not first or first.startswith(b"AMQP"):
            self.blocked += bool(first)
            client.close()
            return
        self.forwarded += 1
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:  # the emulator is down (a test stopped it): refused, as the network would
            client.close()
            return
        upstream.sendall(first)
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def connection_string(self, emulator: Any) -> str:
        """The emulator's connection string, its endpoint this proxy's."""
        return emulator.connection_string.replace(f":{emulator.port};", f":{self.port};")

    def close(self) -> None:
        self.listener.close()


def one_active_three_deferred_in_session_d(client: ServiceBusClient) -> None:
    """Session 'd' of sq (LockDuration 2 s): d0..d3 sent, d0..d2 deferred, d3 active."""
    with client.get_queue_sender("sq") as sender:
        sender.send_messages([ServiceBusMessage(f"d{i}", session_id="d") for i in range(4)])
    with client.get_queue_receiver("sq", session_id="d", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=3)
        assert len(got) == 3
        for m in got:
            r.defer_message(m)


def a_listed_and_an_unlisted_session(client: ServiceBusClient) -> None:
    """sq: session 'a' with 2 active messages (Service Bus lists it), session 'x' with nothing but a
    deferred one (Service Bus does not list it: a purge that is not told of it never sees it)."""
    with client.get_queue_sender("sq") as sender:
        sender.send_messages([ServiceBusMessage(b, session_id="a") for b in ("a1", "a2")])
        sender.send_messages(ServiceBusMessage("x1", session_id="x"))
    with client.get_queue_receiver("sq", session_id="x", max_wait_time=3) as r:
        (got,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.defer_message(got)


def lose_the_session_lock_after_two_deferred(emulator: Any, lost: list[int]) -> Callable[[Any], None]:
    """A purge's progress callback for sq's session 'd' (above), fetched 2 deferred at a time
    (``purge.BY_SEQUENCE`` = 2): once 3 are purged (the active one by the server, then the first 2
    deferred), every session lock on sq is lost, so the next fetch of deferred messages fails with
    SessionLockLostError (receiving by sequence number in a session needs the session's lock, as on
    Service Bus). No wait: the fetch itself finds the lock gone (it used to wait past half the 2 s
    lock so that a renewal would fail). ``lost`` gets how many session locks were lost."""

    def hook(report: Any) -> None:
        if report.count("purged") >= 3 and not lost:
            lost.append(emulator.lose_session_locks("sq"))

    return hook
