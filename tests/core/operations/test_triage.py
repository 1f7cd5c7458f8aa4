"""Dead-letter triage at size (issue 31 point 3): counts per reason / description / subject over the
one scanner, the triage panel opening on the runtime counts and one page, cancelling, flat memory.

Large dead-letter queues are filled the fast way Service Bus offers: messages sent with a short
time to live to a queue that dead-letters on expiry (``ttl-dl``: 1 s), so 20,000 dead-lettered
messages take seconds, not 20,000 receive-and-dead-letter calls."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core.operations.triage import NONE, OTHER, GroupCounts, group_counts
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import send
from tests.processes import start_cli_emulator
from tests.waiting import HANG, settled

DLQ = "ttl-dl/$deadletterqueue"
EXPIRED = "TTLExpiredException"


def fill_dlq(conn: str, n: int, subjects: int = 3) -> None:
    """``n`` messages dead-lettered by expiry, subjects s0..s{subjects-1} round-robin."""
    records = ({"body": f"m{i}", "subject": f"s{i % subjects}"} for i in range(n))
    core.send("ttl-dl", records, max_in_flight=32, connection=conn).raise_for_failures()
    deadline = time.monotonic() + 60
    while core.counts("ttl-dl", connection=conn).dead_letter < n:
        assert time.monotonic() < deadline, core.counts("ttl-dl", connection=conn)
        time.sleep(0.2)


def dead_letter(client: ServiceBusClient, queue: str, reasons: list[tuple[str, str]]) -> None:
    send(client, queue, *[f"x{i}" for i in range(len(reasons))])
    with client.get_queue_receiver(queue) as r:
        got = r.receive_messages(max_message_count=len(reasons), max_wait_time=5)
        for m, (reason, description) in zip(got, reasons, strict=True):
            r.dead_letter_message(m, reason=reason, error_description=description)


def peeks(emulator: Emulator) -> int:
    return emulator.requests["com.microsoft:peek-message"]


# ------------------------------------------------------------------ core.group_counts


def test_group_counts_counts_every_message_by_each_field_with_progress(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    conn = emulator.connection_string
    fill_dlq(conn, 700)  # three pages and more: the scanner's windows, not one peek
    dead_letter(client, "ttl-dl", [("schema", "bad field a"), ("schema", "bad field b"), ("", "")])
    seen: list[int] = []
    counted = group_counts(DLQ, progress=lambda c: seen.append(c.scanned), connection=conn)
    assert counted.done and counted.total == 703 and counted.scanned == 703
    assert counted.counts("dead_letter_reason") == {EXPIRED: 700, "schema": 2, NONE: 1}
    assert counted.counts("subject") == {"s0": 234, "s1": 233, "s2": 233, NONE: 3}
    assert counted.counts("dead_letter_error_description")["bad field a"] == 1
    assert seen == sorted(seen) and seen[-1] == 703 and len(seen) >= 3  # after each page
    assert "703 of 703 messages scanned (100 %)" in counted.progress_text() and counted.rate > 0
    assert counted.progress_text().endswith(", done")
    # With a limit, the line does not say "done" as if every message was counted (it did).
    first = group_counts(DLQ, max_messages=250, connection=conn)
    assert first.scanned == 250 and first.total == 703
    assert first.progress_text().endswith(", done: the first 250 only (max_messages)"), first.progress_text()
    assert group_counts(DLQ, max_messages=703, connection=conn).progress_text().endswith(", done")  # all: done
    frame = counted.to_pandas("dead_letter_reason")
    assert frame[["dead_letter_reason", "messages"]].values.tolist() == [[EXPIRED, 700], ["schema", 2], [NONE, 1]]
    schema = counted.groups["dead_letter_reason"]["schema"]
    assert schema.first_sequence_number == 701 and schema.example_description == "bad field a"
    assert frame["oldest"].dt.tz is not None and frame["oldest"][0] <= frame["newest"][0]
    # The panel's and the summary's counts of a page in hand come from the same code.
    # The first 10 by sequence number are not the first 10 sent (sends are pipelined, 32 in flight):
    # the expected subjects come from each peeked message's body (m{i} was sent with s{i % 3}).
    peeked = core.peek(DLQ, max_messages=10, connection=conn)
    bodies = peeked.to_pandas()["body"].tolist()
    numbers = [int((b.decode() if isinstance(b, bytes) else str(b)).strip('"m')) for b in bodies]
    expected = Counter(f"s{n % 3}" for n in numbers)
    assert len(bodies) == 10 and GroupCounts.of(peeked.records).counts("subject") == dict(expected)


def test_group_counts_keeps_at_most_max_groups_values_and_says_so(
    emulator: Emulator, client: ServiceBusClient, caplog: pytest.LogCaptureFixture
) -> None:
    dead_letter(client, "q", [("r", f"unique description {i}") for i in range(6)])
    with caplog.at_level("INFO", logger="sbnotebook.core.operations.triage"):
        counted = group_counts("q/$deadletterqueue", max_groups=4, connection=emulator.connection_string)
    described = counted.counts("dead_letter_error_description")
    assert len(described) == 5 and described[OTHER] == 2 and sum(described.values()) == 6
    assert counted.notes == [
        "dead_letter_error_description: more than 4 distinct values; the rest are counted under '(other values)'"
    ]
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1  # logged once


def test_group_counts_stops_when_cancelled_and_reads_no_further(emulator: Emulator) -> None:
    conn = emulator.connection_string
    fill_dlq(conn, 5_000)
    stop = threading.Event()
    before = peeks(emulator)
    counted = group_counts(DLQ, progress=lambda c: stop.set(), cancel=stop, connection=conn)
    assert counted.cancelled and not counted.done and counted.scanned == core.PAGE_SIZE  # the first page only
    assert "stopped: partial counts" in counted.progress_text()
    # Peeks sent just before the cancel may reach the emulator later: counted once they stop
    # coming (a scan left running would never stop, and fail there), not after a fixed wait.
    asked = settled(lambda: peeks(emulator)) - before
    assert asked <= 1 + 16  # the first page and the windows that were in flight, no more


# ------------------------------------------------------------------ the panel at 20,000


@pytest.fixture
def big_dlq(emulator: Emulator) -> int:
    fill_dlq(emulator.connection_string, 20_000)
    return 20_000


class ArrivalTimes(Counter[str]):
    """The broker's request counts, keeping when each kind of request first arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[str, float] = {}

    def __setitem__(self, key: str, value: int) -> None:
        self.first.setdefault(key, time.monotonic())
        super().__setitem__(key, value)


