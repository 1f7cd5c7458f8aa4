"""What each nox session (noxfile.py) runs, computed from the tests and notebooks folders, so a new
test file lands in a session without anyone editing a list (tests/project/test_suites.py keeps it honest).

- ``dbr15``: every test file and tutorial that does not need Spark.
- ``spark40``: every one that does (the JVM groups of tests/xdist_groups.py, and any file that imports
  pyspark or asks for the ``spark`` fixture), plus the files with a few tests that need pyspark
  among others (they run in ``dbr15`` too, where those few skip), less ``ONLY_ON_PYSPARK_41``.
- Neither runs ``BUILD_ONLY`` (tests of the build, in the main run only).
- ``sdk-floor``: the same files as ``dbr15``, on the oldest azure-servicebus pyproject.toml allows
  (``sdk_floor_pin``) and the newest of the rest.
- Without OpenTelemetry (the kit without its ``tracing`` extra, ``WITHOUT_TRACING``): ``sdk-floor`` and
  ``spark40``, so every file runs without it somewhere; the tests that need it skip there and run in
  ``dbr15`` and the main run.
- The doc pages (``doc_pages``: README.md and docs/*.md, their Python blocks run by Sybil,
  tests/doc_examples.py) run in the main run only: they check the docs against the code, not a
  runtime's libraries, and show what the newest libraries print (a DataFrame, pyspark 4.1's pushdown).

Nothing here imports nox or pyspark: the test that checks it runs in every session.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

from tests.xdist_groups import spark_group

ROOT = Path(__file__).resolve().parent.parent

# Tutorials that cannot run on pyspark 4.0, with why (docs/spark.md, "On pyspark 4.0").
ONLY_ON_PYSPARK_41 = {
    "notebooks/08_streaming.ipynb": "shows Trigger.AvailableNow reading everything in several batches, "
    "which pyspark 4.0 cannot do (one micro-batch per run there)",
}


# Tests of the build, not of a runtime's libraries: they build the wheel and install it into venvs of
# their own (tests/project/test_packaging.py dry-runs it beside every runtime set itself), so they need the
# build tools of the dev extra and gain nothing from a session's set. They run in the main run only.
BUILD_ONLY = {
    "tests/project/test_release.py": "builds the wheel and installs it into a fresh venv of its own",
    "tests/project/test_packaging.py": "builds the wheel and dry-runs it beside each runtime set by itself",
}


# The packages a session leaves out on purpose are named to the tests in this variable (comma-separated,
# tests/required.py): there a test that needs one skips, as it would on a developer's machine, instead
# of failing as a missing package does under CI=true. dbr15 and sdk-floor have no pyspark (and so no
# Spark Connect client): the tests that need it run in spark40.
LEFT_OUT = "SBNOTEBOOK_LEFT_OUT"
WITHOUT_SPARK = "pyspark,grpc"
# sdk-floor and spark40 have no OpenTelemetry (issue 60: without the tracing extra the kit imports none of it
# and the suite passes): a test that needs it asks with require_module("opentelemetry...") (``uses_opentelemetry``).
WITHOUT_TRACING = "opentelemetry"
# sdk-floor installs the notebook extra alone, which brings no Parquet engine: a playbook's parquet audit
# is tested in dbr15 (the runtime's pyarrow) and the main run (the dev extra's).
WITHOUT_PARQUET = "pyarrow"


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# The folders of tests/, mirroring the package (README.md, "Layout"), core/ and emulator/ down to their
# sub-packages; a test file directly in tests/ or in another folder is refused by tests/project/test_suites.py.
FOLDERS = ("core", "emulator", "sqlrules", "spark", "notebook", "widgets", "testing", "project")


# Folders of tests/ whose test_*.py are not this suite's: installed packages, and a user's project
# that tests/testing/ copies into pytest projects of their own (tests/testing/conftest.py).
NOT_OURS = ("node_modules", "user_project")


def test_files() -> list[str]:
    return sorted(_rel(p) for p in (ROOT / "tests").rglob("test_*.py") if not set(NOT_OURS) & set(p.parts))


def session_test_files() -> list[str]:
    """The test files a runtime session runs: all but ``BUILD_ONLY``."""
    return [p for p in test_files() if p not in BUILD_ONLY]


def doc_pages() -> list[str]:
    """README.md and docs/*.md: the pages whose Python blocks run (main run only: pyproject.toml testpaths)."""
    return ["README.md", *sorted(_rel(p) for p in (ROOT / "docs").glob("*.md"))]


def notebooks() -> list[str]:
    return sorted(_rel(p) for p in (ROOT / "notebooks").glob("*.ipynb"))


def _is_skip_without(node: ast.AST, package: str) -> bool:
    """``require_module("<package>...")`` (tests/required.py: a skip without the package, a failure under
    CI unless the run leaves it out)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "require_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).split(".")[0] == package
    )


def _imports_spark(node: ast.stmt) -> bool:
    """``import pyspark...``, ``from pyspark... import``, ``from sbnotebook.spark... import``,
    ``from sbnotebook import spark``."""
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "pyspark" or a.name.startswith("sbnotebook.spark") for a in node.names)
    if isinstance(node, ast.ImportFrom) and not node.level:
        module = node.module or ""
        return (
            module.split(".")[0] == "pyspark"
            or module.startswith("sbnotebook.spark")
            or (module == "sbnotebook" and any(a.name == "spark" for a in node.names))
        )
    return False


_NOTEBOOK_SPARK = re.compile(
    r"^\s*(import\s+pyspark|from\s+pyspark|from\s+sbnotebook(\.spark|\s+import\s+spark))", re.M
)


def needs_spark(path: str) -> bool:
    """A file that cannot run a test without Spark: in a JVM group, or at module level it imports
    pyspark (or sbnotebook.spark) or skips without it, or a test of it takes the ``spark`` fixture.
    A tutorial: in a JVM group, or one of its code cells imports pyspark or sbnotebook.spark."""
    if spark_group(path) is not None:
        return True
    file = ROOT / path
    if file.suffix == ".ipynb":
        cells = json.loads(file.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        return _NOTEBOOK_SPARK.search(code) is not None
    for node in ast.parse(file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test") and any(a.arg == "spark" for a in node.args.args):
                return True
        elif not isinstance(node, ast.ClassDef) and (
            _imports_spark(node) or any(_is_skip_without(n, "pyspark") for n in ast.walk(node))
        ):
            return True
    return False


def uses_pyspark_somewhere(path: str) -> bool:
    """Some test in the file skips without pyspark (``require_module("pyspark")`` in its body)."""
    file = ROOT / path
    if file.suffix != ".py":
        return False
    return any(_is_skip_without(n, "pyspark") for n in ast.walk(ast.parse(file.read_text("utf-8"))))


# What a test file uses of OpenTelemetry: the plugin's recorder (a fixture or ``recording``), or the package.
_SPAN_RECORDER = ("servicebus_spans", "recording")


def _uses_opentelemetry(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "opentelemetry" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        recorder = module == "sbnotebook.testing.spans" and any(a.name in _SPAN_RECORDER for a in node.names)
        return module.split(".")[0] == "opentelemetry" or recorder
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # a test's or a fixture's argument
        return any(a.arg in _SPAN_RECORDER for a in node.args.args)
    return False


def uses_opentelemetry(path: str) -> bool:
    """The file imports opentelemetry, or the plugin's span recorder (``sbnotebook.testing.spans``), or
    a test or fixture of it takes ``servicebus_spans``: it cannot run without opentelemetry-sdk."""
    return any(_uses_opentelemetry(n) for n in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))))


def asks_for_opentelemetry(path: str) -> bool:
    """The file skips without opentelemetry (``require_module("opentelemetry...")``, at its top or in a test)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return any(_is_skip_without(n, "opentelemetry") for n in ast.walk(tree))


def dbr15() -> list[str]:
    """Every test file and tutorial that does not need Spark."""
    return [p for p in session_test_files() + notebooks() if not needs_spark(p)]


def spark40() -> list[str]:
    """Every test file and tutorial that needs Spark, and the tests that need pyspark in mixed files."""
    spark = [p for p in session_test_files() if needs_spark(p) or uses_pyspark_somewhere(p)]
    return spark + [p for p in notebooks() if needs_spark(p) and p not in ONLY_ON_PYSPARK_41]


def sdk_floor_pin() -> str:
    """``azure-servicebus==X.Y.Z``: the floor of pyproject.toml's requirement, as an exact version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (requirement,) = [r for r in project["dependencies"] if re.match(r"azure-servicebus\b", r)]
    found = re.search(r">=\s*([0-9][0-9.]*)", requirement)
    if found is None:
        raise ValueError(f"pyproject.toml's {requirement!r} has no floor (>=)")
    parts = found.group(1).split(".")
    return "azure-servicebus==" + ".".join(parts + ["0"] * (3 - len(parts)))
