"""The %sb_* magics, driven through a real IPython shell against the embedded emulator."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core import RECORD_FIELDS, LiveConnection, LockedBatch, Report, counts
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from tests.helpers import (
    databricks_secret,
    dead_letter,
    drain,
    interrupt_main_thread,
    magic_fails,
    python_sigint,
    send,
)

COMMANDS = [
    "sb_connect",
    "sb_entities",
    "sb_peek",
    "sb_receive",
    "sb_settle",
    "sb_dlq",
    "sb_stats",
    "sb_browse",
    "sb_compose",
]


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    # One shell per process: start_ipython() returns None once another module has started it.
    return globalipapp.start_ipython() or globalipapp.get_ipython()


@pytest.fixture
def sb(ip: Any, emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    ip.run_line_magic("sb_connect", emulator.connection_string)
    capsys.readouterr()
    yield magics
    unload_ipython_extension(ip)


def line(ip: Any, text: str) -> Any:
    name, _, rest = text.partition(" ")
    return ip.run_line_magic(name, rest)


def answer(monkeypatch: pytest.MonkeyPatch, reply: str) -> list[str]:
    asked: list[str] = []

    def fake_input(prompt: str = "") -> str:
        asked.append(prompt)
        return reply

    monkeypatch.setattr(builtins, "input", fake_input)
    return asked


# ------------------------------------------------------------------ loading and settings


def test_load_ext_twice_is_harmless_and_registers_every_command(ip: Any, sb: SbMagics) -> None:
    ip.run_line_magic("load_ext", "sbnotebook")
    again = load_ipython_extension(ip)
    assert again is sb
    assert sum(isinstance(c, SbMagics) for c in ip.configurables) == 1
    for name in COMMANDS:
        assert ip.find_line_magic(name) is not None
    assert ip.find_cell_magic("sb_send") is not None


def test_every_command_has_help_with_examples(ip: Any, sb: SbMagics, capsys: pytest.CaptureFixture[str]) -> None:
    for name in COMMANDS:
        assert line(ip, f"{name} -h") is None
        out = capsys.readouterr().out
        assert f"usage: %{name}" in out and "examples:" in out
        assert "examples:" in (ip.find_line_magic(name).__doc__ or "")  # what %name? shows
    ip.run_cell_magic("sb_send", "-h", "\n")
    assert "usage: %sb_send" in capsys.readouterr().out
    line(ip, "sb_send -h")
    assert "usage: %sb_send" in capsys.readouterr().out
    assert "is a cell magic" in magic_fails(ip, "sb_send q")


def test_config_traits_and_pyproject_settings(
    ip: Any, emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: ServiceBusClient
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.sbnotebook]\npeek-max-messages = 2\nmax_in_flight = 7\n")
    monkeypatch.chdir(tmp_path)
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    try:
        assert (magics.peek_max_messages, magics.max_in_flight) == (2, 7)
        ip.run_line_magic("sb_connect", emulator.connection_string)
        send(client, "q", *[f"m{i}" for i in range(5)])
        assert len(line(ip, "sb_peek q")) == 2
        ip.run_line_magic("config", "SbMagics.peek_max_messages = 4")
        assert magics.peek_max_messages == 4
        assert len(line(ip, "sb_peek q")) == 4
    finally:
        unload_ipython_extension(ip)


def test_an_unknown_pyproject_setting_fails_loading_in_one_line(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.error import UsageError

    (tmp_path / "pyproject.toml").write_text("[tool.sbnotebook]\npeek-max-mesages = 2\n")
    monkeypatch.chdir(tmp_path)
    unload_ipython_extension(ip)
    try:
        with pytest.raises(UsageError) as err:
            load_ipython_extension(ip)
        said = str(err.value)
        assert "\n" not in said and said.startswith("unknown setting 'peek-max-mesages' in [tool.sbnotebook] of ")
        assert said.endswith(": did you mean peek-max-messages?")
    finally:
        (tmp_path / "pyproject.toml").write_text("[tool.sbnotebook]\n")
        unload_ipython_extension(ip)


# ------------------------------------------------------------------ connect and entities


def test_connect_never_echoes_the_key(ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any) -> None:
    secret = "Zm9vYmFyc2VjcmV0a2V5"
    wrong = emulator.connection_string.replace("SAS_KEY_VALUE", secret)
    shown = magic_fails(ip, f"sb_connect {wrong}")  # a refused key is said at once, in one line, without the key
    out, err = capsys.readouterr()
    assert "Connected to" not in out and "refused" in shown.lower() and secret not in out + err + shown
    line(ip, f"sb_connect {emulator.connection_string}")
    out, err = capsys.readouterr()
    assert "Connected to" in out and "SAS_KEY_VALUE" not in out + err
    assert "SAS_KEY_VALUE" not in repr(sb.connection)


def test_connect_reads_a_databricks_secret(ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any) -> None:
    assert "secret:scope/key" in magic_fails(ip, "sb_connect --secret nothing")
    assert "dbutils is not available" in magic_fails(ip, "sb_connect --secret secret:sb-scope/conn")
    with databricks_secret(ip, "sb-scope", "conn", emulator.connection_string):
        line(ip, "sb_connect --secret secret:sb-scope/conn")
    out, err = capsys.readouterr()
    assert "Connected to" in out and "SAS_KEY_VALUE" not in out + err and not err


def test_connect_reads_an_environment_variable_as_secret_reference(
    ip: Any, sb: SbMagics, emulator: Emulator, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """--secret takes the references Spark's secretRef takes: env:NAME as well as secret:SCOPE/KEY."""
    assert "SB_TEST_UNSET is not set" in magic_fails(ip, "sb_connect --secret env:SB_TEST_UNSET")
    monkeypatch.setenv("SB_TEST_CONN", emulator.connection_string)
    line(ip, "sb_connect --secret env:SB_TEST_CONN")
    out, err = capsys.readouterr()
    assert f"Connected to {emulator.host}:{emulator.port}" in out and "SAS_KEY_VALUE" not in out + err


