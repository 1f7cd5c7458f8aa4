"""docs/names.md against the code: every name of its table is where its row says (a magic's flag in
that magic's parser, a ``core`` keyword in that function's signature, a Spark option in that kind's
KNOWN_OPTIONS, a setting in SbMagics and the [tool.sbnotebook] loader), and every old name of its
second table still works, against the emulator, and says once what replaced it."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import renames
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import magics
from sbnotebook.notebook.config import project_settings
from sbnotebook.notebook.magics import SbMagics
from tests import shell
from tests.helpers import databricks_secret, send
from tests.shell import line

ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "names.md"
PARSERS = {p.prog: p for p in magics.PARSERS}


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table under ``## heading``, each a list of its cells."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]  # past the header and |---|


NAMES = _table("The names")
OLD = _table("Old names")


def _cell(text: str) -> tuple[str, str | None, list[str]] | None:
    """`name` (`-s`): `place`, `place` -> (name, short, places); a dash -> None."""
    if text in ("\u2013", "-"):  # an en dash, as the docs write it, or a hyphen
        return None
    head, _, places = text.partition(":")
    codes = re.findall(r"`([^`]+)`", head)
    return codes[0], (codes[1] if len(codes) > 1 else None), re.findall(r"`([^`]+)`", places)


def test_the_tables_are_read() -> None:
    """The checks below find something: each table has its rows and each row its five cells."""
    assert len(NAMES) >= 7 and all(len(row) == 5 for row in NAMES), NAMES
    assert len(OLD) >= 10 and all(len(row) == 3 for row in OLD), OLD


@pytest.mark.parametrize("row", NAMES, ids=lambda r: r[0])
def test_each_name_is_where_the_table_says(row: list[str]) -> None:
    idea, flag, keyword, option, settings = row
    said = _cell(flag)
    if said is not None:
        name, short, places = said
        assert places, f"{idea}: no magic named"
        for prog in places:
            options = PARSERS[prog].options()
            assert name in options, f"{prog} has no {name}"
            if short is not None:
                assert options[short] is options[name], f"{prog}: {short} is not short for {name}"
    said = _cell(keyword)
    if said is not None:
        name, _, places = said
        for function in places:
            assert name in inspect.signature(getattr(core, function)).parameters, f"core.{function} takes no {name}="
    said = _cell(option)
    if said is not None:
        name, _, kinds = said
        pytest.importorskip("pyspark")
        from sbnotebook.spark.options import KNOWN_OPTIONS

        for kind in kinds:
            assert name in KNOWN_OPTIONS[kind], f"a Spark {kind} does not know {name}"
    for name in re.findall(r"`([^`]+)`", settings):
        assert name in SbMagics.class_trait_names(config=True), f"SbMagics has no setting {name}"


def test_each_setting_is_taken_by_the_settings_loader(tmp_path: Path) -> None:
    named = [n for row in NAMES for n in re.findall(r"`([^`]+)`", row[4])]
    assert named
    keys = "\n".join(f"{n.replace('_', '-')} = 1" for n in named)
    (tmp_path / "pyproject.toml").write_text(f"[tool.sbnotebook]\n{keys}\n")
    assert set(project_settings(SbMagics.class_trait_names(config=True), tmp_path)) == set(named)


# ------------------------------------------------------------------ old names: work, and warn once


@pytest.fixture
def said() -> Iterator[Callable[[str], list[str]]]:
    """The FutureWarnings said while the test runs, with this process's 'said once' forgotten first."""
    saved = set(renames.WARNED)
    renames.WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def lines(old: str) -> list[str]:
            return [str(w.message) for w in caught if issubclass(w.category, FutureWarning) and old in str(w.message)]

        yield lines
    renames.WARNED.clear()
    renames.WARNED.update(saved)


def _once(said: Callable[[str], list[str]], old: str, new: str) -> None:
    lines = said(old)
    assert len(lines) == 1, f"{old}: said {len(lines)} times: {lines}"
    assert new in lines[0] and "\n" not in lines[0] and "0.3.0" in lines[0], lines[0]


FLAG_VALUES = {"--limit": "1", "--wait": "0.5", "--session": "s-1"}


def _flag(row: list[str], said: Callable[[str], list[str]]) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    for prog in re.findall(r"`([^`]+)`", row[1]):
        parser = PARSERS[prog]
        assert parser.renamed.get(old) == new, f"{prog} does not take {old} as {new}"
        renames.WARNED.clear()
        entities = " ".join("q" for a in parser.positionals() if a.nargs is None)
        args = parser.parse_line(f"{entities} {old} {FLAG_VALUES[old]}")
        new_args = parser.parse_line(f"{entities} {new} {FLAG_VALUES[old]}")
        assert vars(args) == vars(new_args), f"{prog} {old} is not {new}"
        assert vars(parser.parse_line(f"{entities} {old}={FLAG_VALUES[old]}")) == vars(new_args)  # said once
        _once(said, f"{prog} {old}", new)


