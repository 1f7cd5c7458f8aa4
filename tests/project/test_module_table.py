"""docs/core.md's module table against the tree: every module it names is there, and every public
name (``core.__all__``) a row gives is defined or imported by one of that row's modules, so a name
that moves (issue 72: ``core/incidents/`` split by job) cannot leave the table pointing elsewhere.
Each public name still imports from ``sbnotebook.core``, where the API is documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sbnotebook import core

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "sbnotebook" / "core"
ROW = re.compile(r"^\| (`[^|]+`) \| (.+) \|$", re.M)
TICKED = re.compile(r"`([^`]+)`")


def names_in(path: Path) -> set[str]:
    """What a module defines or imports at its top level."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            found.update(a.asname or a.name.split(".")[0] for a in node.names)
    return found


def misplaced(table: str, root: Path, public: set[str]) -> list[str]:
    found = []
    for paths, job in ROW.findall(table):
        modules = [p for p in TICKED.findall(paths) if p.endswith(".py") or p.endswith("/")]
        here: set[str] = set()
        for module in modules:
            path = root / module
            if module.endswith("/"):
                if not path.is_dir():
                    found.append(f"{module} is not a folder of core")
                continue
            if not path.is_file():
                found.append(f"{module} is not a module of core")
                continue
            here |= names_in(path)
        if any(m.endswith("/") or not (root / m).is_file() for m in modules):
            continue  # a folder's row names what is inside it; a missing module is said above
        for name in TICKED.findall(job):
            name = name.rstrip("()")
            if name in public and name not in here:
                found.append(f"{name} is not in {', '.join(modules)}")
    return found


def test_the_module_table_names_modules_that_are_there_and_the_names_they_hold() -> None:
    text = (ROOT / "docs" / "core.md").read_text(encoding="utf-8")
    table = text[text.index("| module | job |") :].split("\n\n")[0]
    assert len(ROW.findall(table)) > 30
    assert misplaced(table, CORE, set(core.__all__)) == []


def test_every_public_name_imports_from_core() -> None:
    for name in core.__all__:
        assert getattr(core, name) is not None, name


def test_the_table_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def copy(): ...\nfrom x import purge\n")
    table = "| `a.py` | `copy`, `purge`, `route` |\n| `gone.py` | `copy` |\n| `b/` | x |"
    assert misplaced(table, tmp_path, {"copy", "purge", "route"}) == [
        "route is not in a.py",
        "gone.py is not a module of core",
        "b/ is not a folder of core",
    ]
