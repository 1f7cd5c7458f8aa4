"""Shared access policies made through the administration API (``authorization_rules=[...]`` of
``create_queue`` / ``create_topic`` / ``update_*``), through the real SDK: kept and shown by
``get_*`` (read by a second admin client), the rule's key good for exactly its rights and refused
once an update leaves the rule out; bad rules refused with a 400 that never quotes a key; kept
across a restart with a data directory."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
)
from azure.servicebus.management import (
    AccessRights,
    AuthorizationRule,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleFilter,
)

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator, connection_string
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import send

REFUSED_TOKEN = (ServiceBusAuthenticationError, ServiceBusConnectionError)  # the SDK reports a 401 on $cbs as either
RULE_TYPE = "SharedAccessAuthorizationRule"


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def rule(name: str, rights: list[Any], primary: str | None = None, secondary: str | None = None) -> AuthorizationRule:
    """A rule as azure-servicebus 7.15 sends one (its type given: without it Service Bus answers 400)."""
    return AuthorizationRule(
        type=RULE_TYPE,
        claim_type="SharedAccessKey",
        claim_value="None",
        key_name=name,
        rights=rights,
        primary_key=primary or key(),
        secondary_key=secondary or key(),
    )


def _client(emu: Emulator, name: str, secret: str, entity: str) -> ServiceBusClient:
    conn = connection_string(emu.address, emu.port or 0, name, secret, entity=entity)
    return ServiceBusClient.from_connection_string(conn, retry_total=0)


@pytest.fixture
def other_admin(emulator: Emulator) -> Iterator[ServiceBusAdministrationClient]:
    """A second administration client: what the first one changed, read independently."""
    with emulator_admin_client(emulator.connection_string) as a:
        yield a


def test_a_listen_rule_made_by_create_queue_peeks_and_receives_and_cannot_send(
    emulator: Emulator, admin: ServiceBusAdministrationClient, other_admin: ServiceBusAdministrationClient
) -> None:
    primary, secondary = key(), key()
    admin.create_queue("guarded", authorization_rules=[rule("reader", [AccessRights.listen], primary, secondary)])
    (shown,) = other_admin.get_queue("guarded").authorization_rules
    assert (shown.type, shown.claim_type, shown.claim_value) == (RULE_TYPE, "SharedAccessKey", "None")
    assert (shown.key_name, shown.rights) == ("reader", ["Listen"])
    assert (shown.primary_key, shown.secondary_key) == (primary, secondary)
    assert shown.created_at_utc is not None and shown.modified_at_utc == shown.created_at_utc
    with ServiceBusClient.from_connection_string(emulator.connection_string) as root:
        send(root, "guarded", "a", "b")
    with _client(emulator, "reader", primary, "guarded") as c:
        with c.get_queue_receiver("guarded", max_wait_time=3) as r:
            assert [str(m) for m in r.peek_messages(max_message_count=10, sequence_number=1)] == ["a", "b"]
            (got,) = r.receive_messages(max_message_count=1, max_wait_time=3)
            r.complete_message(got)
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"), c.get_queue_sender("guarded") as s:
            s.send_messages(ServiceBusMessage("not allowed"))
    with _client(emulator, "reader", secondary, "guarded") as c, c.get_queue_receiver("guarded") as r:
        assert [str(m) for m in r.peek_messages(max_message_count=10, sequence_number=1)] == ["b"]
    assert emulator.broker.counts("guarded") == {"active": 1, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_update_queue_without_the_rule_takes_its_key_away(
    emulator: Emulator, admin: ServiceBusAdministrationClient, other_admin: ServiceBusAdministrationClient
) -> None:
    reader, writer = key(), key()
    admin.create_queue("guarded", authorization_rules=[rule("reader", [AccessRights.listen], reader)])
    queue = admin.get_queue("guarded")
    queue.authorization_rules = [rule("writer", [AccessRights.send], writer)]  # the reader's rule left out
    admin.update_queue(queue)
    assert [r.key_name for r in other_admin.get_queue("guarded").authorization_rules] == ["writer"]
    with _client(emulator, "reader", reader, "guarded") as c, pytest.raises(REFUSED_TOKEN):
        with c.get_queue_receiver("guarded", max_wait_time=1) as r:
            r.peek_messages(max_message_count=1, sequence_number=1)
    with _client(emulator, "writer", writer, "guarded") as c, c.get_queue_sender("guarded") as s:
        s.send_messages(ServiceBusMessage("by the writer"))
    queue = admin.get_queue("guarded")
    queue.authorization_rules = None  # the SDK leaves the element out: the entity keeps no rule
    admin.update_queue(queue)
    assert other_admin.get_queue("guarded").authorization_rules is None
    with _client(emulator, "writer", writer, "guarded") as c, pytest.raises(REFUSED_TOKEN):
        with c.get_queue_sender("guarded") as s:
            s.send_messages(ServiceBusMessage("too late"))
    assert emulator.broker.counts("guarded")["active"] == 1


def test_an_unchanged_rule_keeps_its_times_and_a_changed_one_is_modified(
    admin: ServiceBusAdministrationClient,
) -> None:
    admin.create_queue("guarded", authorization_rules=[rule("reader", [AccessRights.listen])])
    queue = admin.get_queue("guarded")
    (before,) = queue.authorization_rules
    queue.max_delivery_count = 3
    admin.update_queue(queue)  # the rule sent back as it was
    (same,) = admin.get_queue("guarded").authorization_rules
    assert (same.created_at_utc, same.modified_at_utc, same.primary_key) == (
        before.created_at_utc,
        before.modified_at_utc,
        before.primary_key,
    )
    queue = admin.get_queue("guarded")
    queue.authorization_rules[0].rights = ["Listen", "Send"]
    admin.update_queue(queue)
    (changed,) = admin.get_queue("guarded").authorization_rules
    assert changed.rights == ["Listen", "Send"] and changed.created_at_utc == before.created_at_utc
    assert changed.modified_at_utc > before.modified_at_utc


def test_a_topic_rule_reaches_its_subscriptions_until_removed(
    emulator: Emulator, admin: ServiceBusAdministrationClient
) -> None:
    listen = key()
    admin.create_topic("news", authorization_rules=[rule("subs", [AccessRights.listen], listen)])
    admin.create_subscription("news", "all")
    with ServiceBusClient.from_connection_string(emulator.connection_string) as root:
        with root.get_topic_sender("news") as s:
            s.send_messages(ServiceBusMessage("event"))
    with _client(emulator, "subs", listen, "news") as c:
        with c.get_subscription_receiver("news", "all", max_wait_time=3) as r:
            (m,) = r.receive_messages(max_message_count=1, max_wait_time=3)
            r.complete_message(m)
        with pytest.raises(ServiceBusAuthorizationError, match="'Send' claim"), c.get_topic_sender("news") as s:
            s.send_messages(ServiceBusMessage("no"))
    admin.update_topic(admin.get_topic("news"), authorization_rules=[])
    with _client(emulator, "subs", listen, "news") as c, pytest.raises(REFUSED_TOKEN):
        with c.get_subscription_receiver("news", "all", max_wait_time=1) as r:
            r.receive_messages(max_message_count=1, max_wait_time=1)
    assert emulator.broker.counts("news/subscriptions/all")["active"] == 0


def test_deleting_the_queue_deletes_its_rules(emulator: Emulator, admin: ServiceBusAdministrationClient) -> None:
    secret = key()
    admin.create_queue("guarded", authorization_rules=[rule("reader", [AccessRights.listen], secret)])
    admin.delete_queue("guarded")
    admin.create_queue("guarded")
    assert admin.get_queue("guarded").authorization_rules is None
    with _client(emulator, "reader", secret, "guarded") as c, pytest.raises(REFUSED_TOKEN):
        with c.get_queue_receiver("guarded", max_wait_time=1) as r:
            r.peek_messages(max_message_count=1, sequence_number=1)


SHORT = "c2hvcnQ="  # base64, but 8 characters


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ([AuthorizationRule(key_name="x", rights=["Listen"], primary_key=key(), secondary_key=key())], "i:type"),
        ([rule("x", ["Listen"], primary=SHORT)], "PrimaryKey is not a 44-character base64 key"),
        ([rule("x", ["Listen"], secondary="!" * 44)], "SecondaryKey is not a 44-character base64 key"),
        ([rule("x", [])], "needs Rights"),
        ([rule("x", ["Read"])], "needs Rights"),
        ([rule("x", ["Listen", "Listen"])], "each once"),
        ([rule("x", ["Manage"])], "Manage permission should also include Send and Listen"),
        ([rule("x", ["Listen"]), rule("X", ["Send"])], "given twice"),
        ([rule("a b", ["Listen"])], "KeyName of 1 to 256"),
        ([rule("x" * 257, ["Listen"])], "KeyName of 1 to 256"),
        ([rule(f"r{i}", ["Listen"]) for i in range(13)], "at most 12"),
        (
            [AuthorizationRule(type=RULE_TYPE, key_name="x", rights=["Listen"], primary_key=key())],
            "needs a SecondaryKey",
        ),
        ([AuthorizationRule(type=RULE_TYPE, claim_type="Other", key_name="x", rights=["Listen"])], "ClaimType"),
    ],
)
def test_a_bad_rule_is_refused_with_a_400_saying_why(
    admin: ServiceBusAdministrationClient,
    other_admin: ServiceBusAdministrationClient,
    rules: list[AuthorizationRule],
    says: str,
) -> None:
    with pytest.raises(HttpResponseError) as refused:
        admin.create_queue("guarded", authorization_rules=rules)
    assert refused.value.status_code == 400 and says in str(refused.value)
    assert str(refused.value).startswith("SubCode=40000.")
    assert not any(r.primary_key and r.primary_key in str(refused.value) for r in rules)
    with pytest.raises(ResourceNotFoundError):
        other_admin.get_queue("guarded")  # nothing made
    admin.create_queue("guarded", authorization_rules=[rule("kept", ["Send"])])
    with pytest.raises(HttpResponseError) as refused:
        admin.update_queue(admin.get_queue("guarded"), authorization_rules=rules)
    assert refused.value.status_code == 400 and says in str(refused.value)
    assert [r.key_name for r in other_admin.get_queue("guarded").authorization_rules] == ["kept"]


def test_keys_stay_out_of_logs_reprs_and_errors(
    emulator: Emulator, admin: ServiceBusAdministrationClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sbnotebook.emulator")
    secret, bad = key(), "QUJD" * 5  # base64, 20 characters: refused
    admin.create_queue("guarded", authorization_rules=[rule("reader", ["Listen"], secret)])
    admin.get_queue("guarded")
    with pytest.raises(HttpResponseError) as refused:
        admin.create_queue("other", authorization_rules=[rule("reader", ["Listen"], bad)])
    with _client(emulator, "reader", bad, "guarded") as c, pytest.raises(REFUSED_TOKEN):
        with c.get_queue_receiver("guarded", max_wait_time=1) as r:
            r.peek_messages(max_message_count=1, sequence_number=1)
    seen = " ".join(r.getMessage() for r in caplog.records)
    shown = seen + repr(emulator.policies) + repr(emulator.broker.entity("guarded").props) + str(refused.value)
    assert "reader" in repr(emulator.policies)
    assert secret not in shown and bad not in shown


WHEN = dt.datetime(2020, 7, 5, 11, 12, 13)


def test_rules_and_properties_are_kept_across_a_restart_with_a_data_directory(tmp_path: Path) -> None:
    secret = key()
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.create_queue(
            "guarded",
            authorization_rules=[rule("reader", ["Listen"], secret)],
            max_delivery_count=4,
            user_metadata="kept",
            auto_delete_on_idle=dt.timedelta(hours=1),
            enable_batched_operations=False,
        )
        admin.update_queue(admin.get_queue("q"), authorization_rules=[rule("late", ["Send"])])
        admin.create_subscription("t", "typed", status="ReceiveDisabled")
        admin.create_rule("t", "typed", "when", filter=SqlRuleFilter("at = @at", parameters={"@at": WHEN}))
        admin.create_rule("t", "typed", "never", filter=FalseRuleFilter())
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_subscription("t", "typed").status == "ReceiveDisabled"
        assert dict(admin.get_rule("t", "typed", "when").filter.parameters) == {"@at": WHEN}  # a dateTime still
        assert type(admin.get_rule("t", "typed", "never").filter) is FalseRuleFilter
        guarded = admin.get_queue("guarded")
        assert [(r.key_name, r.rights, r.primary_key) for r in guarded.authorization_rules] == [
            ("reader", ["Listen"], secret)
        ]
        assert (guarded.max_delivery_count, guarded.user_metadata) == (4, "kept")
        assert (guarded.auto_delete_on_idle, guarded.enable_batched_operations) == (dt.timedelta(hours=1), False)
        assert [r.key_name for r in admin.get_queue("q").authorization_rules] == ["late"]
        with _client(emu, "reader", secret, "guarded") as c, c.get_queue_receiver("guarded") as r:
            assert r.peek_messages(max_message_count=1, sequence_number=1) == []
        admin.update_queue(admin.get_queue("guarded"), authorization_rules=None)
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with _client(emu, "reader", secret, "guarded") as c, pytest.raises(REFUSED_TOKEN):
            with c.get_queue_receiver("guarded", max_wait_time=1) as r:
                r.peek_messages(max_message_count=1, sequence_number=1)


def test_a_journal_from_before_policies_were_kept_leaves_the_topology_s_policies(tmp_path: Path) -> None:
    """An entity the API changed was journaled without its policies until now: restored from such a
    row, it keeps the policies its topology file gives it."""
    config = copy.deepcopy(TEST_TOPOLOGY)
    queue = next(q for q in config["UserConfig"]["Namespaces"][0]["Queues"] if q["Name"] == "q")
    secret = key()
    queue["AuthorizationRules"] = [{"KeyName": "reader", "Rights": ["Listen"], "PrimaryKey": secret}]
    with Emulator(config, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.update_queue(admin.get_queue("q"), max_delivery_count=3)
    with sqlite3.connect(tmp_path / "broker.sqlite3") as db:
        (doc,) = db.execute("SELECT doc FROM entities WHERE path = 'q'").fetchone()
        old = json.loads(doc)
        assert [p["name"] for p in old.pop("policies")] == ["reader"]
        db.execute("UPDATE entities SET doc = ? WHERE path = 'q'", (json.dumps(old),))
    with Emulator(config, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_queue("q").max_delivery_count == 3
        with _client(emu, "reader", secret, "q") as c, c.get_queue_receiver("q") as r:
            assert r.peek_messages(max_message_count=1, sequence_number=1) == []
