"""Named connections (%sb_connect --as NAME, NAME:ENTITY in every command) and %sb_copy between
namespaces, through a real IPython shell against two embedded emulators ("prod" and the default)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook.core import EntityNameError, split_address
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import send


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    return globalipapp.start_ipython() or globalipapp.get_ipython()


@pytest.fixture
def prod() -> Iterator[Emulator]:
    """A second namespace: stands for production."""
    with Emulator(TEST_TOPOLOGY) as emu:
        yield emu


@pytest.fixture
def prod_client(prod: Emulator) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(prod.connection_string) as c:
        yield c


@pytest.fixture
def sb(ip: Any, emulator: Emulator, prod: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    ip.run_line_magic("sb_connect", emulator.connection_string)
    ip.run_line_magic("sb_connect", f"--as prod {prod.connection_string}")
    capsys.readouterr()
    yield magics
    unload_ipython_extension(ip)


def line(ip: Any, text: str) -> Any:
    name, _, rest = text.partition(" ")
    return ip.run_line_magic(name, rest)


def test_split_address_reads_the_connection_prefix_and_says_what_is_wrong() -> None:
    assert split_address("orders") == (None, split_address("orders")[1])
    name, path = split_address("prod:orders/$dlq")
    assert name == "prod" and str(path) == "orders/$deadletterqueue"
    assert split_address("home-2:events/subscriptions/audit")[0] == "home-2"
    for bad, said in [
        (":orders", "goes before the ':'"),
        ("prod:", "no entity after"),
        ("prod:orders:x", "more than one ':'"),
        ("orders/$deadletterqueue:prod", "a colon only follows a connection name"),
        ("9x:orders", "not a connection name"),
    ]:
        with pytest.raises(EntityNameError, match=said):
            split_address(bad)


def test_named_connections_beside_the_default_and_the_list_never_shows_a_key(
    ip: Any,
    sb: SbMagics,
    emulator: Emulator,
    prod: Emulator,
    prod_client: ServiceBusClient,
    client: ServiceBusClient,
    capsys: Any,
) -> None:
    send(prod_client, "q", "p1", "p2")
    send(client, "q", "h1")
    assert list(line(ip, "sb_peek prod:q")["body_text"]) == ["p1", "p2"]
    assert list(line(ip, "sb_peek q")["body_text"]) == ["h1"]  # the unnamed connection stays the default
    assert list(line(ip, "sb_peek q --dlq")["body_text"]) == []
    assert sb.bound is None and sb.connection is not None and sb.connection.namespace.endswith(f":{emulator.port}")
    assert sb.connections["prod"].namespace.endswith(f":{prod.port}")
    listed = line(ip, "sb_connect --list")
    assert list(listed["name"]) == ["(default)", "prod"]
    assert list(listed["namespace"]) == [f"{emulator.host}:{emulator.port}", f"{prod.host}:{prod.port}"]
    out, err = capsys.readouterr()
    shown = out + err + repr(listed) + listed.to_html()
    assert "SAS_KEY_VALUE" not in shown and "SharedAccessKey" not in shown
    # Counts, export, purge, ...: every command takes NAME:ENTITY the same way.
    frame = line(ip, "sb_entities")
    assert frame is not None
    line(ip, "sb_purge prod:q --yes")
    assert capsys.readouterr().out.count("purged") >= 1
    assert list(line(ip, "sb_peek prod:q")["body_text"]) == []
    assert list(line(ip, "sb_peek q")["body_text"]) == ["h1"]


def test_bad_connection_names_are_one_line(ip: Any, sb: SbMagics, capsys: Any) -> None:
    for text, said in [
        ("sb_peek nope:q", "No connection named 'nope' (named: prod)"),
        ("sb_peek prod:q:x", "more than one ':'"),
        ("sb_peek q/$deadletterqueue:prod", "a colon only follows a connection name"),
        ("sb_peek prod:", "no entity after"),
        ("sb_connect --as 9x --emulator", "a name is letters"),
        ("sb_connect --as home", "give CONNECTION, --namespace, --secret or --emulator"),
    ]:
        line(ip, text)
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, (text, err)
