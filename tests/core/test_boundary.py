"""Guards on the core's shape: the SDK boundary, the public names, one schema, one outcome type."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re

import pytest

from sbnotebook import core
from sbnotebook.core.outcome import Outcome, Report
from sbnotebook.core.sdk import PRIVATE_NAMES, USED_BY
from sbnotebook.core.views import records
from sbnotebook.emulator import Emulator
from tests.helpers import names_in

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _resolve(owner: str) -> object:
    parts = owner.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    for name in parts[cut:]:
        obj = getattr(obj, name)
    return obj


def test_every_private_sdk_name_the_kit_uses_still_exists() -> None:
    for owner, attr in PRIVATE_NAMES:
        obj = _resolve(owner)
        found = hasattr(obj, attr) or (
            inspect.isclass(obj) and re.search(rf"self\.{attr}\b", inspect.getsource(obj)) is not None
        )
        assert found, f"the installed azure-servicebus has no {owner}.{attr}: update sbnotebook/core/sdk/"


def mentioned(source: str) -> set[str]:
    """Every name a module's code mentions (attributes, names, imported names, words of the SDK lines
    it pins: string constants other than docstrings)."""
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    found = names_in(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.update(re.findall(r"\w+", node.value))
    return found


def reached(source: str) -> set[str]:
    """The private names a module reaches for in code it did not write: ``obj._name`` (read or set)
    and ``getattr(obj, "_name")`` on anything but ``self``, for a name it does not define, and every
    name it imports from a private SDK module. Its own marks (``_sbnotebook_*``) are left out."""
    tree = ast.parse(source)
    own = {"__init__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            own.add(node.attr)

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__") and name not in own

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            found.add(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr"):
            name = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else ""
            if isinstance(name, str) and private(name):
                found.add(name)
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or "").startswith("azure.") and "._" in f".{node.module}"
        ):
            found.update(alias.name for alias in node.names)
    return {name for name in found if not name.startswith("_sbnotebook")}


def test_each_part_of_the_boundary_uses_what_it_lists_and_lists_what_it_uses() -> None:
    for part, owners in USED_BY.items():
        source = inspect.getsource(importlib.import_module(f"sbnotebook.core.sdk.{part}"))
        listed = {attr for names in owners.values() for attr in names.split()}
        classes = {owner.rsplit(".", 1)[-1] for owner in owners}
        stale = listed - mentioned(source)
        assert not stale, f"sdk.USED_BY lists {sorted(stale)} for {part}, which does not use them"
        unlisted = reached(source) - listed - classes
        assert not unlisted, f"{part} uses the SDK's private {sorted(unlisted)}: list them in sdk.USED_BY"


def test_the_boundary_checks_can_fail() -> None:
    source = (
        "from azure.servicebus._common.constants import HIDDEN\n"
        "def f(receiver):\n"
        '    """Says _stale, in words only."""\n'
        "    receiver._listed = getattr(receiver, '_unlisted', None)\n"
        "    return HIDDEN, receiver._own_helper, _helper()\n"
        "def _helper(): ...\n"
    )
    assert "_stale" not in mentioned(source) and "_listed" in mentioned(source)
    assert reached(source) == {"_listed", "_unlisted", "HIDDEN", "_own_helper"}


def test_private_sdk_names_are_used_only_in_the_boundary_modules() -> None:
    names = {attr for _, attr in PRIVATE_NAMES} | {"_common", "_pyamqp", "_transport"}
    boundary = {f"{part}.py" for part in USED_BY} | {"__init__.py"}
    for path in (ROOT / "sbnotebook").rglob("*.py"):
        if (path.name in boundary and path.parent == ROOT / "sbnotebook" / "core" / "sdk") or "emulator" in path.parts:
            continue
        text = path.read_text()
        for name in names:
            # Reached through self, a name is the module's own (scan.py's _session is not the SDK's).
            used = re.search(rf"(?<!\bself)\.{name}\b", text)
            assert not used, f"{path.relative_to(ROOT)} uses the SDK's private {name}"


def test_public_names_are_exactly_all() -> None:
    public = {n for n in dir(core) if not n.startswith("_")}
    modules = {n for n in public if inspect.ismodule(getattr(core, n))}
    assert set(core.__all__) == public - (modules - {"deferral", "playbook"})  # the two namespaces core exports
    for name in core.__all__:
        assert getattr(core, name) is not None


def test_sync_api_has_explicit_keywords() -> None:
    for name in core.__all__:
        fn = getattr(core, name)
        if inspect.isfunction(fn):
            kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
            # renamed(**old_to_new) takes old names, not an operation's keywords;
            # the SDK's own clients take the SDK's options, passed on as they are (core/sdk/clients.py)
            passes_on = ("renamed", "sdk_client", "sdk_admin_client", "emulator_admin_client")
            assert inspect.Parameter.VAR_KEYWORD not in kinds or name in passes_on, name


def test_each_sync_form_is_its_async_operation_run_to_the_end() -> None:
    """One body per operation: the sync form wraps the async one (same signature, for help() and
    completion). scan yields records where ascan yields the SDK's pages; copy_then_complete's sync
    form has no also_complete (the bulk resubmit's need, async only)."""
    pairs = [n for n in core.__all__ if f"a{n}" in core.__all__]
    assert {"send", "schedule", "cancel_scheduled", "purge", "resubmit"} <= set(pairs)
    for name in pairs:
        if name in ("scan", "copy_then_complete"):
            continue
        sync, async_ = getattr(core, name), getattr(core, f"a{name}")
        assert getattr(sync, "__wrapped__", None) is async_, name
        assert inspect.signature(sync) == inspect.signature(async_), name


def test_a_sync_form_is_made_from_its_operation_and_says_old_keywords_under_its_own_name(emulator: Emulator) -> None:
    """``sync_form(aoperation)`` is ``operation`` (its name less the ``a``), with the operation's
    signature; an old keyword given to it is said once as ``operation(old=)`` at the caller's line,
    not as the async operation's; an operation whose name does not start with ``a`` is refused."""
    from sbnotebook.core.connections.syncforms import sync_form, taking_arguments_of
    from sbnotebook.core.renames import WARNED, renamed

    @renamed(count="limit")
    async def aoperation(entity: str, *, limit: int = 10, connection: object = None) -> int:
        return limit

    operation = sync_form(aoperation)
    assert operation.__name__ == "operation" and inspect.signature(operation) == inspect.signature(aoperation)
    WARNED.clear()
    with pytest.warns(FutureWarning, match=r"operation\(count=\) is deprecated") as said:
        assert operation("q", count=3, connection=emulator.connection_string) == 3  # type: ignore[call-arg]
    assert said[0].filename == __file__ and "aoperation" not in str(said[0].message)

    def _first_of(given: dict[str, object]) -> object:
        """The limit the call was given."""
        return given["limit"]

    first_of = taking_arguments_of(aoperation, _first_of)
    assert first_of.__name__ == "first_of" and first_of.__doc__ == "The limit the call was given."
    assert inspect.signature(first_of) == inspect.signature(aoperation)
    assert first_of("q") == 10
    with pytest.warns(FutureWarning, match=r"first_of\(count=\) is deprecated"):
        assert first_of("q", count=4) == 4  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="an async operation's name starts with 'a'"):
        sync_form(_async_without_prefix)


