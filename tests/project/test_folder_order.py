"""Folders that keep their order, read from the code.

A package's map (the docstring of its ``__init__.py``) is where its order is declared, once: its
bullets, top down, name the package's parts (``name/`` a sub-folder, ``name.py`` a module directly in
the folder). A part may import from its own bullet's parts and from those below it, never from one
above; and no two parts import each other, however indirectly. ``TYPE_CHECKING`` and function-level
imports count: an import inside a function is still an arrow between the folders.

Every folder of the package names each of its modules in its own map, and no docstring or comment
in the package names a ``.py`` file that is gone.

Each rule is a function of a source tree, so each has a test on a small tree that breaks it."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_structure import circles, import_graph, modules, source_tree

ROOT = Path(__file__).resolve().parents[2]
ORDERED = (
    "sbnotebook.core",
    "sbnotebook.core.incidents",
    "sbnotebook.core.incidents.copy",
    "sbnotebook.core.incidents.playbook",
    "sbnotebook.core.incidents.purge",
    "sbnotebook.core.incidents.resubmit",
    "sbnotebook.core.files",
    "sbnotebook.core.topology",
    "sbnotebook.emulator",
    "sbnotebook.sqlrules",
)
PART = re.compile(r"``([A-Za-z_][\w]*)(/|\.py)``")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _folder(root: Path, package: str) -> Path:
    return root / Path(*package.split("."))


def bullets(text: str) -> list[str]:
    """The map's bullets (``- ...`` lines with their continuation lines), in order."""
    found: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            found.append(line[2:])
        elif found and line.startswith("  ") and line.strip():
            found[-1] += " " + line.strip()
        elif found and not line.strip():
            found.append("")  # a blank line ends a bullet
    return [b for b in found if b]


def declared_order(root: Path, package: str) -> dict[str, int]:
    """Each part the package's map names, with the rank of its bullet (0 at the top)."""
    ranks: dict[str, int] = {}
    for rank, bullet in enumerate(bullets(_docstring(_folder(root, package) / "__init__.py"))):
        for name, _kind in PART.findall(bullet):
            ranks.setdefault(name, rank)
    return ranks


def parts(root: Path, package: str) -> set[str]:
    folder = _folder(root, package)
    subfolders = {p.parent.name for p in folder.glob("*/__init__.py")}
    flat = {p.stem for p in folder.glob("*.py")} - {"__init__", "__main__"}
    return subfolders | flat


def part_of(module: str, package: str) -> str | None:
    """The part of ``package`` a module belongs to; None for the package's own ``__init__``."""
    if module == package:
        return None
    return module[len(package) + 1 :].split(".")[0]


def part_imports(root: Path, package: str) -> Iterator[tuple[str, str | None, str, str]]:
    """(source part, target part, source module, target module) for each import between parts."""
    for source, targets in import_graph(root).items():
        if not source.startswith(package + ".") or source.endswith(".__main__"):
            continue
        for target in targets:
            if target != package and not target.startswith(package + "."):
                continue
            a, b = part_of(source, package), part_of(target, package)
            if a != b and a is not None:
                yield a, b, source, target


def unmapped(root: Path, package: str) -> list[str]:
    ranks = declared_order(root, package)
    found = [f"{package}: {name} is not in the map's bullets" for name in sorted(parts(root, package) - set(ranks))]
    found += [
        f"{package}: the map names {name}, which is not there" for name in sorted(set(ranks) - parts(root, package))
    ]
    return found


def against_order(root: Path, package: str) -> list[str]:
    ranks = declared_order(root, package)
    found = set()
    for a, b, source, target in part_imports(root, package):
        if b is None:
            found.add(f"{source} imports {target}, the package's own __init__")
        elif a in ranks and b in ranks and ranks[a] > ranks[b]:
            found.add(f"{source} imports {target}: {a} is below {b} in the map")
    return sorted(found)


def part_cycles(root: Path, package: str) -> list[list[str]]:
    graph: dict[str, set[str]] = {p: set() for p in parts(root, package)}
    for a, b, _source, _target in part_imports(root, package):
        if b is not None:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    return circles(graph)


