"""What the nox sessions run (noxfile.py, tests/suites.py) is what the docs claim: every test file and
tutorial runs in one of them, the Spark ones on pyspark 4.0, the rest on DBR 15.4's set and again on the
oldest azure-servicebus pyproject.toml allows; spark40 and sdk-floor without OpenTelemetry.

noxfile.py is executed here with a stand-in for nox that records each session's commands (nox itself
is not installed in the sessions' own venvs, and this file runs in them too)."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.core.sdk.messages import implicit_tracing
from tests import suites
from tests.xdist_groups import _SPARK_GROUPS, spark_group

ROOT = Path(__file__).resolve().parents[2]
SETS = ROOT / "ci" / "databricks"


class _Session:
    """Records what a session installs and runs."""

    def __init__(self) -> None:
        self.posargs: list[str] = []
        self.installs: list[str] = []
        self.runs: list[tuple[str, ...]] = []
        self.envs: list[dict[str, str]] = []

    def install(self, *args: str, **_: Any) -> None:
        self.installs.extend(args)

    def run(self, *args: str, env: dict[str, str] | None = None, **_: Any) -> None:
        self.runs.append(args)
        self.envs.append(env or {})

    def pytest_files(self) -> list[str]:
        (run,) = [r for r in self.runs if r[:3] == ("python", "-m", "pytest")]
        return [a for a in run if a.startswith(("tests/", "notebooks/"))]

    def pytest_left_out(self) -> set[str]:
        """The packages the session's pytest run is told it leaves out on purpose (tests/required.py)."""
        (env,) = [e for r, e in zip(self.runs, self.envs, strict=True) if r[:3] == ("python", "-m", "pytest")]
        return {name for name in env.get(suites.LEFT_OUT, "").split(",") if name}


def _sessions(noxfile: Path = ROOT / "noxfile.py") -> dict[str, Callable[[Any], None]]:
    """noxfile.py's sessions by name, loaded with a stand-in ``nox`` module."""
    found: dict[str, Callable[[Any], None]] = {}

    def session(*_: Any, name: str | None = None, **__: Any) -> Callable[[Callable[[Any], None]], Any]:
        def register(fn: Callable[[Any], None]) -> Any:
            found[name or fn.__name__] = fn
            return fn

        return register

    fake = types.ModuleType("nox")
    fake.session = session  # type: ignore[attr-defined]
    fake.Session = _Session  # type: ignore[attr-defined]
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location("_noxfile_under_test", noxfile)
    assert spec is not None and spec.loader is not None
    saved, path = sys.modules.get("nox"), list(sys.path)
    sys.modules["nox"] = fake
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        sys.path[:] = path
        if saved is None:
            sys.modules.pop("nox", None)
        else:
            sys.modules["nox"] = saved
    return found


def _run(name: str, noxfile: Path = ROOT / "noxfile.py") -> _Session:
    recorded = _Session()
    _sessions(noxfile)[name](recorded)
    return recorded


def test_every_test_file_and_tutorial_runs_in_a_session() -> None:
    dbr15, spark40 = _run("dbr15").pytest_files(), _run("spark40").pytest_files()
    everything = set(suites.test_files() + suites.notebooks())
    assert len(everything) > 80  # the folders were found
    assert everything - set(dbr15) - set(spark40) == set(suites.ONLY_ON_PYSPARK_41) | set(suites.BUILD_ONLY)
    for name in (
        "core/sdk/test_batches",
        "core/operations/test_copies",
        "core/operations/test_triage",
        "core/sdk/test_spares",
        "core/sdk/test_open",
        "core/connections/test_loop",
        "core/incidents/test_resumable_bulk",
        "notebook/test_fuzz_inputs",
        "project/test_suites",
    ):
        assert f"tests/{name}.py" in dbr15  # the files issue 39 found left out


def test_dbr15_runs_nothing_that_needs_spark_and_spark40_everything_that_does() -> None:
    dbr15, spark40 = _run("dbr15").pytest_files(), _run("spark40").pytest_files()
    assert not [p for p in dbr15 if suites.needs_spark(p)]
    grouped = sorted(
        p for p in suites.test_files() + suites.notebooks() + suites.doc_pages() if spark_group(p) is not None
    )
    assert len(grouped) == len(_SPARK_GROUPS)  # each JVM group entry names a file that exists
    build_only = {p for p in suites.BUILD_ONLY if p in grouped}  # test_release is in a JVM group (a Spark read)
    pages = set(suites.doc_pages())  # the main run's only (test_doc_pages_run_in_the_main_run)
    assert set(grouped) - set(spark40) == set(suites.ONLY_ON_PYSPARK_41) | build_only | (pages & set(grouped))
    # Every file that mentions pyspark in code runs in spark40 (a skip in dbr15 would hide it otherwise).
    code_line = re.compile(r"^\s*((import|from) pyspark|(\w+ = )?require_module\(\"pyspark)", re.M)
    mentions = [p for p in suites.test_files() if code_line.search((ROOT / p).read_text(encoding="utf-8"))]
    assert set(mentions) - set(suites.BUILD_ONLY) <= set(spark40)
    assert {
        "tests/spark/test_connect.py",
        "tests/spark/test_writing.py",
        "tests/core/connections/test_credential_ref.py",
    } <= set(spark40)


