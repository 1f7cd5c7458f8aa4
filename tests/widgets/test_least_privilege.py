"""Panels with a least-privilege key (an entity's Listen-only or Send-only policy): the button does
what the key allows; what it does not is reported in the panel, one line naming the right."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.purging import BY_PEEK, BY_PEEK_NOTE
from sbnotebook.notebook.widgets import MessageBrowser, SendPanel
from sbnotebook.notebook.widgets.purge import PurgePanel
from tests.conftest import entity_keys_emulator


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with entity_keys_emulator() as emulator:
        yield emulator


def test_send_panel_with_a_listen_only_key_says_which_right_is_missing(emu: Emulator) -> None:
    panel = SendPanel("q", connection=emu.policy_connection_string("reader", "q"))
    panel.body.value = '{"order": 1}'
    panel.send_button.click()
    assert "&#x27;Send&#x27; right" in panel.status.value or "'Send' right" in panel.status.value
    assert "\n" not in panel.status.value and "SharedAccessKey" not in panel.status.value
    assert emu.broker.counts("q")["active"] == 0


def test_send_panel_with_a_send_only_key_sends(emu: Emulator) -> None:
    panel = SendPanel("q", connection=emu.policy_connection_string("writer", "q"))
    panel.body.value = '{"order": 1}'
    panel.send_button.click()
    assert emu.broker.counts("q")["active"] == 1


def test_browser_with_a_listen_only_key_pages_and_with_a_send_only_key_says_listen(emu: Emulator) -> None:
    core.send("q", ["m1", "m2"], connection=emu.connection_string)
    browser = MessageBrowser("q", connection=emu.policy_connection_string("reader", "q"))
    assert [r["body_text"] for r in browser.records] == ["m1", "m2"]
    # Opening the browser peeks: refused as the magic's cell fails (%sb_browse), one line
    with pytest.raises(core.ConfigurationError, match="'Listen' right") as refused:
        MessageBrowser("q", connection=emu.policy_connection_string("writer", "q"))
    assert "\n" not in str(refused.value)


def test_purge_panel_with_a_listen_send_key_counts_by_peek_says_so_and_purges(emu: Emulator) -> None:
    """The panel shares %sb_purge's count: without Manage it peeks, says so in the question and the
    reports, and purges once the word is typed; the broker, read apart, is empty. A Send-only key
    cannot count (nor purge): the panel says which right is missing and nothing is removed."""
    core.send("q", ["m1", "m2", "m3"], connection=emu.connection_string)
    with core.receive("q", max_messages=1, connection=emu.connection_string) as batch:
        batch.dead_letter(reason="bad")
    assert emu.broker.counts("q") == {"active": 2, "deferred": 0, "scheduled": 0, "dead_letter": 1}

    refused = PurgePanel("q", connection=emu.policy_connection_string("writer", "q"))
    refused.kinds["dlq"].value = True
    refused.purge_button.click()
    assert "&#x27;Listen&#x27; right" in refused.status.value and refused.pending is None
    assert "SharedAccessKey" not in refused.status.value

    emu.add_policy("app", ["Listen", "Send"], "q")
    panel = PurgePanel("q", connection=emu.policy_connection_string("app", "q"))
    panel.kinds["dlq"].value = True
    panel.purge_button.click()
    question = panel.confirm_row.question.value
    assert "Purge q: 2 active, 1 dead-lettered message(s), 3 in all" in question, question
    assert html.escape(BY_PEEK) in question
    assert emu.broker.counts("q")["active"] == 2  # nothing removed before the word
    reports = panel.confirm("purge")
    assert [(r.entity, r.counts) for r in reports] == [("q", {"purged": 2}), ("q/$deadletterqueue", {"purged": 1})]
    assert all(BY_PEEK_NOTE in r.notes for r in reports) and html.escape(BY_PEEK_NOTE) in panel.status.value
    assert emu.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
