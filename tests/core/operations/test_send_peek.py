"""Sends and peeks through the settlement library, against the emulator."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import EntityNameError, EntityNotFoundError, InvalidInputError, RetryPolicy
from sbnotebook.emulator import Emulator
from tests.helpers import drain

FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.05, max_delay=0.2)


def test_send_then_peek_records_in_the_shared_schema(emulator: Emulator) -> None:
    report = core.send(
        "q",
        [
            "plain text",
            b"\x00\x01\x02",
            {"order": 1, "items": ["a"]},
            {"body": "as a record", "subject": "s", "message_id": "m-9", "application_properties": {"n": 5}},
        ],
        connection=emulator.connection_string,
    )
    assert report.ok and report.count("sent") == 4 and report.failed == 0
    page = core.peek("q", connection=emulator.connection_string)
    assert len(page) == 4
    text, binary, as_json, record = page.records
    assert set(text) == set(core.RECORD_FIELDS)
    assert text["body_text"] == "plain text" and text["state"] == "active" and text["entity"] == "q"
    assert binary["body"] == b"\x00\x01\x02" and binary["body_text"] is None
    assert json.loads(as_json["body_text"]) == {"order": 1, "items": ["a"]}
    assert as_json["content_type"] == "application/json"
    assert record["message_id"] == "m-9" and record["subject"] == "s"
    assert record["application_properties"] == {"n": "5"}  # non-strings JSON-encoded
    assert text["lock_token"] is None and text["delivery_count"] == 0  # peek takes no lock
    frame = page.to_pandas()
    assert list(frame.columns) == list(core.RECORD_FIELDS)
    assert str(frame["enqueued_time"].dtype).startswith("datetime64") and len(frame) == 4


def test_peek_pages_and_dead_letter_queue(emulator: Emulator, client: ServiceBusClient) -> None:
    core.send("q", [f"m{i}" for i in range(600)], connection=emulator.connection_string)
    first = core.peek("q", max_messages=250, connection=emulator.connection_string)
    second = core.peek(
        "q", max_messages=500, from_sequence_number=first.next_sequence_number, connection=emulator.connection_string
    )
    assert len(first) == 250 and len(second) == 350
    assert first.records[-1]["sequence_number"] + 1 == second.records[0]["sequence_number"]
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.dead_letter_message(m, reason="why", error_description="because")
    (dead,) = core.peek("q/$deadletterqueue", connection=emulator.connection_string).records
    assert (dead["dead_letter_reason"], dead["dead_letter_error_description"]) == ("why", "because")
    assert "600 messages" not in repr(first) and "250 messages" in repr(first)


def test_dataframe_rows_round_trip(emulator: Emulator) -> None:
    frame = pd.DataFrame(
        {
            "body": ['{"a": 1}', '{"a": 2}'],
            "content_type": ["application/json", "application/json"],
            "correlation_id": ["c1", "c2"],
            "application_properties": [{"region": "eu"}, {"region": "us"}],
        }
    )
    assert core.send("q", frame, connection=emulator.connection_string).ok
    peeked = core.peek("q", connection=emulator.connection_string).to_pandas()
    assert list(peeked["correlation_id"]) == ["c1", "c2"]
    assert [p["region"] for p in peeked["application_properties"]] == ["eu", "us"]
    # A peeked page goes back out unchanged: export -> re-import.
    again = core.send("fwd-dst", peeked, connection=emulator.connection_string)
    assert again.ok
    assert list(core.peek("fwd-dst", connection=emulator.connection_string).to_pandas()["body_text"]) == [
        '{"a": 1}',
        '{"a": 2}',
    ]


def test_in_flight_limit_and_batching(emulator: Emulator) -> None:
    def generate():  # type: ignore[no-untyped-def]
        for i in range(3000):
            yield {"n": i}

    batched = core.send("q", generate(), max_in_flight=3, connection=emulator.connection_string)
    assert batched.ok and batched.count("sent") == 3000
    assert batched.stats["peak_in_flight"] <= 3
    assert batched.stats["operations"] < 3000 / 50  # packed into batches
    single = core.send(
        "q", (f"s{i}" for i in range(200)), one_per_send=True, max_in_flight=4, connection=emulator.connection_string
    )
    assert single.ok and single.stats["operations"] == 200 and single.stats["peak_in_flight"] <= 4
    assert emulator.broker.counts("q")["active"] == 3200


def test_input_is_streamed_not_read_ahead(emulator: Emulator) -> None:
    """With one unbatched send in flight, the kit pulls at most the next message before the first completes."""
    emulator.latency_ms = 50
    pulled = {"n": 0, "at_first_completion": None}

    def generate():  # type: ignore[no-untyped-def]
        for i in range(20):
            pulled["n"] += 1
            yield f"m{i}"

    def progress(report: core.SendReport) -> None:
        if pulled["at_first_completion"] is None:
            pulled["at_first_completion"] = pulled["n"]

    report = core.send(
        "q", generate(), one_per_send=True, max_in_flight=1, progress=progress, connection=emulator.connection_string
    )
    assert report.ok
    assert pulled["at_first_completion"] is not None and pulled["at_first_completion"] <= 2


def test_retryable_failures_are_retried(emulator: Emulator) -> None:
    emulator.reject_sends("q", 2, "server-busy")
    report = core.send("q", ["a", "b", "c"], retry=FAST_RETRY, connection=emulator.connection_string)
    assert report.ok and report.retries == 2 and report.count("sent") == 3


def test_non_retryable_failures_are_reported_per_message(emulator: Emulator) -> None:
    emulator.reject_sends("q", 1, "quota-exceeded")
    report = core.send("q", ["a", "b"], retry=FAST_RETRY, connection=emulator.connection_string)
    assert report.count("sent") == 0 and report.failed == 2 and report.retries == 0
    failure = report.of(index=0)
    assert failure is not None and failure.outcome == "failed"
    assert failure.condition == "amqp:resource-limit-exceeded"
    assert failure.tracking_id and not failure.retryable and failure.attempts == 1
    frame = report.to_pandas()
    assert list(frame["outcome"]) == ["failed", "failed"]
    with pytest.raises(core.SbError, match="2 of 2"):
        report.raise_for_failures()


def test_retries_give_up_after_the_limit(emulator: Emulator) -> None:
    emulator.reject_sends("q", 10, "server-busy")
    report = core.send("q", ["x"], retry=FAST_RETRY, connection=emulator.connection_string)
    (failure,) = report.failures
    assert failure.retryable and failure.attempts == 4 and failure.condition == "com.microsoft:server-busy"
    assert report.retries == 3  # attempts are tries in all: the send and 3 retries (docs/azure-and-databricks.md)


def test_oversize_and_invalid_items_fail_alone(emulator: Emulator) -> None:
    report = core.send("tiny", ["small", "x" * 10_000, None, "also small"], connection=emulator.connection_string)
    assert report.count("sent") == 2
    assert [f.index for f in report.failures] == [1, 2]
    assert report.of(index=1).condition == "amqp:link:message-size-exceeded"  # type: ignore[union-attr]
    assert report.of(index=3).outcome == "sent"  # type: ignore[union-attr]


def test_bad_targets_fail_before_sending(emulator: Emulator) -> None:
    with pytest.raises(EntityNotFoundError):
        core.send("nope", ["x"], connection=emulator.connection_string)
    with pytest.raises(EntityNameError, match="send to a queue or a topic"):
        core.send("t/subscriptions/all", ["x"], connection=emulator.connection_string)
    with pytest.raises(InvalidInputError):
        core.send("q", ["x"], max_in_flight=0, connection=emulator.connection_string)
    with pytest.raises(InvalidInputError):
        core.peek("q", max_messages=0, connection=emulator.connection_string)


def test_schedule_and_cancel(emulator: Emulator, client: ServiceBusClient) -> None:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    scheduled = core.schedule("q", ["later-1", "later-2"], when, connection=emulator.connection_string)
    assert scheduled.count("scheduled") == 2
    seqs = [int(o.sequence_number or 0) for o in scheduled]
    states = [r["state"] for r in core.peek("q", connection=emulator.connection_string)]
    assert states == ["scheduled", "scheduled"]
    assert core.cancel_scheduled("q", seqs[:1], connection=emulator.connection_string).count("cancelled") == 1
    assert [r["body_text"] for r in core.peek("q", connection=emulator.connection_string)] == ["later-2"]
    soon = core.send(
        "q",
        ["at-time"],
        schedule_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1),
        connection=emulator.connection_string,
    )
    assert soon.ok
    assert "at-time" in [str(m) for m in drain(client, "q", wait=3)]


def test_sync_api_works_inside_a_running_event_loop(emulator: Emulator) -> None:
    """Notebook kernels run an event loop; the blocking API must still work there."""

    async def cell() -> core.SendReport:
        return core.send("q", ["from a notebook"], connection=emulator.connection_string)

    assert asyncio.run(cell()).ok


async def test_async_api(emulator: Emulator) -> None:
    report = await core.asend("q", (f"a{i}" for i in range(50)), connection=emulator.connection_string)
    assert report.ok and report.count("sent") == 50


def test_peek_within_a_session(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("sq", [{"body": f"{s}-{i}", "session_id": s} for s in ("a", "b") for i in range(2)], connection=cs)
    page = core.peek("sq", session_id="b", connection=cs)
    assert [r["body_text"] for r in page] == ["b-0", "b-1"]
    assert {r["session_id"] for r in page} == {"b"}


@pytest.mark.timeout(30)
def test_a_search_iterating_a_field_a_message_lacks_skips_that_message(emulator: Emulator) -> None:
    """`any(... for x in body_json.lines)` over a message without `lines` once looped for ever (the missing
    value answered every index); it must not match, like any other use of a missing field."""
    core.send("q", [{"lines": [1, 5]}, {"other": 1}, {"lines": [0]}], connection=emulator.connection_string)
    for where, expected in [
        ("any(x > 2 for x in body_json.lines)", [[1, 5]]),
        ("all(x > 0 for x in body_json.lines)", [[1, 5]]),
        ("5 in body_json.lines", [[1, 5]]),
        ("len(body_json.lines) == 1", [[0]]),
    ]:
        page = core.peek("q", where=where, connection=emulator.connection_string)
        assert [json.loads(r["body_text"])["lines"] for r in page.records] == expected, where
