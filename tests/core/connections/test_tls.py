"""The kit's Azure path over TLS: core.connect with a production connection string (no
UseDevelopmentEmulator) against the TLS emulator on an explicit port, trusting the CA named by
SSL_CERT_FILE, REQUESTS_CA_BUNDLE or SBNOTEBOOK_CA_BUNDLE instead of certifi's bundle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sbnotebook import core
from sbnotebook.core import trust
from sbnotebook.core.errors import ConfigurationError, SbError
from sbnotebook.emulator import Emulator


@pytest.fixture(scope="module")
def tls_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with Emulator(tls=True, tls_dir=tmp_path_factory.mktemp("tls")) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SBNOTEBOOK_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    yield
    core.close_all()  # each test's settings are its own


@pytest.mark.parametrize("setting", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "SBNOTEBOOK_CA_BUNDLE"])
def test_the_kit_sends_peeks_receives_and_counts_over_tls(
    tls_emulator: Emulator, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """Rule: a CA named by the environment is trusted (a corporate CA behind a TLS-inspecting proxy),
    and the port in the connection string is dialled (the SDK alone dials 5671 over TLS)."""
    monkeypatch.setenv(setting, str(tls_emulator.ca_file))
    with core.connect(tls_emulator.connection_string) as conn:
        assert not conn.is_emulator  # the production path, not the development-emulator one
        core.send("orders", [f"via {setting}"], connection=conn)
        page = core.peek("orders", connection=conn)
        assert f"via {setting}" in [r["body_text"] for r in page.records]
        assert core.counts("orders", connection=conn).active >= 1  # the admin API over HTTPS
        with core.receive("orders", max_messages=50, wait_seconds=3, connection=conn) as batch:
            assert f"via {setting}" in [r["body_text"] for r in batch.records]
            assert batch.complete().ok


def test_without_the_ca_the_kit_fails_on_the_certificate(tls_emulator: Emulator) -> None:
    """certifi's bundle does not hold the emulator's CA: one error about the certificate."""
    with pytest.raises(SbError, match=r"(?i)certificate"):
        with core.connect(tls_emulator.connection_string, warm=False) as conn:
            core.send("orders", ["never"], connection=conn)


def test_a_ca_setting_naming_no_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match="SSL_CERT_FILE"):
        trust.ca_bundle()


def test_the_kit_setting_wins_over_the_environment(tls_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBNOTEBOOK_CA_BUNDLE", str(tls_emulator.ca_file))
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    assert trust.ca_bundle() == str(tls_emulator.ca_file)
