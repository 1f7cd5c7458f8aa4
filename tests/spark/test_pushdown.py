"""Filter pushdown (the ``pushFilters`` option, sbnotebook/spark/pushdown.py): `where enqueued_time
>= ...` and `sequence_number` bounds become the bisection bounds of a time-bounded peek read, on
pyspark 4.1+ with spark.sql.python.filterPushdown.enabled. Real Spark (local), the real SDK, the
embedded emulator; what a read should return is computed from the SDK's own peek of the queue."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core.operations.bounds import FANOUT, PROBE_PAGE
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import counted_peeks, send
from tests.required import require_module
from tests.shell import line

pyspark = require_module("pyspark")
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import DataSourceReader  # noqa: E402

from sbnotebook import spark as sbspark  # noqa: E402
from sbnotebook.spark.options import OptionError  # noqa: E402
from sbnotebook.spark.spec import ReadSpec  # noqa: E402

pytestmark = pytest.mark.slow
ip, sb = shell.ip, shell.sb  # the shell fixtures: %sb_peek against the Spark read (issue 53)
CONF = "spark.sql.python.filterPushdown.enabled"
PUSHDOWN = hasattr(DataSourceReader, "pushFilters")  # pyspark 4.1+
needs_pushdown = pytest.mark.skipif(
    not PUSHDOWN,
    reason="filter pushdown for Python data sources needs pyspark 4.1+ (on 4.0 the option's error is tested)",
)


@pytest.fixture
def sp(spark: Any, emulator: Emulator) -> Iterator[Any]:
    """The module's session, registered against this test's emulator, with Spark's pushdown on."""
    session = sbspark.register(spark, emulator.connection_string)
    session.conf.set(CONF, "true")
    yield session
    session.conf.unset(CONF)
    session.conf.unset("spark.sql.session.timeZone")


def load(sp: Any, entity: str = "q", **options: Any) -> Any:
    """A fresh DataFrame per query: Spark 4.3 reuses a pushed-down plan within one (docs/spark.md)."""
    reader = sp.read.format("servicebus").option("entity", entity).option("pushFilters", "true")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def bodies(df: Any) -> list[str]:
    return sorted(r.body_text for r in df.select("body_text").collect())


def broker(client: ServiceBusClient) -> list[tuple[int, dt.datetime, str]]:
    """(sequence number, enqueued time, body) of every message in q, from the SDK's own peek."""
    out: list[tuple[int, dt.datetime, str]] = []
    seq = 1
    with client.get_queue_receiver("q") as receiver:
        while page := receiver.peek_messages(max_message_count=250, sequence_number=seq):
            for m in page:
                assert m.sequence_number is not None and m.enqueued_time_utc is not None
                t = m.enqueued_time_utc
                out.append((m.sequence_number, t if t.tzinfo else t.replace(tzinfo=dt.UTC), str(m)))
            seq = out[-1][0] + 1
    return out


def where(state: list[tuple[int, dt.datetime, str]], keep: Any) -> list[str]:
    return sorted(body for seq, t, body in state if keep(seq, t))


def groups(client: ServiceBusClient) -> list[tuple[int, dt.datetime, str]]:
    """Groups a, b and c of ten messages, each sent in one batch (its messages share one enqueued
    time), at distinct times; returns the broker's state."""
    for name in "abc":
        send(client, "q", *[f"{name}{i}" for i in range(10)])
        time.sleep(0.05)
    return broker(client)


def time_of(state: list[tuple[int, dt.datetime, str]], body: str) -> dt.datetime:
    return next(t for _, t, b in state if b == body)


@needs_pushdown
def test_time_filters_are_exact_at_the_edges(sp: Any, client: ServiceBusClient) -> None:
    state = groups(client)
    ta, tb, tc = (time_of(state, f"{g}0") for g in "abc")
    assert time_of(state, "b9") == tb and ta < tb < tc  # a batch shares one time: the edge holds ten messages
    col = F.col("enqueued_time")
    cases = {
        ">=": (col >= tb, lambda s, t: t >= tb),
        ">": (col > tb, lambda s, t: t > tb),
        "<": (col < tb, lambda s, t: t < tb),
        "<=": (col <= tb, lambda s, t: t <= tb),
        "=": (col == tb, lambda s, t: t == tb),
        "between": ((col >= ta) & (col < tc), lambda s, t: ta <= t < tc),
        "empty": ((col > tb) & (col < tb), lambda s, t: False),
    }
    for name, (condition, keep) in cases.items():
        expected = where(state, keep)
        assert bodies(load(sp).where(condition)) == expected, name
    assert where(state, cases["="][1]) == [f"b{i}" for i in range(10)]  # the cases above tell the groups apart
    # With the options: both bounds at once (the later start, the earlier end).
    both = load(sp, enqueuedBefore=tc.isoformat()).where(col >= ta + dt.timedelta(microseconds=1))
    assert bodies(both) == where(state, lambda s, t: ta < t < tc) == [f"b{i}" for i in range(10)]


