"""The JavaScript SDK (@azure/service-bus, pinned in tests/emulator/js/package.json) against the emulator.

Each test starts a fresh emulator and runs one flow of ``tests/emulator/js/flows.mjs`` with Node, reading
the JSON line it prints. The npm packages are installed once per test session into tests/emulator/js (git
ignores node_modules). Without Node.js (at least package.json's "engines") and npm they skip, saying why,
or under CI=true fail (tests/required.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.required import require_node

JS_DIR = Path(__file__).parent / "js"
INSTALLED_STAMP = JS_DIR / "node_modules" / ".sbnotebook-lock-sha256"
NODE_TIMEOUT = 60.0  # a hung management call shows as a timeout here, not a hung suite
GUID_N = re.compile(r"^[0-9a-f]{32}$")


def _lock_digest() -> str:
    return hashlib.sha256((JS_DIR / "package-lock.json").read_bytes()).hexdigest()


def _install(npm: str) -> None:
    """``npm ci`` into tests/emulator/js unless the lock file's packages are there already. One process at a
    time (xdist workers share the folder): an exclusive lock on a file beside it."""
    import fcntl

    with open(JS_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = _lock_digest()
        if INSTALLED_STAMP.exists() and INSTALLED_STAMP.read_text() == digest:
            return
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci in {JS_DIR} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        INSTALLED_STAMP.write_text(digest)


@pytest.fixture(scope="session")
def node() -> str:
    node, npm = require_node()
    if sys.platform == "win32":
        pytest.skip("the JavaScript SDK tests install with a POSIX file lock (fcntl); not on Windows")
    _install(npm)
    return node


@pytest.fixture
def js_emulator() -> Iterator[Emulator]:
    with Emulator(TEST_TOPOLOGY) as emu:
        yield emu


def run_flow(node: str, emulator: Emulator, flow: str) -> dict[str, Any]:
    """Run one flow of flows.mjs; its JSON result, or a test failure carrying what Node printed."""
    try:
        done = subprocess.run(
            [node, "flows.mjs", emulator.connection_string, flow],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the JS flow {flow!r} did not finish in {NODE_TIMEOUT:.0f} s: {exc.stderr or ''}")
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {}
    if done.returncode != 0 or "error" in result:
        pytest.fail(f"the JS flow {flow!r} failed: {result.get('error')} {done.stderr.strip()[-2000:]}")
    return dict(result)


def test_management_replies_reach_the_reply_to_link(node: str, js_emulator: Emulator) -> None:
    """The JS SDK names a unique reply address in each request's reply-to (its receiving link's
    target): a reply sent anywhere else is never seen, and every management call hangs."""
    result = run_flow(node, js_emulator, "peek")
    assert result["bodies"] == ["m1", "m2", "m3"]
    assert result["sequenceNumbers"] == sorted(result["sequenceNumbers"])


def test_a_message_sent_without_an_id_gets_one_from_the_broker(node: str, js_emulator: Emulator) -> None:
    """The JS SDK sends no message-id unless told to, and needs one to settle (its lock renewer is
    keyed by it): Service Bus stamps a GUID, the same on peek and receive; a given id is kept."""
    result = run_flow(node, js_emulator, "message-id")
    stamped, given = result["received"]
    assert GUID_N.match(stamped), stamped
    assert given == "mine"
    assert result["peeked"] == result["received"]


def test_admin_client_reads_names_from_the_entry_ids(node: str, js_emulator: Emulator) -> None:
    """The JS admin client finds topic, subscription and rule names in each entry's <id> by the
    case-sensitive '/Subscriptions/' and '/Rules/' of its own request path."""
    result = run_flow(node, js_emulator, "admin")
    assert result["created"] == result["got"] == "t/JsSub"
    assert result["subscriptions"] == ["t/all", "t/sql", "t/corr", "t/JsSub"]
    assert result["rules"] == ["$Default", "param"]
    assert result["rule"] == {
        "name": "param",
        "filter": {"sqlExpression": "color = @color", "sqlParameters": {"@color": "red"}},
    }


def test_rule_manager_over_amqp(node: str, js_emulator: Emulator) -> None:
    """ServiceBusRuleManager uses com.microsoft:add-rule / remove-rule / enumerate-rules on the
    subscription's $management link; the rules it makes route the topic's messages."""
    result = run_flow(node, js_emulator, "rules")
    assert result["listed"] == [
        {"name": "reds", "filter": {"sqlExpression": "color = 'red'"}, "action": {"sqlExpression": "SET seen = 'yes'"}},
        {
            "name": "eu",
            "filter": {
                "correlationId": None,
                "messageId": None,
                "to": None,
                "replyTo": None,
                "subject": "order",
                "sessionId": None,
                "replyToSessionId": None,
                "contentType": None,
                "applicationProperties": {"region": "eu"},
            },
            "action": {},
        },
    ]
    assert result["duplicate"] == "MessagingEntityAlreadyExists"
    assert result["missing"] == "MessagingEntityNotFound"
    assert result["delivered"] == [{"body": "red", "seen": "yes"}, {"body": "eu order", "seen": None}]
    assert result["left"] == []


# -------------------------------------------------- the flows of Microsoft's JS samples


def test_receive_loop_with_subscribe(node: str, js_emulator: Emulator) -> None:
    result = run_flow(node, js_emulator, "subscribe")
    assert result == {"seen": ["a", "b", "c", "d"], "left": 0}


def test_schedule_and_cancel(node: str, js_emulator: Emulator) -> None:
    result = run_flow(node, js_emulator, "schedule")
    keep, drop = result["sequenceNumbers"]
    assert keep != drop
    [peeked] = result["peeked"]
    assert peeked["body"] == "keep" and peeked["state"] == "scheduled"
    assert peeked["messageId"]  # the JS SDK gives scheduled messages an id itself


def test_session_state(node: str, js_emulator: Emulator) -> None:
    result = run_flow(node, js_emulator, "session-state")
    assert result == {"state": "step 2", "body": "in session", "sessionId": "s-1"}


def test_deferral(node: str, js_emulator: Emulator) -> None:
    result = run_flow(node, js_emulator, "deferral")
    assert result == {"deferred": "later", "state": "deferred", "left": 0}


def test_dead_letter(node: str, js_emulator: Emulator) -> None:
    result = run_flow(node, js_emulator, "dead-letter")
    assert result == {"body": "poison", "reason": "bad", "description": "cannot parse", "sameId": True}


def test_delete_messages_on_an_empty_queue(node: str, js_emulator: Emulator) -> None:
    """@azure/service-bus 7.10's deleteMessages returns 0 only for status 204 with the error
    condition com.microsoft:message-not-found (it throws "Unexpected response with status code of
    204" for a bare 204), so Microsoft's deleteMessages.js sample fails on an emulator without it."""
    result = run_flow(node, js_emulator, "delete-messages")
    assert result == {"deleted": 2, "purged": 1, "deletedWhenEmpty": 0, "purgedWhenEmpty": 0}
    assert js_emulator.broker.counts("q")["active"] == 0
