"""The kit with least-privilege keys, as analysts are often given them: a connection string for one
entity (``EntityPath``) with Listen or Send rights only, or a namespace policy with Listen only.

What the key allows works (broker state read directly); what it does not fails with one line
naming the missing right (``ConfigurationError``, which the magics show as the cell's one-line
failure). With an entity's key, the spares' token for the whole namespace is refused: logged once
per connection, and every link puts its own token (``core/sdk/spares.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.conftest import entity_keys_emulator
from tests.helpers import QuickCloseClient, a_listed_and_an_unlisted_session

NAMESPACE_REFUSED = "refused a token for the whole namespace"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with entity_keys_emulator() as emulator:
        emulator.add_policy("ns-reader", ["Listen"])  # and one for the whole namespace
        yield emulator


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "SharedAccessKey=" not in text and "sig=" not in text
    return text


def test_listen_only_key_for_one_entity(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    core.send("q", [{"n": i} for i in range(6)], connection=emu.connection_string)
    core.send("short", ["not yours"], connection=emu.connection_string)
    caplog.set_level(logging.INFO, logger="sbnotebook")
    conn = core.connect(emu.policy_connection_string("reader", "q"))  # checks the key on q itself
    try:
        assert len(core.peek("q", max_messages=10, connection=conn)) == 6
        with core.receive("q", max_messages=2, connection=conn) as batch:
            assert batch.complete().count("completed") == 2
        assert emu.broker.counts("q")["active"] == 4
        with pytest.raises(core.ConfigurationError, match="sending needs the 'Send' right") as refused:
            core.send("q", ["not allowed"], connection=conn)
        _one_line(refused)
        with pytest.raises(core.ConfigurationError, match="'Manage' right") as refused:
            core.counts("q", connection=conn)  # the administration API
        _one_line(refused)
        with pytest.raises(core.ConfigurationError, match="EntityPath") as refused:
            core.peek("short", connection=conn)
        _one_line(refused)
        report = core.purge("q", connection=conn)
        assert report.count("purged") == 4
        assert emu.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
        assert emu.broker.counts("short")["active"] == 1
        # The namespace token on spares was refused: said once for the connection, links put their own
        conn.settle()
        assert conn.spares is not None and conn.spares.covered == 0
        refusals = [
            r for r in caplog.records if r.name == "sbnotebook.core.sdk" and NAMESPACE_REFUSED in r.getMessage()
        ]
        assert len(refusals) == 1
    finally:
        conn.close()


def test_send_only_key_for_one_entity(emu: Emulator) -> None:
    conn = core.connect(emu.policy_connection_string("writer", "q"))
    try:
        report = core.send("q", [{"n": i} for i in range(3)], connection=conn)
        assert report.count("sent") == 3
        assert emu.broker.counts("q")["active"] == 3
        for attempt in (
            lambda: core.peek("q", connection=conn),
            lambda: core.receive("q", max_messages=1, connection=conn),
        ):
            with pytest.raises(core.ConfigurationError, match="needs the 'Listen' right") as refused:
                attempt()
            _one_line(refused)
        assert emu.broker.counts("q")["active"] == 3  # nothing received or locked
    finally:
        conn.close()


def test_namespace_listen_policy_covers_spares_and_reaches_every_entity(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A namespace policy signs the spares' namespace-wide token: links are lent covered spares and
    put no token of their own; its rights still hold (Listen: no sends)."""
    core.send("q", ["a"], connection=emu.connection_string)
    core.send("short", ["b"], connection=emu.connection_string)
    caplog.set_level(logging.INFO, logger="sbnotebook")
    conn = core.connect(emu.policy_connection_string("ns-reader"), warm=False)
    try:
        assert [r["body_text"] for r in core.peek("q", connection=conn)] == ["a"]
        conn.settle()
        assert [r["body_text"] for r in core.peek("short", connection=conn)] == ["b"]  # on a spare
        assert conn.spares is not None and conn.spares.covered >= 1
        with pytest.raises(core.ConfigurationError, match="'Send' right"):
            core.send("tiny", ["no"], connection=conn)
        assert not [r for r in caplog.records if NAMESPACE_REFUSED in r.getMessage()]
        assert emu.broker.counts("tiny")["active"] == 0
    finally:
        conn.close()


def test_a_key_of_another_entity_is_refused_in_one_line(emu: Emulator) -> None:
    """q's key presented for 'short' (the EntityPath edited): the service refuses the token."""
    conn_string = emu.policy_connection_string("reader", "q").replace("EntityPath=q", "EntityPath=short")
    with pytest.raises(core.ConfigurationError) as refused:
        core.connect(conn_string)
    assert "Access refused" in _one_line(refused)


def test_is_unauthorized_tells_a_refused_key_from_other_failures(emu: Emulator) -> None:
    """A key refused a right, by the administration API (HTTP 401) or over AMQP, is ``is_unauthorized``
    (%sb_purge counts by peeking on it); a missing entity is not."""
    listen = core.connect(emu.policy_connection_string("reader", "q"))
    send_only = core.connect(emu.policy_connection_string("writer", "q"))
    try:
        for attempt in (lambda: core.counts("q", connection=listen), lambda: core.peek("q", connection=send_only)):
            with pytest.raises(core.ConfigurationError) as refused:
                attempt()
            assert core.is_unauthorized(refused.value), refused.value
        with pytest.raises(core.EntityNotFoundError) as missing:
            core.counts("nosuch", connection=emu.connection_string)
        assert not core.is_unauthorized(missing.value)
    finally:
        listen.close()
        send_only.close()


def test_a_session_purge_whose_rest_cannot_be_counted_is_not_ok(emu: Emulator) -> None:
    """A Listen and Send key of sq (no Manage, as applications are given) purges the sessions Service
    Bus lists, but what is left can only be counted through the administration API, which refuses
    the key, and a session holding nothing but deferred messages is not listed, so it is never seen.
    The report must not read as complete: an error says what is left was not counted and why. (It
    was ok, with a note, and "(all purged)" in the notebook, while the broker still held a message.)"""
    emu.add_policy("app", ["Listen", "Send"], "sq")
    with QuickCloseClient.from_connection_string(emu.connection_string) as client:
        a_listed_and_an_unlisted_session(client)
    assert emu.broker.counts("sq") == {"active": 2, "deferred": 1, "scheduled": 0, "dead_letter": 0}
    conn = core.connect(emu.policy_connection_string("app", "sq"))
    try:
        report = core.purge("sq", connection=conn)
    finally:
        conn.close()
    assert report.counts == {"purged": 2} and not report.ok, report
    (error,) = report.errors
    assert error.startswith("what is left in sq was not counted, so the purge is not confirmed complete: "), error
    assert "'Manage' right" in error and "session_ids" in error and "SharedAccessKey=" not in error, error
    assert f"[ERRORS: {error}]" in report.summary()
    with pytest.raises(core.SbError, match="purge sq: what is left in sq was not counted"):
        report.raise_for_failures()
    # the broker, read apart from the report: session x's deferred message is still there
    assert emu.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
