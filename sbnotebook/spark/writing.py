"""Spark writes, one way: each task sends its rows through ``core.send`` and hands back its Report as
rows of one shape (``RESULT_COLUMNS``); the driver folds them into the one core ``Report``.

Both write paths use it. ``sbspark.write()`` gets the rows back through ``mapInArrow`` (classic and
Spark Connect alike, no files); ``df.write`` / ``df.writeStream.format("servicebus")`` carries them in
each task's commit message, and the writer's ``commit`` folds and logs them. A row is either one of
the task's figures (``outcome`` null: retries, operations, seconds), a counted outcome (``n``
messages sent), or one failed message with every field of a core ``Outcome``.

A struct ``body`` or ``body_json`` column is sent as JSON the way Spark's ``to_json`` writes it
(:func:`struct_body`).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from ..core import PROBLEMS, Outcome, Report, SbError, live_connection, operation_span, redact, send
from .bodies import BODY_JSON, RESCUED
from .schema import arrow_schema_of, columns_ddl
from .spec import WriteOptions

_KINDS = {str: "string", int: "long", bool: "bool", float: "double"}


def _outcome_columns() -> list[tuple[str, str]]:
    """Every field of core's Outcome (the columns of Report.to_pandas) with its kind, read from the
    dataclass itself: a field added there travels through Spark without a change here."""
    hints = typing.get_type_hints(Outcome)
    out = []
    for f in dataclasses.fields(Outcome):
        hint = hints[f.name]
        if isinstance(hint, types.UnionType):  # "int | None": the column is nullable anyway
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out.append((f.name, _KINDS[hint]))
    return out


# The task's own figures, then the outcome's fields.
RESULT_COLUMNS = [
    ("task", "int"),
    ("n", "long"),
    ("retries", "long"),
    ("operations", "long"),
    ("seconds", "double"),
    *_outcome_columns(),
]
RESULT_DDL = columns_ddl(RESULT_COLUMNS)
_OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))


class SendFailedError(SbError, RuntimeError):
    """A write task could not send some of its messages (after retries). A ``RuntimeError`` too, as
    it was before it joined the kit's family."""


@dataclass
class TaskOutcomes(WriterCommitMessage):
    """What one task of a ``format("servicebus")`` write sent, as result rows (see the module doc)."""

    rows: list[dict[str, Any]]


# ------------------------------------------------------------------ in each task


def task_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0  # 0 outside a Spark task


def send_rows(options: WriteOptions, rows: Iterable[Any]) -> Report:
    """Send a task's rows (Spark Rows, or the dicts of an Arrow batch) through core.send."""
    records = (plain_row(r.asDict(recursive=True) if hasattr(r, "asDict") else r, options.struct_columns) for r in rows)
    # A secret reference is resolved here, on the executor.
    conn = live_connection(options.conn())
    with operation_span("write", conn, options.entity) as span:
        report = send(
            options.entity,
            records,
            max_in_flight=options.max_in_flight,
            rate=options.rate_per_partition,  # this task's: the write's is this times the tasks at once
            one_per_send=options.one_per_send,
            connection=conn,
        )
        span.report(report)
    return report


def plain_row(row: dict[str, Any], struct_columns: tuple[str, ...] = ()) -> dict[str, Any]:
    """Arrow hands a map column over as a list of pairs; a record wants a dict. A struct body is sent
    as JSON (:func:`struct_body`)."""
    props = row.get("application_properties")
    if isinstance(props, list):
        row["application_properties"] = dict(props)
    if struct_columns:
        return struct_body(row, struct_columns)
    return row


# ------------------------------------------------------------------ JSON bodies (struct columns) as sent


