"""The emulator attacked as a client on the same network would: scoped tokens on the admin API,
bodies and frames larger than allowed, and a bind beyond loopback with the published key."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusConnectionError

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.emulator.errors import EntityNotFound
from sbnotebook.emulator.security.sas import DEFAULT_KEY, DEFAULT_KEY_NAME, sign
from tests.emulator.net.rawpeers import http_reply
from tests.processes import run_cli_emulator, start_cli_emulator
from tests.waiting import HANG

KEY_NAME = DEFAULT_KEY_NAME


def _scoped_token(emulator: Emulator, audience_path: str) -> str:
    """A SAS token for ``sb://host:port/<audience_path>`` signed with the emulator's key."""
    audience = f"sb://127.0.0.1:{emulator.port}/{audience_path}".rstrip("/")
    return sign(audience, KEY_NAME, DEFAULT_KEY, time.time() + 600)


def _call(emulator: Emulator, method: str, path: str, token: str, body: bytes = b"") -> int:
    """One admin API request with ``token`` (the SDK's admin client only signs for the whole
    namespace, so a token scoped to an entity is sent as a plain HTTP client would)."""
    request = urllib.request.Request(
        f"{emulator.admin_url}/{path}?api-version=2021-05",
        data=body or None,
        method=method,
        headers={"Authorization": token, "Content-Type": "application/atom+xml"},
    )
    return http_reply(request, timeout=5)[0]


QUEUE_BODY = (
    b'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
    b'<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/>'
    b"</content></entry>"
)


def test_an_entity_token_reaches_only_its_entity_on_the_admin_api(emulator: Emulator) -> None:
    """Rule (Service Bus): a SAS token's audience is a prefix of what it reaches: a token for
    ``sb://ns/short`` cannot read, create or delete ``q``, list or read the namespace; it reaches
    ``short``. (The old emulator checked the token against its own audience: all of these passed.)"""
    scoped = _scoped_token(emulator, "short")
    assert _call(emulator, "GET", "short", scoped) == 200
    assert _call(emulator, "GET", "q", scoped) == 401
    assert _call(emulator, "DELETE", "q", scoped) == 401
    assert _call(emulator, "PUT", "made-by-scoped", scoped, QUEUE_BODY) == 401
    assert _call(emulator, "GET", "$Resources/queues", scoped) == 401
    assert _call(emulator, "GET", "$namespaceinfo", scoped) == 401
    assert _call(emulator, "GET", "shorter", scoped) == 401  # segments, not characters
    emulator.broker.entity("q")  # still there
    with pytest.raises(EntityNotFound):
        emulator.broker.entity("made-by-scoped")
    namespace_wide = _scoped_token(emulator, "")
    assert _call(emulator, "GET", "q", namespace_wide) == 200
    assert _call(emulator, "PUT", "made-by-owner", namespace_wide, QUEUE_BODY) == 201


def test_a_token_signed_for_the_request_url_reaches_that_entity_only(emulator: Emulator) -> None:
    """The JS admin client signs each request's whole URL, lower-cased, query included
    (``http://host:port/short?api-version=2021-05``): its path is what the token covers."""
    url = f"{emulator.admin_url}/short?api-version=2021-05".lower()
    token = sign(url, KEY_NAME, DEFAULT_KEY, time.time() + 600)
    assert _call(emulator, "GET", "short", token) == 200
    assert _call(emulator, "GET", "q", token) == 401


def test_a_topic_token_reaches_its_subscriptions_on_the_admin_api(emulator: Emulator) -> None:
    """Rule: the prefix rule covers what lies below an entity (``t/subscriptions/s``)."""
    scoped = _scoped_token(emulator, "t")
    assert _call(emulator, "GET", "t", scoped) == 200
    assert _call(emulator, "GET", "t/subscriptions", scoped) == 200
    assert _call(emulator, "GET", "t/subscriptions/all", scoped) == 200
    assert _call(emulator, "GET", "st/subscriptions/s", scoped) == 401


def test_the_sdk_admin_client_with_the_namespace_key_reaches_everything(emulator: Emulator) -> None:
    with emulator_admin_client(emulator.connection_string) as admin:
        assert admin.get_queue("q").name == "q"
        assert admin.get_subscription("t", "all").name == "all"


async def test_the_async_sdk_admin_client_with_a_wrong_key_is_refused(emulator: Emulator) -> None:
    bad = emulator.connection_string.replace(DEFAULT_KEY, "wrong")
    async with emulator_admin_client(bad, aio=True, retry_total=0) as admin:
        with pytest.raises(ClientAuthenticationError):
            await admin.delete_queue("q")
    emulator.broker.entity("q")


# ------------------------------------------------ admin API: bodies and frames


