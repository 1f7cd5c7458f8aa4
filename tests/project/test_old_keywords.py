"""Each old keyword of docs/names.md's "Old names" (a Python function's or class's) still works, against
the emulator: a call with the old name does what the call with the new one does (and, where the
value shows, not what the call without it does), says once what replaced it, and refuses both at
once. The Spark session's functions are in tests/spark/test_old_names.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.renames import typed_as
from sbnotebook.emulator import Emulator
from tests.project.oldnames import is_keyword, once, rows, said
from tests.project.surface import spark_installed
from tests.required import require_module

__all__ = ["said"]  # the fixture, for pytest

IN_SPARK_TESTS = ("sbspark.settle", "sbspark.from_spark", "sbspark.write", "sbspark.register")
GATHERED = ("brake", "canary")  # several old keywords into one value: tests/project/test_gathered_keywords.py
KEYWORDS = [r for r in rows(is_keyword) if r[1] not in IN_SPARK_TESTS and r[2] not in GATHERED]
Call = Callable[[dict[str, Any]], Any]

# (place, old) -> the keywords the call is given, by their new names (the new one's value first);
# "same": the value changes nothing a call returns (its effect is elsewhere), so only old == new is checked.
GIVEN: dict[tuple[str, str], dict[str, Any]] = {
    ("core.peek", "count"): {"max_messages": 3},
    ("core.peek", "scan_limit"): {"max_scanned": 4, "where": "True"},
    ("core.receive", "count"): {"max_messages": 2},
    ("core.receive", "wait"): {"wait_seconds": 0.5, "max_messages": 1, "same": True},
    ("core.receive", "max_renewal"): {"max_renewal_seconds": 7.0, "max_messages": 1},
    ("core.receive_deferred", "max_renewal"): {"max_renewal_seconds": 7.0},
    ("core.process", "wait"): {"wait_seconds": 0.5, "same": True},
    ("core.process", "concurrency"): {"max_in_flight": 2, "same": True},
    ("core.peek_numbers", "count"): {"max_messages": 3},
    ("core.peek_numbers", "start"): {"from_sequence_number": 4, "max_messages": 2},
    ("core.peek_page", "count"): {"max_messages": 3},
    ("core.peek_page", "start"): {"from_sequence_number": 4, "max_messages": 2},
    ("core.snapshot", "conn"): {"connection": "cs", "entity": "q", "from_sequence_number": 1, "same": True},
    ("core.snapshot", "path"): {"entity": "q", "connection": "cs", "from_sequence_number": 1, "same": True},
    ("core.snapshot", "start"): {"from_sequence_number": 4, "connection": "cs", "entity": "q", "same": True},
    ("core.list_sessions", "limit"): {"max_sessions": 2},
    ("core.list_sessions", "count_limit"): {"max_counted": 1},
    ("core.group_counts", "limit"): {"max_messages": 3},
    ("core.import_jsonl", "keep_ids"): {"keep_message_id": True},
    # "same": without it, the default resolution would start the shared emulator
    ("core.resolve", "namespace"): {"fully_qualified_namespace": "contoso.servicebus.windows.net", "same": True},
    ("core.connect", "namespace"): {
        "fully_qualified_namespace": "contoso.servicebus.windows.net",
        "warm": False,
        "same": True,
    },
    ("core.Report", "detail_limit"): {"max_details": 3},
    # "same": without it the constructor lacks a required argument
    ("core.Connection", "namespace"): {"fully_qualified_namespace": "contoso.servicebus.windows.net", "same": True},
    ("TriagePanel", "limit"): {"max_messages": 3},
    ("TriagePanel.to_pandas", "limit"): {"max_messages": 2},
    ("TriagePanel.to_pandas", "stop"): {"cancel": threading.Event(), "same": True},
    ("SessionsPanel", "limit"): {"max_sessions": 2},
    ("SessionsPanel", "peek_count"): {"max_messages": 3},
    ("MessageBrowser", "scan_limit"): {"max_scanned": 4},
    ("MessageBrowser", "dead_letter"): {"dlq": True},
    ("Emulator", "latency"): {"latency_ms": 50.0},
    ("Emulator.slow_down", "seconds"): {"latency_ms": 200.0, "same": True},  # without: refused
    ("sbspark.infer_body_schema", "sample"): {"body_sample_size": 1},
    ("sbspark.infer_body_schema", "start"): {"from_sequence_number": 2},
    ("core.send", "batch"): {"one_per_send": True},
    ("core.asend", "batch"): {"one_per_send": True},
}
for _purge in ("core.purge", "core.apurge"):
    GIVEN |= {(_purge, f"include_{kind}"): {kind: False} for kind in ("active", "deferred", "scheduled")}
for _time_bounds in ("conn", "path", "first", "last"):
    GIVEN[("core.time_bounds", _time_bounds)] = {"same": True}  # every argument is needed: see calls()
for _scan in ("core.scan", "core.ascan", "core.scan_records"):
    GIVEN |= {
        (_scan, "limit"): {"max_messages": 3},
        (_scan, "concurrency"): {"max_in_flight": 2, "same": True},
        (_scan, "start"): {"from_sequence_number": 4},
        (_scan, "stop"): {"before_sequence_number": 4},
    }
for _copy in ("core.copy", "core.acopy", "core.copy_record", "core.copy_resume_point"):
    point = _copy == "core.copy_resume_point"  # None with or without: no record is there
    GIVEN |= {
        (_copy, "limit"): {"max_messages": 1, "same": point},
        (_copy, "keep_ids"): {"keep_message_id": True, "max_messages": 1, "same": point},
        (_copy, "concurrency"): {"max_in_flight": 2, "max_messages": 1, "same": True},
    }
for _moving in ("core.resubmit", "core.aresubmit", "core.discard", "core.adiscard"):
    GIVEN[(_moving, "limit")] = {"max_messages": 1}
for _scheduling in ("core.schedule", "core.aschedule", "core.copy_then_complete", "core.acopy_then_complete"):
    GIVEN[(_scheduling, "at")] = {"schedule_at": "in an hour", "same": True}
OLD_VALUES = {("Emulator", "latency"): 0.05, ("Emulator.slow_down", "seconds"): 0.2}  # seconds, the old unit
OLD_VALUES |= {("core.send", "batch"): False, ("core.asend", "batch"): False}  # the opposite of one_per_send


def _seqs(records: Any) -> list[int]:
    return [int(r["sequence_number"]) for r in records]


def _dead_lettered(cs: str, n: int) -> None:
    """``n`` more messages in short's dead-letter queue."""
    core.send("short", [f"d{i}" for i in range(n)], connection=cs)
    with core.receive("short", max_messages=n, wait_seconds=5, connection=cs) as batch:
        assert len(batch) == n and batch.dead_letter(reason="test").ok


