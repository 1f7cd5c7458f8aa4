"""The message browser, send panel, charts and message lists, driven through their Python methods and synced
traits against the embedded emulator (settlement and triage panels: test_panels_triage.py). Each test checks both
sides: what happened in Service Bus, and what the widget shows."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import plots
from sbnotebook.notebook.export import read_jsonl
from sbnotebook.notebook.widgets import MessageBrowser, SendPanel, TriagePanel
from tests.core.incidents.test_typed_copies import _send_every_kind, _without_kit, stored
from tests.helpers import drain, send
from tests.widgets.fill import dead_letter

# ------------------------------------------------------------------ browser


def test_browser_pages_by_sequence_number_and_never_locks(emulator: Emulator, client: ServiceBusClient) -> None:
    send(client, "q", *[f"m{i}" for i in range(25)])
    b = MessageBrowser("q", page_size=10, connection=emulator.connection_string)
    assert [r["body_text"] for r in b.records] == [f"m{i}" for i in range(10)]
    assert len(b.rows.labels) == 10 and "sequence numbers 1..10" in b.status.value
    b.next_page()
    b.next_page()
    assert [r["sequence_number"] for r in b.records] == [21, 22, 23, 24, 25]
    b.previous_page()
    assert b.records[0]["sequence_number"] == 11
    b.jump(24)
    assert [r["body_text"] for r in b.records] == ["m23", "m24"]
    b.next_button.click()  # the buttons drive the same methods
    assert b.records == [] and "no messages" in b.status.value
    assert all(m.delivery_count == 0 for m in drain(client, "q"))


def test_browser_searches_bodies_and_shows_details(emulator: Emulator, client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [ServiceBusMessage(json.dumps({"customer": {"id": f"c-{i % 3}"}, "n": i})) for i in range(30)]
            + [ServiceBusMessage(b"\x00\x01binary", application_properties={"kind": "raw"})]
        )
    b = MessageBrowser("q", page_size=4, connection=emulator.connection_string)
    b.search('body_json.customer.id == "c-1"')
    assert [json.loads(r["body_text"])["n"] for r in b.records] == [1, 4, 7, 10]
    assert "4 messages" in b.status.value and "11 scanned for the search" in b.status.value  # stopped at 4
    b.next_page()
    assert [json.loads(r["body_text"])["n"] for r in b.records] == [13, 16, 19, 22]
    b.search('props.kind == "raw"')
    assert len(b.records) == 1
    b.select([0])
    assert "Body (binary)" in b.detail.value and "00 01 62 69" in b.detail.value and "raw" in b.detail.value
    b.search("")
    b.select([0])
    assert "Body (json)" in b.detail.value and "&quot;customer&quot;" in b.detail.value


def test_browser_exports_are_resendable_with_all_properties(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage("text", subject="s1", application_properties={"a": "1"}, correlation_id="c"),
                ServiceBusMessage(b"\xff\x00", content_type="application/octet-stream"),
            ]
        )
    b = MessageBrowser("q", connection=emulator.connection_string)
    exported = b.export_json(tmp_path / "page.jsonl")
    csv = b.export_csv(tmp_path / "page.csv")
    assert pd.read_csv(csv)["subject"].tolist()[0] == "s1"
    frame = b.to_pandas()
    assert list(frame.columns) == list(core.RECORD_FIELDS) and len(frame) == 2
    drain(client, "q")
    lines = [json.loads(x) for x in exported.read_text().splitlines()]
    fields = [f.name for f in core.FIELDS]
    assert list(lines[0]) == [*fields, "application_property_types", "body_kind"]  # the schema's, then the types
    assert "body_base64" in lines[1] and lines[1]["body"] is None  # binary: no text, base64 bytes
    for loaded in (lines, read_jsonl(exported)):  # the raw JSON, and records read back
        core.send("q", loaded, connection=emulator.connection_string)
        back = drain(client, "q")
        assert [b"".join(m.body) for m in back] == [b"text", b"\xff\x00"]
        assert back[0].subject == "s1" and back[0].correlation_id == "c"
        assert back[0].application_properties == {b"a": b"1"}
        assert back[1].content_type == "application/octet-stream"
    records = read_jsonl(exported)
    assert records[0]["enqueued_time"] == frame["enqueued_time"][0].to_pydatetime()


def test_browser_reads_the_dead_letter_queue(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["bad"])
    b = MessageBrowser("q", dlq=True, connection=emulator.connection_string)
    assert b.entity == "q/$deadletterqueue" and len(b.records) == 1
    b.dlq_box.value = False  # the checkbox is a synced trait: flipping it reloads
    assert b.records == [] and b.entity == "q"


def test_panels_take_a_live_connection_or_settings_and_share_one(emulator: Emulator) -> None:
    conn = core.connect(emulator.connection_string)
    by_live = MessageBrowser("q", connection=conn)
    by_string = SendPanel("q", connection=emulator.connection_string)
    by_settings = TriagePanel("q", connection=conn.settings)
    assert by_live.connection is by_string.connection is by_settings.connection is conn
    by_live.jump(1)
    conn.settle()  # connect()'s warm-up opens links in the background
    opened = conn.links_opened
    by_live.jump(1)
    by_settings.reload()
    assert conn.links_opened == opened  # warm: the pooled receiver link is reused


def test_browser_go_with_an_empty_search_drops_the_filter(emulator: Emulator, client: ServiceBusClient) -> None:
    send(client, "q", *[f"m{i}" for i in range(6)])
    b = MessageBrowser("q", page_size=10, connection=emulator.connection_string)
    b.search_box.value = 'text == "m3"'
    b.jump_button.click()
    assert [r["body_text"] for r in b.records] == ["m3"]
    b.search_box.value = ""
    b.jump_button.click()
    assert len(b.records) == 6 and b.where is None


def frontend_commits(box: Any, text: str) -> None:
    """What the frontend sends when the user commits a Text's contents: the comm's 'update' message
    with the new value, through the widget's own message handler (the kernel side of a real sync)."""
    box._handle_msg({"content": {"data": {"method": "update", "state": {"value": text}}}, "buffers": []})


