"""Credential references (core/connections/credentials.py): ``callable:package.module:function`` and
``service-credential:NAME`` (a Unity Catalog service credential), made by the process that signs in, against
the TLS emulator (the kit's Entra ID path: a namespace and a token credential, no key in any setting).
The token comes from tests/stand_in_credential.py until the emulator issues Entra ID tokens.

The Spark side (local-cluster and Spark Connect with only the reference in the options) is in
tests/spark/test_cluster.py and tests/spark/test_connect.py."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.connections import credentials
from sbnotebook.core.errors import ConfigurationError
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from tests import stand_in_credential as stand_in
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import magic_fails, refusal_test
from tests.required import require_module

SECRET = "credential-ref-key-2f9d41"  # the stand-in issuer's key: never in a setting, a repr or an output


@pytest.fixture(scope="module")
def tls_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with Emulator(TEST_TOPOLOGY, key=SECRET, tls=True, tls_dir=tmp_path_factory.mktemp("tls")) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tls_emulator: Emulator) -> Iterator[None]:
    """Each test starts with no credential made in this process, trusting the emulator's CA, and
    with the stand-in issuer's key in the environment (as on every process of a cluster)."""
    monkeypatch.setattr(credentials, "_made", {})
    monkeypatch.setattr(stand_in, "made", [])
    monkeypatch.setenv("SBNOTEBOOK_CA_BUNDLE", str(tls_emulator.ca_file))
    monkeypatch.setenv(stand_in.KEY, SECRET)
    yield
    core.close_all()


def namespace(emu: Emulator) -> str:
    return f"localhost:{emu.port}"


def test_a_callable_reference_signs_in_once_per_process(tls_emulator: Emulator) -> None:
    with core.connect(fully_qualified_namespace=namespace(tls_emulator), credential=stand_in.REF) as conn:
        assert conn.settings.kind == "entra-id" and SECRET not in repr(conn) + str(conn.settings)
        core.send("q", ["signed in by reference"], connection=conn)
        assert "signed in by reference" in [r["body_text"] for r in core.peek("q", connection=conn).records]
        with core.receive("q", max_messages=10, wait_seconds=2, connection=conn) as batch:
            assert batch.complete().ok
    core.close_all()
    with core.connect(fully_qualified_namespace=namespace(tls_emulator), credential=stand_in.REF, warm=False) as again:
        core.send("q", ["again"], connection=again)
        assert core.receive("q", max_messages=10, wait_seconds=2, connection=again).complete().ok
    assert len(stand_in.made) == 1  # made once, kept by the process
    assert stand_in.made[0].scopes[0] == ("https://servicebus.azure.net//.default",)  # what the SDK asks Entra ID


test_a_malformed_reference_is_one_clear_error = refusal_test(
    credentials.parse_credential_ref,
    ConfigurationError,
    {
        "callable:tests.stand_in_credential": "needs a module and a function",
        "callable:no such:thing": "needs a module and a function",
        "databricks:my-scope/key": "a secretRef",
        "vault:thing": "not a credential reference",
        "databricks:": "not a credential reference",
        "secret:my-scope/key": "a secretRef",
        "service-credential:a/b": "a secretRef",
    },
)