def _core_calls(cs: str, conn: core.LiveConnection, tmp_path: Path) -> dict[str, Call]:
    """One real call per core function, returning what shows the keyword's effect."""

    def received(kw: dict[str, Any]) -> Any:
        with core.receive("q", connection=cs, **kw) as batch:
            seen = (len(batch), batch.max_renewal_seconds)
            batch.abandon()
        return seen

    def deferred(kw: dict[str, Any]) -> Any:
        with core.receive("q", max_messages=1, connection=cs) as batch:
            assert batch.defer().ok
            seq = int(batch.messages[0].sequence_number)
        with core.receive_deferred("q", [seq], connection=cs, **kw) as batch:
            seen = batch.max_renewal_seconds
            batch.complete()
        return seen

    def processed(kw: dict[str, Any]) -> Any:
        core.send("once", ["p"], connection=cs)
        return core.process("once", lambda record: None, max_messages=1, connection=cs, **kw).count("completed")

    async def ascanned(kw: dict[str, Any]) -> list[int]:
        return [int(m.sequence_number) async for page in core.ascan("q", connection=conn, **kw) for m in page]

    def copied(copy: Callable[..., Any]) -> Call:
        def call(kw: dict[str, Any]) -> Any:
            report = copy(kw)
            newest = core.peek("dl-target", connection=cs).records[-1]["message_id"]
            return report.count("sent"), newest == core.peek("q", connection=cs).records[0]["message_id"]

        return call

    def imported(kw: dict[str, Any]) -> bool:
        exported = tmp_path / "q.jsonl"
        core.export_jsonl("q", exported, connection=cs)
        core.import_jsonl("dl-target", exported, connection=cs, **kw)
        ids = {r["message_id"] for r in core.peek("q", connection=cs)}
        return {r["message_id"] for r in core.peek("dl-target", connection=cs).records[-10:]} <= ids

    def moved(move: Callable[..., Any]) -> Call:
        def call(kw: dict[str, Any]) -> Any:
            _dead_lettered(cs, 2)
            return move(kw).total

        return call

    def scheduled(schedule: Callable[..., Any]) -> Call:
        def call(kw: dict[str, Any]) -> Any:
            kw = {k: dt.datetime.now(dt.UTC) + dt.timedelta(hours=1) if v == "in an hour" else v for k, v in kw.items()}
            return schedule(kw)

        return call

    def purged(purge: Callable[..., Any]) -> Call:
        """What a purge of "once" removed, by kind, when it holds two active messages, a deferred and
        a scheduled one; the rest is purged after, so each call starts from the same."""

        def call(kw: dict[str, Any]) -> Any:
            core.send("once", ["a", "b", "c"], connection=cs)
            with core.receive("once", max_messages=1, wait_seconds=5, connection=cs) as batch:
                assert batch.defer().ok
            core.schedule("once", ["later"], dt.datetime.now(dt.UTC) + dt.timedelta(hours=1), connection=cs)
            try:
                report = purge(kw)
                return sorted(report.counts.items()), report.total
            finally:
                core.purge("once", connection=cs)

        return call

    def copied_then_completed(kw: dict[str, Any], run: Callable[..., Any]) -> Any:
        with core.receive("q", max_messages=1, connection=cs) as batch:
            return run(batch, [(0, core.copy_message(batch.messages[0]))], "dl-target", **kw).count("completed")

    return {
        "core.peek": lambda kw: _seqs(core.peek("q", connection=cs, **kw)),
        "core.receive": received,
        "core.receive_deferred": deferred,
        "core.process": processed,
        "core.peek_numbers": lambda kw: core.peek_numbers("q", connection=cs, **kw),
        "core.peek_page": lambda kw: _seqs(core.peek_page("q", connection=cs, **kw)),
        "core.scan": lambda kw: [s for page in core.scan("q", connection=cs, **kw) for s in _seqs(page)],
        "core.ascan": lambda kw: conn.run(ascanned(kw)),
        "core.scan_records": lambda kw: _seqs(core.scan_records("q", connection=cs, **kw)),
        "core.snapshot": lambda kw: core.snapshot(**{k: cs if v == "cs" else v for k, v in kw.items()}),
        "core.list_sessions": lambda kw: sorted(
            (s.session_id, s.messages) for s in core.list_sessions("sq", connection=cs, **kw)
        ),
        "core.group_counts": lambda kw: core.group_counts("q", connection=cs, **kw).scanned,
        "core.copy": copied(lambda kw: core.copy("q", "dl-target", resume=False, connection=cs, **kw)),
        "core.acopy": copied(lambda kw: conn.run(core.acopy("q", "dl-target", resume=False, connection=conn, **kw))),
        "core.copy_record": lambda kw: core.copy_record("q", "dl-target", connection=cs, **kw).name,
        "core.copy_resume_point": lambda kw: core.copy_resume_point("q", "dl-target", connection=cs, **kw),
        "core.import_jsonl": imported,
        "core.resubmit": moved(
            lambda kw: core.resubmit("short/$deadletterqueue", target="dl-target", connection=cs, **kw)
        ),
        "core.aresubmit": moved(
            lambda kw: conn.run(core.aresubmit("short/$deadletterqueue", target="dl-target", connection=conn, **kw))
        ),
        "core.discard": moved(lambda kw: core.discard("short/$deadletterqueue", connection=cs, **kw)),
        "core.adiscard": moved(lambda kw: conn.run(core.adiscard("short/$deadletterqueue", connection=conn, **kw))),
        "core.schedule": scheduled(lambda kw: core.schedule("q", ["later"], connection=cs, **kw).count("scheduled")),
        "core.aschedule": scheduled(
            lambda kw: conn.run(core.aschedule("q", ["later"], connection=conn, **kw)).count("scheduled")
        ),
        "core.copy_then_complete": scheduled(lambda kw: copied_then_completed(kw, core.copy_then_complete)),
        "core.acopy_then_complete": scheduled(
            lambda kw: copied_then_completed(kw, lambda *a, **k: conn.run(core.acopy_then_complete(*a, **k)))
        ),
        "core.resolve": lambda kw: (core.resolve(**kw).kind, core.resolve(**kw).fully_qualified_namespace),
        "core.connect": lambda kw: core.connect(**kw).settings.fully_qualified_namespace,
        "core.Report": lambda kw: core.Report("send", "q", **kw).max_details,
        "core.Connection": lambda kw: repr(core.Connection("entra-id", **kw)),
        "core.send": lambda kw: core.send("q", ["a", "b", "c"], connection=cs, **kw).stats["operations"],
        "core.asend": lambda kw: conn.run(core.asend("q", ["a", "b", "c"], connection=conn, **kw)).stats["operations"],
        "core.purge": purged(lambda kw: core.purge("once", connection=cs, **kw)),
        "core.apurge": purged(lambda kw: conn.run(core.apurge("once", connection=conn, **kw))),
    }