def test_browser_searches_when_the_text_is_committed_not_per_keystroke(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    send(client, "q", *[f"m{i}" for i in range(6)])
    with warnings.catch_warnings():
        # Text.on_submit warned here (ipywidgets 7.7 and 8 both say "on_submit is deprecated"); not
        # every DeprecationWarning: under ipywidgets 7 making any widget warns (traitlets, ipykernel).
        warnings.filterwarnings("error", "on_submit is deprecated", DeprecationWarning)
        warnings.filterwarnings("error", category=DeprecationWarning, module=r"sbnotebook\.")
        b = MessageBrowser("q", page_size=10, connection=emulator.connection_string)
    # The frontend sends the box's text per keystroke when continuous_update is on, and only on
    # Enter / leaving the box when it is off; with it off every 'value' change is a commit.
    assert b.search_box.continuous_update is False
    peeks: list[str | None] = []
    real_peek = core.peek

    def counted(*args: Any, **kwargs: Any) -> Any:
        peeks.append(kwargs.get("where"))
        return real_peek(*args, **kwargs)

    monkeypatch.setattr(core, "peek", counted)
    frontend_commits(b.search_box, 'text == "m3"')
    assert peeks == ['text == "m3"'] and [r["body_text"] for r in b.records] == ["m3"]
    assert "scanned for the search" in b.status.value
    b.search(' text == "m4" ')  # writes the box (stripped): one search, not a second from the write
    assert peeks == ['text == "m3"', 'text == "m4"'] and b.search_box.value == 'text == "m4"'
    frontend_commits(b.search_box, "text ==")  # a bad expression: said in the status, nothing read
    assert "color:#b00" in b.status.value and len(peeks) == 2 and b.where == 'text == "m4"'
    frontend_commits(b.search_box, 'text == "m4"')  # put back as it was: searched again, error gone
    assert len(peeks) == 3 and "color:#b00" not in b.status.value and [r["body_text"] for r in b.records] == ["m4"]
    frontend_commits(b.search_box, "")
    assert peeks[-1] is None and len(b.records) == 6 and b.where is None
    assert all(m.delivery_count == 0 for m in drain(client, "q"))  # peeks only: nothing was locked


def test_browser_runs_a_commit_and_a_go_that_arrive_together_one_after_the_other(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel may handle two widget messages at once: Go (the box's text still the old search)
    is reading a page when the box's commit of "" arrives. The commit waits for Go's load; the panel
    ends unfiltered, its rows and status agreeing (found in JupyterLab: Go's filtered rows under the
    commit's unfiltered status)."""
    send(client, "q", *[f"m{i}" for i in range(6)])
    b = MessageBrowser("q", page_size=10, connection=emulator.connection_string)
    b.search('text == "m3"')
    real_peek = core.peek
    inside, go_on = threading.Event(), threading.Event()

    def held_first(*args: Any, **kwargs: Any) -> Any:
        if not inside.is_set():
            inside.set()
            assert go_on.wait(30)
        return real_peek(*args, **kwargs)

    monkeypatch.setattr(core, "peek", held_first)
    go = threading.Thread(target=b.jump_button.click)
    go.start()
    assert inside.wait(30)  # Go is reading its page, filtered
    commit = threading.Thread(target=frontend_commits, args=(b.search_box, ""))
    commit.start()
    commit.join(1.0)  # unserialized, the commit's whole load runs here
    go_on.set()
    go.join(30)
    commit.join(30)
    assert not go.is_alive() and not commit.is_alive()
    assert b.where is None and len(b.records) == 6, b.status.value
    assert "6 messages" in b.status.value and "scanned" not in b.status.value


def test_browser_exports_the_whole_entity_or_search_with_one_suffix(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    send(client, "q", *[json.dumps({"n": i}) for i in range(600)])
    b = MessageBrowser("q", page_size=20, connection=emulator.connection_string)
    b.export_path.value = "all.jsonl"
    b.export_json_button.click()
    assert not (tmp_path / "all.jsonl.jsonl").exists()
    assert len(read_jsonl(tmp_path / "all.jsonl")) == 600  # every message, not the 20 on the page
    assert b.export_progress.value == 600 and "Exported 600 messages" in b.status.value
    b.search("body_json.n % 100 == 0")
    b.export_path.value = "hundreds.csv"
    b.export_csv_button.click()
    assert pd.read_csv(tmp_path / "hundreds.csv")["sequence_number"].tolist() == [1, 101, 201, 301, 401, 501]
    b.select([0])
    assert len(read_jsonl(b.export_json(tmp_path / "one.jsonl", selection=True))) == 1


def test_the_browsers_json_export_is_core_export_jsonl_and_imports_back_the_same_messages(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export JSON in the panel writes what ``core.export_jsonl`` writes (body kinds, typed
    properties), so an import of the panel's file puts the same messages in the broker: read from the
    emulator's stored bytes by proton, not by the kit. Before, the panel wrote records without types:
    a value body came back a data body, a ``long`` a string."""
    monkeypatch.chdir(tmp_path)
    _send_every_kind(client)
    conn = emulator.connection_string
    b = MessageBrowser("q", connection=conn)
    b.export_path.value = "panel"
    b.export_json_button.click()
    core.export_jsonl("q", tmp_path / "core.jsonl", connection=conn)
    assert (tmp_path / "panel.jsonl").read_text() == (tmp_path / "core.jsonl").read_text()
    assert core.import_jsonl("dl-target", tmp_path / "panel.jsonl", connection=conn).count("sent") == 4
    source = stored(emulator, "q")
    assert source[1]["body"][0][0] == 0x77 and source[0]["properties"]["big"] == ("int", 5)  # a value body, a long
    assert _without_kit(stored(emulator, "dl-target")) == source
    b.select([1, 2])  # the selection: the same lines for those rows
    chosen = b.export_json(tmp_path / "two.jsonl", selection=True).read_text().splitlines()
    assert chosen == (tmp_path / "core.jsonl").read_text().splitlines()[1:3]
    assert "Exported 2 messages" in b.status.value


# ------------------------------------------------------------------ send panel and charts


def test_send_panel_composes_validates_and_reports(emulator: Emulator, client: ServiceBusClient) -> None:
    panel = SendPanel("q", connection=emulator.connection_string)
    panel.body.value = ""
    assert panel.send() is None and "The body is empty" in panel.status.value
    panel.body.value = '{"hello": 1}'
    panel.subject.value = "greeting"
    panel.properties.value = "{not json"
    assert panel.send() is None and "not valid JSON" in panel.status.value
    panel.properties.value = '{"priority": "high"}'
    panel.send_button.click()
    report = panel.reports[-1]
    assert report.ok and panel.progress.value == 1 and "send q: 1 sent of 1" in panel.status.value
    got = drain(client, "q")
    assert got[0].subject == "greeting" and got[0].application_properties == {b"priority": b"high"}
    frame = pd.DataFrame({"body": [f"r{i}" for i in range(20)]})
    assert panel.send_dataframe(frame).count("sent") == 20  # type: ignore[union-attr]
    assert panel.progress.value == 20 and len(drain(client, "q")) == 20
    panel.schedule.value = "+1h"
    panel.send()
    assert core.counts("q", connection=emulator.connection_string).scheduled == 1


def test_charts_are_plain_figures(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", ["x", "y", "y"])
    records = core.peek("q/$deadletterqueue", connection=emulator.connection_string).records
    reasons = plots.dead_letter_reasons(records)
    assert list(reasons.data[0].y) == ["y", "x"] and list(reasons.data[0].x) == [2, 1]
    assert list(plots.delivery_counts(records).data[0].y) == [3]
    assert len(plots.message_age(records).data[0].x) == 3
    report = core.send("q", ["a", "b"], connection=emulator.connection_string)
    assert "2 sent" in plots.send_latency(report).layout.title.text
    assert list(plots.send_throughput({"plain": 10.0, "kit": report}).data[0].x) == ["plain", "kit"]
    counts = core.counts("q", connection=emulator.connection_string)
    import datetime as dt

    depth = plots.depth_over_time([(dt.datetime.now(dt.UTC), counts)], "q")
    assert [t.name for t in depth.data] == ["active", "dead-letter", "scheduled"]


def test_send_panel_refuses_invalid_json_with_a_json_content_type(emulator: Emulator, client: ServiceBusClient) -> None:
    panel = SendPanel("q", connection=emulator.connection_string)
    panel.body.value = '{"order": 1,'
    panel.send_button.click()
    assert "not valid JSON" in panel.status.value and "nothing was sent" in panel.status.value
    assert "\n" not in panel.status.value and panel.reports == []
    assert drain(client, "q", wait=0.3) == []
    panel.content_type.value = "text/plain"  # not JSON on purpose: sent as it is
    panel.send_button.click()
    assert [str(m) for m in drain(client, "q")] == ['{"order": 1,']


# ------------------------------------------------------------------ grids


def test_message_lists_are_grids_with_the_body_and_dead_letter_reason(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    from itables.widget import ITable

    dead_letter(client, "q", ["schema", "timeout"])
    panel = TriagePanel("q", connection=emulator.connection_string)
    assert isinstance(panel.rows.widget, ITable) and panel.rows.is_grid
    frame = panel.rows.widget.df
    assert {"seq", "reason", "description", "body", "deliveries"} <= set(frame.columns)
    assert sorted(frame["reason"]) == ["schema", "timeout"] and frame["body"][0].startswith('{"n": 0')
    assert panel.rows.widget._dt_args.get("select")  # rows are selectable in the browser
    panel.rows.widget.selected_rows = [1]  # what a click in the grid syncs back
    assert panel.selected == [panel.visible[1]] and "timeout happened" in panel.detail.value
    b = MessageBrowser("q", dlq=True, connection=emulator.connection_string)
    assert "reason" in b.rows.widget.df.columns
    b.dlq_box.value = False
    assert "reason" not in b.rows.widget.df.columns and list(b.rows.widget.df.columns)[-1] == "body"


def test_without_itables_the_lists_are_plain_and_say_so(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    import ipywidgets as W

    from sbnotebook.notebook.widgets import grid

    monkeypatch.setitem(sys.modules, "itables.widget", None)  # as if not installed
    monkeypatch.setattr(grid, "_warned", False)
    dead_letter(client, "q", ["schema", "timeout"])
    with caplog.at_level("WARNING"):
        panel = TriagePanel("q", connection=emulator.connection_string)
        TriagePanel("q", connection=emulator.connection_string)
    assert isinstance(panel.rows.widget, W.SelectMultiple) and "plain list" in panel.rows.note
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1  # logged once
    assert "itables" in caplog.records[0].message
    panel.select([1])
    assert panel.rows.widget.value == (1,) and "timeout happened" in panel.detail.value
    # Each line shows what the grid's own columns show: the dead-letter reason and description.
    assert [label.split("  — ", 1)[1] for label in panel.rows.labels] == [
        "reason: schema  — description: schema happened",
        "reason: timeout  — description: timeout happened",
    ]
    assert [text for text, _ in panel.rows.widget.options] == panel.rows.labels


# ------------------------------------------------------------------ widget message sizes


def _widget_tree(root: Any) -> list[Any]:
    import ipywidgets as W

    out, todo = [], [root]
    while todo:
        w = todo.pop()
        if isinstance(w, W.Widget) and w not in out:
            out.append(w)
            todo.extend(getattr(w, "children", ()))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "itables"])
def test_no_panel_widget_message_is_over_5_mb_on_a_page_of_big_bodies(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Databricks caps a widget message at 5 MB: a 1,000-message page of 200 KB bodies, every row
    selected, sends no message (a widget's whole state, or an update) over it."""
    import ipywidgets as W

    from sbnotebook.notebook.widgets import grid

    cap = 5 * 1024 * 1024
    sent: list[tuple[str, int]] = []

    def record(self: Any, msg: Any, buffers: Any = None) -> None:  # what Widget._send hands the comm
        sent.append((type(self).__name__, len(json.dumps(msg, default=str)) + sum(len(b) for b in buffers or [])))

    monkeypatch.setattr(W.Widget, "_send", record)
    monkeypatch.setattr(grid, "configured_mode", lambda: mode)  # as %config SbMagics.grid would
    body = "x" * 200_000
    assert core.send("q", [body] * 1000, connection=emulator.connection_string).count("sent") == 1000
    panel = MessageBrowser("q", page_size=1000, connection=emulator.connection_string)
    panel.select(list(range(1000)))
    assert len(panel.records) == 1000 and panel.rows.is_grid == (mode == "itables")
    states = [(type(w).__name__, len(json.dumps(w.get_state(), default=str))) for w in _widget_tree(panel)]
    # ipywidgets 7 sends a trait's update only through a comm with a kernel (notify_change), so here,
    # without one, nothing reaches _send: there each widget's whole state, which bounds any update,
    # is what is checked (ipywidgets 8 sends updates through comm's stand-in, caught above).
    assert states and (sent or W.__version__.startswith("7."))
    assert [s for s in sent + states if s[1] > cap] == []
