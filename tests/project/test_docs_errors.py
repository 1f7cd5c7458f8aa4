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

DOC = Path(__file__).resolve().parents[2] / "docs" / "azure-and-databricks.md"
# Caught where raised, never shown: HelpShown, _Misfit (core/errors.py); StaleLink (a pooled link of a
# deleted entity: connections/pools.py opens another); NotAMatch (a search's non-match, views/where.py);
# Unsupported (a value the SDK cannot encode: that message's outcome says so, operations/copies.py).
SIGNALS = {"HelpShown", "_Misfit", "StaleLink", "NotAMatch", "Unsupported"}


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


def troubleshooting_text() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Troubleshooting") : text.index("### The errors the kit raises")]


def test_the_troubleshooting_rows_quote_what_the_kit_prints() -> None:
    """The symptoms are the kit's own lines, made here against the emulator: a wrong key, a key
    without Manage at the administration API, sends refused as server busy (throttling)."""
    import pytest

    from sbnotebook import core
    from sbnotebook.emulator import Emulator

    rows = troubleshooting_text()
    with Emulator() as emu:
        emu.add_policy("reader", ["Listen"])
        try:
            wrong = emu.connection_string.replace("SAS_KEY_VALUE", "wrong-key")
            with pytest.raises(core.ConfigurationError) as refused:
                core.connect(wrong)
            assert f"`ConfigurationError: {refused.value}`" in rows
            with pytest.raises(core.ConfigurationError) as refused:
                core.counts("orders", connection=emu.policy_connection_string("reader"))
            assert f"`ConfigurationError: {refused.value}`" in rows
            emu.reject_sends("orders", 100, "server-busy")
            report = core.send(
                "orders", ["a"], retry=core.RetryPolicy(attempts=2, base_delay=0.01), connection=emu.connection_string
            )
            failure = report.failures[0].error
            assert failure is not None and failure.startswith("ServiceBusServerBusyError (orders): ")
            assert failure.split(" (injected")[0] in rows and report.count("failed") == 1
        finally:
            core.close_all()