def test_connect_without_arguments_uses_the_environment_then_the_embedded_emulator(
    ip: Any, emulator: Emulator, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    unload_ipython_extension(ip)
    load_ipython_extension(ip)
    try:
        monkeypatch.setenv("SERVICEBUS_CONNECTION_STRING", emulator.connection_string)
        line(ip, "sb_connect")
        assert f"Connected to {emulator.host}:{emulator.port}" in capsys.readouterr().out
        line(ip, "sb_connect --emulator")
        out = capsys.readouterr().out
        assert "embedded emulator" in out and f":{emulator.port} " not in out
        assert "unrecognized arguments" in magic_fails(ip, "sb_connect a b")
        assert "give one of" in magic_fails(ip, "sb_connect Endpoint=sb://x;SharedAccessKeyName=k --emulator")
    finally:
        unload_ipython_extension(ip)


def test_connect_holds_one_live_connection_and_warm_peeks_open_no_links(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient
) -> None:
    conn = sb.connection
    assert isinstance(conn, LiveConnection) and conn.settings.namespace == f"{emulator.host}:{emulator.port}"
    send(client, "q", "a", "b")
    assert len(line(ip, "sb_peek q")) == 2
    conn.settle()  # connect()'s warm-up opens links in the background
    opened = conn.links_opened
    assert len(line(ip, "sb_peek q")) == 2  # a warm call: the pooled receiver link is reused
    assert len(line(ip, "sb_peek q --where 'text == \"b\"'")) == 1
    assert conn.links_opened == opened and sb.connection is conn
    line(ip, f"sb_connect {emulator.connection_string}")  # the same settings: the same live connection
    assert sb.connection is conn


def test_entities_lists_queues_topics_and_subscriptions_with_counts(
    ip: Any, sb: SbMagics, client: ServiceBusClient
) -> None:
    send(client, "q", "a", "b")
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("x"))
    frame = line(ip, "sb_entities")
    assert isinstance(frame, pd.DataFrame)
    rows = frame.set_index("entity")
    assert rows.loc["q", "active"] == 2 and rows.loc["q", "kind"] == "queue"
    assert rows.loc["t", "kind"] == "topic"
    assert rows.loc["t/subscriptions/all", "active"] == 1
    assert rows.loc["t/subscriptions/all", "kind"] == "subscription"


