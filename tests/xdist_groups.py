"""How the suite is spread over pytest-xdist workers (``-n`` in pyproject.toml): Spark files in
groups, every other test on its own, and a crashed worker's tests not lost or run twice.

Test files and tutorials that start a JVM (Spark, a Spark Connect server) are in two groups; each
group runs on one worker, one file after another, so at most two JVMs run at a time on a 2-core
machine while the other workers run the rest. (Three groups, tried: 17 minutes instead of 12
under contention, the JVMs starving everything else.)

Why more workers than cores: the tests outside the groups mostly wait (the sync SDK sleeps 50 ms
after each frame while a link opens, about 0.5 s a link; receives wait for what may still arrive).
Measured with -n0, CPU of the test process and its children over wall time: tests/emulator 101 s of
840 s, tests/core 169 s of 681 s, tests/spark 297 s of 891 s.
tests/emulator took 197 s with -n 4 and 129 s with -n 6, tests/core (three 10^5-message tests, CPU
bound) 181 s and 157 s. The whole suite, quiet: 13 min 27 s on five workers, the two cores 80% busy
over the run; 12 min 27 s on six, 87%; 11 min 25 s on eight, the files spread (``spread``; docs/benchmarks.md,
"The suite's time").
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

_SPARK_GROUPS = {  # by path, without the suffix
    "tests/spark/test_source": "spark",
    "tests/spark/test_streaming": "spark",
    "tests/spark/test_bodies": "spark",
    "tests/spark/test_entra": "spark",
    "tests/spark/test_least_privilege": "spark",
    "tests/spark/test_pushdown": "spark",
    "tests/spark/test_old_names": "spark",
    "tests/spark/test_route": "spark",
    "tests/spark/test_whole_write_rate": "spark",
    "notebooks/06_spark": "spark",
    # One fresh venv for its tests, and a Spark read in it (in a process of its own). In 'spark', the
    # shorter chain: measured alone (-n0), 'spark' 380 s of tests (and 37 s for test_old_names.py,
    # docs/spark.md and README.md, added since), 'spark-jvm' 486 s, and this file 91 s.
    "tests/project/test_release": "spark",
    "tests/spark/test_cluster": "spark-jvm",  # restarts PySpark's JVM in its process
    "tests/spark/test_connect": "spark-jvm",  # a Connect server, and Connect mode in its process
    "tests/spark/test_soak": "spark-jvm",
    "notebooks/08_streaming": "spark-jvm",
    "docs/spark": "spark",  # the page's Python blocks (tests/doc_examples.py) read and write with Spark
    "README": "spark",  # one Spark block among its examples
}


# Files whose tests share a costly module fixture and run one after another on one worker, not spread
# over four: tests/widgets/test_browser.py starts a JupyterLab server and a Chromium per form
# (module-scoped `lab`); spread out, up to four labs and browsers started at once on two cores, and
# the triage panel once took over 120 s to render in JupyterLab 3 (nox -s dbr15). Not JVM groups: they
# say nothing about Spark (tests/suites.py).
_SHARED_FIXTURE_GROUPS = {
    "tests/widgets/test_browser": "browser",
    # Both pages start `sbnotebook emulator --tls` on port 5672, as they tell the reader to: one at a time.
    "docs/emulator": "docs-port-5672",
    "docs/azure-and-databricks": "docs-port-5672",
}


def work_unit(nodeid: str) -> str:
    """What xdist hands a worker at once: a JVM group, a shared-fixture group, a doc page (its blocks
    share one namespace, in order: tests/doc_examples.py), else the test alone."""
    file = _file(nodeid)
    path = Path(file).with_suffix("").as_posix()
    page = file if file.endswith(".md") else None
    return spark_group(nodeid) or _SHARED_FIXTURE_GROUPS.get(path) or page or nodeid


def spark_group(nodeid: str) -> str | None:
    """The JVM group of a test or tutorial (by its file), None for the rest."""
    return _SPARK_GROUPS.get(Path(_file(nodeid)).with_suffix("").as_posix())


def _file(nodeid: str) -> str:
    """The file of a test's node id (``tests/x.py::test_y[a]`` -> ``tests/x.py``)."""
    return nodeid.split("::", 1)[0]


def spread(items: list[Any]) -> None:
    """The order the workers take the tests in (loadscope queues its units as collected, after the
    groups, which go first by size): files with a test marked ``slow`` first, so that none starts
    last and runs alone, then the rest, files shuffled by a hash of their path so that the tests that
    mostly wait (rate-bound copies, subprocess pytest runs, emulator restarts) are spread over the
    run instead of gathered in its second half with the cores idle. A file's tests keep their order
    and stay together (their module fixtures set up once a worker)."""
    slow = {_file(item.nodeid) for item in items if item.get_closest_marker("slow")}

    def key(item: Any) -> tuple[bool, int]:
        file = _file(item.nodeid)
        return file not in slow, zlib.crc32(file.encode())

    items.sort(key=key)  # stable: each file's tests in their order


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's ``loadgroup`` tags node ids with ``item._nodeid``, which pytest 9.2 no longer reads
    (its groups silently became one test each), so this groups by file name instead, on xdist's
    ``loadscope`` scheduler: a Spark group is one unit of work, every other test its own.

    And it mends how ``loadscope`` treats a worker that died (the conftest watchdog ends a worker
    whose test cannot be interrupted): xdist 3.8 puts the test that crashed back in the queue, so
    another worker runs it again (and dies again, if it wedges again), and after that the run waits
    forever with every worker idle (reproduced with a test that calls ``os._exit``). Here the
    crashed test is reported failed once (xdist does that) and the rest of its group is queued again."""
    from xdist.scheduler import LoadScopeScheduling

    class SparkGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def remove_node(self, node: Any) -> str | None:
            workload: dict[str, dict[str, bool]] = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None  # a node that finished its work
            crashed = pending[0]  # a worker runs its tests in order: the first one not done
            workload[self._split_scope(crashed)][crashed] = True
            for scope, unit in workload.items():
                if not all(unit.values()):
                    self.workqueue[scope] = unit
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _reschedule(self, node: Any) -> None:
            # When two workers die together, xdist starts two replacements, and the first to finish
            # collecting reschedules every node, the other one too, whose collection xdist does not
            # have yet: loadscope then raised KeyError (INTERNALERROR, the run's results lost; seen
            # once under contention). That node gets its work when its own collection arrives.
            if node in self.registered_collections:
                super()._reschedule(node)

        def _assign_work_unit(self, node: Any) -> None:
            # When two workers die together, rescheduling the survivors after the first one's crash
            # can reach the other dead worker before xdist has read its end: sending to it raised
            # OSError("cannot send (already closed?)") (INTERNALERROR, seen once under contention).
            # The unit goes back to the front of the queue; that worker's own crash report follows.
            try:
                super()._assign_work_unit(node)
            except OSError:
                assigned = self.assigned_work[node]
                scope = next(reversed(assigned))
                self.workqueue[scope] = assigned.pop(scope)
                self.workqueue.move_to_end(scope, last=False)

    return SparkGroups(config, log)
