"""Parts of the suite on the library sets of Databricks' LTS runtimes (ci/databricks/*.txt).

    nox -s dbr15      core, magics, panels and the non-Spark tutorials on DBR 15.4 LTS's set
                      (pandas 1.5.3, numpy 1.23.5, pyarrow 14.0.1, ipywidgets 7.7.2, ipython 8.15, plotly 5.9),
                      and every panel in a real browser: JupyterLab 3 with jupyterlab_widgets 1.x, the
                      frontend ipywidgets 7 pairs with (tests/browser-widgets7.txt; Debian's chromium)
    nox -s spark40    the Spark batch and streaming sources and tutorial 06 on pyspark 4.0.x
                      with DBR 17.3 LTS's set (Spark 4.0.0 there)

Each session installs the runtime's set first and then the kit with that set as constraints, so
nothing of the set moves (tests/test_packaging.py checks the Databricks install the same way).
Arguments after ``--`` go to pytest (default: ``-n 2``).
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["dbr15", "spark40"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
SETS = ROOT / "ci" / "databricks"
BROWSER_WIDGETS7 = ROOT / "tests" / "browser-widgets7.txt"
TEST_TOOLS = [
    "pytest>=8",
    "pytest-asyncio>=0.23",
    "pytest-timeout>=2.3",
    "pytest-xdist>=3.5",
    "hypothesis>=6.100",
    "nbmake>=1.5",
    "ipykernel",
    "psutil>=5.9",
    "aiohttp>=3.9",
]

# What runs where, by file: tests/xdist_groups.py keeps the Spark files in their JVM groups.
DBR15_TESTS = [
    "tests/test_core_basics.py",
    "tests/test_core_boundary.py",
    "tests/test_core_exit.py",
    "tests/test_core_live.py",
    "tests/test_core_process_deferral.py",
    "tests/test_core_receive.py",
    "tests/test_core_resubmit_purge.py",
    "tests/test_core_scan.py",
    "tests/test_core_send_peek.py",
    "tests/test_core_sessions.py",
    "tests/test_records.py",
    "tests/test_export_import.py",
    "tests/test_magics.py",
    "tests/test_magics_manage.py",
    "tests/test_magics_purge.py",
    "tests/test_magics_resubmit.py",
    "tests/test_magics_sessions.py",
    "tests/test_widgets.py",
    "tests/test_core_tls.py",
    "tests/test_core_purge_batch.py",
    "tests/test_browser.py",  # every panel in JupyterLab 3 on ipywidgets 7.7.2
    "notebooks/00_emulator_tour.ipynb",
    "notebooks/01_quickstart.ipynb",
    "notebooks/02_settlement_in_depth.ipynb",
    "notebooks/03_deferral_four_ways.ipynb",
    "notebooks/04_dead_letter_triage.ipynb",
    "notebooks/05_sending_fast_and_safely.ipynb",
    "notebooks/07_processing_with_a_policy.ipynb",
]
SPARK40_TESTS = [
    "tests/test_spark.py",
    "tests/test_spark_streaming.py",
    "notebooks/06_spark.ipynb",
    # Not notebooks/08_streaming.ipynb: it shows Trigger.AvailableNow reading everything in several
    # batches, which pyspark 4.0 cannot do (docs/spark.md, "On pyspark 4.0").
]


def _install_runtime(session: nox.Session, runtime: str, *extra: str) -> Path:
    """The runtime's set, then the kit and the test tools constrained to it."""
    constraints = SETS / f"dbr-{runtime}.txt"
    session.install("-r", str(constraints))
    session.install("-c", str(constraints), *extra, *TEST_TOOLS)
    return constraints


def _pytest(session: nox.Session, files: list[str]) -> None:
    args = session.posargs or ["-n", "2"]
    session.run("python", "-m", "pip", "check", silent=True)
    session.run("python", "-m", "pytest", "-p", "no:randomly", *args, *files)


@nox.session(python="3.11")
def dbr15(session: nox.Session) -> None:
    """Core, magics, panels and the non-Spark tutorials on DBR 15.4 LTS's set (ipywidgets 7.7.2)."""
    # The browser test's lab is picked by ipywidgets' major version: 7 pairs with JupyterLab 3 and
    # jupyterlab_widgets 1.x (tests/browser-widgets7.txt), both constrained by the runtime's set too.
    _install_runtime(
        session, "15.4", "-e", ".[notebook]", "-c", str(BROWSER_WIDGETS7), "jupyterlab<4", "playwright>=1.40"
    )
    session.run(
        "python",
        "-c",
        "from importlib.metadata import version as v; "
        "print(*(f'{p} {v(p)}' for p in ('pandas', 'ipywidgets', 'jupyterlab', 'jupyterlab_widgets')))",
    )
    _pytest(session, DBR15_TESTS)


@nox.session(python="3.11")
def spark40(session: nox.Session) -> None:
    """The Spark batch and streaming sources and the Spark tutorials on pyspark 4.0.x (DBR 17.3's set)."""
    _install_runtime(session, "17.3", "-e", ".[notebook]", "pyspark[connect]>=4.0,<4.1")
    session.run("python", "-c", "import pyspark; print('pyspark', pyspark.__version__)")
    _pytest(session, SPARK40_TESTS)
