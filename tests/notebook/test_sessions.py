"""%sb_sessions, %sb_session_state and the sessions panel, through a real IPython shell."""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import magic_fails
from tests.shell import answer, line
from tests.waiting import wait_until

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def _sessions(client: ServiceBusClient, *pairs: tuple[str, str]) -> None:
    with client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(body, session_id=sid) for sid, body in pairs])


def test_sessions_lists_count_state_and_lock(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    _sessions(client, ("a", "1"), ("a", "2"), ("b", "3"))
    core.set_session_state("sq60", "a", '{"step": 1}', connection=sb.conn())
    with client.get_queue_receiver("sq60", session_id="b", max_wait_time=1):
        frame = line(ip, "sb_sessions sq60")
    out = capsys.readouterr().out
    assert "2 sessions in sq60, 1 held by another receiver" in out
    rows = frame.set_index("session_id")
    assert rows.loc["a", "messages"] == 2 and rows.loc["a", "state"] == '{"step": 1}' and not rows.loc["a", "locked"]
    assert bool(rows.loc["b", "locked"])
    ids = line(ip, "sb_sessions sq60 --ids-only --max-sessions 1")
    assert list(ids.columns) == ["session_id"] and len(ids) == 1
    assert "stopped at --max-sessions 1" in capsys.readouterr().out
    assert "not session-enabled" in magic_fails(ip, "sb_sessions q")  # one line
    refused = magic_fails(ip, "sb_sessions sq60 --updated-after yesterday")
    assert refused == f"sbnotebook: %sb_sessions: --updated-after takes {core.TIME_FORMS}; not 'yesterday'.", refused


def test_session_state_show_set_and_clear_ask_first(
    ip: Any, sb: SbMagics, client: ServiceBusClient, emulator: Emulator, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    line(ip, "sb_session_state sq60 s-1")
    assert "Session s-1 of sq60 has no state." in capsys.readouterr().out
    answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_session_state sq60 s-1 --set '{\"step\": 3}'").startswith("nothing done:")
    out = capsys.readouterr().out
    assert "- now:   (no state)" in out and '"step": 3' in out
    assert core.get_session_state("sq60", "s-1", connection=sb.conn()) is None
    answer(monkeypatch, "yes")
    line(ip, "sb_session_state sq60 s-1 --set '{\"step\": 3}'")
    assert "state replaced" in capsys.readouterr().out
    assert core.get_session_state("sq60", "s-1", connection=sb.conn()) == b'{"step": 3}'
    line(ip, "sb_session_state sq60 s-1")
    assert '"step": 3' in capsys.readouterr().out
    assert "--set takes JSON" in magic_fails(ip, "sb_session_state sq60 s-1 --set 'not json'")
    assert "give one of" in magic_fails(ip, "sb_session_state sq60 s-1 --text plain --clear")
    line(ip, "sb_session_state sq60 s-1 --text checkpoint-9 --yes")
    assert core.get_session_state("sq60", "s-1", connection=sb.conn()) == b"checkpoint-9"
    with client.get_queue_receiver("sq60", session_id="s-1", max_wait_time=1):
        assert "held by another receiver" in magic_fails(ip, "sb_session_state sq60 s-1 --clear --yes")
        # Peeking a held session: one line, says why.
        assert "held by another receiver" in magic_fails(ip, "sb_peek sq60 --session-id s-1")
    # The SDK's receiver closes without waiting for the broker to let the session go (it failed the
    # --clear below once, at -n 8): the session is free when the broker has read its link's end.
    wait_until(lambda: not any(emulator.broker.sessions._owned.values()))
    line(ip, "sb_session_state sq60 s-1 --clear --yes")
    assert "state cleared" in capsys.readouterr().out
    assert core.get_session_state("sq60", "s-1", connection=sb.conn()) is None


def test_sessions_panel_lists_peeks_and_edits_state_after_confirm(
    ip: Any, sb: SbMagics, client: ServiceBusClient
) -> None:
    from sbnotebook.notebook.widgets.sessions import SessionsPanel

    _sessions(client, ("a", "one"), ("b", "two"))
    panel = line(ip, "sb_sessions sq60 --panel")
    assert isinstance(panel, SessionsPanel) and panel.connection is sb.connection
    assert [value for _, value in panel.list.options] == ["a", "b"] and panel.selected == "a"
    panel.peek()
    assert "one" in panel.messages.value and "1 messages in session a" in panel.messages.value
    panel.state.value = '{"step": 2}'
    panel.ask_save()
    assert panel.confirm_row.layout.display == "flex" and "(no state)" in panel.confirm_row.question.value
    assert core.get_session_state("sq60", "a", connection=sb.conn()) is None  # nothing before Confirm
    panel.confirm()
    assert core.get_session_state("sq60", "a", connection=sb.conn()) == b'{"step": 2}'
    assert panel.confirm_row.layout.display == "none" and "replaced" in panel.status.value
    assert '"step": 2' in panel.state.value  # the listing was refreshed
    panel.state.value = "{broken"
    panel.save_button.click()
    assert "not valid" in panel.status.value and panel.pending is None
    panel.list.value = "b"
    panel.ask_clear()
    panel.cancel()
    panel.clear_button.click()
    panel.confirm_row.confirm_button.click()
    assert core.get_session_state("sq60", "b", connection=sb.conn()) is None
    # Reading a session's messages in the panel locked nothing: both can be received, none counted.
    with client.get_queue_receiver("sq60", session_id="a", max_wait_time=1) as r:
        assert [m.delivery_count for m in r.receive_messages(max_wait_time=30)] == [0]
