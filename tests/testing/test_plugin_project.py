"""Issue 41's "done when", as a test: a throwaway project outside the repository, in a venv of its
own that installed only the kit (built from this tree) and pytest, passes a user's tests
(tests/testing/user_project/test_servicebus.py) that send and receive through a queue and a topic
with two subscriptions, refuse a send, see a fresh namespace in each test, and run with
``--servicebus-latency-ms 80`` (a timed send takes at least 80 ms). The plugin is found through the
installed entry point, as in any project. Afterwards nothing the runs started is left (processes,
ports, temporary folders), and an unrelated test run imports nothing more than it does with
``-p no:servicebus``. Issue 54's too: docs/testing.md's "Testing time" passes there on the manual
clock (a lock, a TTL, a day-ahead schedule, a session lock, shifted enqueued times), each body far
shorter than what it simulates, and its plain test on real time. Slow (a venv and an install:
about 30 s from pip's warm cache, then five pytest runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.processes import port_open
from tests.testing.sessions import USER_TESTS, plugin_extra_modules
from tests.testing.test_docs_example import TIME_TEST_SECONDS, TIME_TESTS, call_seconds, example_files

ROOT = Path(__file__).resolve().parents[2]
# The tree as a source checkout has it (the build may package more than the code: the tutorials),
# without what builds, runs and version control leave in it.
SKIP = ("*.egg-info", "__pycache__", ".*", "build", "dist", "site", "node_modules", "spark-warehouse", "metastore_db")

UNRELATED = """
import json, os, sys
def test_arithmetic():
    assert 6 * 7 == 42
def teardown_module():
    with open(os.environ["PROJECT_MODULES"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _venv_listens(venv: Path, port: int) -> bool:
    """Whether a process running the venv's Python listens on ``port``."""
    if not port_open(port):
        return False
    for conn in psutil.net_connections("tcp"):
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid is None:
            return True  # another user's process: not ours to name, so not excused either
        try:
            command = psutil.Process(conn.pid).cmdline()
        except psutil.NoSuchProcess:
            continue  # gone: it holds nothing
        if command and command[0].startswith(str(venv)):
            return True
    return False


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_throwaway_project_that_installed_the_kit(tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT)
    source = tmp_path / "kit"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SKIP))  # never build inside the repository
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # --no-compile: the modules the runs import are compiled on first import, the others never.
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-compile"]
    installed = subprocess.run([*pip, str(source), "pytest"], timeout=300, capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-5000:]

    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(USER_TESTS, project / "tests" / "test_servicebus.py")
    # docs/testing.md's "Testing time", as the page shows it (issue 54's "done when")
    (project / "tests" / "test_time.py").write_text(example_files()["tests/test_time.py"])
    (project / "tests" / "test_unrelated.py").write_text(UNRELATED)
    temp = tmp_path / "tmp"  # the runs' TMPDIR: whatever they leave there is seen
    temp.mkdir()
    record = tmp_path / "record.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TMPDIR=str(temp), SB_RECORD=str(record), PROJECT_MODULES=str(tmp_path / "modules.json"))
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
        base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        return subprocess.run(base, cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False)

    # The plugin comes from the installed entry point only: the kit's tree is not on the path.
    where = subprocess.run(
        [python, "-c", "import sbnotebook, sys; print(sbnotebook.__file__)"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where

    plain = pytest_run("tests/test_servicebus.py")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "6 passed" in plain.stdout
    slow = pytest_run("tests/test_servicebus.py", "--servicebus-latency-ms", "80")
    assert slow.returncode == 0, slow.stdout + slow.stderr
    seen = _records(record)
    timed = [r for r in seen if r["test"] == "timed"]
    assert [r["latency_ms"] for r in timed] == [0.0, 80.0]
    assert timed[1]["seconds"] >= 0.08
    fresh = [r for r in seen if r["test"] == "fresh"]
    assert len(fresh) == 4 and len({(r["pid"], r["port"]) for r in fresh}) == 4

    # Time on the manual clock: a minute's lock, an hour's TTL, a day-ahead schedule, a session
    # lock, shifted enqueued times, each in a body far shorter than what it simulates; a plain test
    # still on real time.
    junit = tmp_path / "time.xml"
    timed = pytest_run("tests/test_time.py", f"--junitxml={junit}", "-o", "junit_duration_report=call")
    assert timed.returncode == 0, timed.stdout + timed.stderr
    assert f"{TIME_TESTS} passed" in timed.stdout
    bodies = call_seconds(junit)
    assert len(bodies) == TIME_TESTS and max(bodies.values()) < TIME_TEST_SECONDS, bodies
    print("time tests' bodies (s):", {name: round(seconds, 2) for name, seconds in bodies.items()})

    # An unrelated run: nothing imported beyond the plugin's own module.
    modules = {}
    for label, args in (("with", ()), ("without", ("-p", "no:servicebus"))):
        started = time.perf_counter()
        done = pytest_run("tests/test_unrelated.py", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        modules[label] = (set(json.loads((tmp_path / "modules.json").read_text())), time.perf_counter() - started)
    assert "sbnotebook.pytest_plugin" in modules["with"][0]
    assert plugin_extra_modules(modules["with"][0], modules["without"][0]) == []
    print(f"unrelated run: {modules['with'][1]:.2f} s with the plugin, {modules['without'][1]:.2f} s without")

    # Nothing left: no process the runs started, no port of theirs open, nothing in their TMPDIR.
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == []
    # A port of theirs may be open again, bound by another test's emulator (xdist workers start
    # emulators on free ports all the time): only a listener of the throwaway venv counts.
    assert [port for port in {r["port"] for r in seen} if _venv_listens(venv, port)] == []
    assert sorted(p.name for p in temp.iterdir()) == []
