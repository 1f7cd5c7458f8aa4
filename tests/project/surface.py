"""Every name a user types, read from the code, not from a list kept by hand: the flags of every
magic and command line (``sbnotebook``, the pytest plugin's options), the parameters of every public
function and class of ``sbnotebook.core`` (``__all__``), ``sbnotebook.spark`` (``__all__``), the
pytest plugin (its ``Namespace``, the ``Emulator`` its fixture hands out, its marker's keywords) and
the panels (and the labels they show), every Spark option and every setting.
tests/project/test_names.py checks them against docs/names.md."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Typed:
    """One name as a user types it, and where: ``%sb_peek`` ``--max-messages``, ``core.peek``
    ``max_messages``, ``Spark read`` ``maxMessages``, ``SbMagics`` ``peek_max_messages``."""

    place: str
    name: str
    old: bool = False  # still taken for one release (it warns), never shown


def words(name: str) -> list[str]:
    """``--max-messages``, ``max_messages``, ``maxMessages`` -> ``["max", "messages"]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.lstrip("-"))
    return [w.lower() for w in re.split(r"[-_ ]+", spaced) if w]


# ------------------------------------------------------------------------------------ flags


def parser_flags(place: str, parser: argparse.ArgumentParser) -> Iterator[Typed]:
    """Every option string of a parser (and of its subcommands', as ``place sub``), and the old
    flags a magic's parser still takes (``Parser.renamed``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parser_flags(f"{place} {sub_name}", sub)
            continue
        for option in action.option_strings:
            if option not in ("-h", "--help", "--version"):
                yield Typed(place, option)
    for old in getattr(parser, "renamed", {}):
        yield Typed(place, old, old=True)


def magic_parsers() -> dict[str, argparse.ArgumentParser]:
    from sbnotebook.notebook import magics

    return {p.prog: p for p in magics.PARSERS}


def command_line_parsers() -> dict[str, argparse.ArgumentParser]:
    """``sbnotebook`` (its ``emulator`` subcommand is ``python -m sbnotebook.emulator``'s parser too)
    and the pytest plugin's options, as pytest_addoption declares them."""
    from sbnotebook import cli, pytest_plugin

    plugin = argparse.ArgumentParser(prog="pytest", add_help=False)

    class Group:  # the part of pytest's option group pytest_addoption uses
        def addoption(self, *names: str, **kwargs: Any) -> None:
            plugin.add_argument(*names, **kwargs)

    class Options:
        def getgroup(self, *args: Any, **kwargs: Any) -> Group:
            return Group()

    pytest_plugin.pytest_addoption(Options())  # type: ignore[arg-type]
    return {"sbnotebook": cli.build_parser(), "pytest": plugin}


def parsers() -> dict[str, argparse.ArgumentParser]:
    return {**magic_parsers(), **command_line_parsers()}


# ------------------------------------------------------------------------------- signatures


def parameters(place: str, fn: Callable[..., Any]) -> Iterator[Typed]:
    """A callable's parameters a user can name (not ``self``, not ``*args``/``**kwargs``, not
    ``_private``), and the old keywords it still takes (``renamed``'s ``__renamed__``)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one
        return
    for name, parameter in signature.parameters.items():
        if name in ("self", "cls") or name.startswith("_"):
            continue
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            yield Typed(place, name)
    for old in getattr(fn, "__renamed__", {}):
        yield Typed(place, old, old=True)


def _own_classes(cls: type) -> list[type]:
    """The class and its bases that are the kit's (not ipywidgets', not Exception's)."""
    return [k for k in cls.__mro__ if k.__module__.startswith("sbnotebook")]


def members(place: str, obj: Any) -> Iterator[Typed]:
    """A function's parameters; a class's: its constructor's, its public methods' and its settable
    properties (a property is typed as a name: ``emulator.latency_ms = 80``)."""
    if not inspect.isclass(obj):
        if callable(obj) and not inspect.ismodule(obj):
            yield from parameters(place, obj)
        return
    if not obj.__module__.startswith("sbnotebook"):
        return
    yield from parameters(place, obj)
    yield from (Typed(place, old, old=True) for old in getattr(obj.__init__, "__renamed__", {}))
    seen: set[str] = set()
    for klass in _own_classes(obj):
        for name, member in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if inspect.isfunction(member):
                yield from parameters(f"{place}.{name}", member)
            elif isinstance(member, property) and member.fset is not None:
                yield Typed(place, name, old=hasattr(member.fget, "__renamed_to__"))


def module_members(prefix: str, module: Any, names: Iterable[str]) -> Iterator[Typed]:
    for name in names:
        yield from members(f"{prefix}.{name}", getattr(module, name))


def panels() -> dict[str, type]:
    """Every panel class: the widgets package's classes named ...Panel, and the message browser."""
    from sbnotebook.notebook import widgets

    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(widgets.__path__):
        module = importlib.import_module(f"{widgets.__name__}.{info.name}")
        for name, obj in vars(module).items():
            own = inspect.isclass(obj) and obj.__module__ == module.__name__
            if own and (name.endswith("Panel") or name == "MessageBrowser"):
                found[name] = obj
    return found


def labels_in(source: str) -> Iterator[Typed]:
    """The labels a panel shows beside its boxes and on its buttons (each widget's constant
    ``description="..."``) in a module's source, each with the class it is in."""
    tree = ast.parse(source)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    constant = isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
                    if kw.arg == "description" and constant:
                        yield Typed(cls.name, kw.value.value)  # type: ignore[attr-defined]


def labels() -> list[Typed]:
    """Every constant label of the panels (sbnotebook/notebook/widgets/): what a user reads and
    types beside, so it says an idea in the idea's words ("From sequence number", not "From seq")."""
    from sbnotebook.notebook import widgets

    found: list[Typed] = []
    for info in pkgutil.iter_modules(widgets.__path__):
        path = Path(widgets.__path__[0]) / f"{info.name}.py"
        found += labels_in(path.read_text(encoding="utf-8"))
    return found


# ---------------------------------------------------------------------- options and settings


def spark_options() -> Iterator[Typed]:
    from sbnotebook.spark.options import KNOWN_OPTIONS, RENAMED_OPTIONS

    for kind, names in KNOWN_OPTIONS.items():
        yield from (Typed(f"Spark {kind}", name) for name in names)
    for kind, renamed in RENAMED_OPTIONS.items():
        yield from (Typed(f"Spark {kind}", old, old=True) for old in renamed)


def settings() -> Iterator[Typed]:
    from sbnotebook.notebook.magics import SbMagics
    from sbnotebook.notebook.magics.settings import RENAMED_SETTINGS

    for name in SbMagics.class_trait_names(config=True):
        yield Typed("SbMagics", name, old=name in RENAMED_SETTINGS)


# ---------------------------------------------------------------------------------- all of it


def spark_installed() -> bool:
    return importlib.util.find_spec("pyspark") is not None


def everything() -> list[Typed]:
    """Every name a user types, with where (Spark's only where pyspark is installed)."""
    from sbnotebook import core
    from sbnotebook.emulator import Emulator
    from sbnotebook.testing.model import Namespace
    from sbnotebook.testing.topology import MARKER_KEYWORDS

    found: list[Typed] = []
    for prog, parser in parsers().items():
        found += parser_flags(prog, parser)
    found += module_members("core", core, core.__all__)
    found += members("Emulator", Emulator)
    found += members("Namespace", Namespace)
    found += (Typed("servicebus_topology", name) for name in MARKER_KEYWORDS)
    for name, cls in panels().items():
        found += members(name, cls)
    found += settings()
    if spark_installed():
        from sbnotebook import spark

        found += module_members("sbspark", spark, [n for n in spark.__all__ if n != "ServiceBusDataSource"])
        found += spark_options()
    return found


def live(typed: Iterable[Typed]) -> list[Typed]:
    """The names in use (not the old ones kept for a release)."""
    return [t for t in typed if not t.old]
