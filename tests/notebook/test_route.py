"""%sb_route as a user types it: why the EU subscription did not get order 17 (the answer checked
against what the broker delivered), a message typed in a cell, a what-if rule, a DLQ's --summary."""

from __future__ import annotations

from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

from sbnotebook import core
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.conftest import entity_keys_emulator
from tests.helpers import dead_letter, magic_fails, subscription_with_one_rule
from tests.shell import line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def _orders(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    admin.create_topic("orders")
    subscription_with_one_rule(admin, "orders", "eu", "eu", filter=SqlRuleFilter("region IN ('eu', 'uk')"))
    subscription_with_one_rule(admin, "orders", "big", "big", filter=SqlRuleFilter("total > 100"))
    admin.create_queue("orders-audit")
    sent = [("16", {"region": "eu", "total": 50}), ("17", {"region": "EU", "total": 150})]
    for entity in ("orders", "orders-audit"):
        sender = client.get_topic_sender(entity) if entity == "orders" else client.get_queue_sender(entity)
        with sender:
            sender.send_messages([ServiceBusMessage("{}", message_id=i, application_properties=p) for i, p in sent])


def test_why_eu_did_not_get_order_17(
    ip: Any, sb: SbMagics, admin: ServiceBusAdministrationClient, client: ServiceBusClient, capsys: Any
) -> None:
    _orders(admin, client)
    frame = line(ip, "sb_route orders orders-audit")
    printed = capsys.readouterr().out
    assert "eu: does not get it\n      eu: region IN ('eu', 'uk') is false: user.region was 'EU'" in printed
    # What the broker delivered agrees: eu holds 16, not 17; big holds 17.
    with client.get_subscription_receiver("orders", "eu") as r:
        assert [m.message_id for m in r.peek_messages(10)] == ["16"]
    with client.get_subscription_receiver("orders", "big") as r:
        assert [m.message_id for m in r.peek_messages(10)] == ["17"]
    got = frame[frame.matched][["message_id", "subscription"]].values.tolist()
    assert got == [["16", "eu"], ["17", "big"]]


def test_a_typed_message_and_a_what_if_rule(
    ip: Any, sb: SbMagics, admin: ServiceBusAdministrationClient, client: ServiceBusClient, capsys: Any
) -> None:
    _orders(admin, client)
    props = '{"message_id": "18", "region": "uk", "total": 7}'
    ip.run_cell_magic("sb_route", f"orders --properties '{props}' --rule \"total < 10\"", '{"n": 18}')
    printed = capsys.readouterr().out
    assert "eu: gets it (rules: *)" in printed and "what if: total < 10: gets it" in printed
    assert "big: does not get it\n      big: total > 100 is false: user.total was 7" in printed
    said = magic_fails(ip, 'sb_route orders orders-audit --rule "total >"')
    assert "expected a value at position 7" in said


def test_a_frame_of_many_messages_prints_the_first_twenty_and_writes_every_row_to_jsonl(
    ip: Any, sb: SbMagics, admin: ServiceBusAdministrationClient, client: ServiceBusClient, capsys: Any, tmp_path: Any
) -> None:
    _orders(admin, client)
    ip.user_ns["frame"] = core.to_dataframe(
        [{"message_id": str(i), "application_properties": {"region": "eu", "total": i}} for i in range(25)]
    )
    out = tmp_path / "routed.jsonl"
    frame = line(ip, f"sb_route orders frame --jsonl {out}")
    printed = capsys.readouterr().out
    assert "message 19 19:" in printed and "message 20 20:" not in printed
    assert "... 5 more messages: the DataFrame returned holds them all." in printed
    assert f"50 rows written to {out}" in printed
    assert len(frame) == 50 and len(out.read_text().splitlines()) == 50


def test_a_dead_letter_queue_s_summary(
    ip: Any, sb: SbMagics, admin: ServiceBusAdministrationClient, client: ServiceBusClient, capsys: Any
) -> None:
    _orders(admin, client)
    dead_letter(client, "orders-audit", 2, "bad")
    line(ip, "sb_route orders orders-audit/$deadletterqueue --summary")
    printed = capsys.readouterr().out
    assert "2 messages from orders-audit/$deadletterqueue sent to orders" in printed
    assert "  eu          1 copy\n  big         1 copy\n  (nowhere)   0 messages" in printed
    counts = core.route("orders", "orders-audit/$deadletterqueue", resubmitted=True, connection=sb.conn()).summary()
    assert counts == {"eu": 1, "big": 1, "(nowhere)": 0}


def test_a_resubmit_to_the_topic_shows_where_the_copies_would_go(
    ip: Any, sb: SbMagics, admin: ServiceBusAdministrationClient, client: ServiceBusClient, capsys: Any
) -> None:
    _orders(admin, client)
    with client.get_subscription_receiver("orders", "eu") as r:
        for m in r.receive_messages(1, max_wait_time=5):
            r.dead_letter_message(m, reason="bad")
    line(ip, "sb_resubmit orders/subscriptions/eu --target orders --allow-fan-out --yes")
    printed = capsys.readouterr().out
    assert "1 messages from orders/subscriptions/eu/$deadletterqueue sent to orders" in printed
    assert "  eu          1 copy\n  big         0 copies\n  (nowhere)   0 messages" in printed
    # ... and the resubmit did what the summary said: order 16 (a fresh message id) is back in eu, not in big.
    with client.get_subscription_receiver("orders", "eu") as r:
        assert [m.application_properties[b"total"] for m in r.peek_messages(10)] == [50]
    with client.get_subscription_receiver("orders", "big") as r:
        assert [m.message_id for m in r.peek_messages(10)] == ["17"]


def test_a_key_without_manage_is_told_in_one_line_and_a_topology_file_answers_offline(
    ip: Any, capsys: Any, tmp_path: Any
) -> None:
    with entity_keys_emulator() as emu:
        with shell.loaded(ip, capsys, emu.policy_connection_string("reader", "q")):
            core.export_topology(tmp_path / "c.json", connection=emu.connection_string)
            said = magic_fails(ip, 'sb_route t --properties \'{"color": "red"}\'')
            assert "'Manage' right" in said and "SharedAccessKey" not in said
            frame = line(ip, f'sb_route t --properties \'{{"color": "red"}}\' --topology {tmp_path / "c.json"}')
            assert set(frame.subscription) == {"all", "sql", "corr"}
