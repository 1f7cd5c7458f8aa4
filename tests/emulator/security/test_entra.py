"""Entra ID on the TLS emulator: azure-identity's ClientSecretCredential gets tokens from the
emulator's authority unchanged, the broker takes them over CBS and as Bearer on the admin API,
checks signature, audience and expiry, and enforces the Service Bus data roles as Azure does."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import ClientSecretCredential
from azure.identity.aio import ClientSecretCredential as AsyncClientSecretCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
)
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.emulator import Emulator
from sbnotebook.emulator.security.entra import Principal
from tests.helpers import send, tls_client_options
from tests.processes import run_cli_emulator, start_cli_emulator

SB_SCOPE = "https://servicebus.azure.net//.default"  # what the SDK asks for (double slash)
OWNER = ("owner-app", "owner-secret", "Owner")
SENDER = ("sender-app", "sender-secret", "Azure Service Bus Data Sender")
TOPOLOGY = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {"Name": "orders"},
                    {"Name": "sessions", "Properties": {"RequiresSession": True}},
                ],
                "Principals": [
                    {"ClientId": "both-app", "ClientSecret": "both-secret", "Roles": ["Sender", "Receiver"]}
                ],
            }
        ]
    }
}


@pytest.fixture(scope="module")
def entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    principals = [":".join(p) for p in (OWNER, SENDER)]
    with Emulator(TOPOLOGY, tls=True, tls_dir=tmp_path_factory.mktemp("tls"), principals=principals) as emu:
        yield emu


def _ns(emu: Emulator) -> str:
    return f"localhost:{emu.port}"


def _options(emu: Emulator) -> dict[str, Any]:
    return tls_client_options(emu.port, emu.ca_file)


def _secret_credential(emu: Emulator, client_id: str, secret: str) -> ClientSecretCredential:
    assert emu.tenant is not None and emu.entra_authority is not None
    return ClientSecretCredential(
        emu.tenant,
        client_id,
        secret,
        authority=emu.entra_authority,
        disable_instance_discovery=True,
        connection_verify=str(emu.ca_file),
    )


def _claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def _drain(emu: Emulator, queue: str = "orders") -> None:
    with ServiceBusClient(_ns(emu), emu.credential(["Owner"]), **_options(emu)) as c:
        with c.get_queue_receiver(queue, max_wait_time=1) as r:
            while got := r.receive_messages(max_message_count=50, max_wait_time=1):
                for m in got:
                    r.complete_message(m)


# ------------------------------------------------------------- the authority


def test_client_secret_credential_gets_a_service_bus_token_from_the_authority(entra: Emulator) -> None:
    assert entra.entra_authority == f"https://localhost:{entra.port}"
    token = _secret_credential(entra, *OWNER[:2]).get_token(SB_SCOPE)
    claims = _claims(token.token)
    assert claims["aud"] == "https://servicebus.azure.net"
    assert claims["tid"] == entra.tenant and claims["appid"] == OWNER[0]
    assert 3000 < token.expires_on - time.time() <= 3600
    header = json.loads(base64.urlsafe_b64decode(token.token.split(".")[0] + "=="))
    assert header["alg"] == "RS256"
    # the signing key is published where the discovery document says
    config_url = f"{entra.entra_authority}/{entra.tenant}/v2.0/.well-known/openid-configuration"
    ctx = __import__("ssl").create_default_context(cafile=str(entra.ca_file))
    with urllib.request.urlopen(config_url, context=ctx, timeout=5) as reply:
        config = json.load(reply)
    with urllib.request.urlopen(config["jwks_uri"], context=ctx, timeout=5) as reply:
        keys = json.load(reply)["keys"]
    assert [k["kid"] for k in keys] == [header["kid"]]


def test_a_wrong_secret_or_an_unknown_client_is_refused_by_the_authority(entra: Emulator) -> None:
    with pytest.raises(ClientAuthenticationError, match="AADSTS7000215"):
        _secret_credential(entra, OWNER[0], "not-the-secret").get_token(SB_SCOPE)
    with pytest.raises(ClientAuthenticationError, match="AADSTS700016"):
        _secret_credential(entra, "nobody", "x").get_token(SB_SCOPE)
    with pytest.raises(ClientAuthenticationError, match="AADSTS500011"):
        _secret_credential(entra, *OWNER[:2]).get_token("https://storage.azure.com/.default")


# ------------------------------------------------------------- the broker


def test_the_sdk_with_client_secret_credential_sends_receives_and_settles(entra: Emulator) -> None:
    _drain(entra)
    credential = _secret_credential(entra, *OWNER[:2])
    with ServiceBusClient(_ns(entra), credential, **_options(entra)) as c:
        with c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("with Entra ID"))
        with c.get_queue_receiver("orders", max_wait_time=5) as r:
            got = r.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in got] == ["with Entra ID"]
            r.complete_message(got[0])


async def test_the_async_sdk_with_client_secret_credential(entra: Emulator) -> None:
    """A principal declared in the topology file, with two roles (Sender and Receiver)."""
    _drain(entra)
    assert entra.tenant is not None and entra.entra_authority is not None
    async with (
        AsyncClientSecretCredential(
            entra.tenant,
            "both-app",
            "both-secret",
            authority=entra.entra_authority,
            disable_instance_discovery=True,
            connection_verify=str(entra.ca_file),
        ) as credential,
        AsyncClient(_ns(entra), credential, **_options(entra)) as c,
    ):
        async with c.get_queue_sender("orders") as s:
            await s.send_messages(ServiceBusMessage("async with Entra ID"))
        async with c.get_queue_receiver("orders", max_wait_time=5) as r:
            got = await r.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in got] == ["async with Entra ID"]
            await r.complete_message(got[0])


def test_a_sender_sends_and_schedules_but_cannot_receive_or_peek(entra: Emulator) -> None:
    """Azure Service Bus Data Sender: send (and schedule, cancel); receiving or peeking is refused with
    amqp:unauthorized-access naming the Listen claim, as Service Bus does."""
    _drain(entra)
    with ServiceBusClient(_ns(entra), _secret_credential(entra, *SENDER[:2]), **_options(entra)) as c:
        with c.get_queue_sender("orders") as s:
            s.send_messages(ServiceBusMessage("from a sender"))
            (seq,) = s.schedule_messages(ServiceBusMessage("later"), datetime.now(UTC) + timedelta(hours=1))
            s.cancel_scheduled_messages(seq)
        with pytest.raises(ServiceBusAuthorizationError, match="'Listen' claim") as refused:
            with c.get_queue_receiver("orders", max_wait_time=2) as r:
                r.receive_messages(max_wait_time=1)
        assert "amqp:unauthorized-access" in str(refused.value)
        with pytest.raises(ServiceBusAuthorizationError, match="'Listen' claim"):
            with c.get_queue_receiver("orders") as r:
                r.peek_messages(sequence_number=1)
    assert entra.broker.counts("orders")["active"] == 1


def test_a_receiver_receives_peeks_settles_and_uses_sessions_but_cannot_send(entra: Emulator) -> None:
    _drain(entra)
    session = f"s-{time.monotonic_ns()}"
    with ServiceBusClient(_ns(entra), entra.credential(["Owner"]), **_options(entra)) as c:
        with c.get_queue_sender("orders") as s:
            s.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        with c.get_queue_sender("sessions") as s:
            s.send_messages(ServiceBusMessage("in a session", session_id=session))
    with ServiceBusClient(_ns(entra), entra.credential(["Receiver"]), **_options(entra)) as c:
        with c.get_queue_receiver("orders", max_wait_time=5) as r:
            assert [str(m) for m in r.peek_messages(max_message_count=5, sequence_number=1)][-2:] == ["a", "b"]
            got = r.receive_messages(max_message_count=2, max_wait_time=5)
            r.complete_message(got[0])
            r.defer_message(got[1])
            (deferred,) = r.receive_deferred_messages([got[1].sequence_number])
            r.dead_letter_message(deferred, reason="test")
        with c.get_queue_receiver("sessions", session_id=session, max_wait_time=5) as r:
            r.session.set_state(b"state")
            (m,) = r.receive_messages(max_wait_time=5)
            r.complete_message(m)
            assert r.session.get_state() == b"state"
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"):
            with c.get_queue_sender("orders") as s:
                s.send_messages(ServiceBusMessage("refused"))


async def test_roles_are_enforced_for_the_async_sdk(entra: Emulator) -> None:
    async with AsyncClient(_ns(entra), entra.credential(["Receiver"], aio=True), **_options(entra)) as c:
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"):
            async with c.get_queue_sender("orders") as s:
                await s.send_messages(ServiceBusMessage("refused"))
    async with AsyncClient(_ns(entra), entra.credential(["Sender"], aio=True), **_options(entra)) as c:
        with pytest.raises(ServiceBusAuthorizationError, match="'Listen' claim"):
            async with c.get_queue_receiver("orders", max_wait_time=1) as r:
                await r.receive_messages(max_wait_time=1)


class _Forged:
    """A credential handing out a token of its own making (another key, or another audience)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