# ------------------------------------------------------------------ peek


def test_peek_returns_the_record_schema_and_changes_nothing(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", *[f"m{i}" for i in range(7)])
    df = line(ip, "sb_peek q -n 5")
    assert list(df.columns) == list(RECORD_FIELDS)
    assert df["body_text"].tolist() == [f"m{i}" for i in range(5)]
    assert "next page: --from-seq 6" in capsys.readouterr().out
    nxt = line(ip, "sb_peek q --from-seq 6")
    assert nxt["body_text"].tolist() == ["m5", "m6"]
    again = line(ip, "sb_peek q")
    assert (again["delivery_count"] == 0).all() and again["lock_token"].isna().all()
    assert [m.delivery_count for m in drain(client, "q")] == [0] * 7


def test_peek_searches_bodies_and_properties(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage('{"customer": {"id": "c-7"}, "total": 120}', application_properties={"p": "high"}),
                ServiceBusMessage('{"customer": {"id": "c-8"}, "total": 5}', application_properties={"p": "low"}),
                ServiceBusMessage("not json at all", application_properties={"p": "high"}),
            ]
        )
    assert line(ip, "sb_peek q --where 'body_json.customer.id == \"c-7\"'")["sequence_number"].tolist() == [1]
    assert line(ip, "sb_peek q --where 'body_json.total < 100'")["sequence_number"].tolist() == [2]
    assert line(ip, "sb_peek q --where 'props.p == \"high\"'")["sequence_number"].tolist() == [1, 3]
    assert line(ip, "sb_peek q --where '\"json\" in text'")["sequence_number"].tolist() == [3]
    capsys.readouterr()
    assert "Unknown name in the search: nosuch" in magic_fails(ip, "sb_peek q --where 'nosuch > 1'")
    assert "Cannot read the search expression" in magic_fails(ip, "sb_peek q --where 'body_json.total >'")
    wide = line(ip, "sb_peek q --json")
    assert wide["body_json.customer.id"].tolist()[:2] == ["c-7", "c-8"]
    assert wide["body_json.total"].tolist()[:2] == [120, 5]


