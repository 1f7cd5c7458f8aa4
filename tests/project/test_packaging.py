"""Installing beside a Databricks runtime replaces nothing of it (docs/azure-and-databricks.md).

For each runtime set in ci/databricks/ (the libraries that LTS runtime preinstalls), a venv holds
that set, and pip's own resolver says what the documented install would do: the docs' own
``%pip install '/Volumes/.../sbnotebook-<version>-py3-none-any.whl[databricks]'``, with the volume's
folder standing for the folder of the wheel this tree builds (tests/project/release_build.py), run as
``pip install --dry-run --report r.json`` from a folder outside the repository. The venvs are built
once per set (keyed by the file's content) under ~/.cache/sbnotebook/dbr-venvs, or $SBNOTEBOOK_VENV_CACHE.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import sbnotebook
from tests.project.release_build import built

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "azure-and-databricks.md"
# How the docs name the wheel in a volume; the test puts the built wheel's folder and version in.
VOLUME_WHEEL = "/Volumes/<catalog>/<schema>/<volume>/sbnotebook-<version>-py3-none-any.whl"
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
    # --no-compile: no .pyc files for the venv's 17,000 modules, which nothing here imports (pip only
    # reads the installed distributions' metadata): 13 s of CPU instead of 35 per set, cold.
    install = [*pip, "install", "--no-compile", "--only-binary", ":all:", "-r", str(constraints)]
    subprocess.run(install, check=True, timeout=800)
    (building / "ready").write_text("ok\n")
    try:
        building.rename(home)
    except OSError:  # another worker got there first
        shutil.rmtree(building, ignore_errors=True)
    # venv scripts carry their path: call the interpreter, never bin/pip, after the rename.
    return home


def _dry_run(home: Path, requirement: str, tmp_path: Path) -> list[tuple[str, str]]:
    report = tmp_path / "report.json"
    subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "-q", "install", "--dry-run", "--report", str(report), requirement],
        check=True,
        timeout=600,
        cwd=tmp_path,  # outside the repository: nothing resolves against the checkout
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # nor is found installed through it
        capture_output=True,
    )
    data = json.loads(report.read_text(encoding="utf-8"))
    return [(_canon(i["metadata"]["name"]), i["metadata"]["version"]) for i in data["install"]]


def the_documented_notebook_install() -> str:
    """The requirement of the docs' ``%pip install`` of the wheel from a volume (one, quoted)."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.findall(r"^%pip install '([^']+)'$", text, flags=re.M)
    volume = [r for r in found if r.startswith("/Volumes/")]
    assert volume == [f"{VOLUME_WHEEL}[databricks]"], f"the docs' %pip install from a volume: {found}"
    return volume[0]


def as_built(documented: str) -> str:
    """The documented requirement with the volume's folder and the version of the wheel built here."""
    wheel = built().wheel
    assert wheel.name == f"sbnotebook-{sbnotebook.__version__}-py3-none-any.whl"
    folder = VOLUME_WHEEL.rsplit("/", 1)[0]
    return documented.replace(folder, str(wheel.parent)).replace("<version>", sbnotebook.__version__)


@pytest.mark.parametrize("constraints", SETS, ids=[p.stem for p in SETS])
def test_the_databricks_install_replaces_nothing_of_the_runtime(constraints: Path, tmp_path: Path) -> None:
    pins = _pins(constraints)
    requirement = as_built(the_documented_notebook_install())
    assert requirement == f"{built().wheel}[databricks]"  # the built wheel, with the extra, as documented
    installs = _dry_run(_runtime_venv(constraints), requirement, tmp_path)
    replaced = {name: f"{pins[name]} -> {version}" for name, version in installs if name in pins}
    assert replaced == {}, f"{constraints.name}: the install would replace {replaced}"
    names = {name for name, _ in installs}
    assert "pyspark" not in names and "pyspark-client" not in names
    assert ("sbnotebook", sbnotebook.__version__) in installs and "azure-servicebus" in names
    # The runtime already has all the extra adds: a cluster library or an environment dependency
    # that names the wheel alone (they take a path, not extras) installs the same.
    assert sorted(_dry_run(_runtime_venv(constraints), str(built().wheel), tmp_path)) == sorted(installs)


def test_the_check_sees_a_replacement(tmp_path: Path) -> None:
    """The local-Spark extra installs pyspark beside the oldest runtime: the check above would see it."""
    constraints = SETS[0]
    installs = dict(_dry_run(_runtime_venv(constraints), f"{built().wheel}[spark]", tmp_path))
    assert "pyspark" in installs


def test_every_volume_path_in_the_docs_is_the_tested_one() -> None:
    text = DOCS.read_text(encoding="utf-8")
    paths = set(re.findall(r"/Volumes/[^\s'`\]\[)]+\.whl", text))
    assert paths == {VOLUME_WHEEL}, paths


def test_every_runtime_set_is_there() -> None:
    assert [p.stem for p in SETS] == ["dbr-15.4", "dbr-16.4", "dbr-17.3"]
    for path in SETS:
        assert {"pandas", "numpy", "pyarrow", "ipywidgets", "ipython", "plotly", "azure-core"} <= set(_pins(path))