def _forged_token(emu: Emulator, **changes: Any) -> str:
    """A token like the emulator's, with claims changed and signed by a key that is not the tenant's
    (``resign=False``: the claims changed after signing, the signature kept)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    resign = changes.pop("resign", True)
    good = emu.credential(["Owner"]).get_token(SB_SCOPE).token
    header, payload, signature = good.split(".")
    claims = _claims(good) | changes
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    if resign:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        raw = key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        signature = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return f"{header}.{payload}.{signature}"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(lambda emu: emu.credential(["Owner"], lifetime=-60), "the token has expired", id="expired"),
        pytest.param(
            lambda emu: _Forged(_forged_token(emu)), "the token signature is invalid", id="signed-by-another-key"
        ),
        pytest.param(
            lambda emu: _Forged(_forged_token(emu, aud="https://storage.azure.com", resign=False)),
            "the token signature is invalid",
            id="tampered",
        ),
    ],
)
def test_expired_badly_signed_and_tampered_tokens_are_refused(
    entra: Emulator, make: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK reports a refused put-token as a connection error without the reason (amqp:client-error
    after TokenAuthFailure); the emulator logs why, which is what is checked here."""
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    with ServiceBusClient(_ns(entra), make(entra), **_options(entra)) as c:
        with pytest.raises((ServiceBusAuthenticationError, ServiceBusConnectionError)):
            with c.get_queue_sender("orders") as s:
                s.send_messages(ServiceBusMessage("never"))
    assert any(f"refused a token for sb://localhost/orders: {reason}" in r.getMessage() for r in caplog.records)