def test_panel_opens_on_a_large_dlq_in_one_round_trip_plus_the_first_page(emulator: Emulator, big_dlq: int) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    conn = core.connect(emulator.connection_string)
    conn.settle()  # connect()'s background warm-up peeks other entities: done before counting
    TriagePanel("ttl-dl", connection=conn)  # links open (a notebook's connect() warms them)
    arrived = ArrivalTimes()
    emulator.broker.requests = arrived  # what emulator.requests reads, each request's arrival kept
    emulator.latency_ms = 1000  # a far namespace: every answer a second late
    try:
        panel = TriagePanel("ttl-dl", connection=conn)
    finally:
        emulator.latency_ms = 0
    assert emulator.requests["admin GET"] == 1  # the runtime counts
    assert peeks(emulator) == 1 and emulator.requests["peeked messages"] == core.PAGE_SIZE  # one page
    # The counts and the page are asked at once: both reached the broker before either answer could
    # be back (asked one after the other, the second would come a second later). Not the panel's time
    # to open, which a loaded machine stretches for reasons of its own.
    gap = abs(arrived.first["admin GET"] - arrived.first["com.microsoft:peek-message"])
    assert gap < 1.0, gap
    assert panel.total == big_dlq and len(panel.records) == core.PAGE_SIZE and not panel.complete
    assert "20,000 dead-lettered messages; the first 250 loaded" in panel.title.value
    assert panel.groups.options[0][0] == "all (20,000)" and "(first page)" in panel.groups.description
    assert "Count groups" in panel.progress_text.value

    counted = panel.count(wait=True)
    assert counted.done and panel.complete and panel.reasons == {EXPIRED: big_dlq}
    assert panel.progress.value == big_dlq and "20,000 of 20,000 messages scanned" in panel.progress_text.value
    panel.by.value = "subject"
    assert [label for label, _ in panel.groups.options] == ["all (20,000)", "s0 (6,667)", "s1 (6,667)", "s2 (6,666)"]
    assert "s0" in panel.chart.value and "6,667" in panel.chart.value
    panel.select_group("s1")  # in the first page already: no scan needed for a page of it
    assert len(panel.visible) == 83 and {r["subject"] for r in panel.visible} == {"s1"}
    assert "83 of 6,667 messages shown" in panel.rows_note.value
    assert "Remove 83 messages (shown, of 6,667 in the group)" in panel.ask_discard()  # says what it acts on
    panel.cancel()