def test_what_a_reference_cannot_make_is_said_with_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot import tests\.no_such_module in this process \(pid"):
        credentials.credential_of(credentials.parse_credential_ref("callable:tests.no_such_module:credential"))
    with pytest.raises(ConfigurationError, match="has no missing"):
        credentials.credential_of(credentials.parse_credential_ref("callable:tests.stand_in_credential:missing"))
    with pytest.raises(ConfigurationError, match="gave a str, not an azure-core TokenCredential"):
        credentials.credential_of(credentials.parse_credential_ref("callable:tests.stand_in_credential:__doc__.strip"))
    monkeypatch.delenv(stand_in.KEY)
    with pytest.raises(ConfigurationError, match=r"credential\(\) failed \(LookupError\)") as caught:
        credentials.credential_of(credentials.parse_credential_ref(stand_in.REF))
    assert stand_in.KEY not in str(caught.value)  # only the kind of a callable's error: its text may hold secrets


def test_a_service_credential_outside_databricks_is_a_clear_error() -> None:
    assert "databricks.service_credentials" not in sys.modules
    with pytest.raises(ConfigurationError, match=r"needs Databricks' Unity Catalog service credentials .* \(pid"):
        core.connect(
            fully_qualified_namespace="contoso.servicebus.windows.net",
            credential="service-credential:sb-sender",
            warm=False,
        )


@pytest.fixture
def databricks_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What a Databricks worker's Python has (the UDF entry point ``databricks.service_credentials``),
    handing out the stand-in credential for the name asked; returns the names asked."""
    package = tmp_path / "databricks"
    package.mkdir()
    (package / "__init__.py").write_text("__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n")
    (package / "service_credentials.py").write_text(
        "from tests import stand_in_credential\n"
        "asked = []\n"
        "def getServiceCredentialsProvider(name):\n"
        "    if name != 'sb-sender':\n"
        "        raise PermissionError('no ACCESS on ' + name)\n"
        "    asked.append(name)\n"
        "    return stand_in_credential.credential()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "databricks" or m.startswith("databricks.")]:
        monkeypatch.delitem(sys.modules, name)
    import databricks.service_credentials as module  # type: ignore[import-not-found]

    yield module.asked
    for name in [m for m in sys.modules if m == "databricks" or m.startswith("databricks.")]:
        del sys.modules[name]


def test_a_service_credential_where_databricks_provides_it(
    tls_emulator: Emulator, databricks_worker: list[str]
) -> None:
    with core.connect(
        fully_qualified_namespace=namespace(tls_emulator), credential="service-credential:sb-sender"
    ) as conn:
        core.send("q", ["via a service credential"], connection=conn)
        with core.receive("q", max_messages=10, wait_seconds=2, connection=conn) as batch:
            assert [r["body_text"] for r in batch.records] == ["via a service credential"]
            assert batch.complete().ok
    assert databricks_worker == ["sb-sender"]
    with pytest.raises(ConfigurationError, match=r"service credential 'other' \(PermissionError\).*ACCESS"):
        credentials.credential_of(credentials.parse_credential_ref("service-credential:other"))


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    return globalipapp.start_ipython() or globalipapp.get_ipython()


def test_sb_connect_takes_a_credential_reference(ip: Any, tls_emulator: Emulator, capsys: Any) -> None:
    """%sb_connect --fully-qualified-namespace NS --credential service-credential:NAME uses the
    notebook's dbutils.credentials."""

    class Credentials:
        asked: list[str] = []

        def getServiceCredentialsProvider(self, name: str) -> Any:
            self.asked.append(name)
            return stand_in.credential()

    class DbUtils:
        credentials = Credentials()

    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    try:
        assert "--credential goes with --fully-qualified-namespace" in magic_fails(
            ip, "sb_connect --credential service-credential:sb-sender"
        )
        ip.user_ns["dbutils"] = DbUtils()
        try:
            ip.run_line_magic(
                "sb_connect",
                f"--fully-qualified-namespace {namespace(tls_emulator)} --credential service-credential:sb-sender",
            )
        finally:
            del ip.user_ns["dbutils"]
        out, err = capsys.readouterr()
        assert f"Connected to {namespace(tls_emulator)} (entra-id)" in out and not err
        assert Credentials.asked == ["sb-sender"] and SECRET not in out + repr(magics.connection)
        core.send("q", ["from the magics"], connection=magics.connection)
        assert core.receive("q", max_messages=10, wait_seconds=2, connection=magics.connection).complete().ok
    finally:
        unload_ipython_extension(ip)


def test_spark_options_carry_only_the_reference() -> None:
    require_module("pyspark")
    from sbnotebook.spark.options import OptionError, connection
    from sbnotebook.spark.secrets import EntraRef, source_of

    ref = connection(
        {"fullyQualifiedNamespace": "sb://contoso.servicebus.windows.net/", "credentialRef": stand_in.REF}, None
    )
    assert ref == EntraRef("contoso.servicebus.windows.net", credentials.CredentialRef(stand_in.REF))
    assert pickle.loads(pickle.dumps(ref)) == ref  # what travels to executors: names, no credential object
    assert repr(ref) == f"EntraRef('contoso.servicebus.windows.net', '{stand_in.REF}')"
    with pytest.raises(OptionError, match="give fullyQualifiedNamespace with it"):
        connection({"credentialRef": stand_in.REF}, None)
    with pytest.raises(OptionError, match="give fullyQualifiedNamespace with it"):
        connection({"credentialRef": stand_in.REF, "secretRef": "env:X"}, None)
    with pytest.raises(OptionError, match="not a credential reference"):
        connection({"fullyQualifiedNamespace": "contoso.servicebus.windows.net", "credentialRef": "env:X"}, None)
    with pytest.raises(ConfigurationError, match="not a credential object"):
        source_of(None, namespace="contoso.servicebus.windows.net", credential=object())  # type: ignore[arg-type]
    assert source_of(None, namespace="ns.example", credential="service-credential:sb") == EntraRef(
        "ns.example", credentials.CredentialRef("service-credential:sb")
    )


def test_a_secret_reference_is_a_reference_of_the_same_shape_never_a_credential() -> None:
    """spark's SecretRef is core's CredentialRef shape (one printable string), naming a secret."""
    require_module("pyspark")
    from sbnotebook.spark.secrets import SecretRef, parse_ref

    ref = parse_ref("env:SB_SECRET_NAME")
    assert isinstance(ref, credentials.CredentialRef) and ref == SecretRef("env:SB_SECRET_NAME")
    assert ref != credentials.CredentialRef("env:SB_SECRET_NAME")  # a secret is never taken for a credential
    assert repr(ref) == "SecretRef('env:SB_SECRET_NAME')"
    assert ref.fully_qualified_namespace == "secret env:SB_SECRET_NAME"
    assert pickle.loads(pickle.dumps(ref)) == ref
