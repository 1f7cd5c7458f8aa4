"""The %sb_* magics, driven through a real IPython shell against the embedded emulator: loading and
settings, %sb_connect and %sb_entities, %sb_peek (receive/settle/send in test_magics_receive.py, dlq/stats/panels
in test_magics_dlq.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core import RECORD_FIELDS, LiveConnection
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics
from sbnotebook.notebook.magics.settings import MagicsSettings
from sbnotebook.notebook.magics.state import MagicsState
from tests import shell
from tests.helpers import (
    databricks_secret,
    dead_letter,
    drain,
    magic_fails,
    send,
)
from tests.shell import line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


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


def test_every_setting_is_declared_once_in_the_type_the_command_families_read() -> None:
    """Each config trait of SbMagics is MagicsSettings' own (settings.py), so a family's ``self:
    MagicsState`` reads it with its trait's type, and neither SbMagics nor MagicsState repeats it."""
    settings = MagicsSettings.class_traits(config=True)
    assert settings and issubclass(SbMagics, MagicsState) and issubclass(MagicsState, MagicsSettings)
    assert SbMagics.class_traits(config=True) == settings  # the same trait objects: none redeclared
    assert not set(vars(MagicsState).get("__annotations__", {})) & set(settings)


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
    assert "needs Databricks' dbutils" in magic_fails(ip, "sb_connect --secret secret:sb-scope/conn")
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
    assert isinstance(conn, LiveConnection)
    assert conn.settings.fully_qualified_namespace == f"{emulator.host}:{emulator.port}"
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
    assert "next page: --from-sequence-number 6" in capsys.readouterr().out
    nxt = line(ip, "sb_peek q --from-sequence-number 6")
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
    assert "2 of 16 scanned messages matched" in out and "next page: --from-sequence-number 17" in out
    nxt = line(ip, "sb_peek q -n 2 --from-sequence-number 17 --where 'text.endswith(\"5\")'")
    assert nxt["body_text"].tolist() == ["m25", "m35"]
    capsys.readouterr()
    none = line(ip, "sb_peek q --max-scanned 10 --where 'text == \"nothing\"'")
    assert len(none) == 0 and list(none.columns) == list(RECORD_FIELDS)
    out = capsys.readouterr().out
    assert "0 of 10 scanned messages matched" in out and "--max-scanned 10" in out
    assert "--from-sequence-number 11" in out


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
    nxt = int(out.split("--from-sequence-number ")[1].split(".")[0])
    assert nxt > max(shown)


def test_a_comment_after_a_magic_is_not_read_as_arguments(
    ip: Any, sb: SbMagics, client: ServiceBusClient, emulator: Emulator, capsys: Any
) -> None:
    """IPython hands a line magic its whole line, comment included; the docs write a comment after
    most magics (``%sb_connect  # the embedded emulator``). A ``#`` that begins a word outside quotes
    ends the line, as in a shell; one inside a word or in quotes is an argument's."""
    send(client, "q", "#1 in text", "plain")
    line(ip, f"sb_connect {emulator.connection_string}   # a comment")
    capsys.readouterr()
    page = line(ip, "sb_peek q --where '\"#1\" in text'   # only the first")
    assert list(page["body_text"]) == ["#1 in text"]
    assert "--session-id" in magic_fails(ip, "sb_peek q --session-id # nothing after the flag")
