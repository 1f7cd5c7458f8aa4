"""``sbspark.route``: a DataFrame of records with where each row would go through a topic's rules,
evaluated on the executors. The rules are read once on the driver (``core.topic_rules``: the
administration API, a Config.json, what-if filters) and shipped to the tasks as plain data; each
task compiles them once (each ``RuleSpec`` keeps its compiled rule) and routes each Arrow batch of its
rows with ``core.route`` (the broker's evaluator)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..core import RuleSpec, route, topic_rules


def _record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as a record: Arrow's map as a dict, pandas' NaN and NaT as None."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "application_properties" and value is not None and not isinstance(value, dict):
            value = dict(value)  # a map arrives as (key, value) pairs
        missing = value is None or (isinstance(value, float) and value != value) or type(value).__name__ == "NaTType"
        out[str(key)] = None if missing else value
    return out


def partition_task(topic: str, specs: list[RuleSpec]) -> Any:
    """What each task runs (``mapInPandas``): its rows with the routing columns."""

    def task(frames: Iterator[Any]) -> Iterator[Any]:
        for frame in frames:
            routed = route(topic, [_record(r) for r in frame.to_dict("records")], rules=specs, explain=False)
            gets: list[list[str]] = [[] for _ in range(len(frame))]
            copies = [0] * len(frame)
            for r in routed.routed:
                if r.deliveries:
                    gets[r.message].append(r.subscription)
                    copies[r.message] += len(r.deliveries)
            yield frame.assign(subscriptions=gets, copies=copies)

    return task


def route_frame(
    df: Any,
    topic: str,
    *,
    rules: Any = None,
    topology: Any = None,
    extra_rules: Any = (),
    connection: Any = None,
) -> Any:
    """``df`` (the record schema, as a ``servicebus`` read gives it) with two columns more:
    ``subscriptions``, those of ``topic`` that would get the row's message, and ``copies``, how many
    copies they would hold (an acting rule's copy counts apart). Rules as ``core.route`` takes them."""
    from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

    specs, _ = topic_rules(topic, rules=rules, topology=topology, extra_rules=extra_rules, connection=connection)
    for spec in specs:
        spec.compiled()  # a filter outside the grammar refused here, on the driver, with its position
    added = [StructField("subscriptions", ArrayType(StringType())), StructField("copies", IntegerType())]
    schema = StructType(df.schema.fields + added)
    return df.mapInPandas(partition_task(topic, specs), schema)
