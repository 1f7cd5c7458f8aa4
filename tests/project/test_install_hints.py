"""``sbnotebook --version``, ``sbnotebook tutorials`` and the hints that fit how the kit was installed,
run in this process from the source tree (tests/project/test_release.py runs the same from the built wheel)."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import sbnotebook
from sbnotebook import about
from sbnotebook.cli import main
from sbnotebook.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_version_names_the_kit_the_sdk_and_python(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"sbnotebook {sbnotebook.__version__}, azure-servicebus {version('azure-servicebus')}, Python 3."
    )


def test_the_version_is_written_once() -> None:
    """pyproject.toml reads sbnotebook/_version.py; no other file of the package or the build states it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sbnotebook._version.__version__"}
    stating = [
        str(p.relative_to(ROOT))
        for p in [*(ROOT / "sbnotebook").rglob("*.py"), ROOT / "setup.py", ROOT / "pyproject.toml"]
        if sbnotebook.__version__ in p.read_text(encoding="utf-8")
    ]
    assert stating == ["sbnotebook/_version.py"]


def test_tutorials_writes_every_notebook_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "tut"
    assert main(["tutorials", str(target)]) == 0
    assert NOTEBOOKS and {p.name: p.read_bytes() for p in target.iterdir()} == {
        p.name: p.read_bytes() for p in NOTEBOOKS
    }
    mine = target / NOTEBOOKS[-1].name
    mine.write_text("my edits")
    capsys.readouterr()
    assert main(["tutorials", str(target)]) == 1
    assert "--force" in capsys.readouterr().err and mine.read_text() == "my edits"
    assert main(["tutorials", str(target), "--force"]) == 0
    assert mine.read_bytes() == NOTEBOOKS[-1].read_bytes()


def test_run_from_this_checkout_the_hints_name_the_checkout() -> None:
    how = about.install()
    assert how.checkout == ROOT and how.kind == "checkout"
    assert how.requirement("notebook") == f"-e '{ROOT}[notebook]'"
    steps = "\n".join(about.next_steps())
    assert "-e '.[dev]'" in steps and "notebooks/01_quickstart.ipynb" in steps


@pytest.fixture
def as_installed(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install_as(source: str, databricks: bool = False) -> None:
        about.install.cache_clear()
        monkeypatch.setattr(about, "_checkout", lambda: None)
        monkeypatch.setattr(about, "_source", lambda: source)
        monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4") if databricks else monkeypatch.delenv(
            "DATABRICKS_RUNTIME_VERSION", raising=False
        )

    yield install_as
    about.install.cache_clear()


def test_installed_from_a_wheel_file_the_hints_name_the_wheel_and_no_checkout(as_installed: Any) -> None:
    as_installed("/srv/wheels/sbnotebook-0.2.0-py3-none-any.whl")
    how = about.install()
    assert how.kind == "installed"
    assert how.pip_install("notebook") == "pip install '/srv/wheels/sbnotebook-0.2.0-py3-none-any.whl[notebook]'"
    steps = "\n".join(about.next_steps())
    assert " tutorials sbnotebook-tutorials" in steps and "lab sbnotebook-tutorials" in steps
    assert "-e " not in steps and "notebooks/" not in steps and "docs/" not in steps


def test_installed_from_an_index_or_on_databricks(as_installed: Any) -> None:
    as_installed("index")
    assert about.install().pip_install("spark") == "pip install 'sbnotebook[spark]'"
    as_installed("index", databricks=True)
    steps = "\n".join(about.next_steps())
    assert about.install().kind == "databricks"
    assert "tutorials DIR" in steps and "import-dir" in steps and "jupyter" not in steps


def test_the_source_is_read_from_direct_url_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PEP 610: a wheel installed from a file records its URL; none at all means an index. The
    metadata counts only when its files are the ones running (else: unknown)."""
    wheel = tmp_path / "sbnotebook-0.2.0-py3-none-any.whl"
    wheel.write_bytes(b"")

    class Dist:
        def __init__(self, direct_url: str | None, init: Path) -> None:
            self.direct_url, self.init = direct_url, init

        def locate_file(self, name: str) -> Path:
            return self.init

        def read_text(self, name: str) -> str | None:
            return self.direct_url if name == "direct_url.json" else None

    ours = about.PACKAGE_DIR / "__init__.py"
    for direct_url, init, expected in [
        (f'{{"url": "{wheel.as_uri()}", "archive_info": {{}}}}', ours, str(wheel)),
        (None, ours, "index"),
        (
            '{"url": "https://example.org/sbnotebook-0.2.0-py3-none-any.whl"}',
            ours,
            "https://example.org/sbnotebook-0.2.0-py3-none-any.whl",
        ),
        (None, tmp_path / "elsewhere" / "__init__.py", "unknown"),
    ]:
        dist = Dist(direct_url, init)
        monkeypatch.setattr(about.metadata, "distribution", lambda name, dist=dist: dist)
        assert about._source() == expected


def test_sb_connect_names_the_versions(capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.testing import globalipapp

    from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension

    ip = globalipapp.start_ipython() or globalipapp.get_ipython()
    unload_ipython_extension(ip)
    load_ipython_extension(ip)
    try:
        with Emulator() as emu:
            ip.run_line_magic("sb_connect", emu.connection_string)
            assert f"{about.versions_line()}\n" in capsys.readouterr().out
    finally:
        unload_ipython_extension(ip)


def test_load_ext_without_the_notebook_extra_says_what_to_install() -> None:
    """A kernel without ipywidgets (the kit installed without its `notebook` extra): %load_ext
    fails in one line naming the pip command for this install, not an import traceback."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.modules['ipywidgets'] = None  # as if not installed\n"
        "from IPython.testing import globalipapp\n"
        "ip = globalipapp.start_ipython() or globalipapp.get_ipython()\n"
        "ip.run_cell('%load_ext sbnotebook')  # as a notebook cell shows it\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    line = next(x for x in out.splitlines() if x.startswith("UsageError: "))
    assert line == (
        "UsageError: sbnotebook's magics and panels need the notebook extra (ipywidgets is not installed): run "
        f"%{about.install().pip_install('notebook')} in a cell, then restart the kernel."
    )
    doc = (ROOT / "docs" / "azure-and-databricks.md").read_text(encoding="utf-8")
    assert line.split(": run ")[0] + ": run %pip install ... in a cell, then restart the kernel." in doc
