"""Export an entity to JSON lines and import it back: every property survives (round trip through
the real SDK and the embedded emulator), through the core and through %sb_export / %sb_import."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import InvalidInputError, Report
from sbnotebook.core.files.importing import ImportProgress
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import magic_fails
from tests.shell import line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded

# What differs between a message and its imported copy by nature.
ASSIGNED = {"message_id", "sequence_number", "enqueued_time", "entity"}


def _variety(client: ServiceBusClient) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage(
                    '{"order": 1, "total": 9.5}',
                    content_type="application/json",
                    subject="order",
                    correlation_id="c-1",
                    application_properties={"region": "eu", "priority": 3, "urgent": True, "ratio": 0.5},
                    time_to_live=dt.timedelta(hours=2),
                ),
                ServiceBusMessage(b"\x00\x01\x02binary\xff", content_type="application/octet-stream", session_id="s-9"),
                ServiceBusMessage("plain text", reply_to="replies", to="somewhere", partition_key="pk"),
            ]
        )
        s.schedule_messages(ServiceBusMessage("later", subject="reminder"), later)


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ASSIGNED} for r in records]


def test_round_trip_keeps_every_property_but_ids(emulator: Emulator, client: ServiceBusClient, tmp_path: Path) -> None:
    conn = core.connect(emulator.connection_string)
    _variety(client)
    path = tmp_path / "q.jsonl"
    assert core.export_jsonl("q", path, connection=conn) == 4
    report = core.import_jsonl("dl-target", path, connection=conn)
    assert isinstance(report, Report) and report.count("sent") == 4 and report.ok
    before = core.scan_records("q", connection=conn)
    after = core.scan_records("dl-target", connection=conn)
    assert _comparable(after) == _comparable(before)
    assert after[1]["body"] == b"\x00\x01\x02binary\xff" and after[1]["session_id"] == "s-9"
    assert after[3]["state"] == "scheduled" and after[0]["time_to_live"] == 7200
    assert {r["message_id"] for r in after}.isdisjoint({r["message_id"] for r in before})  # fresh ids
    # --keep-message-id keeps them; typed properties come back as numbers and booleans on request.
    core.import_jsonl("fwd-dst", path, keep_message_id=True, decode_properties=True, connection=conn)
    kept = core.scan_records("fwd-dst", connection=conn)
    assert [r["message_id"] for r in kept] == [r["message_id"] for r in before]
    with client.get_queue_receiver("fwd-dst", max_wait_time=1) as r:
        (first,) = r.peek_messages(max_message_count=1)
    props = {k.decode(): v for k, v in first.application_properties.items()}
    assert props["priority"] == 3 and props["urgent"] is True and props["ratio"] == 0.5
    assert props["region"] in (b"eu", "eu")


def test_import_checks_the_file_first_and_exports_a_search(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    conn = core.connect(emulator.connection_string)
    _variety(client)
    path = tmp_path / "hits.jsonl"
    assert core.export_jsonl("q", path, where='subject == "order"', connection=conn) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{not json\n")
    with pytest.raises(InvalidInputError, match=r"Line 2 of .* is not valid JSON"):
        core.import_jsonl("dl-target", bad, connection=conn)
    assert core.scan_records("dl-target", connection=conn) == []  # nothing was sent
    with pytest.raises(InvalidInputError, match="No file"):
        core.import_jsonl("dl-target", tmp_path / "missing.jsonl", connection=conn)


def test_export_and_import_magics(ip: Any, sb: SbMagics, client: ServiceBusClient, tmp_path: Path, capsys: Any) -> None:
    _variety(client)
    with client.get_queue_receiver("q") as r:
        (m,) = r.receive_messages(max_message_count=1, max_wait_time=5)
        r.dead_letter_message(m, reason="bad-total", error_description="why")
    out_file = tmp_path / "dlq.jsonl"
    line(ip, f"sb_export q {out_file} --dlq")
    assert f"Exported 1 messages of q/$deadletterqueue to {out_file}." in capsys.readouterr().out
    exported = json.loads(out_file.read_text().splitlines()[0])
    assert exported["dead_letter_reason"] == "bad-total" and exported["subject"] == "order"
    report = line(ip, f"sb_import dl-target {out_file}")
    out = capsys.readouterr().out
    assert "Importing 1 messages from" in out and "fresh message ids" in out and "send dl-target: 1 sent" in out
    assert isinstance(report, Report) and report.count("sent") == 1
    (copy,) = core.scan_records("dl-target", connection=sb.conn())
    assert copy["subject"] == "order" and copy["application_properties"]["region"] == "eu"
    assert copy["dead_letter_reason"] is None  # the broker's reason is dropped, as a resubmit drops it
    assert "No file" in magic_fails(ip, f"sb_import dl-target {tmp_path / 'nope.jsonl'}")
    assert magic_fails(ip, f"sb_export nosuch {tmp_path / 'x.jsonl'}").startswith("EntityNotFoundError")


def test_export_and_import_magics_say_when_they_resume(
    ip: Any, sb: SbMagics, client: ServiceBusClient, tmp_path: Path, capsys: Any
) -> None:
    """An export cut short (its marker still there) and an import with lines recorded as sent: the
    same commands say they resume, and finish with every message once."""
    core.send("q", [f"m{i}" for i in range(30)], connection=sb.conn())
    out = tmp_path / "q.jsonl"
    core.export_jsonl("q", out, connection=sb.conn())
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:12]) + lines[12][:7])  # as a kill leaves it: 12 lines and a half
    Path(f"{out}.exporting").write_text(json.dumps({"entity": "q", "where": None}))
    line(ip, f"sb_export q {out}")
    printed = capsys.readouterr().out
    assert "Resuming the export" in printed and "12 messages already written" in printed
    assert "Exported 30 messages of q" in printed
    assert [json.loads(x)["body_text"] for x in out.read_text().splitlines()] == [f"m{i}" for i in range(30)]
    report = core.import_jsonl("dl-target", out, connection=sb.conn())
    assert report.count("sent") == 30 and not list(tmp_path.glob("q.jsonl.importing-*"))
    state = ImportProgress("dl-target", "6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41", 0, 0, done=20)
    stat = out.stat()
    state.size, state.mtime_ns = stat.st_size, stat.st_mtime_ns
    Path(f"{out}.importing-dl-target").write_text(json.dumps(state.to_json()))
    line(ip, f"sb_import dl-target {out}")
    printed = capsys.readouterr().out
    assert "Resuming: lines up to 20 were sent before" in printed and "send dl-target: 10 sent" in printed
    assert _records_in(sb, "dl-target") == 40


def _records_in(sb: SbMagics, queue: str) -> int:
    return len(core.scan_records(queue, connection=sb.conn()))


def test_unreadable_markers_are_said_once_and_no_import_is_announced(
    ip: Any, sb: SbMagics, tmp_path: Path, capsys: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """%sb_export asks for the resume point and the export asks again: a marker cut short is one
    WARNING, not two. %sb_import with its marker cut short is refused in one line naming it, with no
    'Importing ...' printed before, and nothing sent (the broker's count)."""
    core.send("q", ["m0", "m1"], connection=sb.conn())
    out = tmp_path / "q.jsonl"
    out.write_text("an earlier export\n")
    Path(f"{out}.exporting").write_text('{"entity": "q", "wh')  # cut short by a full disk
    with caplog.at_level("WARNING", logger="sbnotebook"):
        line(ip, f"sb_export q {out}")
    said = [r for r in caplog.records if r.levelname == "WARNING" and "is unreadable" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert [json.loads(x)["body_text"] for x in out.read_text().splitlines()] == ["m0", "m1"]
    capsys.readouterr()
    Path(f"{out}.importing-dl-target").write_text('{"entity": "dl-tar')
    refused = magic_fails(ip, f"sb_import dl-target {out}")
    assert f"{out}.importing-dl-target" in refused and "unreadable" in refused
    assert "Importing" not in capsys.readouterr().out
    assert _records_in(sb, "dl-target") == 0