def _time_bounds(cs: str) -> Call:
    """time_bounds with every argument named (old or new), over the whole of q."""

    names = {"conn": "connection", "path": "entity", "first": "from_sequence_number", "last": "to_sequence_number"}

    def call(kw: dict[str, Any]) -> Any:
        given: dict[str, Any] = {
            "connection": cs,
            "entity": core.EntityPath.parse("q"),
            "from_sequence_number": 1,
            "to_sequence_number": 10,
        }
        for old, new in names.items():
            if old in kw:  # the old name carries the value; the new one too when both are given
                given[old] = given[new] if new in kw else given.pop(new)
        bounds = core.time_bounds(window=core.TimeWindow(), **given)
        return None if bounds is None else (bounds.first, bounds.last)

    return call


def _other_calls(emulator: Emulator, cs: str) -> dict[str, Call]:
    """The panels', the emulator's and infer_body_schema's calls."""
    from sbnotebook.notebook.widgets import MessageBrowser, TriagePanel
    from sbnotebook.notebook.widgets.sessions import SessionsPanel

    triage = TriagePanel("short", connection=cs)
    calls: dict[str, Call] = {
        "TriagePanel": lambda kw: TriagePanel("short", connection=cs, **kw).max_messages,
        "TriagePanel.to_pandas": lambda kw: len(triage.to_pandas(**kw)),
        "SessionsPanel": lambda kw: (lambda p: (len(p.sessions), p.max_messages))(
            SessionsPanel("sq", connection=cs, **kw)
        ),
        "MessageBrowser": lambda kw: (lambda b: (b.max_scanned, b.dlq_box.value))(
            MessageBrowser("q", connection=cs, **kw)
        ),
        "Emulator": lambda kw: Emulator(**kw).latency_ms,
        "Emulator.slow_down": lambda kw: (emulator.slow_down("q", **kw), emulator.broker.faults.of("q").delay)[1],
    }
    if spark_installed():
        from sbnotebook import spark as sbspark

        calls["sbspark.infer_body_schema"] = lambda kw: sbspark.infer_body_schema("dl-target", connection=cs, **kw)
    return calls


