"""What ``sbspark.route`` costs: 10^6 rows of the record schema routed on the executors through the
Done-when topic of issue 61 (20 subscriptions, 50 rules: tests/core/topology/routed_topic.py, as
``benchmarks/route_cost.py`` reads them), the routing columns computed (``subscriptions``,
``copies``) and summed, so every row goes through the rules.

The rows are made by Spark itself (``spark.range`` and column expressions, no driver-side data):
``message_id``, ``subject``, ``to``, ``reply_to``, ``correlation_id``, ``content_type`` and an
``application_properties`` map as a ``servicebus`` read gives it (strings, numbers and booleans
JSON-encoded), each property left out of a fifth of the rows, values as route_cost.py draws them.
A local session (``sbspark.local_session``: ``local[N]``, Arrow on). Reports the wall seconds of the
whole query (planning, Arrow transfer to the Python workers, routing, the sum), best and all runs,
and rows per second; the query ``--baseline`` runs the same rows through an identity ``mapInPandas``
(Arrow and the pandas rows, no routing) to say what Spark's own part is.

    python benchmarks/route_spark.py [--rows 1000000] [--partitions 4] [--cores 2] [--runs 1] [--baseline]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from route_cost import rules  # the topic's 50 rules, as core reads them from the administration API

from sbnotebook import spark as sbspark

# property -> (SQL expression of its value as the record holds it: text, JSON-encoded where not a string)
PROPERTIES = {
    "region": "element_at(array('eu', 'us', 'uk', 'apac', 'EU', 'e%u'), CAST(pmod(hash(id, 1), 6) + 1 AS INT))",
    "priority": "CAST(pmod(hash(id, 2), 16) - 5 AS STRING)",
    "big": "element_at(array('1073741824', '-1073741824', '7', '12'), CAST(pmod(hash(id, 3), 4) + 1 AS INT))",
    "price": "CAST(ROUND(pmod(hash(id, 4), 11000) / 100.0 - 10, 2) AS STRING)",
    "vip": "IF(pmod(hash(id, 5), 2) = 0, 'true', 'false')",
    "placed": "'\"2026-01-01T00:00:00+00:00\"'",
    "code": "element_at(array('A-1', 'B_2', 'C%3', 'a-1', 'zz'), CAST(pmod(hash(id, 7), 5) + 1 AS INT))",
    "hr-id": "CAST(pmod(hash(id, 8), 21) AS STRING)",
}


def _one_of(values: list[str | None], salt: int) -> str:
    items = ", ".join("CAST(NULL AS STRING)" if v is None else f"'{v}'" for v in values)
    return f"element_at(array({items}), CAST(pmod(hash(id, {salt}), {len(values)}) + 1 AS INT))"


def frame(spark: Any, rows: int, partitions: int) -> Any:
    """The rows, made on the executors."""
    entries = ", ".join(
        f"struct('{name}' AS k, IF(pmod(hash(id, {100 + i}), 5) = 0, CAST(NULL AS STRING), {expr}) AS v)"
        for i, (name, expr) in enumerate(PROPERTIES.items())
    )
    props = f"map_filter(map_from_entries(array({entries})), (k, v) -> v IS NOT NULL)"
    return spark.range(0, rows, numPartitions=partitions).selectExpr(
        "concat('m', CAST(id AS STRING)) AS message_id",
        _one_of(["order", "refund", "return", "order_eu", None], 11) + " AS subject",
        _one_of(["t1", None], 12) + " AS to",
        _one_of(["r1", None], 13) + " AS reply_to",
        _one_of(["c1", None], 14) + " AS correlation_id",
        _one_of(["application/json", "text/plain", None], 15) + " AS content_type",
        f"{props} AS application_properties",
    )


def _timed(query: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    row = query.collect()[0]
    return time.perf_counter() - started, row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    spark = sbspark.local_session("route-spark", cores=args.cores)
    try:
        df = frame(spark, args.rows, args.partitions)
        specs = rules()
        subs = len({s.subscription for s in specs})
        print(
            f"{args.rows:,} rows x {subs} subscriptions x {len(specs)} rules, {args.partitions} partitions, "
            f"local[{args.cores}], {args.runs} run(s)"
        )
        if args.baseline:
            same = df.mapInPandas(lambda frames: (f for f in frames), df.schema)
            walls = [_timed(same.selectExpr("count(*) AS n"))[0] for _ in range(args.runs)]
            runs = ", ".join(f"{w:.1f}" for w in walls)
            print(f"baseline (identity mapInPandas)  wall {min(walls):7.1f} s  (runs: {runs})")
        routed = sbspark.route(df, "bench", rules=specs).selectExpr("count(*) AS n", "sum(copies) AS copies")
        results = [_timed(routed) for _ in range(args.runs)]
        walls = [w for w, _ in results]
        row = results[-1][1]
        print(
            f"sbspark.route                   wall {min(walls):7.1f} s  ({row.n:,} rows, {row.copies:,} copies; "
            f"{row.n / min(walls):,.0f} rows/s; runs: {', '.join(f'{w:.1f}' for w in walls)})"
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