def folders_missing_modules(root: Path) -> list[str]:
    """Modules (and sub-folders) a folder's ``__init__.py`` docstring does not name."""
    found = []
    for init in sorted((root / "sbnotebook").rglob("__init__.py")):
        named = {name for name, _kind in PART.findall(_docstring(init))}
        here = {p.stem for p in init.parent.glob("*.py")} - {"__init__", "__main__", "_version"}
        here |= {p.parent.name for p in init.parent.glob("*/__init__.py")}
        for name in sorted(here - named):
            found.append(f"{init.parent.relative_to(root)}/__init__.py does not name {name}")
    return found


PY_NAME = re.compile(r"(?<![\w.-])((?:[\w-]+/)*[\w-]+\.py)\b")


def _repository_files(root: Path) -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    files = set(listed.split())
    files |= {str(p.relative_to(root)) for p in (root / "sbnotebook").rglob("*.py")}  # not yet added
    return files


def gone_names(root: Path, files: set[str]) -> list[str]:
    """``something.py`` named in the package's text whose file exists nowhere in the repository
    (by path, or by its file name when the name has no folder)."""
    basenames = {f.rsplit("/", 1)[-1] for f in files}
    found = []
    for path in sorted(modules(root).values()):
        text = path.read_text(encoding="utf-8")
        for match in PY_NAME.finditer(text):
            said = match.group(1)
            exists = any(f == said or f.endswith("/" + said) for f in files) if "/" in said else said in basenames
            if not exists:
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(root)}:{line} names {said}")
    return found


@pytest.mark.parametrize("package", ORDERED)
def test_the_map_names_every_part_once(package: str) -> None:
    assert unmapped(ROOT, package) == []


@pytest.mark.parametrize("package", ORDERED)
def test_no_import_runs_against_the_declared_order(package: str) -> None:
    assert against_order(ROOT, package) == []


@pytest.mark.parametrize("package", ORDERED)
def test_no_two_folders_import_each_other(package: str) -> None:
    assert part_cycles(ROOT, package) == []


def test_every_folder_names_its_modules() -> None:
    assert folders_missing_modules(ROOT) == []


def test_no_text_in_the_package_names_a_module_that_is_gone() -> None:
    assert gone_names(ROOT, _repository_files(ROOT)) == []


def test_the_order_checks_can_fail(tmp_path: Path) -> None:
    root = source_tree(
        tmp_path,
        {
            "__init__.py": '"""Top: ``core/``."""\n',
            "core/__init__.py": (
                '"""Core.\n\n- ``upper/``: on top;\n- ``lower/`` and ``gone/``;\n- ``base.py``: at the bottom.\n"""\n'
            ),
            "core/base.py": "from .upper import a\n",
            "core/stray.py": "",
            "core/upper/__init__.py": '"""``a.py``."""\n',
            "core/upper/a.py": "def f():\n    from ..lower import b\n",
            "core/lower/__init__.py": '"""Nothing named; see ``old_module.py``."""\n',
            "core/lower/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..upper import a\n",
        },
    )
    package = "sbnotebook.core"
    assert declared_order(root, package) == {"upper": 0, "lower": 1, "gone": 1, "base": 2}
    assert unmapped(root, package) == [
        "sbnotebook.core: stray is not in the map's bullets",
        "sbnotebook.core: the map names gone, which is not there",
    ]
    assert against_order(root, package) == [
        "sbnotebook.core.base imports sbnotebook.core.upper.a: base is below upper in the map",
        "sbnotebook.core.lower.b imports sbnotebook.core.upper.a: lower is below upper in the map",
    ]
    assert part_cycles(root, package) == [["lower", "upper"]]
    assert folders_missing_modules(root) == [
        "sbnotebook/core/__init__.py does not name stray",
        "sbnotebook/core/lower/__init__.py does not name b",
    ]
    files = {"sbnotebook/core/base.py", "sbnotebook/core/upper/a.py", "sbnotebook/core/lower/b.py"}
    assert gone_names(root, files) == ["sbnotebook/core/lower/__init__.py:1 names old_module.py"]