def test_a_token_for_another_audience_is_refused(entra: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """Signed by the tenant's key, but for another resource: Service Bus takes only its own audience."""
    assert entra.issuer is not None
    principal = entra.add_principal("storage-app", "x", ["Owner"])
    token, _ = entra.issuer.token(principal, entra.admin_url)
    claims = _claims(token) | {"aud": "https://storage.azure.com"}
    forged = entra.issuer._sign(claims)  # the tenant's own key: only the audience is wrong
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    with ServiceBusClient(_ns(entra), _Forged(forged), **_options(entra)) as c:
        with pytest.raises((ServiceBusAuthenticationError, ServiceBusConnectionError)):
            with c.get_queue_sender("orders") as s:
                s.send_messages(ServiceBusMessage("never"))
    assert any("audience is not https://servicebus.azure.net" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------- the admin API


def test_the_admin_client_with_an_owner_credential(entra: Emulator) -> None:
    admin = ServiceBusAdministrationClient(
        _ns(entra), _secret_credential(entra, *OWNER[:2]), connection_verify=str(entra.ca_file)
    )
    with admin:
        admin.create_queue("made-with-entra")
        assert admin.get_queue_runtime_properties("made-with-entra").active_message_count == 0
        assert "made-with-entra" in [q.name for q in admin.list_queues()]
        admin.delete_queue("made-with-entra")


async def test_the_async_admin_client_with_an_owner_credential(entra: Emulator) -> None:
    async with AsyncAdmin(_ns(entra), entra.credential(["Owner"], aio=True), connection_verify=str(entra.ca_file)) as a:
        props = await a.get_queue_runtime_properties("orders")
        assert props.name == "orders"


@pytest.mark.parametrize("roles", [["Sender"], ["Receiver"], ["Sender", "Receiver"]])
def test_the_admin_api_needs_the_data_owner_role(entra: Emulator, roles: list[str]) -> None:
    """Service Bus answers 401 (SubCode 40100, 'Manage,EntityRead claims required'), not 403."""
    admin = ServiceBusAdministrationClient(
        _ns(entra), entra.credential(roles), connection_verify=str(entra.ca_file), retry_total=0
    )
    with admin, pytest.raises(ClientAuthenticationError, match="Manage,EntityRead claims required"):
        admin.get_queue("orders")


def test_a_bad_bearer_token_is_401_on_the_admin_api(entra: Emulator) -> None:
    ctx = __import__("ssl").create_default_context(cafile=str(entra.ca_file))
    for token in (_forged_token(entra), entra.credential(["Owner"], lifetime=-5).get_token(SB_SCOPE).token, "x.y.z"):
        request = urllib.request.Request(
            f"{entra.admin_url}/orders?api-version=2021-05", headers={"Authorization": f"Bearer {token}"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, context=ctx, timeout=5)
        assert refused.value.code == 401


# ------------------------------------------------------------- set-up


def test_principals_need_tls() -> None:
    with pytest.raises(ValueError, match="need TLS"):
        Emulator(principals=["a:b:Owner"])
    with pytest.raises(ValueError, match="unknown role"):
        Emulator(tls=True, principals=["a:b:Admin"])


def test_the_command_line_declares_principals_and_prints_the_authority(tmp_path: Path) -> None:
    proc, authority_line = start_cli_emulator(
        "--tls",
        "--port",
        "0",
        "--data-dir",
        str(tmp_path),
        "--principal",
        "cli-app:env:CLI_APP_SECRET:Sender,Receiver",  # the secret is not in the command line (ps)
        pattern=re.compile(r"^Entra authority: "),
        env={"CLI_APP_SECRET": "cli-secret"},
    )
    try:
        assert proc.stdout is not None
        tenant_line = proc.stdout.readline().strip()
        authority = authority_line.removeprefix("Entra authority: ")
        tenant = tenant_line.removeprefix("Tenant: ")
        assert re.fullmatch(r"https://localhost:\d+", authority) and re.fullmatch(r"[0-9a-f-]{36}", tenant)
        assert (tmp_path / "tls" / "tenant").read_text().strip() == tenant  # kept beside the CA
        ca = tmp_path / "tls" / "ca.pem"
        credential = ClientSecretCredential(
            tenant,
            "cli-app",
            "cli-secret",
            authority=authority,
            disable_instance_discovery=True,
            connection_verify=str(ca),
        )
        ns = authority.removeprefix("https://")  # the authority is on the emulator's one port
        with ServiceBusClient(ns, credential, **tls_client_options(int(ns.rsplit(":", 1)[1]), ca)) as c:
            send(c, "orders", "via the command line, with Entra ID")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_a_principal_secret_named_by_an_environment_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    with pytest.raises(ValueError, match=r"NOT_SET_HERE.*not set"):
        Principal.parse("a:env:NOT_SET_HERE:Owner")
    monkeypatch.setenv("APP_SECRET", "s3cret:with:colons")
    assert Principal.parse("a:env:APP_SECRET:Owner").secret == "s3cret:with:colons"


def test_the_command_line_refuses_principals_without_tls() -> None:
    done = run_cli_emulator("--port", "0", "--principal", "a:b:Owner")
    assert done.returncode == 2 and "--principal go with --tls" in done.stderr


class _Typed(_Forged):
    """A valid token put on $cbs with a token type of the test's choosing (a str: the SDK passes it on)."""

    def __init__(self, token: str, token_type: str) -> None:
        super().__init__(token)
        self.token_type = token_type


def test_an_entra_token_must_be_put_as_jwt(entra: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """Service Bus's CBS takes two token types: 'jwt' (Entra ID; and SAS tokens, which azure-servicebus
    puts as 'jwt') and 'servicebus.windows.net:sastoken' (SAS only). An Entra token typed as a SAS is
    refused; the same token typed 'jwt' is taken."""
    _drain(entra)
    token = entra.credential(["Owner"]).get_token(SB_SCOPE).token
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    with ServiceBusClient(_ns(entra), _Typed(token, "servicebus.windows.net:sastoken"), **_options(entra)) as c:
        with pytest.raises((ServiceBusAuthenticationError, ServiceBusConnectionError)):
            with c.get_queue_sender("orders") as s:
                s.send_messages(ServiceBusMessage("never"))
    assert any("must be a SharedAccessSignature" in r.getMessage() for r in caplog.records)
    with ServiceBusClient(_ns(entra), _Typed(token, "jwt"), **_options(entra)) as c, c.get_queue_sender("orders") as s:
        s.send_messages(ServiceBusMessage("typed jwt"))
    assert entra.broker.counts("orders")["active"] == 1
    _drain(entra)
