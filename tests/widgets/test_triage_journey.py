"""The triage panel's "Journey" button: what happened to the selected dead letter, from the broker."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient

from sbnotebook.emulator import Emulator
from sbnotebook.notebook.widgets import TriagePanel
from tests.widgets.fill import dead_letter


def test_journey_shows_the_selected_messages_history(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["bad-total", "other"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    try:
        panel.journey_button.click()  # nothing selected: says what to do, shows nothing
        assert "Select a message first" in panel.status.value and panel.journey_frame is None
        second = panel.rows.records.index(next(r for r in panel.rows.records if r["dead_letter_reason"] == "other"))
        panel.select([second])
        panel.journey_button.click()
        frame = panel.journey_frame
        assert list(frame["event"]) == ["accepted", "delivered", "dead_lettered"]
        assert frame["reason"].iloc[-1] == "other" and int(frame["delivery_count"].iloc[-1]) == 1
        assert set(frame["sequence_number"]) == {panel.rows.records[second]["sequence_number"]}
        assert "Journey of #" in panel.detail.value and "dead_lettered" in panel.detail.value
    finally:
        panel.close()
