"""Rules about the repository itself: layers stay clean, tutorials are committed without outputs.
The checks only read the tree: a test that needs a bad module writes it into a copy (tmp_path),
never into the package, which other xdist workers are importing and walking at the same time."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sbnotebook"


def _imports(path: Path, root: Path = ROOT) -> set[str]:
    """The modules ``path`` imports; relative imports resolved against its package under ``root``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = path.relative_to(root).with_suffix("").parts[: -node.level]
                found.add(".".join((*base, node.module or "")).rstrip("."))
            elif node.module:
                found.add(node.module)
    return found


# The SQL of subscription rules sits below the emulator and core: the emulator may import it, and
# it imports nothing of the kit at all.
SQL = "sbnotebook.sqlrules"


def _offenders(root: Path, folder: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules under ``root``/sbnotebook/``folder`` importing sbnotebook outside ``allowed``, with what they import."""
    offenders = {
        str(p.relative_to(root)): sorted(
            m
            for m in _imports(p, root)
            if m.startswith("sbnotebook") and not any(m == a or m.startswith(a + ".") for a in allowed)
        )
        for p in (root / "sbnotebook" / folder).rglob("*.py")
    }
    return {k: v for k, v in offenders.items() if v}


def _emulator_offenders(root: Path) -> dict[str, list[str]]:
    return _offenders(root, "emulator", ("sbnotebook.emulator", SQL))


def _sql_offenders(root: Path) -> dict[str, list[str]]:
    return _offenders(root, "sqlrules", (SQL,))


def test_the_emulator_imports_nothing_else_from_sbnotebook_but_the_rules_sql() -> None:
    assert _emulator_offenders(ROOT) == {}


def test_the_rules_sql_imports_nothing_from_sbnotebook() -> None:
    assert _sql_offenders(ROOT) == {}


def test_the_layer_check_can_fail(tmp_path: Path) -> None:
    """The same check on a copy of the emulator package with one bad module added (relative and
    absolute imports of the rest of the kit) reports exactly that module; importing the rules' SQL passes."""
    copy = tmp_path / "sbnotebook" / "emulator"
    shutil.copytree(PACKAGE / "emulator", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _emulator_offenders(tmp_path) == {}  # the copy is as clean as the original
    (copy / "_probe_for_test.py").write_text(
        "from ..demo import run_demo\nimport sbnotebook.core\nfrom ..sqlrules.rule import compile_rule\n"
    )
    assert _emulator_offenders(tmp_path) == {
        "sbnotebook/emulator/_probe_for_test.py": ["sbnotebook.core", "sbnotebook.demo"]
    }
    assert not (PACKAGE / "emulator" / "_probe_for_test.py").exists()


def test_the_rules_sql_check_can_fail(tmp_path: Path) -> None:
    copy = tmp_path / "sbnotebook" / "sqlrules"
    shutil.copytree(PACKAGE / "sqlrules", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _sql_offenders(tmp_path) == {}
    (copy / "_probe_for_test.py").write_text("from ..emulator import Broker\nfrom .rule import compile_rule\n")
    assert _sql_offenders(tmp_path) == {"sbnotebook/sqlrules/_probe_for_test.py": ["sbnotebook.emulator"]}


def test_notebooks_are_committed_without_outputs() -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "the tutorials live in notebooks/"
    for nb in notebooks:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        dirty = [i for i, c in enumerate(cells) if c.get("outputs") or c.get("execution_count")]
        assert not dirty, f"{nb.name}: cells {dirty} carry outputs; strip them before committing"


def test_core_imports_no_notebook_or_spark_libraries() -> None:
    banned = ("IPython", "ipywidgets", "plotly", "pyspark")
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.split(".")[0] in banned)
        for p in (PACKAGE / "core").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
