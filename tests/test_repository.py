"""Rules about the repository itself: layers stay clean, tutorials are committed without outputs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sbnotebook"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = path.relative_to(ROOT).with_suffix("").parts[: -node.level]
                found.add(".".join((*base, node.module or "")).rstrip("."))
            elif node.module:
                found.add(node.module)
    return found


def test_the_emulator_imports_nothing_else_from_sbnotebook() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(
            m for m in _imports(p) if m.startswith("sbnotebook") and not m.startswith("sbnotebook.emulator")
        )
        for p in (PACKAGE / "emulator").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_layer_check_can_fail(tmp_path: Path) -> None:
    bad = PACKAGE / "emulator" / "_probe_for_test.py"
    bad.write_text("from ..demo import run_demo\n")
    try:
        assert "sbnotebook.demo" in _imports(bad)
    finally:
        bad.unlink()


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
