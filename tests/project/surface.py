"""Every name a user types, read from the code (not from a list kept by hand): each magic's and each
command line's flags, the parameters of every public function and class of ``sbnotebook.core``,
``sbnotebook.spark``, ``sbnotebook.testing`` (the pytest plugin and the ``Emulator`` its fixture
hands out) and the panels, every Spark option, every setting. tests/project/test_names.py checks
them against docs/names.md."""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sbnotebook import core

Kind = str  # "flag", "keyword", "option", "setting"


@dataclass(frozen=True)
class Typed:
    """One name as a user types it, and where."""

    place: str  # "%sb_peek", "core.peek", "sbspark.settle", "Spark read", "SbMagics", ...
    name: str  # "--max-messages", "max_messages", "maxMessages"
    kind: Kind
    old: bool = False  # still taken for one release (it warns), never shown


def words(name: str) -> list[str]:
    """``--max-messages``, ``max_messages``, ``maxMessages`` -> ``["max", "messages"]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.lstrip("-"))
    return [w.lower() for w in re.split(r"[-_ ]+", spaced) if w]


def snake(name: str) -> str:
    return "_".join(words(name))


# ------------------------------------------------------------------------------------ flags


def parser_flags(place: str, parser: argparse.ArgumentParser) -> Iterator[Typed]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parser_flags(f"{place} {sub_name}", sub)
            continue
        for option in action.option_strings:
            if option not in ("-h", "--help", "--version"):
                yield Typed(place, option, "flag")
    for old in getattr(parser, "renamed", {}):
        yield Typed(place, old, "flag", old=True)


def magic_parsers() -> dict[str, argparse.ArgumentParser]:
    from sbnotebook.notebook import magics

    return {p.prog: p for p in magics.PARSERS}


def command_line_parsers() -> dict[str, argparse.ArgumentParser]:
    """``sbnotebook ...`` (and its ``emulator`` subcommand, which ``python -m sbnotebook.emulator``
    shares) and the pytest plugin's options."""
    from sbnotebook import cli, pytest_plugin

    plugin = argparse.ArgumentParser(prog="pytest", add_help=False)

    class Group:  # pytest's option group, as pytest_addoption uses it
        def addoption(self, *names: str, **kwargs: Any) -> None:
            plugin.add_argument(*names, **kwargs)

    class Recorder:
        def getgroup(self, *args: Any, **kwargs: Any) -> Group:
            return Group()

    pytest_plugin.pytest_addoption(Recorder())  # type: ignore[arg-type]
    return {"sbnotebook": cli.build_parser(), "pytest": plugin}


# ------------------------------------------------------------------------------- signatures


def parameters(place: str, fn: Callable[..., Any]) -> Iterator[Typed]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one
        return
    for name, parameter in signature.parameters.items():
        if name in ("self", "cls") or name.startswith("_"):
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        yield Typed(place, name, "keyword")
    for old in getattr(fn, "__renamed__", {}):
        yield Typed(place, old, "keyword", old=True)


def members(place: str, obj: Any) -> Iterator[Typed]:
    """A function's parameters; a class's constructor's and its public methods' (their own, not
    those of a base outside the kit: ipywidgets', Exception's)."""
    if inspect.isclass(obj):
        if obj.__module__.startswith("sbnotebook"):
            yield from parameters(place, obj)
            for name, member in vars(obj).items():
                if name.startswith("_"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member):
                    yield from parameters(f"{place}.{name}", member)
                elif isinstance(member, property) and member.fset is not None:
                    yield Typed(f"{place}", name, "keyword")  # a settable property is typed as a name
    elif callable(obj) and not inspect.ismodule(obj):
        yield from parameters(place, obj)


def module_names(prefix: str, module: Any, names: list[str]) -> Iterator[Typed]:
    for name in names:
        yield from members(f"{prefix}.{name}", getattr(module, name))


def panels() -> dict[str, type]:
    """Every panel class (each a widget the magics show or a user builds): the classes of the
    widgets package whose names end in Panel, and the message browser."""
    import importlib
    import pkgutil

    from sbnotebook.notebook import widgets

    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(widgets.__path__):
        module = importlib.import_module(f"{widgets.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                if name.endswith("Panel") or name == "MessageBrowser":
                    found[name] = obj
    return found


# ---------------------------------------------------------------------- options and settings


def spark_options() -> Iterator[Typed]:
    from sbnotebook.spark.options import KNOWN_OPTIONS, RENAMED_OPTIONS

    for kind, names in KNOWN_OPTIONS.items():
        for name in names:
            yield Typed(f"Spark {kind}", name, "option")
    for kind, renamed in RENAMED_OPTIONS.items():
        for old in renamed:
            yield Typed(f"Spark {kind}", old, "option", old=True)


def settings() -> Iterator[Typed]:
    from sbnotebook.notebook.magics import SbMagics
    from sbnotebook.notebook.magics.settings import RENAMED_SETTINGS

    for name in SbMagics.class_trait_names(config=True):
        yield Typed("SbMagics", name, "setting", old=name in RENAMED_SETTINGS)


# ---------------------------------------------------------------------------------- all of it


def everything() -> list[Typed]:
    """Every name a user types, with where. Spark's only where pyspark is installed (its options'
    table imports it)."""
    from sbnotebook import emulator, testing  # noqa: F401  (the plugin's package: imported for its fixtures)
    from sbnotebook.emulator import Emulator
    from sbnotebook.testing.model import Namespace

    found: list[Typed] = []
    for prog, parser in {**magic_parsers(), **command_line_parsers()}.items():
        found += parser_flags(prog, parser)
    found += module_names("core", core, list(core.__all__))
    found += members("Emulator", Emulator)
    found += members("Namespace", Namespace)
    for name, cls in panels().items():
        found += members(name, cls)
    found += settings()
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return found
    from sbnotebook import spark

    found += module_names("sbspark", spark, [n for n in spark.__all__ if n != "ServiceBusDataSource"])
    found += spark_options()
    return found
