"""Topology file parsing and SAS token validation."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sbnotebook.emulator import DEFAULT_TOPOLOGY, Topology, TopologyError, default_topology
from sbnotebook.emulator.security.sas import Grant, TokenError, covers, sign, validate
from sbnotebook.emulator.topology import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT1M", 60),
        ("PT5S", 5),
        ("PT0.5S", 0.5),
        ("P1D", 86400),
        ("P1DT2H3M4S", 93784),
        ("PT1H", 3600),
        (30, 30),
    ],
)
def test_iso_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["1M", "PT", "P", "PTXS", "", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(TopologyError):
        parse_duration(bad)  # type: ignore[arg-type]


def test_format_duration_round_trips() -> None:
    for seconds in (1, 60, 3600, 93784, 0.5):
        assert parse_duration(format_duration(seconds)) == seconds


def test_microsoft_emulator_config_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(DEFAULT_TOPOLOGY))
    topo = Topology.from_file(path)
    assert {q.name for q in topo.queues} >= {"orders", "retries"}
    retries = next(q for q in topo.queues if q.name == "retries")
    assert retries.properties.lock_duration == 5
    assert retries.properties.max_delivery_count == 3
    assert default_topology().topics[0].subscriptions[1].rules[0].sql_expression == "priority = 'high'"


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({}, "UserConfig"),
        ({"UserConfig": {"Namespaces": []}}, "exactly one namespace"),
        ({"UserConfig": {"Namespaces": [{"Queues": [{"Properties": {}}]}]}}, "needs a Name"),
        (
            {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuraton": "PT1M"}}]}]}},
            "unknown property 'LockDuraton'",
        ),
        (
            {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuration": "PT6M"}}]}]}},
            "at most PT5M",
        ),
        (
            {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"ForwardTo": "nowhere"}}]}]}},
            "forwarding target",
        ),
        ({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q"}, {"Name": "Q"}]}]}}, "unique"),
    ],
)
def test_bad_topologies_are_explained(config: dict, fragment: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(TopologyError, match=fragment):
        Topology.from_dict(config)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n "UserConfig": ,\n}')
    with pytest.raises(TopologyError, match="line 2"):
        Topology.from_file(path)


KEYS = {"RootManageSharedAccessKey": "secret"}


def test_valid_token_grants_its_audience() -> None:
    token = sign("sb://localhost:5672/orders", "RootManageSharedAccessKey", "secret", time.time() + 60)
    grant = validate(token, keys=KEYS, resource="sb://localhost:5672/orders")
    assert covers(grant, "orders/$management", time.time())
    assert not covers(grant, "invoices", time.time())


@pytest.mark.parametrize(
    ("key_name", "key", "expiry", "resource", "fragment"),
    [
        ("RootManageSharedAccessKey", "wrong", 60, "sb://h/q", "signature"),
        ("Other", "secret", 60, "sb://h/q", "unknown key name"),
        ("RootManageSharedAccessKey", "secret", -1, "sb://h/q", "expired"),
        ("RootManageSharedAccessKey", "secret", 60, "sb://h/other", "audience"),
    ],
)
def test_invalid_tokens_are_refused(key_name: str, key: str, expiry: float, resource: str, fragment: str) -> None:
    token = sign("sb://h/q", key_name, key, time.time() + expiry)
    with pytest.raises(TokenError, match=fragment) as err:
        validate(token, keys=KEYS, resource=resource)
    assert "secret" not in str(err.value)


def test_expired_grant_covers_nothing() -> None:
    assert not covers(Grant("h", time.time() - 1), "q", time.time())
    assert covers(Grant("h", time.time() + 60), "q", time.time())  # namespace-wide
