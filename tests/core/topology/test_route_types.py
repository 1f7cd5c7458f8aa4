"""The properties after a rule's action keep the types the broker delivers them with, in
``core.route``'s rows, its DataFrame and the JSON lines it writes: a copy sent through the emulator's
topic and received with the SDK is the reference, read apart from the kit."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleAction, TrueRuleFilter
from proton import timestamp

from sbnotebook import core
from sbnotebook.emulator import Emulator

ACTION = "SET user.n = 1; SET user.f = 1.5; SET user.b = TRUE; SET user.z = NULL; SET user.s = 'x'; " + (
    "SET user.w = user.when"
)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
WHEN = dt.datetime(2026, 11, 29, 3, 12, 5, 250000, tzinfo=dt.UTC)


def _delivered(emulator: Emulator) -> dict[str, Any]:
    """The copy's properties as the broker holds them to deliver, proton's AMQP types read as Python's
    (a timestamp is a datetime; the SDK would hand it over as milliseconds, the kit's records as a datetime)."""
    (stored,) = emulator.broker.subscription("typed", "acting").store.messages.values()
    return {
        str(k): EPOCH + dt.timedelta(milliseconds=int(v)) if isinstance(v, timestamp) else v
        for k, v in stored.application_properties.items()
    }


def test_an_actions_properties_keep_the_broker_s_types_in_rows_frame_and_jsonl(
    emulator: Emulator, admin: ServiceBusAdministrationClient, client: ServiceBusClient, tmp_path: Path
) -> None:
    admin.create_topic("typed")
    admin.create_subscription("typed", "acting")
    admin.delete_rule("typed", "acting", "$Default")
    admin.create_rule("typed", "acting", "set-them", filter=TrueRuleFilter(), action=SqlRuleAction(ACTION))
    admin.create_queue("typed-src")
    for entity in ("typed", "typed-src"):
        sender = client.get_topic_sender(entity) if entity == "typed" else client.get_queue_sender(entity)
        with sender:
            sender.send_messages(ServiceBusMessage("{}", message_id="m1", application_properties={"when": WHEN}))
    broker = _delivered(emulator)
    assert broker["n"] == 1 and broker["b"] is True and broker["z"] is None and broker["w"] == WHEN  # the reference

    result = core.route("typed", "typed-src", connection=emulator.connection_string)
    (row,) = [r for r in result.rows() if r["matched"]]
    props = {k: v for k, v in row["properties"].items() if not k.startswith("sys.")}
    assert props == broker
    assert {k: type(v) for k, v in props.items()} == {k: type(v) for k, v in broker.items()}

    (framed,) = result.to_pandas().query("matched").properties
    assert {k: (type(v), v) for k, v in framed.items() if not k.startswith("sys.")} == {
        k: (type(v), v) for k, v in broker.items()
    }

    path = tmp_path / "routed.jsonl"
    assert result.to_jsonl(path) == len(result.rows())
    (line,) = [json.loads(x) for x in path.read_text().splitlines() if json.loads(x)["matched"]]
    assert {k: line["property_types"][k] for k in broker} == {
        "when": "timestamp",
        "n": "long",
        "f": "double",
        "b": "boolean",
        "z": "null",
        "s": "string",
        "w": "timestamp",
        "RuleName": "string",
    }
    assert line["properties"]["n"] == 1 and line["properties"]["b"] is True and line["properties"]["z"] is None
    assert dt.datetime.fromisoformat(line["properties"]["w"]) == WHEN


def test_an_explanation_remembered_for_one_value_is_not_given_for_an_equal_one_of_another_type() -> None:
    """1, 1.0 and TRUE are one dict key to Python; the words that say what was seen differ."""
    rules = [core.RuleSpec("s", "one", sql="x = 2")]
    given = [{"message_id": str(i), "application_properties": {"x": v}} for i, v in enumerate([1, 1.0, True, 1])]
    result = core.route("t", given, rules=rules)
    assert [r.why_not for r in result.routed] == [
        ("one: x = 2 is false: user.x was 1",),
        ("one: x = 2 is false: user.x was 1.0",),
        ("one: x = 2: user.x was TRUE, so = is unknown",),
        ("one: x = 2 is false: user.x was 1",),
    ]


def test_lines_for_the_first_messages_are_the_first_of_all_lines() -> None:
    rules = [core.RuleSpec("a", "one", sql="x = 2"), core.RuleSpec("b", "$Default", filter_type="True")]
    given = [{"message_id": str(i), "application_properties": {"x": i}} for i in range(30)]
    result = core.route("t", given, rules=rules)
    every = result.lines()
    assert result.lines(3) == every[: every.index("message 3 3:")]
    assert result.lines(100) == every


def test_a_frame_s_missing_values_read_as_none_whatever_pandas_marks_them_with() -> None:
    """pandas 1.5 (DBR 15.4's) hands a nullable column's missing value over as NA, which JSON cannot write."""
    import pandas as pd

    from sbnotebook.core.topology.route import _cleaned

    row = {"a": pd.NA, "b": pd.NaT, "c": float("nan"), "d": None, "e": 7}
    assert _cleaned(row) == {"a": None, "b": None, "c": None, "d": None, "e": 7}
