"""local_session's Python workers are forks of sbnotebook.spark.daemon, which imports the data source
before it forks (the module's docstring says why): the fork is safe only if that import starts no
thread, and it leaves pandas and pyarrow (which start threads) to after the fork."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.required import require_module

pyspark = require_module("pyspark")

pytestmark = pytest.mark.slow

WHAT_A_FORK_INHERITS = (
    "import sys, threading\n"
    "{code}\n"
    "print(threading.active_count(), sorted(m for m in ('pandas', 'pyarrow', 'numpy') if m in sys.modules))\n"
)


def inherited(code: str) -> str:
    """Threads running, and which of the libraries that start threads are imported, after ``code``
    in a fresh interpreter."""
    script = WHAT_A_FORK_INHERITS.format(code=code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_the_daemon_imports_the_data_source_and_starts_no_thread() -> None:
    assert inherited("import sbnotebook.spark.daemon") == "1 []"
    # The check sees what a fork must not inherit: a thread, a library that starts them.
    assert inherited("t = threading.Timer(30, print); t.daemon = True; t.start()").startswith("2 ")
    assert inherited("import pandas").endswith("['numpy', 'pandas']")


def test_local_session_workers_are_forks_of_the_kits_daemon(spark: Any) -> None:
    from pyspark.sql.functions import udf

    @udf("string")
    def daemon_of_this_worker() -> str:
        import sys

        return f"{sys.argv[0]} {'sbnotebook.spark.source' in sys.modules}"

    (row,) = spark.range(1).select(daemon_of_this_worker().alias("d")).collect()
    assert row.d.endswith("sbnotebook/spark/daemon.py True"), row.d
