"""The settlement and triage panels, driven through their Python methods and synced traits against the embedded
emulator. Each test checks both sides: what happened in Service Bus, and what the widget shows."""

from __future__ import annotations

import json
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.widgets import SettlementPanel, TriagePanel, merge_patch
from tests.helpers import drain, send
from tests.waiting import renewed_past_the_lock, wait_until
from tests.widgets.fill import dead_letter

# ------------------------------------------------------------------ settlement panel


def test_settlement_panel_settles_selected_rows_and_shows_each_outcome(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    send(client, "q", "a", "b", "c", "d")
    batch = core.receive("q", max_messages=4, connection=emulator.connection_string)
    panel = SettlementPanel(batch, tick=0)
    assert panel.rows.options[0][0].endswith("locked") and "4 locked, the soonest ends in" in panel.locks.value
    panel.select([0, 1])
    panel.buttons["complete"].click()
    panel.reason.value, panel.description_box.value = "bad-total", "total < 0"
    panel.act("dead_letter", [2])
    panel.act("defer", [3])
    labels = [label for label, _ in panel.rows.options]
    assert labels[0].endswith("completed") and labels[2].endswith("dead lettered") and labels[3].endswith("deferred")
    assert "0 unsettled" in panel.status.value and "defer q: 1 deferred of 1" in panel.status.value
    again = panel.act("complete", [0])
    assert again is not None and [o.outcome for o in again] == ["already_settled"]
    assert panel.act("complete", []) is None and "Select one or more rows" in panel.status.value
    dlq = drain(client, "q", sub_queue="deadletter")
    assert [(str(m), m.dead_letter_reason, m.dead_letter_error_description) for m in dlq] == [
        ("c", "bad-total", "total < 0")
    ]
    states = [r["state"] for r in core.peek("q", connection=emulator.connection_string)]
    assert states == ["deferred"]
    batch.close()


def test_settlement_panel_shows_a_lost_lock_and_the_renewal_switch(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    send(client, "short", "slow")
    batch = core.receive("short", max_messages=1, connection=emulator.connection_string)
    panel = SettlementPanel(batch, tick=0.2)
    panel.auto_renew.value = False  # synced trait -> the batch stops renewing
    assert batch.auto_renew is False
    # Until the panel's countdown (its own thread, on the wall clock) and the broker (its timer) both
    # say so, not for a fixed 1.5 s a loaded machine may not have given either thread.
    wait_until(lambda: "lock expired" in panel.rows.options[0][0] and "1 lock expired" in panel.locks.value)
    wait_until(lambda: not emulator.broker._locks)
    report = panel.act("complete", [0])
    assert report is not None and [o.outcome for o in report] == ["lock_lost"] and report.failed == 1
    assert "complete: lock lost" in panel.rows.options[0][0] and "1 lock-lost of 1" in panel.status.value
    panel.close()
    batch.close()


def test_the_countdown_keeps_the_selection_and_the_last_outcome(emulator: Emulator, client: ServiceBusClient) -> None:
    """The countdown ticks on its own thread: it must not clear a selection or erase the outcome
    of the last click (a CI run of the browser test clicked Complete and never saw its result)."""
    send(client, "q", "a", "b")
    batch = core.receive("q", max_messages=2, connection=emulator.connection_string)
    panel = SettlementPanel(batch, tick=0.05)
    try:
        options = panel.rows.options
        panel.select([0])
        time.sleep(0.5)  # ten ticks
        assert panel.rows.value == (0,) and panel.rows.options == options  # nothing redrawn
        report = panel.act("complete")
        assert report is not None and report.count("completed") == 1
        time.sleep(0.5)
        assert "complete q: 1 completed of 1" in panel.status.value and "1 locked" in panel.locks.value
    finally:
        panel.close()
        batch.close()


@pytest.mark.servicebus_clock("manual")
def test_settlement_panel_renewal_keeps_locks_alive(emulator: Emulator, client: ServiceBusClient) -> None:
    send(client, "short", "kept")
    batch = core.receive("short", max_messages=1, connection=emulator.connection_string)
    panel = SettlementPanel(batch, tick=0)
    renewed_past_the_lock(emulator, lock=1.0)  # the broker's time 2.4 s on: only renewal keeps the 1 s lock
    report = panel.act("complete", [0])
    assert report is not None and report.count("completed") == 1 and report.ok
    assert drain(client, "short", wait=0.5) == []
    batch.close()


# ------------------------------------------------------------------ triage


def test_triage_groups_repairs_in_bulk_and_resubmits_copy_first(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["schema", "schema", "timeout", "schema"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    assert panel.reasons == {"schema": 3, "timeout": 1}
    assert panel.groups.label == "all (4)"  # the dropdown names what it shows, never blank
    panel.select_group("schema")
    assert len(panel.rows.records) == 3
    panel.patch.value = '{"currency": "EUR", "n": null}'
    asked = panel.ask_resubmit()
    assert "Type resubmit and press Confirm" in asked and "<" not in asked  # plain text for a notebook cell
    assert "<b>resubmit</b>" in panel.status.value
    assert len(drain(client, "q", wait=0.3)) == 0  # nothing moved before the confirmation
    assert panel.confirm("nope") is None
    report = panel.confirm("resubmit")
    assert report is not None and report.count("resubmitted") == 3 and report.ok and report.target == "q"
    moved = drain(client, "q")
    assert sorted(json.loads(str(m)) == {"currency": "EUR"} for m in moved) == [True] * 3
    assert all(m.application_properties[b"sbnotebook-resubmit-count"] == 1 for m in moved)
    assert all(b"DeadLetterReason" not in m.application_properties for m in moved)
    assert panel.reasons == {"timeout": 1}  # reloaded after the move
    assert "resubmit q/$deadletterqueue -&gt; q: 3 resubmitted" in panel.final_report()
    assert "Type" not in panel.status.value and "3 resubmitted" in panel.status.value  # the prompt is answered
    panel.select_group(None)
    assert panel.groups.label == "all (1)" and len(panel.rows.records) == 1


def test_triage_python_edit_other_target_and_unselected_untouched(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["a", "a", "b"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    before = {r["sequence_number"]: r["delivery_count"] for r in panel.records}
    panel.select_group("a")
    panel.select([1])
    panel.edit = lambda r: {**r, "body_text": r["body_text"].upper()}
    panel.ask_resubmit(target="once")
    assert panel.confirm("resubmit").count("resubmitted") == 1  # type: ignore[union-attr]
    assert [str(m) for m in drain(client, "once")] == ['{"N": 1, "CURRENCY": "USD"}']
    left = core.peek("q/$deadletterqueue", connection=emulator.connection_string).records
    assert sorted(r["body_text"] for r in left) == ['{"n": 0, "currency": "usd"}', '{"n": 2, "currency": "usd"}']
    assert all(r["delivery_count"] == before[r["sequence_number"]] for r in left)  # released: nothing counted


def test_triage_discard_asks_then_removes_only_the_selection(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["junk", "junk", "keep"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    panel.select_group("junk")
    panel.ask_discard()
    panel.cancel()
    assert "Cancelled" in panel.status.value and panel.reasons == {"junk": 2, "keep": 1}
    panel.ask_discard()
    assert panel.confirm_row.layout.display == "flex"
    report = panel.confirm("discard")
    assert report is not None and report.count("discarded") == 2 and report.operation == "discard"
    assert report.target is None and report.ok
    assert panel.reasons == {"keep": 1}
    assert drain(client, "q", wait=0.3) == []


def test_triage_refuses_a_topic_target_for_subscription_dead_letters(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("x"))
    with client.get_subscription_receiver("t", "all") as r:
        for m in r.receive_messages(max_wait_time=5):
            r.dead_letter_message(m, reason="r")
    panel = TriagePanel("t/subscriptions/all", connection=emulator.connection_string)
    assert panel.target.value == ""
    assert "Name a target queue" in panel.ask_resubmit()
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {"a": {"c": 2, "d": 3}}


def test_triage_shows_the_patch_before_confirm_and_clears_it_after_use(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    dead_letter(client, "q", ["a", "b"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    panel.select_group("a")
    panel.patch.value = '{"currency": "EUR"}'
    asked = panel.ask_resubmit()
    assert "merge patch" in asked and "EUR" in asked  # what will be applied, before the confirmation
    assert panel.confirm("resubmit").count("resubmitted") == 1  # type: ignore[union-attr]
    assert panel.patch.value == "" and panel.edit is None  # used once, then cleared
    assert [json.loads(str(m))["currency"] for m in drain(client, "q")] == ["EUR"]
    panel.select_group("b")
    assert "unchanged (no patch)" in panel.ask_resubmit()
    assert panel.confirm("resubmit").count("resubmitted") == 1  # type: ignore[union-attr]
    assert [json.loads(str(m))["currency"] for m in drain(client, "q")] == ["usd"]  # not patched again
    dead_letter(client, "q", ["c"])
    panel.reload()
    panel.edit = lambda r: {**r, "body_text": "edited"}
    assert "Python edit" in panel.ask_resubmit()
    panel.confirm("resubmit")
    assert panel.edit is None and [str(m) for m in drain(client, "q")] == ["edited"]


def test_triage_layout_prompt_under_its_buttons_reload_and_full_labels(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    dead_letter(client, "q", ["schema"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    children = list(panel.children)
    actions = next(c for c in children if panel.resubmit_button in getattr(c, "children", ()))
    assert children.index(panel.status) == children.index(actions) + 1  # the prompt right under its button
    assert children.index(panel.confirm_row) == children.index(panel.status) + 1  # the one ConfirmRow
    panel.ask_discard()
    assert "Type <b>discard</b>" in panel.status.value and panel.confirm_row.layout.display == "flex"
    assert "1 dead-lettered messages" in panel.title.value
    dead_letter(client, "q", ["late"])
    panel.reload_button.click()
    assert panel.reasons == {"schema": 1, "late": 1} and "2 dead-lettered messages" in panel.title.value
    assert panel.pending is None and panel.confirm_row.layout.display == "none"  # asked about other rows
    assert not panel.confirm_row.box.description  # the word box has no label to cut (placeholder only)
    for text in (panel.target, panel.groups):
        assert text.style.description_width == "initial"  # labels never cut
    assert panel.layout.overflow == "hidden" and panel.patch.layout.width == "100%"
