"""docs/azure-and-databricks.md's troubleshooting lists every error class the kit raises (the
emulator aside: its errors are the broker's, not the user's), found by walking the package."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import sbnotebook
from sbnotebook.core import SbError

DOC = Path(__file__).resolve().parents[1] / "docs" / "azure-and-databricks.md"
SIGNALS = {"HelpShown", "_Misfit"}  # caught where raised, never shown (core/errors.py)


def error_classes() -> set[str]:
    found: set[str] = set()
    for mod in pkgutil.walk_packages(sbnotebook.__path__, "sbnotebook."):
        if mod.name.startswith("sbnotebook.emulator") or mod.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(mod.name)
        except ImportError:
            continue  # an optional extra not installed here
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, SbError) and value.__module__.startswith("sbnotebook"):
                found.add(value.__name__)
    return found - SIGNALS


def test_every_error_class_has_a_troubleshooting_row() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### The errors the kit raises") :]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    classes = error_classes()
    expected = {"SbError", "CommandFailed", "PartlyDoneError"}
    if importlib.util.find_spec("pyspark") is not None:
        expected.add("OptionError")  # sbnotebook.spark imports only with pyspark (not in nox -s dbr15)
    assert expected <= classes  # the walk finds them
    assert sorted(classes - rows) == []
