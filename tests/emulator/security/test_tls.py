"""TLS on the emulator's one port: the plain SDK with only its standard options (amqps, wss, and
the admin client over HTTPS with no custom transport), a wrong CA refused, nothing in the clear."""

from __future__ import annotations

import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.aio import ServiceBusClient as AsyncClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from azure.servicebus.exceptions import ServiceBusConnectionError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.emulator import Emulator
from tests.helpers import TLS_ENDPOINTS, send, tls_client_options
from tests.processes import start_cli_emulator


@pytest.fixture(scope="module")
def tls_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with Emulator(tls=True, tls_dir=tmp_path_factory.mktemp("tls")) as emu:
        yield emu


def _client_options(emu: Emulator, transport: TransportType, ca: Path | None = None) -> dict[str, object]:
    return tls_client_options(emu.port, ca or emu.ca_file, transport)


def test_the_connection_string_is_the_production_one(tls_emulator: Emulator) -> None:
    conn = tls_emulator.connection_string
    assert conn.startswith(f"Endpoint=sb://localhost:{tls_emulator.port};")
    assert "UseDevelopmentEmulator" not in conn
    assert tls_emulator.ca_file is not None and tls_emulator.ca_file.read_text().startswith("-----BEGIN CERTIFICATE")
    assert tls_emulator.admin_url == f"https://localhost:{tls_emulator.port}"


@pytest.mark.parametrize("transport", list(TLS_ENDPOINTS), ids=["amqps", "wss"])
def test_send_receive_settle_over_tls(tls_emulator: Emulator, transport: TransportType) -> None:
    body = f"over {transport.name}"
    with ServiceBusClient.from_connection_string(
        tls_emulator.connection_string, **_client_options(tls_emulator, transport)
    ) as c:
        with c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage(body))
        with c.get_queue_receiver("orders", max_wait_time=5) as r:
            got = r.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in got] == [body]
            r.complete_message(got[0])


@pytest.mark.parametrize("transport", list(TLS_ENDPOINTS), ids=["amqps", "wss"])
async def test_send_receive_settle_over_tls_async(tls_emulator: Emulator, transport: TransportType) -> None:
    body = f"async over {transport.name}"
    async with AsyncClient.from_connection_string(
        tls_emulator.connection_string, **_client_options(tls_emulator, transport)
    ) as c:
        async with c.get_queue_sender("orders") as s:
            await s.send_messages(ServiceBusMessage(body))
        async with c.get_queue_receiver("orders", max_wait_time=5) as r:
            got = await r.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in got] == [body]
            await r.complete_message(got[0])


def test_the_admin_client_over_https_with_no_custom_transport(tls_emulator: Emulator) -> None:
    ca = str(tls_emulator.ca_file)
    with ServiceBusAdministrationClient.from_connection_string(
        tls_emulator.connection_string, connection_verify=ca
    ) as admin:
        admin.create_queue("made-over-https")
        assert admin.get_queue("made-over-https").name == "made-over-https"
        assert "orders" in [q.name for q in admin.list_queues()]
        admin.delete_queue("made-over-https")


async def test_the_async_admin_client_over_https(tls_emulator: Emulator) -> None:
    async with AsyncAdmin.from_connection_string(
        tls_emulator.connection_string, connection_verify=str(tls_emulator.ca_file)
    ) as admin:
        props = await admin.get_queue_runtime_properties("orders")
        assert props.name == "orders"


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CA of another emulator: not the one that signed ``tls_emulator``'s certificate."""
    other = Emulator(tls=True, tls_dir=tmp_path_factory.mktemp("other-tls"))
    assert other.ca_file is not None
    return other.ca_file


@pytest.mark.parametrize("transport", list(TLS_ENDPOINTS), ids=["amqps", "wss"])
def test_a_wrong_ca_fails_with_a_certificate_error(
    tls_emulator: Emulator, other_ca: Path, transport: TransportType
) -> None:
    with ServiceBusClient.from_connection_string(
        tls_emulator.connection_string, **_client_options(tls_emulator, transport, other_ca)
    ) as c:
        with pytest.raises(ServiceBusConnectionError) as err, c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("never"))
    assert "CERTIFICATE_VERIFY_FAILED" in repr(err.value) + repr(err.value.__cause__) or "certificate" in str(err.value)


def test_the_admin_client_with_a_wrong_ca_fails_with_a_certificate_error(
    tls_emulator: Emulator, other_ca: Path
) -> None:
    with ServiceBusAdministrationClient.from_connection_string(
        tls_emulator.connection_string, connection_verify=str(other_ca), retry_total=0
    ) as admin:
        with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
            admin.get_queue("orders")


def test_plain_amqp_and_http_to_the_tls_port_never_succeed(tls_emulator: Emulator) -> None:
    plain = tls_emulator.connection_string + ";UseDevelopmentEmulator=true"
    with ServiceBusClient.from_connection_string(plain, retry_total=0) as c:
        with pytest.raises(ServiceBusConnectionError), c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("in the clear"))
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://localhost:{tls_emulator.port}/orders", timeout=5)
    # A raw AMQP header gets no protocol header back: the connection just ends.
    with socket.create_connection(("127.0.0.1", tls_emulator.port), timeout=5) as s:
        s.sendall(b"AMQP\x03\x01\x00\x00")
        try:
            reply = s.recv(64)
        except ConnectionResetError:
            reply = b""
        assert not reply.startswith(b"AMQP")


def test_the_command_line_with_tls_prints_the_ca_and_a_production_connection_string(tmp_path: Path) -> None:
    proc, ca_line = start_cli_emulator(
        "--tls", "--port", "0", "--data-dir", str(tmp_path), pattern=re.compile(r"^CA certificate: ")
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # the connection string follows the CA line
        assert "UseDevelopmentEmulator" not in line and line.startswith("Endpoint=sb://localhost:")
        ca = tmp_path / "tls" / "ca.pem"
        assert ca.exists() and ca_line == f"CA certificate: {ca}"
        port = int(line.split(";")[0].rsplit(":", 1)[1])
        with ServiceBusClient.from_connection_string(line, **tls_client_options(port, ca)) as c:
            send(c, "orders", "via the command line")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