@pytest.fixture
def calls(emulator: Emulator, tmp_path: Path) -> dict[str, Call]:
    """One real call of each function or class whose keywords were renamed, on an emulator holding
    ten messages in q, three dead-lettered in short, three sessions of three in sq, and JSON bodies
    of two shapes in dl-target."""
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(10)], connection=cs)
    _dead_lettered(cs, 3)
    for s in range(3):
        core.send("sq", [{"body": f"{s}-{i}", "session_id": f"s-{s}"} for i in range(3)], connection=cs)
    core.send("dl-target", ['{"a": 1}', '{"b": 2}'], connection=cs)
    conn = core.live_connection(cs)
    found = _core_calls(cs, conn, tmp_path) | _other_calls(emulator, cs)
    found["core.time_bounds"] = _time_bounds(cs)
    return found


def _function(place: str) -> Any:
    from sbnotebook.notebook import widgets
    from sbnotebook.notebook.widgets.sessions import SessionsPanel

    owners: dict[str, Any] = {"core": core, "Emulator": Emulator, "SessionsPanel": SessionsPanel}
    if spark_installed():
        from sbnotebook import spark as sbspark

        owners["sbspark"] = sbspark
    head, *rest = place.split(".")
    found = owners.get(head) or getattr(widgets, head)
    for part in rest:
        found = getattr(found, part)
    return found.__init__ if inspect.isclass(found) else found


@pytest.mark.parametrize(("old", "place", "new"), KEYWORDS, ids=[f"{old} in {place}" for old, place, _ in KEYWORDS])
def test_an_old_keyword_still_works_and_says_once_what_replaced_it(
    old: str, place: str, new: str, said: Any, calls: dict[str, Call]
) -> None:
    if place.startswith("sbspark."):
        require_module("pyspark")
    fn = _function(place)
    assert getattr(fn, "__renamed__", {}).get(old) == new, f"{place} does not take {old}= as {new}="
    given = dict(GIVEN[(place, old)])
    same = given.pop("same", False)
    if place != "core.time_bounds":  # its own call names every argument
        value = given.pop(new)
        as_old, as_new = {**given, old: OLD_VALUES.get((place, old), value)}, {**given, new: value}
    else:
        as_old, as_new = {old: None}, {}
    call = calls[place]
    said_before = call(as_old)
    assert said_before == call(as_new), f"{place}({old}=) is not {place}({new}=)"
    call(as_old)  # said once per process
    once(said, f"{typed_as(fn)}({old}=)", f"{new}=")
    if not same:
        assert call(given) != said_before, f"{place}: {new}= changes nothing seen here; mark it same"
    with pytest.raises(TypeError, match=f"not also {old}="):
        both = call({**as_new, old: as_old.get(old)} if place != "core.time_bounds" else {old: 1, new: 1})
        if inspect.iscoroutine(both):
            asyncio.run(both)
