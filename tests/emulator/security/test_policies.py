"""Shared access policies of entities (and of the namespace) with Send / Listen / Manage rights, as
Service Bus has them, through the real SDK with the policies' connection strings (``EntityPath``).

What a key allows works; what it does not is refused as Service Bus refuses it: a missing right at
attach or on a management operation with ``amqp:unauthorized-access`` naming the claim
(``ServiceBusAuthorizationError``); a token the key cannot sign (another entity, the namespace,
expired, a wrong token type) on ``$cbs`` with 401 (``ServiceBusAuthenticationError``). Every test
reads the broker's state directly.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.credentials import AccessToken, AzureSasCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
)

from sbnotebook.emulator import Emulator, Topology, TopologyError
from sbnotebook.emulator.security.sas import KeyRing, Policy, TokenError, sign, validate
from tests.conftest import TEST_TOPOLOGY
from tests.emulator.net.rawpeers import http_reply
from tests.helpers import send

REFUSED_TOKEN = (ServiceBusAuthenticationError, ServiceBusConnectionError)  # the SDK reports a 401 on $cbs as either

POLICIES: dict[str, Any] = copy.deepcopy(TEST_TOPOLOGY)
_NS = POLICIES["UserConfig"]["Namespaces"][0]
next(q for q in _NS["Queues"] if q["Name"] == "q")["AuthorizationRules"] = [
    {"KeyName": "reader", "Rights": ["Listen"], "PrimaryKey": "reader-primary", "SecondaryKey": "reader-secondary"},
    {"KeyName": "writer", "Rights": ["Send"], "PrimaryKey": "writer-primary"},
    {"KeyName": "owner", "Rights": ["Manage"]},
]
next(t for t in _NS["Topics"] if t["Name"] == "t")["AuthorizationRules"] = [{"KeyName": "subs", "Rights": ["Listen"]}]
_NS["AuthorizationRules"] = [{"KeyName": "ns-listen", "Rights": ["Listen"]}]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(POLICIES) as emulator:
        yield emulator


def _client(conn: str) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(conn, retry_total=0)


def test_topology_declares_policies_with_their_rights() -> None:
    topo = Topology.from_dict(POLICIES)
    by_name = {(p.entity, p.name): p for p in topo.policies}
    assert by_name[("q", "reader")].rights == {"Listen"}
    assert by_name[("q", "owner")].rights == {"Listen", "Send", "Manage"}  # Manage brings the others
    assert by_name[(None, "ns-listen")].rights == {"Listen"}
    assert by_name[("q", "owner")].primary_key != by_name[("q", "owner")].secondary_key  # made at random
    assert "reader-primary" not in repr(topo.policies)


@pytest.mark.parametrize(
    ("rules", "fragment"),
    [
        ([{"KeyName": "x", "Rights": ["Read"]}], "unknown right 'Read'"),
        ([{"KeyName": "x", "Rights": []}], "at least one right"),
        ([{"KeyName": "", "Rights": ["Send"]}], "KeyName"),
        ([{"KeyName": "x", "Rights": ["Send"], "Key": "k"}], "unknown field"),
        ([{"KeyName": "x", "Rights": ["Send"]}, {"KeyName": "x", "Rights": ["Listen"]}], "appears twice"),
        ({"KeyName": "x"}, "must be a list"),
    ],
)
def test_bad_policies_are_refused_saying_where(rules: Any, fragment: str) -> None:
    config = copy.deepcopy(TEST_TOPOLOGY)
    config["UserConfig"]["Namespaces"][0]["Queues"][0]["AuthorizationRules"] = rules
    with pytest.raises(TopologyError, match=fragment) as err:
        Topology.from_dict(config)
    assert "Queues[0].AuthorizationRules" in str(err.value)


def test_a_subscription_has_no_policies_of_its_own() -> None:
    config = copy.deepcopy(TEST_TOPOLOGY)
    topic = next(t for t in config["UserConfig"]["Namespaces"][0]["Topics"] if t["Name"] == "t")
    topic["Subscriptions"][0]["AuthorizationRules"] = [{"KeyName": "x", "Rights": ["Listen"]}]
    with pytest.raises(TopologyError, match="give the topic one"):
        Topology.from_dict(config)


def test_listen_only_key_receives_peeks_and_settles_but_cannot_send(emu: Emulator) -> None:
    send(_client(emu.connection_string), "q", "a", "b")
    reader = emu.policy_connection_string("reader", "q")
    assert reader.endswith(";EntityPath=q;UseDevelopmentEmulator=true")
    with _client(reader) as c:
        with c.get_queue_receiver("q", max_wait_time=3) as r:
            assert [str(m) for m in r.peek_messages(max_message_count=10, sequence_number=1)] == ["a", "b"]
            got = r.receive_messages(max_message_count=2, max_wait_time=3)
            r.renew_message_lock(got[0])
            r.complete_message(got[0])
            r.abandon_message(got[1])
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"), c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("not allowed"))  # refused at attach, as in Service Bus
    assert emu.broker.counts("q") == {"active": 1, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_send_only_key_sends_but_cannot_receive_or_peek(emu: Emulator) -> None:
    with _client(emu.policy_connection_string("writer", "q")) as c:
        with c.get_queue_sender("q") as s:
            s.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
            s.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
        with pytest.raises(ServiceBusAuthorizationError, match="'Listen' claim"):  # refused at attach
            with c.get_queue_receiver("q", max_wait_time=1) as r:
                r.receive_messages(max_message_count=1, max_wait_time=1)
    # peek is a management operation: on a management-only handler (no receive link attached) it is
    # refused on the $management link itself, with the same words
    from azure.servicebus._common import mgmt_handlers

    with _client(emu.policy_connection_string("writer", "q")) as c:
        browser = c._create_session_browser("q")
        try:
            transport = browser._amqp_transport
            body = {"from-sequence-number": transport.AMQP_LONG_VALUE(1), "message-count": transport.AMQP_INT_VALUE(5)}
            with pytest.raises(ServiceBusAuthorizationError, match="'Listen' claim"):
                browser._mgmt_request_response_with_retry(b"com.microsoft:peek-message", body, mgmt_handlers.default)
        finally:
            browser.close()
    assert emu.broker.counts("q") == {"active": 2, "deferred": 0, "scheduled": 1, "dead_letter": 0}


def test_secondary_key_works_too(emu: Emulator) -> None:
    with _client(emu.policy_connection_string("reader", "q", secondary=True)) as c:
        with c.get_queue_receiver("q") as r:
            assert r.peek_messages(max_message_count=1, sequence_number=1) == []


def test_entity_key_reaches_nothing_outside_its_entity(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """q's key without EntityPath (the SDK would refuse another queue's name otherwise) on queue
    'short': the token put for 'short' is refused (401), nothing is received."""
    send(_client(emu.connection_string), "short", "keep me")
    reader = emu.policy_connection_string("reader", "q").replace(";EntityPath=q", "")
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    with _client(reader) as c, pytest.raises(REFUSED_TOKEN):
        with c.get_queue_receiver("short", max_wait_time=1) as r:
            r.receive_messages(max_message_count=1, max_wait_time=1)
    assert any("/short: unknown key name 'reader'" in r.getMessage() for r in caplog.records)
    # "q2"-style prefixes do not count as inside: 'q' does not cover 'queue-like' names
    policy = emu.keys.get("reader", "q")
    assert policy is not None
    token = sign("sb://h/q", "reader", policy.primary_key, time.time() + 60)
    with pytest.raises(TokenError, match="audience"):
        validate(token, keys=emu.keys, resource="sb://h/qq")
    assert emu.broker.counts("short")["active"] == 1


def test_entity_key_cannot_sign_for_the_namespace(emu: Emulator) -> None:
    policy = emu.keys.get("reader", "q")
    assert policy is not None
    token = sign("sb://h/", "reader", policy.primary_key, time.time() + 60)
    with pytest.raises(TokenError, match="unknown key name 'reader'"):
        validate(token, keys=emu.keys, resource="sb://h/q")


def test_topic_key_reaches_its_subscriptions(emu: Emulator) -> None:
    send(_client(emu.connection_string), "t", "event")
    with _client(emu.policy_connection_string("subs", "t")) as c:
        with c.get_subscription_receiver("t", "all", max_wait_time=3) as r:
            (m,) = r.receive_messages(max_message_count=1, max_wait_time=3)
            r.complete_message(m)
    assert emu.broker.counts("t/subscriptions/all")["active"] == 0


def test_namespace_listen_policy_reaches_every_entity_for_listen_only(emu: Emulator) -> None:
    send(_client(emu.connection_string), "short", "x")
    with _client(emu.policy_connection_string("ns-listen")) as c:
        with c.get_queue_receiver("short") as r:
            assert [str(m) for m in r.peek_messages(max_message_count=5, sequence_number=1)] == ["x"]
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"), c.get_queue_sender("short") as s:
            s.send_messages(ServiceBusMessage("no"))
    assert emu.broker.counts("short")["active"] == 1


def test_expired_token_is_refused(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """The same policy's token works while valid and is refused once expired (the emulator logs why:
    the SDK reports a refused put-token without the reason)."""
    policy = emu.keys.get("writer", "q")
    assert policy is not None
    audience = f"sb://{emu.address}:{emu.port}/q"
    valid = sign(audience, "writer", policy.primary_key, time.time() + 600)
    with ServiceBusClient(f"{emu.address}:{emu.port}", AzureSasCredential(valid), retry_total=0, **_plain(emu)) as c:
        with c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("in time"))
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    expired = sign(audience, "writer", policy.primary_key, time.time() - 5)
    with (
        ServiceBusClient(f"{emu.address}:{emu.port}", AzureSasCredential(expired), retry_total=0, **_plain(emu)) as c,
        pytest.raises(REFUSED_TOKEN),
    ):
        with c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("late"))
    assert any("the token has expired" in r.getMessage() for r in caplog.records)
    assert emu.broker.counts("q")["active"] == 1


def _plain(emu: Emulator) -> dict[str, Any]:
    """A client built from a credential dials TLS on 5671; the emulator here speaks plain AMQP."""
    from azure.servicebus import TransportType

    return {
        "custom_endpoint_address": f"sb://{emu.address}:{emu.port}",
        "transport_type": TransportType.Amqp,
        "use_tls": False,
    }


def _admin_get(emu: Emulator, path: str, token: str) -> tuple[int, str]:
    request = urllib.request.Request(f"{emu.admin_url}/{path}?api-version=2021-05", headers={"Authorization": token})
    return http_reply(request)


def test_administration_api_needs_manage(emu: Emulator) -> None:
    audience = f"sb://{emu.address}:{emu.port}/q"
    keys = {name: emu.keys.get(name, "q") for name in ("owner", "reader")}
    owner, reader = (sign(audience, n, p.primary_key, time.time() + 60) for n, p in keys.items() if p)
    assert _admin_get(emu, "q", owner)[0] == 200
    status, text = _admin_get(emu, "q", reader)
    assert status == 401 and "Manage" in text
    assert _admin_get(emu, "short", owner)[0] == 401  # its entity only


class _TypedToken:
    """A credential whose token the SDK puts on $cbs with ``token_type`` (a str, so the SDK passes
    it through as given; bytes 'servicebus.windows.net:sastoken' makes it put 'jwt')."""

    def __init__(self, token: str, token_type: str) -> None:
        self.token, self.token_type = token, token_type

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


@pytest.mark.parametrize(
    ("token_type", "sas", "accepted"),
    [
        ("servicebus.windows.net:sastoken", True, True),
        ("jwt", True, True),  # what azure-servicebus (pyamqp) sends for every key's token
        ("servicebus.windows.net:sastoken", False, False),  # a sastoken must be a SAS
        ("swt", True, False),  # not a type Service Bus takes
    ],
)
def test_token_types(emu: Emulator, token_type: str, sas: bool, accepted: bool) -> None:
    audience = f"sb://{emu.address}:{emu.port}/q"
    token = sign(audience, "RootManageSharedAccessKey", "SAS_KEY_VALUE", time.time() + 600) if sas else "e30.e30.sig"
    with _client(emu.connection_string) as c:
        c._credential = _TypedToken(token, token_type)
        if accepted:
            with c.get_queue_sender("q") as s:
                s.send_messages(ServiceBusMessage("typed"))
        else:
            with pytest.raises(REFUSED_TOKEN), c.get_queue_sender("q") as s:  # the token is refused at open
                s.send_messages(ServiceBusMessage("typed"))
    assert emu.broker.counts("q")["active"] == (1 if accepted else 0)


def test_added_policy_and_its_connection_string(emu: Emulator) -> None:
    emu.add_policy("late-writer", ["Send"], "short")
    conn = emu.policy_connection_string("late-writer", "short")
    assert "SharedAccessKeyName=late-writer" in conn and "EntityPath=short" in conn
    with _client(conn) as c, c.get_queue_sender("short") as s:
        s.send_messages(ServiceBusMessage("ok"))
    assert emu.broker.counts("short")["active"] == 1
    with pytest.raises(KeyError, match="no policy"):
        emu.policy_connection_string("nobody", "short")
    with pytest.raises(ValueError, match="topic"):
        emu.add_policy("x", ["Listen"], "t/subscriptions/all")
    assert "late-writer" in json.dumps([p.name for p in emu.policies])


def test_keyring_of_plain_keys_grants_everything() -> None:
    ring = KeyRing.of({"root": "k"})
    assert ring.get("root") == Policy("root", "k", "k")
    assert "k" not in repr(ring) + repr(ring.get("root"))
