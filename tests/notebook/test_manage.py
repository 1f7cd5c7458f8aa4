"""Entity management: core.manage and %sb_entities create / update / delete / rules, against the
embedded emulator's administration API through the SDK."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import EntityNotFoundError, InvalidInputError
from sbnotebook.core.operations.manage import duration
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import drain, magic_fails, send
from tests.shell import answer, line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def test_durations() -> None:
    assert duration("30s") == dt.timedelta(seconds=30) and duration("PT1M") == dt.timedelta(minutes=1)
    assert duration("7d") == dt.timedelta(days=7) and duration(2.5) == dt.timedelta(seconds=2.5)
    assert duration("P1DT2H") == dt.timedelta(days=1, hours=2)
    with pytest.raises(InvalidInputError, match="30s, 5m"):
        duration("soon")


def test_core_creates_updates_and_deletes_entities_and_rules(emulator: Emulator, client: ServiceBusClient) -> None:
    conn = core.connect(emulator.connection_string)
    made = core.create_entity(
        "made", properties={"lock_duration": "5s", "max_delivery_count": "4", "requires_session": True}, connection=conn
    )
    assert made["lock_duration"] == dt.timedelta(seconds=5) and made["requires_session"] is True
    with pytest.raises(InvalidInputError, match="exists already"):
        core.create_entity("made", connection=conn)
    with pytest.raises(InvalidInputError, match="has no property 'colour'"):
        core.create_entity("other", properties={"colour": "red"}, connection=conn)
    change = core.update_entity("made", {"max_delivery_count": 9}, connection=conn)
    assert change["before"] == {"max_delivery_count": 4} and change["after"] == {"max_delivery_count": 9}
    assert core.entity_properties("made", connection=conn)["max_delivery_count"] == 9
    with pytest.raises(InvalidInputError, match="cannot change after"):
        core.update_entity("made", {"requires_session": False}, connection=conn)
    core.create_entity("news", kind="topic", properties={"default_message_time_to_live": "1h"}, connection=conn)
    core.create_entity("news/subscriptions/eu", connection=conn)
    core.delete_rule("news/subscriptions/eu", "$Default", connection=conn)
    core.create_rule("news/subscriptions/eu", "eu", sql="region = 'eu'", action="SET tier = 'gold'", connection=conn)
    core.create_rule("news/subscriptions/eu", "orders", correlation={"subject": "order"}, connection=conn)
    rules = {r.name: r for r in core.list_rules("news/subscriptions/eu", connection=conn)}
    assert rules["eu"].filter_kind == "sql" and rules["eu"].filter == "region = 'eu'"
    assert rules["eu"].action == "SET tier = 'gold'"
    assert rules["orders"].filter_kind == "correlation" and "label='order'" in rules["orders"].filter
    with client.get_topic_sender("news") as s:
        s.send_messages(
            [
                ServiceBusMessage("a", application_properties={"region": "eu"}),
                ServiceBusMessage("b", subject="order"),
                ServiceBusMessage("c", application_properties={"region": "us"}),
            ]
        )
    with client.get_subscription_receiver("news", "eu", max_wait_time=1) as r:
        got = r.receive_messages(max_message_count=5, max_wait_time=30)
    assert sorted(str(m) for m in got) == ["a", "b"]
    assert next(m for m in got if str(m) == "a").application_properties[b"tier"] == b"gold"
    with pytest.raises(InvalidInputError, match="one of them"):
        core.create_rule("news/subscriptions/eu", "x", connection=conn)
    with pytest.raises(InvalidInputError, match="subscriptions"):
        core.list_rules("news", connection=conn)
    assert core.delete_entity("news/subscriptions/eu", connection=conn) == "subscription"
    assert core.delete_entity("news", connection=conn) == "topic"
    assert core.delete_entity("made", connection=conn) == "queue"
    with pytest.raises(EntityNotFoundError):
        core.delete_entity("made", connection=conn)


def test_entities_magic_create_update_show_and_delete_after_asking(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    line(ip, "sb_entities create queue jobs --lock-duration 1m --max-delivery-count 5 --requires-session --ttl 2h")
    assert "Created queue jobs." in capsys.readouterr().out
    shown = line(ip, "sb_entities show jobs").set_index("property")["value"]
    assert shown["lock_duration"] == "0:01:00" and shown["requires_session"] == "True"
    assert shown["default_message_time_to_live"] == "2:00:00"
    line(ip, "sb_entities update jobs --max-delivery-count 8 --property user_metadata=team-a")
    out = capsys.readouterr().out
    assert "jobs: max_delivery_count 5 -> 8" in out and "user_metadata None -> team-a" in out
    assert "cannot change later" in magic_fails(ip, "sb_entities update jobs --requires-session")
    assert "30s, 5m" in magic_fails(ip, "sb_entities update jobs --lock-duration soon")
    assert "exists already" in magic_fails(ip, "sb_entities create queue jobs")
    assert "queue, topic or subscription" in magic_fails(ip, "sb_entities create table jobs")
    with client.get_queue_sender("jobs") as s:
        s.send_messages(ServiceBusMessage("x", session_id="s"))
    answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_entities delete jobs").startswith("nothing done:")
    assert "Delete queue jobs holding 1 active" in capsys.readouterr().out
    assert "jobs" in line(ip, "sb_entities")["entity"].tolist()
    answer(monkeypatch, "delete")
    line(ip, "sb_entities delete jobs")
    assert "Deleted queue jobs." in capsys.readouterr().out
    assert "jobs" not in line(ip, "sb_entities")["entity"].tolist()
    assert magic_fails(ip, "sb_entities delete jobs --yes").startswith("EntityNotFoundError")


def test_entities_magic_topics_subscriptions_and_rules(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    line(ip, "sb_entities create topic news --ttl 1d")
    line(ip, "sb_entities create subscription news/subscriptions/eu --max-delivery-count 3")
    assert capsys.readouterr().out.count("Created") == 2
    rules = line(ip, "sb_entities rules news/subscriptions/eu")
    assert rules["name"].tolist() == ["$Default"]
    line(ip, "sb_entities rule add news/subscriptions/eu eu --sql \"region = 'eu'\" --action \"SET tier = 'gold'\"")
    assert "Added rule eu to news/subscriptions/eu: sql filter region = 'eu'." in capsys.readouterr().out
    correlation = '{"subject": "order", "properties": {"n": 1}}'
    line(ip, f"sb_entities rule add news/subscriptions/eu orders --correlation '{correlation}'")
    line(ip, "sb_entities rule delete news/subscriptions/eu '$Default' --yes")
    rules = line(ip, "sb_entities rules news/subscriptions/eu").set_index("name")
    assert sorted(rules.index) == ["eu", "orders"] and rules.loc["eu", "action"] == "SET tier = 'gold'"
    capsys.readouterr()
    assert "JSON object" in magic_fails(ip, "sb_entities rule add news/subscriptions/eu bad --correlation '[1]'")
    assert "one of them" in magic_fails(
        ip, "sb_entities rule add news/subscriptions/eu bad --sql 'a = 1' --correlation '{}'"
    )
    assert "has no rule 'nosuch'; its rules: eu, orders" in magic_fails(
        ip, "sb_entities rule delete news/subscriptions/eu nosuch --yes"
    )
    with client.get_topic_sender("news") as s:
        s.send_messages([ServiceBusMessage("a", application_properties={"region": "eu"}), ServiceBusMessage("z")])
    with client.get_subscription_receiver("news", "eu", max_wait_time=1) as r:
        assert [str(m) for m in r.receive_messages(max_wait_time=30)] == ["a"]
    assert "is not show, create" in magic_fails(ip, "sb_entities frobnicate")
    line(ip, "sb_entities delete news --yes")
    assert "Deleted topic news." in capsys.readouterr().out
    send(client, "q", "still here")
    assert [str(m) for m in drain(client, "q")] == ["still here"]


def test_entity_panel_creates_updates_adds_rules_and_deletes_after_the_name_is_typed(
    ip: Any, sb: SbMagics, client: ServiceBusClient
) -> None:
    from sbnotebook.notebook.widgets.entities import EntityPanel

    panel = line(ip, "sb_entities --panel")
    assert isinstance(panel, EntityPanel) and panel.connection is sb.connection
    assert "q" in [value for _, value in panel.list.options]
    panel.name.value, panel.props.value = "jobs", '{"max_delivery_count": 4}'
    panel.create()
    assert panel.selected == "jobs" and "max_delivery_count" in panel.detail.value
    panel.props.value = "{broken"
    panel.update_button.click()
    assert "not valid JSON" in panel.status.value
    panel.props.value = '{"max_delivery_count": 6}'
    panel.update()
    assert "max_delivery_count 4 -&gt; 6" in panel.status.value
    assert core.entity_properties("jobs", connection=sb.conn())["max_delivery_count"] == 6
    panel.list.value = "t/subscriptions/all"
    assert panel.rules_box.layout.display == "flex" and "$Default" in panel.detail.value
    panel.rule_name.value, panel.rule_sql.value = "eu", "region = 'eu'"
    panel.add_rule()
    assert "sql: region = &#x27;eu&#x27;" in panel.detail.value
    panel.delete_rule()
    assert [r.name for r in core.list_rules("t/subscriptions/all", connection=sb.conn())] == ["$Default"]
    panel.list.value = "jobs"
    panel.ask_delete()
    assert (
        panel.confirm_row.layout.display == "flex"
        and "Delete queue jobs with 0 active" in panel.confirm_row.question.value
    )
    panel.confirm_row.box.value = "job"
    panel.confirm_row.confirm_button.click()
    assert "nothing was deleted" in panel.status.value
    assert "jobs" in [e.entity for e in core.list_entities(connection=sb.conn())]
    assert panel.confirm_delete("jobs") == "queue"
    assert "jobs" not in [value for _, value in panel.list.options] and "Deleted queue jobs." in panel.status.value
