"""A test that finds a tool or package missing skips on a developer's machine and fails under CI=true
(tests/required.py, issue 59 point 8): CI cannot go green with the Spark, JavaScript SDK or browser
tests not run. Both branches, on a PATH and a package made missing here, and the suite checked for a
skip that goes around the helper."""

from __future__ import annotations

import ast
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import required
from tests.required import LEFT_OUT, require_module, require_node, require_tool

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is one empty folder: no tool is found unless a test puts it there."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(LEFT_OUT, raising=False)
    return tmp_path


def fake_node(folder: Path, version: str) -> None:
    """``node`` and ``npm`` in ``folder``: node prints ``version``."""
    for name, text in (("node", f"#!/bin/sh\necho {version}\n"), ("npm", "#!/bin/sh\n")):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_a_missing_tool_skips_elsewhere(bare_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=r"java is not on PATH: the Spark tests run .* Java 17"):
        require_tool("java")


def test_a_missing_tool_fails_under_ci(bare_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI is set and chromium or chromium-browser is not on PATH"):
        require_tool("chromium", "chromium-browser")
    fake_node(bare_path, "v20.1.0")  # found: its path, under CI as anywhere
    assert require_tool("node") == str(bare_path / "node")


def test_a_missing_package_skips_here_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark raises ImportError
    monkeypatch.delenv(LEFT_OUT, raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pyspark cannot be imported .*pip install -e '\.\[dev\]'"):
        require_module("pyspark")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set and pyspark cannot be imported"):
        require_module("pyspark")
    assert require_module("json") is sys.modules["json"]


def test_a_run_that_leaves_a_package_out_on_purpose_skips_it_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """nox -s dbr15 has no pyspark on purpose (tests/suites.py): its pyspark tests skip, anything else fails."""
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "twine", None)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(LEFT_OUT, "pyspark,grpc")
    with pytest.raises(pytest.skip.Exception):
        require_module("pyspark")
    with pytest.raises(pytest.fail.Exception):
        require_module("twine")


def test_a_node_older_than_package_jsons_engines_is_missing(bare_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian 12's Node 18 runs npm ci but fails a flow (``crypto is not defined``): not good enough."""
    assert required.node_minimum() == 20
    assert "Node.js 20+" in (ROOT / "README.md").read_text(encoding="utf-8")  # what the README says
    monkeypatch.setenv("CI", "true")
    fake_node(bare_path, "v18.20.4")
    with pytest.raises(pytest.fail.Exception, match=r"Node\.js 20 or later is not on PATH \(.*node is v18\.20\.4\)"):
        require_node()
    fake_node(bare_path, "v20.20.2")
    assert require_node() == (str(bare_path / "node"), str(bare_path / "npm"))


def test_every_requirement_says_what_needs_it() -> None:
    """A name without a line in ``NEEDED`` is a KeyError, not a bare "missing"."""
    with pytest.raises(KeyError):
        required.missing("made-up-tool", "made-up-tool is not on PATH")


def ways_around(source: str) -> list[str]:
    """Calls that skip on, or look for, a missing tool or package without tests/required.py:
    ``pytest.importorskip(...)``, ``shutil.which(...)``, and reading ``CI`` from the environment."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in ("importorskip", "which"):
                found.append(f"line {node.lineno}: {name}()")
        if isinstance(node, ast.Constant) and node.value == "CI":
            found.append(f"line {node.lineno}: reads CI")
    return found


def test_ways_around_the_helper_are_found() -> None:
    made_up = (
        "import os, shutil, pytest\n"
        'pyspark = pytest.importorskip("pyspark")\n'
        'if shutil.which("node") is None and not os.environ.get("CI"):\n'
        "    pytest.skip('no node')\n"
    )
    assert ways_around(made_up) == ["line 2: importorskip()", "line 3: which()", "line 3: reads CI"]
    assert ways_around("from tests.required import require_tool\nnode = require_tool('node')\n") == []


def test_no_test_skips_on_a_missing_tool_or_package_but_through_tests_required() -> None:
    files = [p for p in (ROOT / "tests").rglob("*.py") if "node_modules" not in p.parts]
    assert len(files) > 100
    allowed = {ROOT / "tests" / "required.py", Path(__file__).resolve()}
    found = {
        p.relative_to(ROOT).as_posix(): ways
        for p in files
        if p not in allowed and (ways := ways_around(p.read_text(encoding="utf-8")))
    }
    assert found == {}


CI_RUN = ROOT / ".ci" / "run"


def ci_tools_block() -> str:
    """The part of .ci/run that installs what the tests need from the system."""
    text = CI_RUN.read_text(encoding="utf-8")
    start = text.index('echo "== what the tests need from the system')
    return text[start : text.index('echo "== tests (README command 2)"')]


def run_ci_tools(tmp_path: Path, java: str, apt_exit: int) -> tuple[int, str, str]:
    """The block run by bash with every program it calls a stand-in (chromium, java printing ``java``'s
    version line, node 20, npm, apt-get exiting ``apt_exit``, mkdir, sudo) beside the real sed, head,
    id and python3: (exit code, what it printed, the apt-get calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for real in ("sed", "head", "id", "bash"):
        found = shutil.which(real)
        assert found is not None, real
        (bin_dir / real).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    stand_ins = {
        "chromium": "exit 0",
        "java": f"echo '{java}' >&2",
        "node": 'case "$1" in -p) echo 20;; *) echo v20.0.0;; esac',
        "npm": "echo 10.0.0",
        "apt-get": f'echo "$*" >> {tmp_path}/apt.log; exit {apt_exit}',
        "mkdir": "exit 0",
        "sudo": 'exec "$@"',
    }
    for name, body in stand_ins.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
    done = subprocess.run(
        ["/bin/bash", "-c", "set -euo pipefail\n" + ci_tools_block()],
        cwd=ROOT,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path), "CI": "true"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    log = tmp_path / "apt.log"
    return done.returncode, done.stdout, log.read_text(encoding="utf-8") if log.exists() else ""


def test_ci_run_installs_nothing_when_the_tools_are_there(tmp_path: Path) -> None:
    code, out, apt = run_ci_tools(tmp_path, 'openjdk version "17.0.15" 2025-04-15', apt_exit=0)
    assert (code, apt) == (0, ""), out
    assert 'openjdk version "17.0.15"' in out and "node v20.0.0, npm 10.0.0" in out


def test_ci_run_installs_java_17_over_an_older_one_or_fails_in_one_line(tmp_path: Path) -> None:
    """Java 11 on PATH: apt-get is asked for openjdk-17-jre-headless; java still says 11 after it (or
    apt-get fails): one line saying so, and CI stops."""
    code, out, apt = run_ci_tools(tmp_path, 'openjdk version "11.0.2" 2019-01-15', apt_exit=0)
    assert code == 1 and "update -q\n" in apt and "install -y -q openjdk-17-jre-headless" in apt
    assert out.splitlines()[-1] == (
        '!! java on PATH is openjdk version "11.0.2" 2019-01-15, not 17+: the Spark tests cannot run'
    )
    (tmp_path / "bin").rename(tmp_path / "bin-before")
    code, out, _ = run_ci_tools(tmp_path, "", apt_exit=100)  # no version line: as no Java at all
    assert code == 1 and out.splitlines()[-1].startswith("!! could not install Java 17"), out
