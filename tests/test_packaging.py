"""Installing beside a Databricks runtime replaces nothing of it (docs/azure-and-databricks.md).

For each runtime set in ci/databricks/ (the libraries that LTS runtime preinstalls), a venv holds
that set, and pip's own resolver says what the documented install would do:
``pip install --dry-run --report r.json -e '.[databricks]'``. The venvs are built once per set
(keyed by the file's content) under ~/.cache/sbnotebook/dbr-venvs, or $SBNOTEBOOK_VENV_CACHE.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETS = sorted((ROOT / "ci" / "databricks").glob("dbr-*.txt"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_canon(name)] = version
    return pins


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _runtime_venv(constraints: Path) -> Path:
    """A venv holding the runtime's set, built once per file content (xdist workers may race: the
    venv is built aside and renamed into place)."""
    cache = Path(os.environ.get("SBNOTEBOOK_VENV_CACHE") or Path.home() / ".cache" / "sbnotebook" / "dbr-venvs")
    digest = hashlib.sha256(constraints.read_bytes() + sys.version.encode()).hexdigest()[:12]
    home = cache / f"{constraints.stem}-{digest}"
    if (home / "ready").exists():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    building = cache / f"{home.name}.{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    venv.create(building, with_pip=True, symlinks=True)
    pip = [str(building / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--only-binary", ":all:", "-r", str(constraints)], check=True, timeout=800)
    (building / "ready").write_text("ok\n")
    try:
        building.rename(home)
    except OSError:  # another worker got there first
        shutil.rmtree(building, ignore_errors=True)
    # venv scripts carry their path: call the interpreter, never bin/pip, after the rename.
    return home


def _dry_run(home: Path, target: str, tmp_path: Path) -> list[tuple[str, str]]:
    report = tmp_path / "report.json"
    subprocess.run(
        [
            str(home / "bin" / "python"),
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            "--dry-run",
            "--report",
            str(report),
            "-e",
            target,
        ],
        check=True,
        timeout=600,
        cwd=ROOT,
        capture_output=True,
    )
    data = json.loads(report.read_text(encoding="utf-8"))
    return [(_canon(i["metadata"]["name"]), i["metadata"]["version"]) for i in data["install"]]


@pytest.mark.parametrize("constraints", SETS, ids=[p.stem for p in SETS])
def test_the_databricks_install_replaces_nothing_of_the_runtime(constraints: Path, tmp_path: Path) -> None:
    pins = _pins(constraints)
    installs = _dry_run(_runtime_venv(constraints), f"{ROOT}[databricks]", tmp_path)
    replaced = {name: f"{pins[name]} -> {version}" for name, version in installs if name in pins}
    assert replaced == {}, f"{constraints.name}: the install would replace {replaced}"
    names = {name for name, _ in installs}
    assert "pyspark" not in names and "pyspark-client" not in names
    assert {"sbnotebook", "azure-servicebus"} <= names  # it did resolve the kit


def test_the_check_sees_a_replacement(tmp_path: Path) -> None:
    """The local-Spark extra installs pyspark beside the oldest runtime: the check above would see it."""
    constraints = SETS[0]
    installs = dict(_dry_run(_runtime_venv(constraints), f"{ROOT}[spark]", tmp_path))
    assert "pyspark" in installs


def test_every_runtime_set_is_there() -> None:
    assert [p.stem for p in SETS] == ["dbr-15.4", "dbr-16.4", "dbr-17.3"]
    for path in SETS:
        assert {"pandas", "numpy", "pyarrow", "ipywidgets", "ipython", "plotly", "azure-core"} <= set(_pins(path))
