"""The suite's own xdist scheduler (tests/xdist_groups.py), run on a throwaway project: Spark files
stay together, and a worker that dies neither hangs the run nor gets its test run twice."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.xdist_groups import make_scheduler, spark_group, spread, work_unit

ROOT = Path(__file__).resolve().parents[2]


def test_spark_files_are_grouped_and_the_rest_is_not() -> None:
    assert spark_group("tests/spark/test_source.py::test_x") == spark_group("notebooks/06_spark.ipynb") == "spark"
    assert spark_group("tests/spark/test_connect.py::test_y[a]") == "spark-jvm"
    assert spark_group("notebooks/08_streaming.ipynb::08_streaming.ipynb") == "spark-jvm"
    assert spark_group("tests/core/connections/test_live.py::test_z") is None
    assert spark_group("tests/core/test_source.py::test_z") is None  # by path: the same name elsewhere is not


def test_every_file_whose_tests_start_a_jvm_is_in_a_jvm_group() -> None:
    """A test or fixture that takes the ``spark`` session (or ``sp``, tests/spark/conftest.py's, which
    takes it) starts a JVM in its worker: outside the two groups, a third JVM runs beside them."""
    import ast

    from tests import suites

    def starts_a_jvm(path: str) -> bool:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        return any(a.arg in ("spark", "sp") for f in functions for a in f.args.args)

    ungrouped = [p for p in suites.test_files() if starts_a_jvm(p) and spark_group(p) is None]
    assert not ungrouped


def test_the_browser_tests_share_one_worker_and_are_not_a_spark_group() -> None:
    a, b = "tests/widgets/test_browser.py::test_x[grid]", "tests/widgets/test_browser.py::test_y[plain]"
    assert work_unit(a) == work_unit(b) == "browser"
    assert spark_group(a) is None  # so tests/suites.py keeps them out of spark40
    assert work_unit("tests/core/connections/test_live.py::test_z") == "tests/core/connections/test_live.py::test_z"
    assert work_unit("tests/spark/test_source.py::test_x") == "spark"


class _Item:
    """What ``spread`` reads of a collected test: its node id and whether it is marked ``slow``."""

    def __init__(self, nodeid: str, slow: bool = False) -> None:
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_spread_puts_slow_files_first_and_keeps_each_files_tests_together_in_order() -> None:
    files = [f"tests/core/test_{n}.py" for n in "abcdefgh"]
    items = [_Item(f"{f}::test_{i}", slow=(f.endswith("g.py") and i == 1)) for f in files for i in range(3)]
    spread(items)
    order = [item.nodeid.split("::")[0] for item in items]
    assert order[:3] == ["tests/core/test_g.py"] * 3  # its second test is slow: the whole file goes first
    runs = [f for i, f in enumerate(order) if i == 0 or order[i - 1] != f]
    assert sorted(runs) == sorted(files)  # each file once: its tests together
    for f in files:
        assert [i.nodeid for i in items if i.nodeid.startswith(f)] == [f"{f}::test_{i}" for i in range(3)]
    assert runs[1:] != sorted(runs[1:])  # shuffled: not the collection's (alphabetical) order


@pytest.mark.timeout(180)
def test_a_worker_that_dies_is_reported_once_and_the_run_ends(tmp_path: Path) -> None:
    hook = "from tests.xdist_groups import make_scheduler as pytest_xdist_make_scheduler\n"
    (tmp_path / "conftest.py").write_text(hook)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_dies.py").write_text("import os\n\ndef test_dies():\n    os._exit(3)\n")
    (tmp_path / "tests" / "spark").mkdir(parents=True)
    (tmp_path / "tests" / "spark" / "test_source.py").write_text(  # a group whose third test kills its worker
        "import os, pytest\n\n@pytest.mark.parametrize('i', range(5))\ndef test_in_group(i):\n"
        "    if i == 2:\n        os._exit(3)\n"
    )
    (tmp_path / "test_rest.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(8))\ndef test_other(i):\n    pass\n"
    )
    # Only xdist and the hook: every installed plugin (nbmake, sybil, ...) loaded in each of the five
    # processes (the run, two workers, the two that replace the dead ones) was most of this test's CPU.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "xdist.plugin",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--junitxml={report}",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,  # with xdist's own loadscope handling of a crash this run never ends
    )
    out = done.stdout[-2000:]
    assert "2 failed, 12 passed" in done.stdout, out
    # Count runs from the report, not the console: how often pytest repeats a message there depends on
    # the terminal (it does not shorten the summary when CI is set).
    cases = list(ET.parse(report).getroot().iter("testcase"))
    runs = Counter(case.get("name") for case in cases)
    failed = sorted(case.get("name") or "" for case in cases if case.find("error") is not None)  # a crash
    assert failed == ["test_dies", "test_in_group[2]"], out
    assert runs["test_dies"] == 1 and runs["test_in_group[2]"] == 1, (runs, out)
    assert sum(runs.values()) == 14, (runs, out)


class _Config:
    option = SimpleNamespace(loadscopereorder=True)

    def getvalue(self, name: str) -> Any:
        return ["2*popen"] if name == "tx" else None


class _Worker:
    """What the scheduler uses of xdist's WorkerController."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down, self.sent = False, list[list[int]]()

        self.dead = False  # its channel is closed, and xdist has not read its end yet

    def send_runtest_some(self, indexes: list[int]) -> None:
        if self.dead:
            raise OSError("cannot send (already closed?)")
        self.sent.append(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_two_workers_that_die_together_are_replaced_without_an_internal_error() -> None:
    """Both workers crash; of their two replacements, the first to finish collecting has the scheduler
    reschedule every node, the second one too while it is still collecting (xdist's loadscope raised
    KeyError there in a contended full run). It gets its share once its own collection arrives."""
    collection = [f"test_x.py::test_{i}" for i in range(12)]
    sched = make_scheduler(_Config(), None)
    first = [_Worker("gw0"), _Worker("gw1")]
    for worker in first:
        sched.add_node(worker)
        sched.add_node_collection(worker, collection)
    sched.schedule()
    for worker in first:
        assert sched.remove_node(worker) is not None  # each died in its first test
    early, late = _Worker("gw2"), _Worker("gw3")
    sched.add_node(early)
    sched.add_node(late)
    sched.add_node_collection(early, collection)
    sched.schedule()  # what xdist calls when a collection arrives
    assert early.sent and not late.sent
    sched.add_node_collection(late, collection)
    sched.schedule()
    assert late.sent


def test_a_worker_dead_before_its_end_is_read_gets_no_work_and_loses_none() -> None:
    """Both workers crash; when xdist handles the first crash, the scheduler gives the second more
    work, but its channel is already closed (OSError, an INTERNALERROR in a contended full run). That
    unit goes back to the queue: the second worker's crash names the test it really ran, and a
    replacement runs everything else."""
    collection = [f"test_x.py::test_{i}" for i in range(12)]
    sched = make_scheduler(_Config(), None)
    gw0, gw1 = _Worker("gw0"), _Worker("gw1")
    for worker in (gw0, gw1):
        sched.add_node(worker)
        sched.add_node_collection(worker, collection)
    sched.schedule()
    running = {w: collection[w.sent[0][0]] for w in (gw0, gw1)}
    gw1.dead = True
    assert sched.remove_node(gw0) == running[gw0]
    assert sched.remove_node(gw1) == running[gw1]
    spare = _Worker("gw2")
    sched.add_node(spare)
    sched.add_node_collection(spare, collection)
    sched.schedule()
    ran: list[str] = []
    while spare.sent:
        for index in spare.sent.pop(0):
            ran.append(collection[index])
            sched.mark_test_complete(spare, index)
    assert sorted(ran) == sorted(set(collection) - set(running.values()))