def test_the_sessions_tell_the_tests_what_they_leave_out() -> None:
    """Under CI=true a test that finds a package missing fails (tests/required.py), but dbr15 and sdk-floor
    lack pyspark on purpose, spark40 and sdk-floor OpenTelemetry, and sdk-floor (the notebook extra alone)
    a Parquet engine: they say so, and the tests there that
    need it skip (the other sessions run them). A package left out by accident fails."""
    assert _run("dbr15").pytest_left_out() == {"pyspark", "grpc"}
    assert _run("sdk-floor").pytest_left_out() == {"pyspark", "grpc", "opentelemetry", "pyarrow"}
    assert _run("spark40").pytest_left_out() == {"opentelemetry"}


def test_spark40_and_sdk_floor_run_the_kit_without_opentelemetry_and_dbr15_with_it() -> None:
    """spark40 and sdk-floor install the kit without its tracing extra and the test tools without
    opentelemetry-sdk (dbr15's tools less that one), check that nothing brought it in, and leave it out:
    the files that need it skip there (``test_every_file_that_uses_opentelemetry_skips_without_it``), and
    tests/core/test_tracing_absent.py runs the kit's operations and finds none of it loaded."""
    tracing = re.compile(r"\.\[.*\btracing\b.*\]")
    dbr15 = _run("dbr15")
    for name in ("sdk-floor", "spark40"):
        without = _run(name)
        assert not [a for a in without.installs if tracing.fullmatch(a) or a.startswith("opentelemetry")]
        assert ".[notebook,websockets]" in without.installs
        tools = [a for a in dbr15.installs if a in without.installs or a.startswith("opentelemetry")]
        assert sorted(set(tools) - set(without.installs)) == ["opentelemetry-sdk>=1.20"]  # the one tool left out
        assert any("find_spec('opentelemetry') is None" in arg for run in without.runs for arg in run)
    assert "tests/core/test_tracing_absent.py" in _run("sdk-floor").pytest_files()
    # The check can fail: dbr15 installs both.
    assert any(tracing.fullmatch(a) for a in dbr15.installs) and "opentelemetry-sdk>=1.20" in dbr15.installs


def test_every_file_runs_without_opentelemetry_somewhere() -> None:
    """Issue 60: without the tracing extra the suite passes. Between them, sdk-floor and spark40 (both without
    it) run every file and tutorial the sessions run."""
    without = set(_run("sdk-floor").pytest_files()) | set(_run("spark40").pytest_files())
    everything = set(suites.test_files() + suites.notebooks())
    assert everything - without == set(suites.ONLY_ON_PYSPARK_41) | set(suites.BUILD_ONLY)


def test_every_file_that_uses_opentelemetry_skips_without_it() -> None:
    """A test file that imports opentelemetry or records spans asks for it (``require_module``): it skips
    in sdk-floor (which leaves it out) and fails under CI anywhere else it is missing."""
    using = [p for p in suites.session_test_files() if suites.uses_opentelemetry(p)]
    assert {"tests/core/test_tracing.py", "tests/notebook/test_one_trace.py"} <= set(using)
    assert not [p for p in using if not suites.asks_for_opentelemetry(p)]
    assert not suites.uses_opentelemetry("tests/core/test_tracing_absent.py")  # runs without it


@pytest.mark.parametrize(
    ("source", "uses", "asks"),
    [
        ("from opentelemetry import trace\n", True, False),
        ("def test_x():\n    import opentelemetry.trace\n", True, False),
        ("from sbnotebook.testing.spans import Spans, recording\n", True, False),
        ("from sbnotebook.testing.spans import Spans\n", False, False),
        ("def test_x(emulator, servicebus_spans):\n    pass\n", True, False),
        ('from tests.required import require_module\nrequire_module("opentelemetry.sdk.trace")\n', False, True),
        ('def test_x():\n    require_module("opentelemetry.trace")\n', False, True),
        ('require_module("pyspark")\n', False, False),
    ],
)
def test_what_uses_opentelemetry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, uses: bool, asks: bool
) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_probe.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(suites, "ROOT", tmp_path)
    assert suites.uses_opentelemetry("tests/test_probe.py") is uses
    assert suites.asks_for_opentelemetry("tests/test_probe.py") is asks


def test_dbr15_runs_the_tracing_tests_on_an_azure_core_that_picks_its_plugin_by_itself() -> None:
    """DBR 15.4's azure-core is older than the one that stopped picking its tracing plugin by itself
    (sbnotebook/core/sdk/messages.py): dbr15 installs the tracing extra and opentelemetry-sdk, so the
    tracing tests run there on the kit's way around it."""
    pins = dict(
        line.split("==") for line in (SETS / "dbr-15.4.txt").read_text(encoding="utf-8").splitlines() if "==" in line
    )
    assert implicit_tracing(pins["azure-core"])
    extras = re.compile(r"\.\[.*\btracing\b.*\]")
    installs = _run("dbr15").installs
    assert any(extras.fullmatch(arg) for arg in installs)
    assert not extras.fullmatch(".[notebook,websockets]")  # the check can fail: the kit without the extra
    assert any(arg.startswith("opentelemetry-sdk") for arg in installs)


