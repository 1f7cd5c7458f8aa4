"""The kit's Azure path with Entra ID, end to end over the TLS emulator: core.connect(namespace=,
credential=), %sb_connect --fully-qualified-namespace with DefaultAzureCredential (a service principal in the
environment, AZURE_AUTHORITY_HOST pointing at the emulator), and one clear line naming the role
a refused operation needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.connections.connection import credential_options
from sbnotebook.core.errors import ConfigurationError
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension

PRINCIPAL = ("kit-app", "kit-secret")
ENV_NAMES = ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_AUTHORITY_HOST")


@pytest.fixture(scope="module")
def entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with Emulator(
        tls=True, tls_dir=tmp_path_factory.mktemp("tls"), principals=[f"{PRINCIPAL[0]}:{PRINCIPAL[1]}:Owner"]
    ) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, entra: Emulator) -> Iterator[None]:
    for name in ("SBNOTEBOOK_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", *ENV_NAMES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SBNOTEBOOK_CA_BUNDLE", str(entra.ca_file))
    yield
    core.close_all()


def _ns(emu: Emulator) -> str:
    return f"localhost:{emu.port}"


def _service_principal_env(monkeypatch: pytest.MonkeyPatch, emu: Emulator) -> None:
    assert emu.tenant is not None and emu.entra_authority is not None
    monkeypatch.setenv("AZURE_TENANT_ID", emu.tenant)
    monkeypatch.setenv("AZURE_CLIENT_ID", PRINCIPAL[0])
    monkeypatch.setenv("AZURE_CLIENT_SECRET", PRINCIPAL[1])
    monkeypatch.setenv("AZURE_AUTHORITY_HOST", emu.entra_authority)


def test_core_with_a_token_credential_sends_peeks_receives_and_counts(entra: Emulator) -> None:
    with core.connect(fully_qualified_namespace=_ns(entra), credential=entra.credential(["Owner"])) as conn:
        core.send("orders", ["with a credential"], connection=conn)
        assert "with a credential" in [r["body_text"] for r in core.peek("orders", connection=conn).records]
        assert core.counts("orders", connection=conn).active >= 1  # the admin API with a Bearer token
        with core.receive("orders", max_messages=50, wait_seconds=3, connection=conn) as batch:
            assert "with a credential" in [r["body_text"] for r in batch.records]
            assert batch.complete().ok


def test_core_with_default_azure_credential_from_the_environment(
    entra: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DefaultAzureCredential's EnvironmentCredential signs in as the service principal at the
    emulator's authority: no network to login.microsoftonline.com (instance discovery disabled)."""
    _service_principal_env(monkeypatch, entra)
    with core.connect(fully_qualified_namespace=_ns(entra)) as conn:
        core.send("orders", ["with DefaultAzureCredential"], connection=conn)
        assert core.counts("orders", connection=conn).active >= 1
        with core.receive("orders", max_messages=50, wait_seconds=3, connection=conn) as batch:
            assert "with DefaultAzureCredential" in [r["body_text"] for r in batch.records]
            assert batch.complete().ok