def test_peek_search_stops_once_enough_matched_and_says_how_many_it_scanned(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", *[f"m{i}" for i in range(40)])
    hits = line(ip, "sb_peek q -n 2 --where 'text.endswith(\"5\")'")
    assert hits["body_text"].tolist() == ["m5", "m15"]
    out = capsys.readouterr().out
    assert "2 of 16 scanned messages matched" in out and "next page: --from-seq 17" in out
    nxt = line(ip, "sb_peek q -n 2 --from-seq 17 --where 'text.endswith(\"5\")'")
    assert nxt["body_text"].tolist() == ["m25", "m35"]
    capsys.readouterr()
    none = line(ip, "sb_peek q --scan 10 --where 'text == \"nothing\"'")
    assert len(none) == 0 and list(none.columns) == list(RECORD_FIELDS)
    out = capsys.readouterr().out
    assert "0 of 10 scanned messages matched" in out and "--scan limit of 10" in out and "--from-seq 11" in out


def test_peek_dead_letter_queue_and_sessions(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    send(client, "q", "bad")
    dead_letter(client, "q", 1, reason="broken", error_description="why")
    dlq = line(ip, "sb_peek q --dlq")
    assert dlq["dead_letter_reason"].tolist() == ["broken"]
    with client.get_queue_sender("sq") as s:
        s.send_messages([ServiceBusMessage("one", session_id="s1"), ServiceBusMessage("two", session_id="s2")])
    assert line(ip, "sb_peek sq --session-id s2")["body_text"].tolist() == ["two"]


def test_user_errors_are_one_line_unless_full_tracebacks(ip: Any, sb: SbMagics, capsys: Any) -> None:
    shown = magic_fails(ip, "sb_peek nosuchqueue")
    assert shown.startswith("EntityNotFoundError:") and "Traceback" not in "".join(capsys.readouterr())
    assert magic_fails(ip, "sb_peek q --bogus") == (
        "sbnotebook: %sb_peek: unrecognized arguments: --bogus (see %sb_peek -h)"
    )
    assert magic_fails(ip, "sb_peek q --sesion s1") == (
        "sbnotebook: %sb_peek: unrecognized arguments: --sesion s1: did you mean --session-id? (see %sb_peek -h)"
    )
    assert "is not a valid entity name" in magic_fails(ip, "sb_peek 'bad name!'")
    sb.full_tracebacks = True
    from sbnotebook.core import EntityNotFoundError

    with pytest.raises(EntityNotFoundError):
        line(ip, "sb_peek nosuchqueue")


# ------------------------------------------------------------------ receive and settle


def test_receive_then_settle_rows_by_number(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    send(client, "q", *[f"m{i}" for i in range(5)])
    batch = line(ip, "sb_receive q -n 5")
    assert isinstance(batch, LockedBatch) and len(batch) == 5
    assert "5 messages locked from q" in capsys.readouterr().out
    assert "<table" in batch._repr_html_()
    done = line(ip, "sb_settle complete 0,1")
    assert done["outcome"].tolist() == ["completed", "completed"] and done["index"].tolist() == [0, 1]
    assert "complete q: 2 completed of 2" in capsys.readouterr().out
    line(ip, "sb_settle dead-letter 2 --reason bad-total --description 'total < 0'")
    line(ip, "sb_settle defer 3")
    line(ip, "sb_settle abandon 4")
    again = line(ip, "sb_settle complete 0")
    assert again["outcome"].tolist() == ["already_settled"]
    assert "Row 9 is not in this batch" in magic_fails(ip, "sb_settle complete 9")
    dlq = line(ip, "sb_peek q --dlq")
    assert dlq[["body_text", "dead_letter_reason", "dead_letter_error_description"]].values.tolist() == [
        ["m2", "bad-total", "total < 0"]
    ]
    left = line(ip, "sb_peek q")
    assert dict(zip(left["body_text"], left["state"], strict=True)) == {"m3": "deferred", "m4": "active"}
    deferred = line(ip, "sb_receive q --deferred 4")
    assert [r["body_text"] for r in deferred.records] == ["m3"]
    assert "'nope' is not a variable holding a locked batch" in magic_fails(ip, "sb_settle complete 0 --batch nope")
    ip.user_ns["held"] = deferred
    line(ip, "sb_settle complete all --batch held --yes")
    assert counts("q", connection=sb.conn()).active == 1


def test_settle_all_asks_first_and_says_which_rows(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    send(client, "q", "a", "b", "c")
    line(ip, "sb_receive q -n 3")
    assert "Say which rows" in magic_fails(ip, "sb_settle complete")
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_settle complete all") == "nothing done: 'yes' was not typed (--yes skips the question)."
    assert asked
    answer(monkeypatch, "yes")
    assert line(ip, "sb_settle complete all")["outcome"].tolist() == ["completed"] * 3
    assert drain(client, "q", wait=0.5) == []


def test_a_lost_lock_shows_as_lost(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    send(client, "short", "slow")
    ip.run_line_magic("config", "SbMagics.max_renewal = 0")
    line(ip, "sb_receive short -n 1")
    time.sleep(1.6)
    shown = magic_fails(ip, "sb_settle complete 0")  # a lost lock fails the cell: Run All stops there
    assert shown == "%sb_settle: 1 lock-lost of 1 (the report above; it is also in sb_last_report)", shown
    result = ip.user_ns["sb_last_report"].to_pandas()
    assert result["outcome"].tolist() == ["lock_lost"] and result["error"].notna().all()
    out = capsys.readouterr().out
    assert "1 lock-lost of 1" in out and "[1 rows x 9 columns]" in out  # the summary, then the table as returned


def test_receive_and_delete_asks_unless_yes(
    ip: Any, sb: SbMagics, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    send(client, "q", "a", "b")
    answer(monkeypatch, "n")
    assert magic_fails(ip, "sb_receive q --mode receive-and-delete").startswith("nothing done: 'delete' was not typed")
    assert counts("q", connection=sb.conn()).active == 2
    batch = line(ip, "sb_receive q --mode receive-and-delete --yes -n 5 --wait-seconds 1")
    assert len(batch) == 2 and "received and deleted" in capsys.readouterr().out
    assert counts("q", connection=sb.conn()).active == 0
    assert "already removed" in magic_fails(ip, "sb_settle complete 0")


def test_receive_from_an_empty_queue_says_so(ip: Any, sb: SbMagics, capsys: Any) -> None:
    batch = line(ip, "sb_receive q --wait-seconds 0.2")
    assert len(batch) == 0 and "No messages arrived from q" in capsys.readouterr().out


# ------------------------------------------------------------------ send


def test_send_json_lines_array_and_python_expression(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    report = ip.run_cell_magic("sb_send", "q", '{"n": 1}\n\n{"n": 2}\n')
    assert isinstance(report, Report) and report.ok and report.count("sent") == 2
    ip.run_cell_magic("sb_send", "q --max-in-flight 2", '[{"n": 3}, {"n": 4}, {"n": 5}]')
    ip.user_ns["frame"] = pd.DataFrame({"body": ['{"n": 6}', '{"n": 7}'], "subject": ["s", "s"]})
    ip.run_cell_magic("sb_send", "q", "frame")
    ip.run_cell_magic("sb_send", "q --no-batch", "[{'n': i} for i in range(8, 10)]")
    got = drain(client, "q")
    assert [str(m) for m in got] == [f'{{"n": {i}}}' for i in range(1, 10)]
    assert [m.subject for m in got][5:7] == ["s", "s"]


def test_send_reports_bad_json_by_line_and_sends_nothing(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    assert "Line 3 is not valid JSON" in magic_fails(ip, "sb_send q", '{"n": 1}\n{"n": 2}\n{"n": 3,\n{"n": 4}')
    assert "Line 2 is not valid JSON" in magic_fails(ip, "sb_send q --format json", '[{"n": 1},\n {"n": 2}\n')
    assert "NameError" in magic_fails(ip, "sb_send q", "undefined_name_here")
    assert "The cell is empty" in magic_fails(ip, "sb_send q", "   \n")
    assert drain(client, "q", wait=0.5) == []


def test_send_schedules_and_reports_failures(ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any) -> None:
    report = ip.run_cell_magic("sb_send", "q --schedule +1h", '{"later": true}')
    assert report.ok and counts("q", connection=sb.conn()).scheduled == 1
    assert "is not a time" in magic_fails(ip, "sb_send q --schedule tomorrow", "[1]")
    shown = magic_fails(ip, "sb_send tiny", '{"big": "' + "x" * 6000 + '"}\n{"small": 1}')
    assert shown == "%sb_send: 1 failed, 1 sent of 2 (the report above; it is also in sb_last_report)", shown
    report = ip.user_ns["sb_last_report"]
    out = capsys.readouterr().out
    assert report.count("sent") == 1 and report.failed == 1 and "1 FAILED" in out
    (failure,) = report.failures
    assert failure.index == 0 and failure.condition and "send tiny:" in out and "1 sent" in out


# ------------------------------------------------------------------ dlq and stats


def test_dlq_summary_by_reason(ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any) -> None:
    send(client, "q", *[f"m{i}" for i in range(5)])
    with client.get_queue_receiver("q") as r:
        for i, m in enumerate(r.receive_messages(max_message_count=5, max_wait_time=5)):
            r.dead_letter_message(m, reason="timeout" if i < 3 else "schema", error_description=f"d{i}")
    table = line(ip, "sb_dlq q --summary")
    assert table[["dead_letter_reason", "messages"]].values.tolist() == [["timeout", 3], ["schema", 2]]
    assert "5 dead-lettered messages in q by reason" in capsys.readouterr().out


def test_dlq_summary_counts_every_message_by_subject_and_an_interrupt_shows_partial_counts(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    """The summary counts the whole DLQ over the scanner (not the first 1,000); a real SIGINT (a
    kernel interrupt) while it counts stops the scan and shows the counts so far."""
    import threading

    from tests.core.test_triage import fill_dlq

    fill_dlq(emulator.connection_string, 3_000)
    table = line(ip, "sb_dlq ttl-dl --summary --by subject")
    assert table[["subject", "messages"]].values.tolist() == [["s0", 1000], ["s1", 1000], ["s2", 1000]]
    assert "3,000 dead-lettered messages in ttl-dl by subject" in capsys.readouterr().out
    assert line(ip, "sb_dlq ttl-dl --summary -n 300")["messages"].tolist() == [300]
    # A limit counts the first 300 only: the last line must not read as the queue's size (it said "300 ...").
    assert (
        "The first 300 of 3,000 dead-lettered messages in ttl-dl by reason (--max-messages" in capsys.readouterr().out
    )

    time.sleep(0.5)  # the windows the capped count left in flight are answered
    emulator.latency = 0.05  # long enough to be interrupted half way
    peeked = emulator.requests["peeked messages"]

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while emulator.requests["peeked messages"] - peeked < 500 and time.monotonic() < deadline:
            time.sleep(0.005)
        interrupt_main_thread()

    sender = threading.Thread(target=interrupt)
    try:
        with python_sigint():
            sender.start()
            try:
                table = line(ip, "sb_dlq ttl-dl --summary")
            finally:
                sender.join()
    finally:
        emulator.latency = 0
    out = capsys.readouterr().out
    assert "Interrupted: partial counts" in out and "stopped: partial counts" in out
    assert "of 3,000 dead-lettered messages in ttl-dl by reason (interrupted: the rest were not counted)" in out
    assert 0 < table["messages"].sum() < 3_000
    time.sleep(0.3)  # a peek sent just before the interrupt may reach the emulator a little later
    asked = emulator.requests["com.microsoft:peek-message"]
    time.sleep(0.5)
    assert emulator.requests["com.microsoft:peek-message"] == asked  # the scan stopped with the cell


def test_dlq_count_opens_the_panel_counting(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    send(client, "q", "a", "b")
    dead_letter(client, "q", 2, reason="broken")
    panel = line(ip, "sb_dlq q --count --by subject")
    assert isinstance(panel, TriagePanel) and panel.by.value == "subject"
    assert panel.wait(30) and panel.complete and panel.reasons == {"broken": 2}


def test_stats_collects_samples_into_a_figure(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    send(client, "q", "a", "b")
    fig = line(ip, "sb_stats q --samples 2 --interval 0.1")
    send(client, "q", "c")
    fig = line(ip, "sb_stats q")
    active = next(t for t in fig.data if t.name == "active")
    assert list(active.y) == [2, 2, 3]
    ages = next(t for t in fig.data if t.name == "age")
    assert len(ages.x) == 3 and min(ages.x) >= 0
    fig = line(ip, "sb_stats q --reset")
    assert len(next(t for t in fig.data if t.name == "active").y) == 1


def test_panels_open_from_the_magics(ip: Any, sb: SbMagics, client: ServiceBusClient) -> None:
    from sbnotebook.notebook.widgets import MessageBrowser, SendPanel, SettlementPanel, TriagePanel

    send(client, "q", "a", "b")
    dead_letter(client, "q", 1, reason="broken")
    triage = line(ip, "sb_dlq q")
    assert isinstance(triage, TriagePanel) and triage.reasons == {"broken": 1}
    browser = line(ip, "sb_browse q --dlq")
    assert isinstance(browser, MessageBrowser)
    compose = line(ip, "sb_compose q")
    assert isinstance(compose, SendPanel)
    panel = line(ip, "sb_receive q --panel")
    assert isinstance(panel, SettlementPanel) and len(panel.batch) == 1
    # Every panel a magic opens works on the magics' one live connection.
    assert triage.connection is browser.connection is compose.connection is panel.batch.connection is sb.connection
    panel.act("complete", [0])
    assert drain(client, "q", wait=0.3) == []


# ------------------------------------------------------------------ issue 16


def test_session_receive_shows_the_session_lock_and_close_lets_it_go(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    with client.get_queue_sender("sq") as s:
        s.send_messages([ServiceBusMessage(f"m{i}", session_id="s-1") for i in range(2)])
    batch = line(ip, "sb_receive sq --session-id s-1 -n 2 --wait-seconds 2")
    out, err = capsys.readouterr()
    assert isinstance(batch, LockedBatch) and len(batch) == 2 and not err
    assert "2 messages locked from sq (locks" in out and "Traceback" not in out
    assert all(s is not None and 0 < s <= 2 for s in batch.seconds_left())  # the session lock (2 s)
    line(ip, "sb_settle close")
    again = line(ip, "sb_receive sq --session-id s-1 -n 2 --wait-seconds 2")  # the session was let go: it can be taken
    assert len(again) == 2
    line(ip, "sb_settle complete all --yes")
    line(ip, "sb_settle close")
    assert len(line(ip, "sb_peek sq --session-id s-1")) == 0


def test_peek_and_browse_of_a_session_entity_without_a_session_say_what_to_do(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any, tmp_path: Path
) -> None:
    with client.get_queue_sender("sq") as s:
        s.send_messages([ServiceBusMessage("one", session_id="s-1")])
    for command in ("sb_peek sq", "sb_browse sq", "sb_receive sq --wait-seconds 0.5"):
        shown = magic_fails(ip, command)
        assert "requires sessions" in shown and "--session-id" in shown and not capsys.readouterr().err, shown
        assert "TrackingId" not in shown
    # A command with no --session-id of its own says so, and what reads one session instead.
    shown = magic_fails(ip, f"sb_export sq {tmp_path / 'sq.jsonl'}")
    assert "requires sessions, and this command reads it without one" in shown, shown
    assert "%sb_peek sq --session-id ID reads one session (%sb_sessions sq lists them)" in shown, shown
    assert line(ip, "sb_peek sq --session-id s-1")["body_text"].tolist() == ["one"]


def test_settle_all_after_lock_expiry_reports_the_lost_locks_and_summarises_sdk_logs(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    import logging

    send(client, "short", "a", "b", "c")
    ip.run_line_magic("config", "SbMagics.max_renewal = 0")
    line(ip, "sb_receive short -n 3")
    time.sleep(1.6)
    assert magic_fails(ip, "sb_settle complete 0").startswith("%sb_settle: 1 lock-lost of 1 ")
    assert ip.user_ns["sb_last_report"].to_pandas()["outcome"].tolist() == ["lock_lost"]
    capsys.readouterr()
    # What the SDK's own loggers write when a link fails (an error with its traceback), from its thread.
    try:
        raise RuntimeError("link detached")
    except RuntimeError:
        logging.getLogger("azure.servicebus._pyamqp.aio._link_async").error("Link failed", exc_info=True)
    assert magic_fails(ip, "sb_settle complete all --yes").startswith("%sb_settle: 3 lock-lost of 3 ")
    done = ip.user_ns["sb_last_report"].to_pandas()
    assert done["outcome"].tolist() == ["lock_lost"] * 3 and done["index"].tolist() == [0, 1, 2]
    out, err = capsys.readouterr()
    assert "3 lock-lost of 3" in out and "of 0" not in out
    assert "Traceback" not in out + err and "the Azure SDK logged 1 warning(s) (last: Link failed)" in err
    assert err.count("\n") == 1
    assert magic_fails(ip, "sb_settle complete all --yes").startswith("%sb_settle: 3 lock-lost of 3 ")
    again = ip.user_ns["sb_last_report"].to_pandas()
    assert again["outcome"].tolist() == ["lock_lost"] * 3  # still said, never "0 of 0"
    assert "of 0" not in capsys.readouterr().out


def test_where_type_mismatch_hint_missing_entities_and_forward_next_page(
    ip: Any, sb: SbMagics, client: ServiceBusClient, capsys: Any
) -> None:
    send(client, "q", '{"n": 5, "id": "7"}', '{"n": 6, "id": "8"}')
    assert len(line(ip, "sb_peek q --where 'body_json.n == \"5\"'")) == 0
    out = capsys.readouterr().out
    assert "body_json.n is a number in the messages, but '5' is a string" in out and "body_json.n == 5" in out
    assert len(line(ip, "sb_peek q --where 'body_json.id == 7'")) == 0
    assert "body_json.id is a string in the messages, but 7 is a number" in capsys.readouterr().out
    assert len(line(ip, "sb_peek q --where 'body_json.n == 5'")) == 1
    assert "hint" not in capsys.readouterr().out
    for command in ("sb_peek qq", "sb_peek qq --where 'text == \"a\"'", "sb_browse qq", "sb_compose qq"):
        shown = magic_fails(ip, command)
        assert shown.startswith("EntityNotFoundError:") and "qq" in shown and not capsys.readouterr().err, command
    # Dead-lettered in reverse order: the next page still points past every message shown.
    send(client, "once", "x", "y", "z")
    with client.get_queue_receiver("once") as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=5)
        for m in reversed(got):
            r.dead_letter_message(m, reason="r")
    capsys.readouterr()
    first = line(ip, "sb_peek once --dlq -n 2")
    out = capsys.readouterr().out
    shown = first["sequence_number"].tolist()
    nxt = int(out.split("--from-seq ")[1].split(".")[0])
    assert nxt > max(shown)


def test_receive_deferred_unknown_number_is_one_quick_line(ip: Any, sb: SbMagics, capsys: Any) -> None:
    started = time.monotonic()
    shown = magic_fails(ip, "sb_receive q --deferred 999")
    assert time.monotonic() - started < 3
    assert "No deferred message with sequence number 999 in q" in shown and not capsys.readouterr().err
    assert "b'" not in shown and 'b"' not in shown


def test_on_databricks_the_panels_lists_are_plain_unless_configured(
    sb: SbMagics, ip: Any, emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """anywidget-based widgets are not known to load on Databricks: the grid is opt-in there."""
    import ipywidgets as W

    from sbnotebook.notebook.widgets import MessageBrowser, grid

    monkeypatch.setattr(grid, "_warned", False)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    send(client, "q", "one", "two")
    plain = MessageBrowser("q", connection=emulator.connection_string)
    assert isinstance(plain.rows.widget, W.SelectMultiple) and "on Databricks" in plain.rows.note
    assert len(plain.rows.widget.options) == 2
    ip.run_line_magic("config", "SbMagics.grid = 'itables'")
    assert plain.rows.is_grid is False and MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    ip.run_line_magic("config", "SbMagics.grid = 'plain'")
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION")
    assert not MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    ip.run_line_magic("config", "SbMagics.grid = 'auto'")
    assert MessageBrowser("q", connection=emulator.connection_string).rows.is_grid
    with pytest.raises(Exception, match="grid"):
        sb.grid = "fancy"
