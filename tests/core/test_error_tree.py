"""Every exception class the kit defines is an ``SbError`` and is named in the tree drawn in
core/errors.py (and docs/core.md), so ``except SbError`` catches whatever the kit raises on purpose.
The emulator and the SQL rule evaluator below it and core (``sbnotebook.sqlrules``) are outside: they
import nothing from the rest of the package; core turns a ``SqlFilterError`` into ``InvalidInputError``
(core/topology/evaluator.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import sbnotebook
from sbnotebook.core import SbError
from tests.required import require_module


def _module_names(*, spark: bool) -> list[str]:
    names = []
    for info in pkgutil.walk_packages(sbnotebook.__path__, "sbnotebook."):
        if info.name.startswith(("sbnotebook.emulator", "sbnotebook.sqlrules")) or info.name.endswith("__main__"):
            continue
        if info.name.startswith("sbnotebook.spark") == spark:
            names.append(info.name)
    return names


def _outside_the_tree(names: list[str]) -> tuple[set[str], list[str]]:
    """(every exception class defined in these modules, those not derived from SbError)."""
    found: set[str] = set()
    outside = []
    for name in names:
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name:
                found.add(f"{name}.{cls.__qualname__}")
                if not issubclass(cls, SbError):
                    outside.append(f"{name}.{cls.__qualname__}{tuple(b.__name__ for b in cls.__bases__)}")
    return found, outside


def _not_drawn(found: set[str]) -> list[str]:
    """The classes the tree in core/errors.py's docstring does not name (docs/core.md, "Errors",
    draws the same tree and says every class is in it)."""
    from sbnotebook.core import errors

    drawn = set(re.findall(r"\b_?[A-Z]\w+", errors.__doc__ or ""))
    return sorted(name for name in found if name.rsplit(".", 1)[-1] not in drawn)


def test_every_exception_the_kit_defines_is_an_sberror() -> None:
    found, outside = _outside_the_tree(_module_names(spark=False))
    # The walk sees the classes it must see (else it could pass by finding nothing).
    assert {"sbnotebook.core.errors.PartlyDoneError", "sbnotebook.notebook.magics.command.CommandFailed"} <= found
    assert outside == []
    assert _not_drawn(found) == []


def test_every_exception_the_spark_layer_defines_is_an_sberror() -> None:
    require_module("pyspark")
    from pyspark.sql import datasource

    names = _module_names(spark=True)
    if not hasattr(datasource, "EqualTo"):  # pyspark 4.0: pushdown.py is imported only with pushFilters (4.1+)
        names.remove("sbnotebook.spark.pushdown")
    found, outside = _outside_the_tree(names)
    assert {"sbnotebook.spark.options.OptionError", "sbnotebook.spark.writing.SendFailedError"} <= found
    assert outside == []
    assert _not_drawn(found) == []


def test_the_old_bases_are_kept_where_users_catch_them() -> None:
    from IPython.core.error import UsageError

    from sbnotebook.notebook.magics import CommandFailed

    assert issubclass(CommandFailed, UsageError)
    require_module("pyspark")
    from sbnotebook.spark import OptionError, SendFailedError

    assert issubclass(OptionError, ValueError) and issubclass(SendFailedError, RuntimeError)
