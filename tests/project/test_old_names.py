"""Each old name of docs/names.md's "Old names" that is not a Python keyword (those are in
test_old_keywords.py) still works, and says once what replaced it: magic flags, settings, Spark
options, ``core``'s old module names, the emulator's old attribute and call, and the words of a
search and of references. Every row has a check here or there: a row nobody checks fails."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core import renames
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import PARSERS
from tests import shell
from tests.helpers import databricks_secret
from tests.project.oldnames import is_keyword, once, said
from tests.project.test_names import OLD, codes
from tests.required import require_module
from tests.shell import line

__all__ = ["said"]  # the fixture, for pytest

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded
PROGS = {p.prog: p for p in PARSERS}

# A value for each old flag (None: a switch), and what the entity positionals are given.
FLAG_VALUES = {
    "--limit": "1",
    "--wait": "0.5",
    "--session": "s-1",
    "--from-seq": "5",
    "--scan": "7",
    "-n": "3",
    "--count-limit": "4",
    "--keep-ids": None,
    "--session-id": "s-1",
    "--namespace": "contoso.servicebus.windows.net",
    "--schedule": "+10m",
    "--no-batch": None,
    "--deferred": "5",
    "--set": "user_metadata=team-a",
}


def is_flag(row: list[str]) -> bool:
    return row[0].startswith("`-") and all(p.startswith("%") and " " not in p for p in codes(row[1]))


@pytest.mark.parametrize("row", [r for r in OLD if is_flag(r)], ids=lambda r: f"{r[0]} in {r[1]}")
def test_an_old_flag_is_its_new_name_and_says_so_once(row: list[str], said: Any) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    value = FLAG_VALUES[old]
    for prog in codes(row[1]):
        parser = PROGS[prog]
        assert parser.renamed.get(old) == new, f"{prog} does not take {old} as {new}"
        renames.WARNED.clear()
        entities = " ".join("q" for a in parser.positionals() if a.nargs is None)
        given = f" {value}" if value is not None else ""
        as_new = vars(parser.parse_line(f"{entities} {new}{given}"))
        assert vars(parser.parse_line(f"{entities} {old}{given}")) == as_new, f"{prog} {old} is not {new}"
        if value is not None:  # the other spellings argparse takes: --flag=VALUE, and -nVALUE
            assert vars(parser.parse_line(f"{entities} {old}={value}")) == as_new
            if len(old) == 2:
                assert vars(parser.parse_line(f"{entities} {old}{value}")) == as_new
        assert as_new != vars(parser.parse_line(entities)), f"{prog} {new} changes nothing"
        once(said, f"{prog} {old}", new)


def _setting(old: str, new: str, said: Any, ip: Any, tmp_path: Path) -> None:
    from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension

    unload_ipython_extension(ip)
    sb = load_ipython_extension(ip)
    try:
        renames.WARNED.clear()
        ip.run_line_magic("config", f"SbMagics.{old} = 3")
        assert getattr(sb, new) == 3, f"%config SbMagics.{old} did not set {new}"
        once(said, f"SbMagics.{old}", f"SbMagics.{new}")
    finally:
        ip.config.SbMagics.pop(old, None)  # the shell keeps what %config was given
        unload_ipython_extension(ip)
    (tmp_path / "pyproject.toml").write_text(f"[tool.sbnotebook]\n{old.replace('_', '-')} = 4\n")
    cwd = Path.cwd()
    try:
        os.chdir(tmp_path)
        sb = load_ipython_extension(ip)
        assert getattr(sb, new) == 4, f"{old} in [tool.sbnotebook] did not set {new}"
        once(said, f"{old.replace('_', '-')} in [tool.sbnotebook]", new.replace("_", "-"))
    finally:
        os.chdir(cwd)
        unload_ipython_extension(ip)


@pytest.mark.parametrize("row", [r for r in OLD if r[1].startswith("`SbMagics`")], ids=lambda r: r[0])
def test_an_old_setting_sets_its_new_name_and_says_so_once(row: list[str], said: Any, ip: Any, tmp_path: Path) -> None:
    _setting(row[0].strip("`"), row[2].strip("`"), said, ip, tmp_path)


def is_command_line_flag(row: list[str]) -> bool:
    return row[0].startswith("`-") and row[1].startswith("`sbnotebook ")


@pytest.mark.parametrize("row", [r for r in OLD if is_command_line_flag(r)], ids=lambda r: f"{r[0]} in {r[1]}")
def test_an_old_command_line_flag_is_its_new_name_and_says_so_once(row: list[str], said: Any) -> None:
    from sbnotebook import cli

    old, new, words = row[0].strip("`"), row[2].strip("`"), codes(row[1])[0].split()[1:]
    parser = cli.build_parser()
    renames.WARNED.clear()
    as_old = vars(parser.parse_args([*words, old, "env:SB"]))
    assert as_old == vars(parser.parse_args([*words, new, "env:SB"]))
    assert as_old == vars(parser.parse_args([*words, f"{old}=env:SB"]))
    assert as_old != vars(parser.parse_args(words)), f"{new} changes nothing"
    once(said, f"{codes(row[1])[0]} {old}", new)


def is_spark_option(row: list[str]) -> bool:
    return row[1].startswith("Spark") and not row[1].endswith(" value")


@pytest.mark.parametrize("row", [r for r in OLD if is_spark_option(r)], ids=lambda r: f"{r[0]} in {r[1]}")
def test_an_old_spark_option_is_its_new_name_and_says_so_once(row: list[str], said: Any, emulator: Emulator) -> None:
    require_module("pyspark")
    from sbnotebook.spark.options import KNOWN_OPTIONS, RENAMED_OPTIONS, OptionError, check_known, connection
    from sbnotebook.spark.spec import ReadSpec

    old, new = row[0].strip("`"), row[2].strip("`")
    for kind in codes(row[1]):
        assert RENAMED_OPTIONS[kind][old] == new and old not in KNOWN_OPTIONS[kind] and new in KNOWN_OPTIONS[kind]
        if new == "sessionIds":
            conn = {"connectionString": emulator.connection_string}
            check_known({old: "s-1"}, kind)  # accepted, not refused as unknown
            parsed = ReadSpec({"entity": "sq", old: "s-1", **conn}, 2, None).stream()
            assert parsed == ReadSpec({"entity": "sq", new: "s-1", **conn}, 2, None).stream()
            both = {"entity": "sq", old: "a", new: "b", **conn}
            with pytest.raises(OptionError, match=f"as {new} and as {old}"):
                ReadSpec(both, 2, None).stream()
        elif new == "bodySampleFromSequenceNumber":  # a stream's JSON sample: schema() reads it, stream() says so
            conn = {"connectionString": emulator.connection_string}
            check_known({old: "7"}, kind)
            as_old = ReadSpec({"entity": "q", old: "7", **conn}, 2, None)
            assert as_old.body_sample_from == ReadSpec({"entity": "q", new: "7", **conn}, 2, None).body_sample_from == 7
            as_old.stream()
            with pytest.raises(OptionError, match=f"as {new} and as {old}"):
                ReadSpec({"entity": "q", old: "7", new: "8", **conn}, 2, None).stream()
        elif new == "onePerSend":  # the opposite of the old name: batch=false is onePerSend=true
            from sbnotebook.spark.options import bool_option

            check_known({"entity": "q", old: "false"}, kind)  # accepted, not refused as unknown
            assert bool_option({old: "false"}, new) is True and bool_option({old: "true"}, new) is False
            assert bool_option({}, new) is False
            with pytest.raises(OptionError, match=f"as {new} and as {old}"):
                bool_option({old: "true", new: "true"}, new)
        else:  # where to connect: the namespace, as Entra ID signs in to it
            host = "contoso.servicebus.windows.net"
            check_known({"entity": "q", old: host}, kind)
            assert connection({old: host}, None) == connection({new: host}, None)
            assert connection({old: host}, None).fully_qualified_namespace == host
            with pytest.raises(OptionError, match=f"as {new} and as {old}"):
                connection({old: host, new: host}, None)
    once(said, f"the Spark option {old}", new)  # once per process, whatever the kind


def test_cores_old_module_names_still_give_what_they_gave_and_say_what_replaced_them(said: Any) -> None:
    """core.SEARCH_SCAN_LIMIT and COPY_CONCURRENCY, renamed, and the names that left core.__all__:
    each still comes from core for one release, and says once where it is now."""
    from sbnotebook.core.operations import bounds, triage
    from sbnotebook.core.views import records

    assert core.SEARCH_SCAN_LIMIT == core.MAX_SCANNED
    assert core.COPY_CONCURRENCY == 1
    assert core.BOUND_WINDOW == bounds.BOUND_WINDOW and core.GROUP_NONE == triage.NONE and core.Field is records.Field
    once(said, "core.SEARCH_SCAN_LIMIT", "core.MAX_SCANNED")
    once(said, "core.COPY_CONCURRENCY", "core.copy(max_in_flight=)")
    assert core.BOUND_WINDOW  # said once: not again
    once(said, "core.BOUND_WINDOW", "sbnotebook.core.operations.bounds.BOUND_WINDOW (private")
    text = Path(__file__).resolve().parents[2].joinpath("docs", "names.md").read_text(encoding="utf-8")
    gone = re.search(r"named them;.*?:\n(.*?)\(and", text, re.S)
    assert gone is not None
    for name in codes(gone.group(1)):
        assert getattr(core, name) is not None and name not in core.__all__
        once(said, f"core.{name}", "private")
    with pytest.raises(AttributeError):
        core.NO_SUCH_NAME  # noqa: B018


def test_the_emulators_old_latency_attribute_and_slow_down_in_seconds_still_work(said: Any) -> None:
    with Emulator() as emu:
        emu.latency = 0.05  # the old attribute, in seconds
        assert emu.latency_ms == 50.0 and emu.latency == 0.05
        once(said, "Emulator.latency", "Emulator.latency_ms")
        emu.slow_down("q", 0.2)  # the old call: seconds, by position
        assert emu.broker.faults.of("q").delay == 0.2
        once(said, "Emulator.slow_down(entity, seconds)", "latency_ms=MS")
        emu.slow_down("q", latency_ms=300)
        assert emu.broker.faults.of("q").delay == 0.3
        with pytest.raises(TypeError, match="not also seconds"):
            emu.slow_down("q", 0.2, latency_ms=200)


def test_the_old_namespace_attribute_of_a_connection_is_its_fully_qualified_namespace(
    said: Any, emulator: Emulator
) -> None:
    settings = core.resolve(emulator.connection_string)
    assert settings.namespace == settings.fully_qualified_namespace == f"{emulator.host}:{emulator.port}"
    once(said, "core.Connection.namespace", "core.Connection.fully_qualified_namespace")
    conn = core.live_connection(emulator.connection_string)
    assert conn.namespace == conn.fully_qualified_namespace == settings.fully_qualified_namespace
    once(said, "core.LiveConnection.namespace", "core.LiveConnection.fully_qualified_namespace")


def _search(old: str, new: str, said: Any) -> None:
    record = {"body_text": '{"customer": "c-7"}', "application_properties": {}}
    for expression in (f'{old} == "c-7"', f'{new} == "c-7"'):
        assert core.compile_where(expression)(record), expression
    assert not core.compile_where(f'{old} == "c-8"')(record)
    once(said, f"'{old.split('.')[0]}' in a search", new.split(".")[0])


def _secret(row: list[str], said: Any, ip: Any, emulator: Emulator) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    if row[1] == "secret reference":
        assert core.parse_secret_ref(old.replace("SCOPE/KEY", "s/k")) == new.replace("SCOPE/KEY", "s/k")
        core.parse_secret_ref(old.replace("SCOPE/KEY", "s/k"))
        once(said, "secretRef databricks:SCOPE/KEY", new)
        return
    with databricks_secret(ip, "sb-scope", "conn", emulator.connection_string):
        line(ip, "sb_connect --secret sb-scope/conn")
        line(ip, "sb_connect --secret sb-scope/conn")
    once(said, "%sb_connect --secret SCOPE/KEY", "--secret secret:SCOPE/KEY")


def _credential(old: str, new: str, said: Any) -> None:
    assert core.parse_credential_ref(old.replace("NAME", "sb-cred")).ref == new.replace("NAME", "sb-cred")
    core.parse_credential_ref(old.replace("NAME", "sb-cred"))
    once(said, "credentialRef databricks:NAME", new)


def _mode(old: str, new: str, where: str, said: Any, emulator: Emulator) -> None:
    """A mode's old value (kebab-case) reads as the new one (snake_case), and says so once."""
    cs = emulator.connection_string
    if where.startswith("Spark"):
        require_module("pyspark")
        from sbnotebook.spark.spec import ReadSpec

        def parsed(mode: str) -> str:
            return ReadSpec({"entity": "q", "mode": mode, "connectionString": cs}, 2, None).read().mode

        assert parsed(old) == parsed(new) == new
        once(said, f"the Spark option mode={old}", f"mode={new}")
        return
    core.send("q", ["a", "b"], connection=cs)
    for mode in (old, new):
        with core.receive("q", max_messages=1, mode=mode, wait_seconds=5, connection=cs) as batch:
            assert batch.mode == new and len(batch) == 1
            if new == "peek_lock":
                assert batch.complete().ok
    assert core.peek("q", connection=cs).records == []
    once(said, f"core.receive(mode='{old}')", f"mode='{new}'")


