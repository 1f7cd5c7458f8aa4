"""``GET /$emulator/journey``: the same journey as ``Emulator.journey``, behind the administration
API's authorization, and every malformed question refused with a reason (never a crash, never a
reply the size of what was asked)."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage

from sbnotebook.emulator import DEFAULT_KEY, DEFAULT_KEY_NAME, Emulator
from sbnotebook.emulator.journey.log import MAX_EVENTS
from sbnotebook.emulator.security.sas import sign

from ...helpers import QuickCloseClient
from .test_journey import TOPOLOGY


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as e:
        with QuickCloseClient.from_connection_string(e.connection_string) as sb, sb.get_queue_sender("poison") as s:
            s.send_messages([ServiceBusMessage("x", message_id="r1"), ServiceBusMessage("y", message_id="r2")])
        yield e


def ask(emu: Emulator, query: str, key: str = DEFAULT_KEY, method: str = "GET") -> tuple[int, Any]:
    token = sign(f"sb://{emu.address}:{emu.port}/", DEFAULT_KEY_NAME, key, time.time() + 60)
    conn = http.client.HTTPConnection(emu.address, emu.port, timeout=30)
    try:
        conn.request(method, f"/$emulator/journey?{query}", headers={"Authorization": token, "Content-Length": "0"})
        reply = conn.getresponse()
        body = reply.read().decode()
    finally:
        conn.close()
    return reply.status, json.loads(body) if body.startswith("{") else body


def test_the_route_answers_what_the_emulator_does(emu: Emulator) -> None:
    status, body = ask(emu, "entity=poison&message-id=r1")
    assert status == 200
    direct = emu.journey("poison", message_id="r1")
    # (another test of the module may have received r1 since: the two read the same log)
    assert [e["event"] for e in body["events"]] == [e["event"] for e in direct.events]
    assert body["events"][0]["event"] == "accepted"
    assert body["events"][0]["sequence_number"] == direct.events[0]["sequence_number"]
    assert body["events"][0]["time"].endswith("Z")
    assert (body["dropped"], body["capacity"], body["truncated"]) == (0, MAX_EVENTS, False)
    status, body = ask(emu, "entity=POISON&sequence-number=2")
    assert status == 200 and [e["message_id"] for e in body["events"]] == ["r2"]
    status, body = ask(emu, "entity=poison&message-id=nobody")
    assert status == 200 and body["events"] == []


def test_a_wrong_key_is_refused(emu: Emulator) -> None:
    status, body = ask(emu, "entity=poison&message-id=r1", key="d3Jvbmcga2V5IGZvciB0aGUgdGVzdA==")
    assert status == 401 and "r1" not in body


@pytest.mark.parametrize(
    "query",
    [
        "",
        "entity=poison",
        "message-id=r1",
        "entity=poison&message-id=r1&sequence-number=1",
        "entity=poison&message-id=r1&message-id=r2",
        "entity=poison&sequence-number=one",
        "entity=poison&sequence-number=-1",
        "entity=poison&trace-id=xyz",
        "entity=poison&message-id=" + "m" * 200,
        "entity=poison&message-id=r1&limit=0",
        f"entity=poison&message-id=r1&limit={MAX_EVENTS + 1}",
        "entity=poison&message-id=r1&limit=" + "9" * 400,
        "entity=poison&message-id=r1&color=red",
        "entity=poison&message-id=r1&" + urllib.parse.quote("<script>") + "=1",
    ],
)
def test_a_bad_question_is_refused_with_its_reason(emu: Emulator, query: str) -> None:
    status, body = ask(emu, query)
    assert status == 400, body
    assert "<Detail>" in body and len(body) < 1000
    assert "<script>" not in body


def test_the_limit_cuts_the_rows_and_says_so(emu: Emulator) -> None:
    with QuickCloseClient.from_connection_string(emu.connection_string) as sb, sb.get_queue_receiver("poison") as r:
        got = [m for m in r.receive_messages(max_message_count=2, max_wait_time=30) if m.message_id == "r2"]
        r.abandon_message(got[0])
    status, body = ask(emu, "entity=poison&message-id=r2&limit=2")
    assert status == 200 and body["truncated"] is True and len(body["events"]) == 2
    status, body = ask(emu, "entity=poison&message-id=r2&limit=3")
    assert body["truncated"] is False and len(body["events"]) == 3


def test_the_route_takes_get_only(emu: Emulator) -> None:
    status, _ = ask(emu, "entity=poison&message-id=r1", method="DELETE")
    assert status == 405