def _raw_request(port: int, head: str, body: bytes, timeout: float = 5.0) -> bytes:
    """Send a request head and part of a body; return what the server answers (until it closes
    or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head.encode())
        with contextlib.suppress(OSError):  # the server may close before all of it is sent
            s.sendall(body)
        reply = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in reply and time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
        return reply


@pytest.mark.parametrize("port_kind", ["amqp", "admin"])
def test_an_unauthorized_huge_body_is_answered_401_without_being_read(emulator: Emulator, port_kind: str) -> None:
    """Rule: the caller is checked before the body is read: a request declaring 2 GB without a
    token is answered 401 at once (the old emulator waited for the whole body)."""
    port = emulator.port if port_kind == "amqp" else emulator.admin_port
    assert port is not None
    head = (
        "PUT /q?api-version=2021-05 HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/atom+xml\r\nContent-Length: 2000000000\r\n\r\n"
    )
    # Not timed: a server that waited for the body would answer nothing at all (it never comes).
    reply = _raw_request(port, head, b"x" * 65536, timeout=HANG)
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]


def test_an_authorized_body_over_the_cap_is_answered_413(emulator: Emulator) -> None:
    """Rule: an entity description is a few KiB; a body over the cap is refused (413) unread."""
    token = sign(f"sb://127.0.0.1:{emulator.port}", KEY_NAME, DEFAULT_KEY, time.time() + 600)
    head = (
        "PUT /big?api-version=2021-05 HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: {token}\r\nContent-Length: 50000000\r\n\r\n"
    )
    assert emulator.port is not None
    reply = _raw_request(emulator.port, head, b"<" * 65536)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    with pytest.raises(EntityNotFound):
        emulator.broker.entity("big")


def test_a_refused_small_request_keeps_answering_the_sdk(emulator: Emulator) -> None:
    """A wrong key on a request with a small body is still a clean 401 the SDK reports."""
    bad = emulator.connection_string.replace(DEFAULT_KEY, "wrong")
    with emulator_admin_client(bad, retry_total=0) as admin:
        with pytest.raises(ClientAuthenticationError):
            admin.create_queue("nope")
    with pytest.raises(EntityNotFound):
        emulator.broker.entity("nope")


def test_a_frame_over_the_max_frame_size_ends_the_connection_at_once(emulator: Emulator) -> None:
    """Rule: a frame header declaring 32 MiB (the broker allows 256 KiB) is refused at once, not
    buffered while its bytes arrive (the old transfer-ordering filter held up to 64 MiB)."""
    assert emulator.port is not None
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
        s.sendall(b"AMQP\x03\x01\x00\x00")  # SASL layer, as the SDK opens
        s.sendall(struct.pack(">IBBH", 32 * 1024 * 1024, 2, 1, 0) + b"\x00" * 4096)
        received = b""
        deadline = time.monotonic() + HANG  # a buffering broker shows as a recv timing out (5 s), not this
        closed = False
        while time.monotonic() < deadline:
            try:
                s.sendall(b"\x00" * 65536)  # keep sending the "frame"'s bytes, as an attacker would
                chunk = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            received += chunk
        assert closed, "the connection stayed open while a 32 MiB frame arrived"
    # the broker is still serving everyone else
    with ServiceBusClient.from_connection_string(emulator.connection_string) as c, c.get_queue_sender("q") as snd:
        snd.send_messages(ServiceBusMessage("still serving"))


# ------------------------------------------------------- never an open door


@pytest.fixture
def wide_open() -> Iterator[Emulator]:
    with Emulator(host="0.0.0.0") as emu:
        yield emu


def test_a_bind_beyond_loopback_makes_a_random_key_and_a_usable_address(wide_open: Emulator) -> None:
    """Rule: on 0.0.0.0 the published key is refused (the key is random) and the connection
    string names this machine, not 0.0.0.0."""
    conn = wide_open.connection_string
    assert DEFAULT_KEY not in conn and "0.0.0.0" not in conn
    with ServiceBusClient.from_connection_string(conn) as c:
        with c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("hi"))
    published = f"Endpoint=sb://127.0.0.1:{wide_open.port};SharedAccessKeyName={KEY_NAME};SharedAccessKey={DEFAULT_KEY};UseDevelopmentEmulator=true"
    with ServiceBusClient.from_connection_string(published, retry_total=0) as c:
        with pytest.raises((ServiceBusAuthenticationError, ServiceBusConnectionError)):
            with c.get_queue_sender("orders") as s:
                s.send_messages(ServiceBusMessage("intruder"))
    for port in (wide_open.port, wide_open.admin_port):
        assert port is not None
        with emulator_admin_client(published, port=port, retry_total=0) as admin:
            with pytest.raises(ClientAuthenticationError):
                admin.get_queue("orders")


async def test_the_published_key_is_refused_beyond_loopback_async(wide_open: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    published = f"Endpoint=sb://127.0.0.1:{wide_open.port};SharedAccessKeyName={KEY_NAME};SharedAccessKey={DEFAULT_KEY};UseDevelopmentEmulator=true"
    async with AsyncClient.from_connection_string(published, retry_total=0) as c:
        with pytest.raises((ServiceBusAuthenticationError, ServiceBusConnectionError)):
            async with c.get_queue_sender("orders") as s:
                await s.send_messages(ServiceBusMessage("intruder"))
    async with emulator_admin_client(published, aio=True, retry_total=0) as admin:
        with pytest.raises(ClientAuthenticationError):
            await admin.get_queue("orders")


def test_the_published_key_cannot_be_asked_for_beyond_loopback() -> None:
    with pytest.raises(ValueError, match="published default key"):
        Emulator(host="0.0.0.0", key=DEFAULT_KEY)


def test_the_command_line_on_0_0_0_0_prints_a_random_key_and_this_host() -> None:
    proc, line = start_cli_emulator("--host", "0.0.0.0", "--port", "0")
    try:
        assert DEFAULT_KEY not in line and "0.0.0.0" not in line
        assert f"sb://{socket.gethostname()}:" in line
        with ServiceBusClient.from_connection_string(line) as c, c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("hi"))
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("args", [["--key", DEFAULT_KEY], ["--quiet"]], ids=["published-key", "quiet-random-key"])
def test_the_command_line_refuses_an_open_door(args: list[str]) -> None:
    done = run_cli_emulator("--host", "0.0.0.0", "--port", "0", *args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert DEFAULT_KEY not in done.stderr or args[0] == "--key"