def test_panel_finds_a_page_of_a_group_beyond_the_first_page(
    emulator: Emulator, client: ServiceBusClient, big_dlq: int
) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    dead_letter(client, "ttl-dl", [("late", "after the others"), ("late", "after the others")])
    panel = TriagePanel("ttl-dl", connection=emulator.connection_string)
    assert "late" not in panel.reasons  # the first page only, until counted
    panel.count(wait=True)
    assert panel.reasons == {EXPIRED: big_dlq, "late": 2}
    panel.select_group("late")
    assert panel.wait(30)
    assert [r["dead_letter_reason"] for r in panel.visible] == ["late", "late"]
    assert "2 messages shown" in panel.rows_note.value
    frame = panel.to_pandas(max_messages=5)  # asked for: a DataFrame of the group, capped
    assert frame["dead_letter_reason"].tolist() == ["late", "late"]
    panel.select_group(None)
    assert len(panel.to_pandas(max_messages=300)) == 300


def test_panel_stop_button_ends_counting_with_partial_counts(emulator: Emulator, big_dlq: int) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    panel = TriagePanel("ttl-dl", connection=emulator.connection_string)
    emulator.latency_ms = 200  # so that counting runs long enough (seconds) to be stopped however loaded
    try:
        counting = panel.count()
        assert panel.stop_button.disabled is False and panel.count_button.disabled is True
        deadline = time.monotonic() + HANG
        while counting.scanned < 1_000:
            assert time.monotonic() < deadline and counting.running
            time.sleep(0.01)
        panel.stop_button.click()
        assert panel.wait(HANG)
    finally:
        emulator.latency_ms = 0
    assert counting.cancelled and 1_000 <= counting.scanned < big_dlq
    settled(lambda: peeks(emulator))  # a peek sent just before the stop lands; one left scanning never stops
    assert panel.stop_button.disabled is True and panel.count_button.disabled is False
    assert "partial: stopped" in panel.groups.description and "stopped: partial counts" in panel.progress_text.value


# ------------------------------------------------------------------ memory


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_counting_30_000_dead_lettered_messages_keeps_memory_flat(tmp_path: Path) -> None:
    """The emulator runs in its own process, so tracemalloc traces only what counting allocates here
    (the kit and the SDK), not the emulator's work too. 30,000 messages, not the 10^5 of before (97-171 s
    under the suite's load, tracemalloc slowing every allocation): the peak is the scanner's windows in
    flight, the same at any size past 4,000 (measured below), and counting that held the records would pass
    the bound; counting 10^5 is measured by benchmarks/scale.py."""
    config = tmp_path / "topology.json"
    config.write_text(json.dumps(TEST_TOPOLOGY))
    proc, conn = start_cli_emulator("--port", "0", "--admin-port", "0", "--config", str(config))
    try:
        fill_dlq(conn, 30_000)
        core.counts("ttl-dl", connection=conn)
        held: list[Any] = []
        tracemalloc.start()
        try:
            counted = group_counts(DLQ, connection=conn, progress=lambda c: held.append(c.scanned))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        core.close_all()
        proc.terminate()
        proc.wait(timeout=30)
    assert counted.done and counted.counts("subject") == {"s0": 10_000, "s1": 10_000, "s2": 10_000}
    # Measured (kit and SDK only, the emulator in its own process): a peak of 14.7 MiB at 30,000 and
    # 15.4 MiB at 10^5, the scanner's windows in flight (16 pages of 250) and the counters; counting
    # that held the records peaked at 185 MiB at 10^5, so about 55 MiB at 30,000.
    assert peak < 24 * 1024 * 1024, f"peak traced memory {peak / 2**20:.1f} MiB"