@needs_pushdown
def test_filters_that_cannot_be_pushed_are_left_to_spark(sp: Any, client: ServiceBusClient) -> None:
    state = groups(client)
    ta, tb, tc = (time_of(state, f"{g}0") for g in "abc")
    seq = {body: s for s, _, body in state}
    col = F.col("enqueued_time")
    # A body filter beside a time bound: the bound is pushed, the body filter is Spark's.
    got = bodies(load(sp).where((col >= tb) & F.col("body_text").startswith("c")))
    assert got == where(state, lambda s, t: t >= tb and s >= seq["c0"]) == [f"c{i}" for i in range(10)]
    # An OR is not pushed at all: a full read, filtered by Spark.
    got = bodies(load(sp).where((col >= tc) | (F.col("body_text") == "a3")))
    assert got == where(state, lambda s, t: t >= tc or s == seq["a3"])
    # IN narrows the read to [min, max]; Spark keeps only the values.
    got = bodies(load(sp).where(col.isin(ta, tc)))
    assert got == where(state, lambda s, t: t in (ta, tc)) and len(got) == 20
    # Sequence numbers: exact bounds, alone and with a time bound.
    got = bodies(load(sp).where(F.col("sequence_number").between(seq["a5"], seq["b3"])))
    assert got == where(state, lambda s, t: seq["a5"] <= s <= seq["b3"]) and len(got) == 9
    got = bodies(load(sp).where((F.col("sequence_number") > seq["a7"]) & (col < tc)))
    assert got == where(state, lambda s, t: s > seq["a7"] and t < tc) and len(got) == 12
    assert bodies(load(sp).where(F.col("sequence_number") > seq["c9"])) == []


@needs_pushdown
def test_a_session_enabled_entity_is_filtered_by_time_as_it_is_peeked(sp: Any, client: ServiceBusClient) -> None:
    """Sessions are peeked whole (through their locks) and their rows kept by the pushed time bound;
    a sequence-number bound is left to Spark there."""
    with client.get_queue_sender("sq") as sender:
        for name in "abc":
            sender.send_messages([ServiceBusMessage(f"{name}{i}", session_id=f"s{i % 2}") for i in range(6)])
            time.sleep(0.05)
    state: list[tuple[int, dt.datetime, str]] = []
    for session in ("s0", "s1"):
        with client.get_queue_receiver("sq", session_id=session) as receiver:
            state += [(m.sequence_number or 0, m.enqueued_time_utc, str(m)) for m in receiver.peek_messages(100)]
    tb = time_of(state, "b0")
    got = bodies(load(sp, "sq").where(F.col("enqueued_time") >= tb))
    assert got == where(state, lambda s, t: t >= tb) and len(got) == 12
    low = next(s for s, _, b in state if b == "a4")
    got = bodies(load(sp, "sq").where((F.col("enqueued_time") < tb) & (F.col("sequence_number") >= low)))
    assert got == where(state, lambda s, t: t < tb and s >= low) == ["a4", "a5"]


@needs_pushdown
def test_a_string_time_is_read_in_the_session_time_zone(sp: Any, client: ServiceBusClient) -> None:
    """`enqueued_time >= '2026-11-25 13:30:00'` means 13:30 in spark.sql.session.timeZone, as everywhere
    in Spark: the filter arrives as that instant. The same text read as UTC is 5.5 hours later."""
    state = groups(client)
    tb = time_of(state, "b0")
    zone = "Asia/Kolkata"  # UTC+05:30
    local = tb.astimezone(ZoneInfo(zone)).replace(tzinfo=None).isoformat(sep=" ")
    sp.conf.set("spark.sql.session.timeZone", zone)
    got = bodies(load(sp).where(f"enqueued_time >= '{local}'"))
    assert got == where(state, lambda s, t: t >= tb) == sorted(f"{g}{i}" for g in "bc" for i in range(10))
    sp.conf.set("spark.sql.session.timeZone", "UTC")
    assert bodies(load(sp).where(f"enqueued_time >= '{local}'")) == []  # read as UTC: after every message


@needs_pushdown
def test_scheduled_messages_are_read_as_with_the_options(sp: Any, client: ServiceBusClient) -> None:
    """A message scheduled first (the lowest number) and enqueued in a minute is inside a window that
    starts at b: the read finds it below the bisected range, as with enqueuedAfter."""
    with client.get_queue_sender("q") as sender:
        sender.schedule_messages(ServiceBusMessage("s-early"), dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60))
    state = groups(client)
    tb = time_of(state, "b0")
    got = bodies(load(sp).where(F.col("enqueued_time") >= tb))
    assert got == where(state, lambda s, t: t >= tb) and "s-early" in got and "a0" not in got
    assert bodies(load(sp).where(F.col("enqueued_time") >= tb)) == bodies(load(sp, enqueuedAfter=tb.isoformat()))