def _dlq_by(old: str, new: str, said: Any) -> None:
    dlq = PROGS["%sb_dlq"]
    assert vars(dlq.parse_line(f"q --summary --by {old}")) == vars(dlq.parse_line(f"q --summary --by {new}"))
    assert dlq.parse_line(f"q --by {old}").by == new != dlq.parse_line("q --by subject").by
    once(said, f"%sb_dlq --by {old}", f"--by {new}")


VALUES = (
    "search",
    "secret reference",
    "`%sb_connect --secret`",
    "credential reference",
    "`%sb_dlq --by` value",
    "`core.receive` mode value",
    "Spark `read` mode value",
)


@pytest.mark.parametrize("row", [r for r in OLD if r[1] in VALUES], ids=lambda r: f"{r[0]} in {r[1]}")
def test_an_old_word_in_a_value_still_works_and_says_so_once(
    row: list[str], said: Any, request: pytest.FixtureRequest
) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    if row[1].endswith("mode value"):
        _mode(old.strip('"'), new.strip('"'), row[1], said, request.getfixturevalue("emulator"))
    elif row[1] == "`%sb_dlq --by` value":
        _dlq_by(old, new, said)
    elif row[1] == "search":
        _search(old, new, said)
    elif row[1] == "credential reference":
        _credential(old, new, said)
    else:
        request.getfixturevalue("sb")
        _secret(row, said, request.getfixturevalue("ip"), request.getfixturevalue("emulator"))


IN_SPARK_TESTS = ("sbspark", "sbspark.settle", "sbspark.from_spark", "sbspark.write", "sbspark.register")


def test_every_old_name_has_its_check() -> None:
    """Each row of the table is one of the kinds checked above, in test_old_keywords.py or in
    tests/spark/test_old_names.py (the Spark session's): a row of a new kind fails here."""
    checked_here = (
        is_flag,
        is_keyword,
        is_command_line_flag,
        lambda r: r[1].startswith(("`SbMagics`", "Spark")) or r[1] in VALUES,
        lambda r: r[1] == "`core`",
        lambda r: any(p in IN_SPARK_TESTS for p in codes(r[1])),
    )
    unchecked = [row for row in OLD if not any(kind(row) for kind in checked_here)]
    assert unchecked == [], f"docs/names.md: no check for these old names: add one: {unchecked}"