def _keyword(
    row: list[str], said: Callable[[str], list[str]], calls: dict[str, Callable[[dict[str, Any]], None]]
) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    for function in re.findall(r"`([^`]+)`", row[1]):
        fn = getattr(core, function)
        assert getattr(fn, "__renamed__", {}).get(old) == new, f"core.{function} does not take {old}= as {new}="
        assert new in inspect.signature(fn).parameters and old not in inspect.signature(fn).parameters
        renames.WARNED.clear()
        calls[function]({old: 1 if old != "wait" else 0.5})  # runs against the emulator: it works
        calls[function]({old: 1 if old != "wait" else 0.5})
        _once(said, f"core.{function}({old}=)", f"{new}=")
        with pytest.raises(TypeError, match=f"not also {old}="):  # both at once: refused before any call
            both = fn("q", **{old: 1, new: 1})
            if inspect.iscoroutine(both):
                asyncio.run(both)


@pytest.fixture
def calls(emulator: Emulator, client: ServiceBusClient, tmp_path: Path) -> dict[str, Callable[[dict[str, Any]], None]]:
    """One real call of each renamed function with the keyword given, checked for its effect."""
    cs = emulator.connection_string
    send(client, "q", *[f"m{i}" for i in range(3)])

    def peek(kw: dict[str, Any]) -> None:
        assert len(core.peek("q", connection=cs, **kw)) == 1

    def receive(kw: dict[str, Any]) -> None:
        with core.receive("q", connection=cs, **kw) as batch:
            assert len(batch) >= 1
            batch.abandon()

    def process(kw: dict[str, Any]) -> None:
        send(client, "once", "p")
        report = core.process("once", lambda record: None, max_messages=1, connection=cs, **kw)
        assert report.count("completed") == 1, report.summary()

    def dead_letters() -> None:  # two more in short's dead-letter queue: a call with the old name takes one
        send(client, "short", "d1", "d2")
        with core.receive("short", max_messages=2, wait_seconds=2, connection=cs) as batch:
            assert len(batch) == 2 and batch.dead_letter(reason="test").ok

    def copy(kw: dict[str, Any]) -> None:
        report = core.copy("q", "dl-target", resume=False, connection=cs, **kw)
        assert report.count("sent") == 1, report.summary()

    def acopy(kw: dict[str, Any]) -> None:
        conn = core.live_connection(cs)
        report = conn.run(core.acopy("q", "dl-target", resume=False, connection=conn, **kw))
        assert report.count("sent") == 1, report.summary()

    def resubmit(kw: dict[str, Any]) -> None:
        dead_letters()
        report = core.resubmit("short/$deadletterqueue", target="dl-target", connection=cs, **kw)
        assert report.count("resubmitted") == 1, report.summary()

    def aresubmit(kw: dict[str, Any]) -> None:
        dead_letters()
        conn = core.live_connection(cs)
        report = conn.run(core.aresubmit("short/$deadletterqueue", target="dl-target", connection=conn, **kw))
        assert report.count("resubmitted") == 1, report.summary()

    def discard(kw: dict[str, Any]) -> None:
        dead_letters()
        report = core.discard("short/$deadletterqueue", connection=cs, **kw)
        assert report.total == 1, report.summary()

    def group_counts(kw: dict[str, Any]) -> None:
        assert core.group_counts("q", connection=cs, **kw).scanned == 1

    def copy_record(kw: dict[str, Any]) -> None:
        assert core.copy_record("q", "dl-target", connection=cs, **kw) != core.copy_record(
            "q", "dl-target", connection=cs
        )

    def copy_resume_point(kw: dict[str, Any]) -> None:
        assert core.copy_resume_point("q", "dl-target", connection=cs, **kw) is None

    return {
        "peek": peek,
        "receive": receive,
        "process": process,
        "copy": copy,
        "acopy": acopy,
        "resubmit": resubmit,
        "aresubmit": aresubmit,
        "discard": discard,
        "group_counts": group_counts,
        "copy_record": copy_record,
        "copy_resume_point": copy_resume_point,
    }


