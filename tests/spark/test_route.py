"""sbspark.route: the routing columns computed on the executors equal core.route's answer on the
driver, row by row, for the Done-when topic's rules (tests/core/topology/routed_topic.py) read
through the administration API."""

from __future__ import annotations

from typing import Any

from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.core.topology.routed_topic import make_topic, messages
from tests.required import require_module

require_module("pyspark")
from sbnotebook import spark as sbspark  # noqa: E402


def test_the_executors_route_as_core_does(
    spark: Any, emulator: Emulator, admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    make_topic(admin, "routed")
    admin.create_queue("src")
    with client.get_queue_sender("src") as sender:
        sender.send_messages(messages(300))
    cs = emulator.connection_string
    page = core.peek("src", max_messages=300, connection=cs)
    df = sbspark.to_spark(page, spark).repartition(3)
    routed = sbspark.route(df, "routed", connection=cs).select("message_id", "subscriptions", "copies").collect()
    got = {r.message_id: (sorted(r.subscriptions), r.copies) for r in routed}
    answer = core.route("routed", page.records, connection=cs)
    want: dict[str, tuple[list[str], int]] = {}
    for r in answer.routed:
        subs, copies = want.setdefault(r.message_id, ([], 0))
        want[r.message_id] = (sorted(subs + [r.subscription] * r.matched), copies + len(r.deliveries))
    assert len(got) == 300 and got == want
    assert sum(c for _, c in got.values()) > 300  # rows fan out, acting rules' copies counted
    # The comparison can fail: one row's subscriptions changed.
    some = next(iter(got))
    assert {**got, some: ([], 0)} != want


def test_a_task_compiles_its_rules_once_for_all_its_arrow_batches(monkeypatch: Any) -> None:
    """docs/spark.md: the rules are compiled once per partition. A task gets the specs pickled (each
    compiled on the driver to refuse a bad filter there: pickled without it) and routes batch after
    batch with them; each rule is compiled once in the task, not once per batch (issue 72)."""
    import pickle

    import pandas as pd

    from sbnotebook.core.topology import evaluator
    from sbnotebook.spark.routing import partition_task

    specs = [
        core.RuleSpec("high", "big", sql="total > 100"),
        core.RuleSpec("all", "any", sql="1=1", action="SET seen = TRUE"),
    ]
    for spec in specs:
        spec.compiled()  # as route_frame does on the driver
    shipped = pickle.loads(pickle.dumps(specs))
    compiled: list[str] = []
    real = evaluator.compile_rule

    def counted(*args: Any) -> Any:
        compiled.append(args[1])
        return real(*args)

    monkeypatch.setattr(evaluator, "compile_rule", counted)
    frames = [
        pd.DataFrame(
            {
                "message_id": [f"m{b}{i}" for i in range(3)],
                "application_properties": [{"total": str(50 * (i + b))} for i in range(3)],
            }
        )
        for b in range(4)
    ]
    out = list(partition_task("orders", shipped)(iter(frames)))
    assert sorted(compiled) == ["1=1", "total > 100"]  # once each, for four batches
    assert [list(f["copies"]) for f in out][3] == [2, 2, 2]  # batch 4: totals 150-250, both rules
    assert shipped == specs  # the compiled rule is no part of the spec's value