@needs_pushdown
def test_planning_with_pushed_filters_costs_a_few_peeks_not_a_scan(
    sp: Any, client: ServiceBusClient, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 messages in four groups; a window around the third. Planning (explain: Spark pushes the
    filters and plans the partitions) peeks a few rounds of small probes per bound, counted at the broker;
    the read then peeks only the window's numbers."""
    for g in range(4):
        send(client, "q", *[f"g{g}-{i}" for i in range(500)])
        time.sleep(0.05)
    state = broker(client)
    t2, t3 = time_of(state, "g2-0"), time_of(state, "g3-0")
    window = {s for s, t, _ in state if t2 <= t < t3}
    assert (min(window), max(window)) == (1001, 1500)
    df = load(sp, numPartitions=4).where((F.col("enqueued_time") >= t2) & (F.col("enqueued_time") < t3))
    df = df.select("body_text")
    peeks = counted_peeks(emulator, monkeypatch)
    df.explain()  # plans the query: the same plan collect() runs below
    planning = list(peeks)
    # The snapshot's two, then per bound at most 3 rounds of FANOUT small probes (log33(2000) + 1; issue 53
    # traded peeks for round trips), fewer messages in all than the 2,000 a scan peeks.
    assert 0 < len(planning) <= 2 + 2 * (3 * FANOUT + 1), planning
    assert all(count <= PROBE_PAGE for _, count in planning[2:]) and sum(c for _, c in planning[2:]) < 2000
    del peeks[:]
    assert sorted(r.body_text for r in df.collect()) == sorted(f"g2-{i}" for i in range(500))
    assert peeks and all(1001 <= start <= 1500 for start, _ in peeks), peeks  # the window's numbers only
    del peeks[:]
    full = load(sp, numPartitions=4).where(F.col("body_text").startswith("g2-"))  # nothing to push: a scan
    assert bodies(full) == sorted(f"g2-{i}" for i in range(500))
    assert min(start for start, _ in peeks) == 1 and len(peeks) >= 8


@needs_pushdown
def test_the_option_without_the_conf_fails_naming_the_conf(sp: Any, client: ServiceBusClient) -> None:
    send(client, "q", "m")
    sp.conf.set(CONF, "false")
    with pytest.raises(Exception, match=f"DATA_SOURCE_PUSHDOWN_DISABLED.*ServiceBusPushdownReader.*'{CONF}'") as err:
        load(sp).where(F.col("enqueued_time") >= dt.datetime(2026, 1, 1, tzinfo=dt.UTC)).collect()
    assert "Set it to true" in str(err.value)
    without = sp.read.format("servicebus").option("entity", "q").load()  # no option: as before, conf or not
    assert bodies(without.where(F.col("enqueued_time") >= dt.datetime(2000, 1, 1, tzinfo=dt.UTC))) == ["m"]


@needs_pushdown
def test_spark_reuses_a_pushed_down_plan_within_one_dataframe(sp: Any, client: ServiceBusClient) -> None:
    """What docs/spark.md warns of: Spark 4.3 keeps the partitions a pushdown planned on the loaded
    relation, and a later query of the same DataFrame that has no filter to push reads them again (a
    Spark bug; Spark's development sources keep that state per scan). A fresh load() per query reads
    everything."""
    state = groups(client)
    tb = time_of(state, "b0")
    df = load(sp)
    assert df.where(F.col("enqueued_time") >= tb).count() == 20
    reused = df.count()
    if pyspark.__version__.startswith("4.3."):  # checked there (docs/spark.md)
        assert reused == 20  # the window leaked into an unfiltered query
    assert load(sp).count() == len(state) == 30


def test_the_option_is_refused_where_it_cannot_work(emulator: Emulator) -> None:
    """pyspark 4.0 (Databricks 17.3 LTS) hands no filters to a Python data source: the option fails
    in one line there. Everywhere: a destructive read cannot be bounded by time, and the value is
    true or false."""
    given = {"entity": "q", "connectionString": emulator.connection_string, "pushFilters": "true"}
    if not PUSHDOWN:
        needs = r"^servicebus: option pushFilters needs pyspark 4\.1 or later \(this is 4\.0"
        with pytest.raises(OptionError, match=needs):
            ReadSpec(given, 2, None).read()
        return
    assert ReadSpec(given, 2, None).read().push_filters
    assert not ReadSpec({**given, "pushFilters": "false"}, 2, None).read().push_filters
    with pytest.raises(OptionError, match=r"^servicebus: option pushFilters bounds a peek read, not mode=defer"):
        ReadSpec({**given, "mode": "defer"}, 2, None).read()
    with pytest.raises(OptionError, match=r"^servicebus: option pushFilters must be true or false, not 'yes'"):
        ReadSpec({**given, "pushFilters": "yes"}, 2, None).read()


def planned_and_read(given: dict[str, str], filters: list[Any]) -> tuple[list[str], list[Any]]:
    """What the reader Spark would get returns, in this process (no JVM): the filters pushed as
    Spark's planner pushes them, then every partition read; and the filters left to Spark."""
    from sbnotebook.spark.source import ServiceBusDataSource

    source = ServiceBusDataSource(given)
    reader = source.reader(source.schema())
    rest = list(reader.pushFilters(filters))  # type: ignore[attr-defined]
    out: list[str] = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            out.extend(batch.column("body_text").to_pylist())
    return sorted(out), rest


@needs_pushdown
def test_the_narrower_end_wins_at_the_same_time(client: ServiceBusClient, emulator: Emulator) -> None:
    """`< tb` and `<= tb` together keep what `< tb` keeps, whichever comes first and whether one is the
    enqueuedBefore option: the batch b enqueued exactly at tb is out (the filters are exact, so Spark
    does not filter again)."""
    from pyspark.sql.datasource import LessThan, LessThanOrEqual

    state = groups(client)
    tb = time_of(state, "b0")
    given = {"entity": "q", "connectionString": emulator.connection_string, "pushFilters": "true"}
    expected = where(state, lambda s, t: t < tb)
    assert expected == sorted(f"a{i}" for i in range(10))
    closed, open_ = LessThanOrEqual(("enqueued_time",), tb), LessThan(("enqueued_time",), tb)
    assert planned_and_read({**given, "enqueuedBefore": tb.isoformat()}, [closed]) == (expected, [])
    assert planned_and_read(given, [open_, closed]) == (expected, [])
    assert planned_and_read(given, [closed, open_]) == (expected, [])
    assert planned_and_read(given, [closed]) == (where(state, lambda s, t: t <= tb), [])


@needs_pushdown
def test_the_narrower_start_wins_at_the_same_time(client: ServiceBusClient, emulator: Emulator) -> None:
    """The start's mirror: `> tb` and `>= tb` together keep what `> tb` keeps, in either order and with
    the enqueuedAfter option; `= tb` with `< tb` keeps nothing (an empty window plans no partition)."""
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, LessThan

    state = groups(client)
    tb = time_of(state, "b0")
    given = {"entity": "q", "connectionString": emulator.connection_string, "pushFilters": "true"}
    expected = where(state, lambda s, t: t > tb)
    assert expected == sorted(f"c{i}" for i in range(10))
    closed, open_ = GreaterThanOrEqual(("enqueued_time",), tb), GreaterThan(("enqueued_time",), tb)
    assert planned_and_read({**given, "enqueuedAfter": tb.isoformat()}, [open_]) == (expected, [])
    assert planned_and_read(given, [open_, closed]) == (expected, [])
    assert planned_and_read(given, [closed, open_]) == (expected, [])
    equal, before = EqualTo(("enqueued_time",), tb), LessThan(("enqueued_time",), tb)
    assert planned_and_read(given, [equal]) == (where(state, lambda s, t: t == tb), [])
    assert planned_and_read(given, [equal, before]) == ([], [])


def test_sb_peek_and_the_spark_read_return_the_same_window(
    sp: Any, ip: Any, sb: SbMagics, client: ServiceBusClient
) -> None:
    """Issue 53: the magic's window is the Spark options' (half-open, found by bisection), at a
    boundary ten messages share, and pushed down where Spark can."""
    state = groups(client)
    tb, tc = (time_of(state, f"{g}0") for g in "bc")
    after, before = tb.isoformat(), tc.isoformat()
    expected = where(state, lambda s, t: tb <= t < tc)
    assert expected == [f"b{i}" for i in range(10)]
    peeked = line(ip, f"sb_peek q -n 100 --enqueued-after {after} --enqueued-before {before}")
    options = sp.read.format("servicebus").option("entity", "q").option("enqueuedAfter", after)
    read = options.option("enqueuedBefore", before).load()
    assert sorted(peeked["body_text"]) == bodies(read) == expected
    from_b = line(ip, f"sb_peek q -n 100 --enqueued-after {after}")
    read_from_b = sp.read.format("servicebus").option("entity", "q").option("enqueuedAfter", after).load()
    assert sorted(from_b["body_text"]) == bodies(read_from_b) == where(state, lambda s, t: t >= tb)
    if PUSHDOWN:
        col = F.col("enqueued_time")
        assert bodies(load(sp).where((col >= tb) & (col < tc))) == expected
