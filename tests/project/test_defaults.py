"""Each default declared once (issue 59 point 2): the defaults more than one layer starts from live in
``sbnotebook/core/defaults.py`` (and ``MAX_SCANNED``, ``TAIL_INTERVAL`` beside their code), and every
public function, panel, magic flag, setting and Spark option whose parameter means one of them has
that constant as its default, read from the signatures, the parsers, the traits and the option
parsers themselves. An in-flight limit is refused by one check (``core.check_max_in_flight``) in every
layer, in its words.

Each rule is a function of what it reads, so each has a test on a made-up case that breaks it."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from traitlets import Float, Int
from traitlets.config import Configurable

from sbnotebook import core
from sbnotebook.core.operations import process, scan
from sbnotebook.emulator import Emulator
from tests import shell
from tests.project import surface
from tests.required import require_module

ip, sb = shell.ip, shell.sb  # the magics' fixtures (the last test)

# A parameter of this name means this fact wherever it is a keyword of a public callable.
BY_NAME: dict[str, tuple[str, object]] = {
    "max_in_flight": ("core.MAX_IN_FLIGHT", core.MAX_IN_FLIGHT),
    "max_renewal_seconds": ("core.MAX_RENEWAL_SECONDS", core.MAX_RENEWAL_SECONDS),
    "max_sessions": ("core.MAX_SESSIONS", core.MAX_SESSIONS),
    "max_scanned": ("core.MAX_SCANNED", core.MAX_SCANNED),
}
# Parameters whose word is shared by other ideas, meaning the fact only here.
BY_PLACE: dict[tuple[str, str], tuple[str, object]] = {
    ("core.peek", "max_messages"): ("core.PEEK_MAX_MESSAGES", core.PEEK_MAX_MESSAGES),
    ("core.receive", "max_messages"): ("core.RECEIVE_MAX_MESSAGES", core.RECEIVE_MAX_MESSAGES),
    ("core.receive", "wait_seconds"): ("core.WAIT_SECONDS", core.WAIT_SECONDS),
    ("core.tail", "interval"): ("core.TAIL_INTERVAL", core.TAIL_INTERVAL),
    ("TailPanel", "interval"): ("core.TAIL_INTERVAL", core.TAIL_INTERVAL),
}
# The same word for another fact, with its own constant (docs/names.md, "operations in flight").
OTHER_FACTS: dict[tuple[str, str], tuple[str, object]] = {
    ("core.scan", "max_in_flight"): ("scan.DEFAULT_MAX_IN_FLIGHT: peek windows", scan.DEFAULT_MAX_IN_FLIGHT),
    ("core.ascan", "max_in_flight"): ("scan.DEFAULT_MAX_IN_FLIGHT: peek windows", scan.DEFAULT_MAX_IN_FLIGHT),
    ("core.scan_records", "max_in_flight"): ("scan.DEFAULT_MAX_IN_FLIGHT: peek windows", scan.DEFAULT_MAX_IN_FLIGHT),
    ("core.process", "max_in_flight"): ("process.HANDLERS_IN_FLIGHT: handlers", process.HANDLERS_IN_FLIGHT),
}
if surface.spark_installed():
    settle = importlib.import_module("sbnotebook.spark.settle")
    OTHER_FACTS[("sbspark.settle", "max_in_flight")] = (
        "settle.RECEIVERS_IN_FLIGHT: receivers",
        settle.RECEIVERS_IN_FLIGHT,
    )
# Every numeric setting starts from a core constant.
SETTINGS: dict[str, tuple[str, object]] = {
    "peek_max_messages": ("core.PEEK_MAX_MESSAGES", core.PEEK_MAX_MESSAGES),
    "receive_max_messages": ("core.RECEIVE_MAX_MESSAGES", core.RECEIVE_MAX_MESSAGES),
    "max_in_flight": ("core.MAX_IN_FLIGHT", core.MAX_IN_FLIGHT),
    "wait_seconds": ("core.WAIT_SECONDS", core.WAIT_SECONDS),
    "max_renewal_seconds": ("core.MAX_RENEWAL_SECONDS", core.MAX_RENEWAL_SECONDS),
    "tail_interval": ("core.TAIL_INTERVAL", core.TAIL_INTERVAL),
}


def public_callables() -> dict[str, Callable[..., Any]]:
    """Every public function and class of core (``__all__``, and ``core.deferral``'s functions), of
    ``sbnotebook.spark`` (``__all__``, when pyspark is installed) and every panel, by the name a user
    calls it by."""
    found: dict[str, Callable[..., Any]] = {}
    for name in core.__all__:
        obj = getattr(core, name)
        if callable(obj) and not inspect.ismodule(obj):
            found[f"core.{name}"] = obj
    for name, obj in vars(core.deferral).items():
        if inspect.isfunction(obj) and not name.startswith("_") and obj.__module__ == core.deferral.__name__:
            found[f"core.deferral.{name}"] = obj
    if surface.spark_installed():
        spark = importlib.import_module("sbnotebook.spark")
        found |= {f"sbspark.{n}": getattr(spark, n) for n in spark.__all__ if n != "ServiceBusDataSource"}
    found |= surface.panels()
    return found


def defaults_of(fn: Callable[..., Any]) -> Iterator[tuple[str, object]]:
    """(parameter, default) of each parameter of ``fn`` that has one."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without one
        return
    for name, parameter in parameters.items():
        if parameter.default is not parameter.empty:
            yield name, parameter.default


def expected(place: str, parameter: str) -> tuple[str, object] | None:
    return OTHER_FACTS.get((place, parameter)) or BY_PLACE.get((place, parameter)) or BY_NAME.get(parameter)


def wrong_defaults(callables: Mapping[str, Callable[..., Any]]) -> list[str]:
    """Each parameter that means one of the facts above without its constant as its default."""
    found = []
    for place, fn in sorted(callables.items()):
        for parameter, default in defaults_of(fn):
            fact = expected(place, parameter)
            if fact is not None and default != fact[1]:
                found.append(f"{place}({parameter}=) defaults to {default!r}, not {fact[0]} ({fact[1]!r})")
    return found


def wrong_flags(parsers: Mapping[str, argparse.ArgumentParser], settings: type[Configurable]) -> list[str]:
    """Each magic flag that means a fact: its default is the constant, or None (the line says so in
    its help) and the setting it names starts from the constant."""
    found = []
    traits = settings.class_traits(config=True)
    for prog, parser in sorted(parsers.items()):
        for action in parser._actions:
            fact = BY_NAME.get(action.dest)
            if fact is None:
                continue
            if action.default is None:
                setting = f"SbMagics.{action.dest}"
                trait = traits.get(action.dest)
                if setting not in (action.help or "") or trait is None or trait.default_value != fact[1]:
                    found.append(f"{prog} {action.option_strings[-1]}: its default is not {setting} = {fact[0]}")
            elif action.default != fact[1]:
                found.append(f"{prog} {action.option_strings[-1]} defaults to {action.default!r}, not {fact[0]}")
    return found


def wrong_settings(settings: type[Configurable]) -> list[str]:
    """Each numeric setting that does not start from its core constant (a new one must name one)."""
    from sbnotebook.notebook.magics.settings import RENAMED_SETTINGS

    found = []
    for name, trait in sorted(settings.class_traits(config=True).items()):
        if name in RENAMED_SETTINGS or not isinstance(trait, (Int, Float)):
            continue
        fact = SETTINGS.get(name)
        if fact is None:
            found.append(f"SbMagics.{name}: a numeric setting without a core constant to start from")
        elif trait.default_value != fact[1]:
            found.append(f"SbMagics.{name} defaults to {trait.default_value!r}, not {fact[0]}")
    return found


ROOT = Path(__file__).resolve().parents[2]


def _number(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _flag_dest(call: ast.Call) -> str | None:
    dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
    if isinstance(dest, ast.Constant):
        return str(dest.value)
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
    return str(flags[0])[2:].replace("-", "_") if flags else None


def _trait(call: ast.Call) -> ast.Call | None:
    """The ``Int(...)`` / ``Float(...)`` of a trait declaration (``Int(10, min=1).tag(config=True)``)."""
    while isinstance(call.func, ast.Attribute) and call.func.attr == "tag" and isinstance(call.func.value, ast.Call):
        call = call.func.value
    return call if getattr(call.func, "id", "") in ("Int", "Float") and call.args else None


def _names_option(call: ast.Call, option: str) -> bool:
    return any(isinstance(a, ast.Constant) and a.value == option for a in call.args)


def typed_numbers(root: Path) -> list[str]:
    """Each parameter, setting or flag meaning one of the facts whose default is a number typed where
    it is (the number then lives in two places), read from the source of ``root``'s sbnotebook (the
    emulator aside: it imports nothing of core)."""
    found = []
    for path in sorted((root / "sbnotebook").rglob("*.py")):
        if "emulator" in path.relative_to(root).parts:
            continue
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = args.posonlyargs + args.args
                given = [*zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)]
                given += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
                found += [
                    f"{where}:{d.lineno} {node.name}({a.arg}={ast.unparse(d)})"
                    for a, d in given
                    if a.arg in BY_NAME and _number(d)
                ]
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                trait = _trait(node.value)
                if trait is not None and any(n in SETTINGS for n in names) and _number(trait.args[0]):
                    found.append(f"{where}:{node.lineno} {names[0]} = {ast.unparse(trait.func)}(...)")
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if _flag_dest(node) in BY_NAME and _number(default):
                    found.append(f"{where}:{node.lineno} {ast.unparse(node.args[0])} default={ast.unparse(default)}")
            elif isinstance(node, ast.Call) and _names_option(node, "maxInFlight") and any(map(_number, node.args)):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def exported_numbers() -> list[str]:
    """Every number ``core`` exports by an upper-case name (``core.__all__``): defaults.py's and those
    declared beside their code (``MAX_SCANNED``, ``PAGE_SIZE``, ...), each a default of something."""
    return sorted(f"core.{n}" for n in core.__all__ if n.isupper() and type(getattr(core, n)) in (int, float))


def wrong_documented(text: str, numbers: Iterable[str] = ()) -> list[str]:
    """docs/core.md's Defaults table against core: each row's value the constant's, and a row for
    every constant this test reads and every one of ``numbers`` (``core.NAME``)."""
    section = text.split("\n## Defaults\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip().strip("`") for c in r.strip("|").split("|")] for r in section.splitlines() if r.startswith("| `")
    ]
    found = []
    for name, value, *_ in rows:
        actual = getattr(core, name.removeprefix("core."), None)
        if actual is None or float(value) != actual:
            found.append(f"docs/core.md gives {name} the value {value}, the code {actual!r}")
    named = {fact[0] for fact in [*BY_NAME.values(), *BY_PLACE.values(), *SETTINGS.values()]} | set(numbers)
    found += [f"docs/core.md's Defaults has no row for {n}" for n in sorted(named - {r[0] for r in rows})]
    return found


def test_the_documented_defaults_are_the_code_s() -> None:
    """A row for every number core exports (issue 72): a constant of defaults.py is one of them."""
    from sbnotebook.core import defaults

    declared = {n for n, v in vars(defaults).items() if n.isupper() and type(v) in (int, float)}
    assert declared and declared <= set(core.__all__)  # defaults.py's constants are core's, so each needs a row
    numbers = exported_numbers()
    assert {"core.MAX_HELD_BYTES", "core.PAGE_SIZE"} <= set(numbers)  # the search finds them
    assert wrong_documented((ROOT / "docs" / "core.md").read_text(encoding="utf-8"), numbers) == []


def test_no_default_is_typed_as_a_number_where_it_is_used() -> None:
    assert typed_numbers(ROOT) == []


def test_every_public_parameter_meaning_a_default_has_its_constant() -> None:
    callables = public_callables()
    assert wrong_defaults(callables) == []
    read = {(place, p) for place, fn in callables.items() for p, _ in defaults_of(fn)}
    assert set(BY_PLACE) | set(OTHER_FACTS) <= read  # each listed place is read (none is stale)
    assert ("core.send", "max_in_flight") in read and ("SendPanel", "max_in_flight") in read


def test_every_magic_flag_and_setting_starts_from_the_constants() -> None:
    from sbnotebook.notebook.magics import SbMagics

    parsers = surface.magic_parsers()
    assert wrong_flags(parsers, SbMagics) == []
    assert wrong_settings(SbMagics) == []
    in_flight = [p for p, parser in parsers.items() if "--max-in-flight" in parser._option_string_actions]
    assert sorted(in_flight) == ["%sb_copy", "%sb_discard", "%sb_import", "%sb_resubmit", "%sb_send"]


def test_the_checks_can_fail_on_made_up_cases(tmp_path: Path) -> None:
    made_up_source = tmp_path / "sbnotebook" / "made_up.py"
    made_up_source.parent.mkdir()
    made_up_source.write_text(
        "def send(*, max_in_flight=10, max_sessions=MAX_SESSIONS): ...\n"
        "class Settings:\n    wait_seconds = Float(5.0, min=0.0).tag(config=True)\n"
        'P.add_argument("--max-scanned", type=int, default=10_000)\n'
        'in_flight = int_option(options, "maxInFlight", 10, 1)\n',
        encoding="utf-8",
    )
    made_up_page = (
        "\n## Defaults\n\n| `core.MAX_IN_FLIGHT` | 12 | ... |\n| `core.MAX_SESSIONS` | 100 | ... |\n\n## Next\n"
    )
    assert wrong_documented(made_up_page)[:2] == [
        "docs/core.md gives core.MAX_IN_FLIGHT the value 12, the code 10",
        "docs/core.md's Defaults has no row for core.MAX_RENEWAL_SECONDS",
    ]
    assert "docs/core.md's Defaults has no row for core.MAX_HELD_BYTES" in wrong_documented(
        made_up_page, ["core.MAX_HELD_BYTES"]
    )
    assert typed_numbers(tmp_path) == [
        "sbnotebook/made_up.py:1 send(max_in_flight=10)",
        "sbnotebook/made_up.py:3 wait_seconds = Float(...)",
        "sbnotebook/made_up.py:4 '--max-scanned' default=10000",
        "sbnotebook/made_up.py:5 int_option(options, 'maxInFlight', 10, 1)",
    ]

    def made_up(*, max_in_flight: int = 12, max_sessions: int = core.MAX_SESSIONS) -> None: ...

    assert wrong_defaults({"made_up": made_up}) == [
        "made_up(max_in_flight=) defaults to 12, not core.MAX_IN_FLIGHT (10)"
    ]
    assert wrong_defaults({"core.process": made_up}) == [
        "core.process(max_in_flight=) defaults to 12, not process.HANDLERS_IN_FLIGHT: handlers (4)"
    ]

    class MadeUpSettings(Configurable):
        max_in_flight = Int(8).tag(config=True)
        max_rows = Int(5).tag(config=True)

    made = argparse.ArgumentParser(prog="%sb_made_up")
    made.add_argument("--max-in-flight", dest="max_in_flight", help="default: SbMagics.max_in_flight")
    made.add_argument("--max-sessions", type=int, default=50)
    assert wrong_flags({"%sb_made_up": made}, MadeUpSettings) == [
        "%sb_made_up --max-in-flight: its default is not SbMagics.max_in_flight = core.MAX_IN_FLIGHT",
        "%sb_made_up --max-sessions defaults to 50, not core.MAX_SESSIONS",
    ]
    assert wrong_settings(MadeUpSettings) == [
        "SbMagics.max_in_flight defaults to 8, not core.MAX_IN_FLIGHT",
        "SbMagics.max_rows: a numeric setting without a core constant to start from",
    ]


def test_spark_options_start_from_the_constants(emulator: Emulator) -> None:
    """Every kind that takes ``maxInFlight`` parses it with one parser, from ``core.MAX_IN_FLIGHT``;
    a destructive read waits ``core.WAIT_SECONDS`` (what the parsers give, not what they say)."""
    require_module("pyspark")
    from pyspark.sql.types import BinaryType, StructField, StructType

    from sbnotebook.spark.options import KNOWN_OPTIONS
    from sbnotebook.spark.spec import ReadSpec, WriteOptions

    given = {"entity": "q", "connectionString": emulator.connection_string}
    schema = StructType([StructField("body", BinaryType())])
    parsed = {
        "read": ReadSpec({**given, "mode": "receive_and_delete"}, 2, None).read(),
        "stream": ReadSpec(given, 2, None).stream(),
        "write": WriteOptions.parse(given, schema),
        "stream write": WriteOptions.parse(given, schema, kind="stream write"),
    }
    assert {kind for kind, names in KNOWN_OPTIONS.items() if "maxInFlight" in names} == set(parsed)
    assert {kind: o.max_in_flight for kind, o in parsed.items()} == dict.fromkeys(parsed, core.MAX_IN_FLIGHT)
    assert parsed["read"].wait_seconds == core.WAIT_SECONDS  # type: ignore[union-attr]


def test_one_check_refuses_an_in_flight_limit_in_every_layer(emulator: Emulator, ip: Any, sb: Any) -> None:
    """0 is refused everywhere with the check's own sentence, naming the place's word for it; the
    setting keeps its value."""
    from traitlets import TraitError

    from sbnotebook.notebook.widgets import SendPanel
    from tests.helpers import magic_fails

    said = "must be a whole number of 1 or more, not 0."
    cs = emulator.connection_string
    for call, name in [
        (lambda: core.send("q", ["x"], max_in_flight=0, connection=cs), "max_in_flight"),
        (lambda: core.copy("q", "fwd-dst", max_in_flight=0, connection=cs), "max_in_flight"),
        (lambda: core.resubmit("q", max_in_flight=0, connection=cs), "max_in_flight"),
        (lambda: core.receive("q", max_in_flight=0, connection=cs), "max_in_flight"),
        (lambda: core.scan("q", max_in_flight=0, connection=cs), "max_in_flight"),
        (lambda: SendPanel("q", connection=cs, max_in_flight=0), "max_in_flight"),
    ]:
        with pytest.raises(core.InvalidInputError) as refused:
            result = call()
            next(iter(result))  # a scan is a generator: its check runs at the first page
        assert refused.value.message == f"{name} {said}"
    shown = magic_fails(ip, "sb_send q --max-in-flight 0", '"x"')
    assert shown.endswith(f"argument --max-in-flight: {said[:-1]} (see %sb_send -h)"), shown
    with pytest.raises(TraitError, match=f"^SbMagics.max_in_flight {said}$"):
        sb.max_in_flight = 0
    assert sb.max_in_flight == core.MAX_IN_FLIGHT
    assert emulator.broker.counts("q")["active"] == 0  # nothing was sent
    if surface.spark_installed():
        from sbnotebook.spark.options import OptionError, in_flight_option

        with pytest.raises(OptionError, match=f"^servicebus: option maxInFlight {said}$"):
            in_flight_option({"maxInFlight": "0"})
