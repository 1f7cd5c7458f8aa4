"""PySpark's Python worker daemon with the data source imported before it forks.

``local_session`` names this module in ``spark.python.daemon.module``. Spark starts one daemon per
kind of Python work (a data source's lookup, creation, read planning, the tasks, the write and its
commit) and the daemon forks a worker for each request; a fork of this one finds the kit, the SDK and
the data source already imported instead of importing them afresh (about 0.5 s of CPU each, paid by
every worker of PySpark's own daemon). The import starts no thread, which a fork needs
(tests/spark/test_daemon.py); pandas and pyarrow, which do, are still imported after the fork.
"""

from __future__ import annotations

from pyspark.daemon import manager

from sbnotebook.spark import source  # noqa: F401  imported once, before the daemon forks

if __name__ == "__main__":
    manager()