def json_text(value: Any) -> str:
    """A struct value (a Row as dict, or Arrow's to_pylist form) as JSON, the way Spark's to_json
    writes it: null fields left out, timestamps ISO 8601, binary base64, maps as objects."""
    return json.dumps(_jsonable(value), separators=(",", ":"), allow_nan=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # an Arrow map
            return {str(k): _jsonable(v) for k, v in value if v is not None}
        return [_jsonable(v) for v in value]
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value) if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def struct_body(record: dict[str, Any], struct_columns: tuple[str, ...]) -> dict[str, Any]:
    """A row to send: a struct `body` column, or else a `body_json` column, becomes the JSON body with
    content type application/json (unless the row gives one). A row whose body_json is null (a body
    rescued at read) sends its `body` as it is."""
    body = record.get("body")
    if "body" in struct_columns and isinstance(body, (dict, list)):
        record["body"] = json_text(body)
    elif "body_json" in struct_columns and record.get("body_json") is not None:
        record["body"] = json_text(record["body_json"])
    else:
        return _without_body_columns(record)
    if not record.get("content_type"):
        record["content_type"] = "application/json"
    record.pop("body_text", None)
    return _without_body_columns(record)


def _without_body_columns(record: dict[str, Any]) -> dict[str, Any]:
    record.pop(BODY_JSON, None)
    record.pop(RESCUED, None)
    return record


def task_rows(report: Report, task: int) -> list[dict[str, Any]]:
    """A task's Report as result rows: its figures, one row per counted outcome, one per failure."""
    rows: list[dict[str, Any]] = [
        {
            "task": task,
            "n": 0,
            "retries": report.retries,
            "operations": report.stats.get("operations", 0),
            "seconds": report.elapsed,
        }
    ]
    kept = {k: n for k, n in report.counts.items() if k not in PROBLEMS}
    rows += [{"task": task, "outcome": k, "n": n} for k, n in sorted(kept.items())]
    rows += [{"task": task, "n": 1, **dataclasses.asdict(o)} for o in report.failures]
    return rows


def raise_for_failures(report: Report, entity: Any) -> None:
    """A format("servicebus") task fails on a message it could not send (docs/spark.md, "Writing")."""
    if report.ok:
        return
    shown = "; ".join(
        f"row {f.index}: {f.condition or 'error'} (tracking id {f.tracking_id or '-'}): {f.error}"
        for f in report.failures[:5]
    )
    more = f"; and {report.failed - 5} more" if report.failed > 5 else ""
    raise SendFailedError(
        redact(f"servicebus: {report.failed} of {report.total} messages to {entity} failed: {shown}{more}")
    )


def format_task(options: WriteOptions, rows: Iterator[Any]) -> TaskOutcomes:
    """What each task of a ``format("servicebus")`` write runs: send, fail on a refused message, else
    hand the outcomes to the commit."""
    report = send_rows(options, rows)
    raise_for_failures(report, options.entity)
    return TaskOutcomes(task_rows(report, task_id()))


def arrow_task(options: WriteOptions) -> Any:
    """The function each task of ``sbspark.write`` runs over its Arrow batches: send, yield its rows."""

    def send_partition(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        report = send_rows(options, (row for b in batches for row in b.to_pylist()))
        yield pa.RecordBatch.from_pylist(task_rows(report, task_id()), schema=arrow_schema_of(RESULT_COLUMNS))

    return send_partition


# ------------------------------------------------------------------ on the driver


def fold(rows: Iterable[Any], entity: str) -> Report:
    """The tasks' result rows (dicts or Spark Rows) as one Report: counts summed, failures kept in
    full, ``stats`` with tasks and operations; ``elapsed`` is the longest task's (the caller may know
    the wall time better)."""
    report = Report("send", entity)
    tasks: set[int] = set()
    operations = 0
    for row in rows:
        r = row.asDict() if hasattr(row, "asDict") else row
        tasks.add(r["task"])
        outcome = r.get("outcome")
        if outcome is None:  # the task's figures
            report.retries += r.get("retries") or 0
            operations += r.get("operations") or 0
            report.elapsed = max(report.elapsed, r.get("seconds") or 0.0)
        elif outcome in PROBLEMS:
            report.add(Outcome(**{name: r.get(name) for name in _OUTCOME_FIELDS}))
        else:
            report.add_counted(outcome, r["n"])
    report.stats.update(tasks=len(tasks), operations=operations)
    return report


def commit_report(messages: Iterable[Any], entity: str) -> Report:
    """The Report of a ``format("servicebus")`` write from its tasks' commit messages (None for a
    task that failed)."""
    return fold((row for m in messages if isinstance(m, TaskOutcomes) for row in m.rows), entity)