def test_sb_connect_namespace_with_default_azure_credential(
    entra: Emulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.testing import globalipapp

    _service_principal_env(monkeypatch, entra)
    ip: Any = globalipapp.start_ipython() or globalipapp.get_ipython()
    unload_ipython_extension(ip)
    load_ipython_extension(ip)
    try:
        ip.run_line_magic("sb_connect", f"--fully-qualified-namespace {_ns(entra)}")
        out = capsys.readouterr().out
        assert f"Connected to {_ns(entra)} (entra-id)" in out
        ip.run_cell_magic("sb_send", "orders", '["from-the-magic"]')
        peeked = ip.run_line_magic("sb_peek", "orders -n 50")
        assert "from-the-magic" in list(peeked["body_text"])
    finally:
        unload_ipython_extension(ip)


def test_the_kit_disables_instance_discovery_only_off_microsoft_clouds(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    local = credential_options({"AZURE_AUTHORITY_HOST": "https://localhost:5671", "SSL_CERT_FILE": str(ca)})
    assert local == {"disable_instance_discovery": True, "connection_verify": str(ca)}
    assert credential_options({"AZURE_AUTHORITY_HOST": "https://login.microsoftonline.us"}) == {}
    assert credential_options({}) == {}


@pytest.mark.parametrize(
    ("roles", "operation", "role_named"),
    [
        (["Receiver"], "send", "Azure Service Bus Data Sender"),
        (["Sender"], "peek", "Azure Service Bus Data Receiver"),
        (["Sender"], "receive", "Azure Service Bus Data Receiver"),
        (["Sender", "Receiver"], "counts", "Azure Service Bus Data Owner"),
    ],
)
def test_a_missing_role_is_one_line_naming_the_role(
    entra: Emulator, roles: list[str], operation: str, role_named: str
) -> None:
    calls = {
        "send": lambda conn: core.send("orders", ["refused"], connection=conn).raise_for_failures(),
        "peek": lambda conn: core.peek("orders", connection=conn),
        "receive": lambda conn: core.receive("orders", max_messages=1, wait_seconds=1, connection=conn).__enter__(),
        "counts": lambda conn: core.counts("orders", connection=conn),
    }
    with core.connect(fully_qualified_namespace=_ns(entra), credential=entra.credential(roles)) as conn:
        with pytest.raises(ConfigurationError) as refused:
            calls[operation](conn)
    message = str(refused.value)
    assert role_named in message and "\n" not in message
    assert message.startswith("Access refused")


def test_panels_work_over_tls_with_entra_id(entra: Emulator) -> None:
    """The panels take the same live connection: the browser peeks, the triage panel opens on the
    dead-letter count (the admin API with a Bearer token) and its first page, over TLS + Entra ID."""
    from sbnotebook.notebook.widgets import MessageBrowser, TriagePanel

    with core.connect(fully_qualified_namespace=_ns(entra), credential=entra.credential(["Owner"])) as conn:
        core.purge("orders", connection=conn)
        core.purge("orders/$deadletterqueue", connection=conn)
        core.send("orders", ["for the browser", "for the triage panel"], connection=conn)
        browser = MessageBrowser("orders", page_size=10, connection=conn)
        assert [r["body_text"] for r in browser.records] == ["for the browser", "for the triage panel"]
        with core.receive("orders", max_messages=2, wait_seconds=3, connection=conn) as batch:
            assert batch.dead_letter([1], reason="entra-test").ok
            assert batch.complete([0]).ok
        panel = TriagePanel("orders", connection=conn)
        assert panel.total == 1
        assert [r["dead_letter_reason"] for r in panel.records] == ["entra-test"]


def test_a_sign_in_for_the_wrong_tenant_is_one_line_and_fixing_it_needs_no_restart(
    entra: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """DefaultAzureCredential with a tenant the authority does not know: one line with Entra's
    AADSTS code (not the SDK's several lines and a logged traceback), for messages and for the
    administration API; with the tenant fixed in the environment, the next connect signs in."""
    import logging

    from tests.project.test_docs_errors import troubleshooting_text

    _service_principal_env(monkeypatch, entra)
    monkeypatch.setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000000")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigurationError) as refused:
        core.connect(fully_qualified_namespace=_ns(entra))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Sign-in failed: AADSTS90002: Tenant '00000000-0000-0000-0000-000000000000' not found")
    sdk = [r.getMessage() for r in caplog.records if r.exc_info and r.name.startswith("azure.servicebus")]
    assert sdk == []  # the SDK logged no traceback on the way (azure-identity logs its own, at DEBUG)
    said = message.split(" not found")[0].replace("'00000000-0000-0000-0000-000000000000'", "'...'")
    assert said in troubleshooting_text() and message.split(". ", 1)[1][:60] in troubleshooting_text()
    with pytest.raises(ConfigurationError, match=r"^Sign-in failed \(orders\): EnvironmentCredential: ") as refused:
        core.counts(
            "orders", connection=core.connect(fully_qualified_namespace=_ns(entra), warm=False)
        )  # the admin API
    assert "tenant" in str(refused.value) and "\n" not in str(refused.value)
    core.close_all()
    monkeypatch.setenv("AZURE_TENANT_ID", str(entra.tenant))
    with core.connect(fully_qualified_namespace=_ns(entra)) as conn:  # no restart: the refused connection was dropped
        core.send("orders", ["after the fix"], connection=conn)
        peeked = core.peek("orders", max_messages=100, connection=conn).records
        assert "after the fix" in [r["body_text"] for r in peeked]