def _setting(row: list[str], said: Callable[[str], list[str]], ip: Any, tmp_path: Path) -> None:
    from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension

    old, new = row[0].strip("`"), row[2].strip("`")
    unload_ipython_extension(ip)
    sb = load_ipython_extension(ip)
    try:
        renames.WARNED.clear()
        ip.run_line_magic("config", f"SbMagics.{old} = 3")
        assert getattr(sb, new) == 3, f"%config SbMagics.{old} did not set {new}"
        _once(said, f"SbMagics.{old}", f"SbMagics.{new}")
    finally:
        ip.config.SbMagics.pop(old, None)  # the shell keeps what %config was given
        unload_ipython_extension(ip)
    (tmp_path / "pyproject.toml").write_text(f"[tool.sbnotebook]\n{old.replace('_', '-')} = 4\n")
    cwd = Path.cwd()
    try:
        os.chdir(tmp_path)
        sb = load_ipython_extension(ip)
        assert getattr(sb, new) == 4, f"{old} in [tool.sbnotebook] did not set {new}"
        _once(said, f"{old.replace('_', '-')} in [tool.sbnotebook]", new.replace("_", "-"))
    finally:
        os.chdir(cwd)
        unload_ipython_extension(ip)


def _search(row: list[str], said: Callable[[str], list[str]]) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    record = {"body_text": '{"customer": "c-7"}', "application_properties": {}}
    for expression in (f'{old} == "c-7"', f'{new} == "c-7"'):
        assert core.compile_where(expression)(record), expression
    assert not core.compile_where(f'{old} == "c-8"')(record)
    _once(said, f"'{old.split('.')[0]}' in a search", new.split(".")[0])


def _secret(row: list[str], said: Callable[[str], list[str]], ip: Any, emulator: Emulator) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    if row[1] == "secret reference":
        assert core.parse_secret_ref(old.replace("SCOPE/KEY", "s/k")) == new.replace("SCOPE/KEY", "s/k")
        core.parse_secret_ref(old.replace("SCOPE/KEY", "s/k"))
        _once(said, "secretRef databricks:SCOPE/KEY", new)
        return

    with databricks_secret(ip, "sb-scope", "conn", emulator.connection_string):
        line(ip, "sb_connect --secret sb-scope/conn")
        line(ip, "sb_connect --secret sb-scope/conn")
    _once(said, "%sb_connect --secret SCOPE/KEY", "--secret secret:SCOPE/KEY")


def _credential(row: list[str], said: Callable[[str], list[str]]) -> None:
    old, new = row[0].strip("`"), row[2].strip("`")
    assert core.parse_credential_ref(old.replace("NAME", "sb-cred")).ref == new.replace("NAME", "sb-cred")
    core.parse_credential_ref(old.replace("NAME", "sb-cred"))
    _once(said, "credentialRef databricks:NAME", new)


def _spark_option(row: list[str], said: Callable[[str], list[str]], emulator: Emulator) -> None:
    pytest.importorskip("pyspark")
    from sbnotebook.spark.options import KNOWN_OPTIONS, RENAMED_OPTIONS, OptionError, check_known
    from sbnotebook.spark.spec import ReadSpec

    old, new = row[0].strip("`"), row[2].strip("`")
    for kind in re.findall(r"`([^`]+)`", row[1]):
        assert RENAMED_OPTIONS[kind][old] == new and old not in KNOWN_OPTIONS[kind] and new in KNOWN_OPTIONS[kind]
        conn = {"connectionString": emulator.connection_string}
        check_known({old: "s-1"}, kind)  # accepted, not refused as unknown
        parsed = ReadSpec({"entity": "sq", old: "s-1", **conn}, 2, None).stream()
        assert parsed == ReadSpec({"entity": "sq", new: "s-1", **conn}, 2, None).stream()
        _once(said, f"the Spark option {old}", new)
        with pytest.raises(OptionError, match=f"as {new} and as {old}"):
            ReadSpec({"entity": "sq", old: "a", new: "b", **conn}, 2, None).stream()


@pytest.mark.parametrize("row", OLD, ids=lambda r: f"{r[0]} in {r[1]}")
def test_each_old_name_still_works_and_says_once_what_replaced_it(
    row: list[str],
    said: Callable[[str], list[str]],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    where = row[1]
    if where.startswith("`%") and "--" not in where:
        _flag(row, said)
    elif where == "`SbMagics`, `[tool.sbnotebook]`":
        _setting(row, said, request.getfixturevalue("ip"), tmp_path)
    elif where == "search":
        _search(row, said)
    elif where in ("secret reference", "`%sb_connect --secret`"):
        request.getfixturevalue("sb")
        _secret(row, said, request.getfixturevalue("ip"), request.getfixturevalue("emulator"))
    elif where == "credential reference":
        _credential(row, said)
    elif where.startswith("Spark "):
        _spark_option(row, said, request.getfixturevalue("emulator"))
    elif all(hasattr(core, name) for name in re.findall(r"`([^`]+)`", where)):
        _keyword(row, said, request.getfixturevalue("calls"))
    else:
        pytest.fail(f"docs/names.md: no check for an old name in {where!r}: add one here")