async def _async_without_prefix(connection: object = None) -> None:
    return None


def test_one_field_list() -> None:
    assert records.RECORD_FIELDS[0] == "body_text"  # body first
    assert len(set(records.RECORD_FIELDS)) == len(records.FIELDS)
    assert set(records.SENDABLE_FIELDS) <= set(records.RECORD_FIELDS)
    # No other module lists the record's system fields again.
    needle = re.compile(r'"dead_letter_error_description",\s*\n?\s*"dead_letter_source"')
    for path in (ROOT / "sbnotebook").rglob("*.py"):
        if path.name != "records.py":
            assert not needle.search(path.read_text()), f"{path.relative_to(ROOT)} lists record fields itself"


def test_page_size_is_defined_once() -> None:
    for path in (ROOT / "sbnotebook").rglob("*.py"):
        if "emulator" in path.parts or path.name == "scan.py":
            continue
        assert not re.search(r"\b250\b", path.read_text()), f"{path.relative_to(ROOT)} has its own page size"


def test_report_summary_and_views() -> None:
    report = Report("send", "q")
    report.add(Outcome("a", None, "sent", index=0))
    report.add(Outcome("b", None, "failed", "refused", 1, "amqp:resource-limit-exceeded", "t-1", False, 1))
    assert report.total == 2 and report.failed == 1 and not report.ok
    assert "1 sent" in report.summary() and "1 failed" in report.summary()
    frame = report.to_pandas()
    assert list(frame["outcome"]) == ["sent", "failed"] and frame.loc[1, "tracking_id"] == "t-1"
    assert report.of(index=1) is not None and report.of(index=1).condition == "amqp:resource-limit-exceeded"  # type: ignore[union-attr]
    small = Report("purge", "q", max_details=2)
    small.extend(Outcome(None, i, "purged") for i in range(5))
    assert small.count("purged") == 5 and len(small.outcomes) == 2 and not small.detailed
