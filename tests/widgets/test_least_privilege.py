"""Panels with a least-privilege key (an entity's Listen-only or Send-only policy): the button does
what the key allows; what it does not is reported in the panel, one line naming the right."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.widgets import MessageBrowser, SendPanel
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