def test_the_sessions_install_what_their_docs_say() -> None:
    spark40 = _run("spark40")
    assert "pyspark[connect]>=4.0,<4.1" in spark40.installs
    floor = _run("sdk-floor")
    assert suites.sdk_floor_pin() == "azure-servicebus==7.15.0" and suites.sdk_floor_pin() in floor.installs
    files = floor.pytest_files()
    assert "tests/core/connections/test_basics.py" in files and "tests/emulator/broker/test_send_receive.py" in files
    assert files == _run("dbr15").pytest_files()  # the same files, on other libraries
    assert "jupyterlab>=4" in floor.installs  # the browser test's lab for ipywidgets 8 (test_browser.py LABS)
    # docs/emulator.md names that version as the oldest the kit supports, and says where it runs.
    emulator_md = (ROOT / "docs" / "emulator.md").read_text(encoding="utf-8")
    assert "7.15.0 (the oldest the kit supports" in emulator_md and "nox -s sdk-floor" in emulator_md


def test_every_file_a_session_installs_from_exists() -> None:
    """A requirements or constraints file a session names (``-r``, ``-c``) is there: pip stops on a
    missing one, and only a nox run would tell (the tests' move into folders left dbr15 naming
    tests/browser-widgets7.txt)."""
    named = []
    for name in ("dbr15", "spark40", "sdk-floor"):
        installs = _run(name).installs
        named += [installs[i + 1] for i, flag in enumerate(installs[:-1]) if flag in ("-r", "-c")]
    assert any(f.endswith("browser-widgets7.txt") for f in named) and any(f.endswith("dbr-17.3.txt") for f in named)
    assert not [f for f in named if not Path(f).is_file()]


def test_a_hand_list_that_leaves_a_file_out_is_caught(tmp_path: Path) -> None:
    """The check above fails on a noxfile whose dbr15 session runs a fixed list."""
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "suites.dbr15()" in text
    hand = tmp_path / "noxfile.py"
    hand.write_text(text.replace("suites.dbr15()", '["tests/core/connections/test_basics.py"]'), encoding="utf-8")
    dbr15, spark40 = _run("dbr15", hand).pytest_files(), _run("spark40", hand).pytest_files()
    left_out = set(suites.test_files() + suites.notebooks()) - set(dbr15) - set(spark40)
    assert "tests/core/sdk/test_batches.py" in left_out


@pytest.mark.parametrize(
    ("source", "needs"),
    [
        ('from tests.required import require_module\npyspark = require_module("pyspark")\n', True),
        ("from pyspark.sql import Row\n", True),
        ("from sbnotebook import spark as sbspark\n", True),
        ("def test_x(spark):\n    pass\n", True),
        ('from tests.required import require_module\ndef test_x():\n    require_module("pyspark")\n', False),  # mixed
        ("from sbnotebook import core\ndef test_x(emulator):\n    pass\n", False),
    ],
)
def test_what_needs_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, needs: bool) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_probe.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(suites, "ROOT", tmp_path)
    assert suites.needs_spark("tests/test_probe.py") is needs
    assert suites.uses_pyspark_somewhere("tests/test_probe.py") is ("require_module(" in source)


def test_every_test_file_is_in_a_folder_that_mirrors_the_package() -> None:
    """tests/ mirrors the package (README.md, "Layout"), down to the sub-packages where a folder of tests
    has one (tests/core/connections/ for sbnotebook/core/connections/): a test file directly in tests/ or
    in a folder of its own would still run, but nobody would find it. Each folder is a package (two
    files are named test_tls.py)."""

    def mirrors(path: str) -> bool:
        top, *sub = Path(path).parent.relative_to("tests").parts or ("",)
        return top in suites.FOLDERS and (
            not sub or (len(sub) == 1 and (ROOT / "sbnotebook" / top / sub[0] / "__init__.py").is_file())
        )

    assert not [p for p in suites.test_files() if not mirrors(p)]
    assert not [p for p in suites.test_files() if not (ROOT / Path(p).parent / "__init__.py").is_file()]
    assert {p.split("/")[1] for p in suites.test_files()} == set(suites.FOLDERS)  # and each folder holds tests


def test_doc_pages_run_in_the_main_run() -> None:
    """README.md and every docs/*.md page are in pyproject.toml's testpaths (Sybil collects their Python
    blocks: tests/doc_examples.py); the nox sessions pass test files and tutorials only."""
    import glob
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    found = {Path(p).as_posix() for pattern in config["testpaths"] for p in glob.glob(pattern, root_dir=ROOT)}
    assert set(suites.doc_pages()) <= found and len(suites.doc_pages()) > 10
    assert "docs" not in config["testpaths"]  # docs/tutorials links to notebooks/: they would run twice
    for name in ("dbr15", "spark40", "sdk-floor"):
        assert not [a for r in _run(name).runs for a in r if a.endswith(".md")]
