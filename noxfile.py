"""Parts of the suite on the library sets of Databricks' LTS runtimes (ci/databricks/*.txt), and on the
oldest azure-servicebus the kit allows. Which files each session runs is computed from the tests and
notebooks folders (tests/suites.py; tests/project/test_suites.py checks that every file runs somewhere):

    nox -s dbr15      every test file and tutorial that does not need Spark (core, emulator, magics,
                      panels, export/import, the soaks, the JavaScript SDK, the repository rules,
                      every tutorial but 06 and 08), on DBR 15.4 LTS's set (pandas 1.5.3, numpy 1.23.5,
                      pyarrow 14.0.1, ipywidgets 7.7.2, ipython 8.15, plotly 5.9), and every panel in a
                      real browser: JupyterLab 3 with jupyterlab_widgets 1.x, the frontend ipywidgets 7
                      pairs with (tests/widgets/browser-widgets7.txt; Debian's chromium)
    nox -s spark40    every test file and tutorial that needs Spark (batch, streaming, bodies, writes,
                      options, snapshots, local-cluster, Spark Connect with a key, a secret reference and
                      credential references, Entra ID, the Spark soak; the pyspark tests of
                      test_credential_ref.py; tutorial 06) on pyspark 4.0.x with DBR 17.3 LTS's set
                      (Spark 4.0.0 there). Not tutorial 08 (tests/suites.py says why).
    nox -s sdk-floor  the files dbr15 runs, on azure-servicebus pinned to pyproject.toml's floor (7.15.0)
                      and the newest of the rest (ipywidgets 8 and JupyterLab 4 in the browser test); the
                      main run (a fresh ``pip install -e '.[dev]'``) takes the newest azure-servicebus.

spark40 and sdk-floor run without OpenTelemetry: the kit without its ``tracing`` extra, the test tools
without opentelemetry-sdk, checked absent before the tests start; the tests that need it skip there
(tests/suites.py ``WITHOUT_TRACING``) and run in dbr15 and the main run. Between the two, every test
file and tutorial runs on a kit without OpenTelemetry (tests/core/test_tracing_absent.py also runs the
kit's operations and finds no ``opentelemetry`` module loaded).

No session runs tests/project/test_release.py or tests/project/test_packaging.py: they test the build,
make venvs of their own (test_packaging dry-runs the wheel beside every runtime set itself) and run in
the main run only (tests/suites.py BUILD_ONLY).

dbr15 and spark40 install the runtime's set first and then the kit with that set as constraints, so
nothing of the set moves (tests/project/test_packaging.py checks the Databricks install the same way).
Arguments after ``--`` go to pytest (default: ``-n 4``, ``-n 2`` for spark40: one worker per JVM group).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["dbr15", "spark40", "sdk-floor"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
SETS = ROOT / "ci" / "databricks"
BROWSER_WIDGETS7 = ROOT / "tests" / "widgets" / "browser-widgets7.txt"
TEST_TOOLS = [
    "pytest>=8",
    "pytest-asyncio>=0.23",
    "pytest-timeout>=2.3",
    "pytest-xdist>=3.5",
    "hypothesis>=6.100",
    "nbmake>=1.5",
    "sybil>=10.1",  # tests/project/test_doc_examples.py parses the docs with it (the pages run in the main run only)
    "ipykernel",
    "psutil>=5.9",
    "jsonschema>=4.0",
    "aiohttp>=3.9",
    "opentelemetry-sdk>=1.20",  # the tracing tests' in-memory spans (with the kit's tracing extra below)
]
PLAYWRIGHT = "playwright>=1.40"  # the browser test drives Debian's chromium with it (dbr15, sdk-floor)
# spark40's and sdk-floor's: the same without OpenTelemetry (their tracing tests skip, tests/suites.py WITHOUT_TRACING).
TEST_TOOLS_WITHOUT_TRACING = [tool for tool in TEST_TOOLS if not tool.startswith("opentelemetry")]

# What runs where, computed from the tests and notebooks folders (tests/suites.py, checked by
# tests/project/test_suites.py): no hand list to leave a new file out.
sys.path.insert(0, str(ROOT))
from tests import suites  # noqa: E402


def _install_runtime(session: nox.Session, runtime: str, *extra: str, tools: list[str] = TEST_TOOLS) -> Path:
    """The runtime's set, then the kit and the test tools constrained to it."""
    constraints = SETS / f"dbr-{runtime}.txt"
    session.install("-r", str(constraints))
    session.install("-c", str(constraints), *extra, *tools)
    return constraints


def _pytest(session: nox.Session, files: list[str], workers: str, left_out: str = "") -> None:
    """pytest on ``files``; ``left_out``: the packages this session's set lacks on purpose, told to the tests
    (tests/suites.py ``LEFT_OUT``), whose tests that need them skip here even under CI=true."""
    args = session.posargs or ["-n", workers]
    session.run("python", "-m", "pip", "check", silent=True)
    session.run("python", "-m", "pytest", "-p", "no:randomly", *args, *files, env={suites.LEFT_OUT: left_out})


@nox.session(python="3.11")
def dbr15(session: nox.Session) -> None:
    """Core, magics, panels and the non-Spark tutorials on DBR 15.4 LTS's set (ipywidgets 7.7.2)."""
    # The browser test's lab is picked by ipywidgets' major version: 7 pairs with JupyterLab 3 and
    # jupyterlab_widgets 1.x (tests/widgets/browser-widgets7.txt), both constrained by the runtime's set too.
    _install_runtime(
        session,
        "15.4",
        "-e",
        # The tracing extra too: the tracing tests run on the runtime's azure-core 1.30.2, which picks its
        # tracing plugin by itself (docs/tracing.md, "The SDK's spans too").
        ".[notebook,websockets,tracing]",
        "-c",
        str(BROWSER_WIDGETS7),
        "jupyterlab<4",
        PLAYWRIGHT,
    )
    session.run(
        "python",
        "-c",
        "from importlib.metadata import version as v; "
        "print(*(f'{p} {v(p)}' for p in ('pandas', 'ipywidgets', 'jupyterlab', 'jupyterlab_widgets')))",
    )
    _pytest(session, suites.dbr15(), "4", left_out=suites.WITHOUT_SPARK)


def _without_opentelemetry(session: nox.Session) -> None:
    """Nothing brought OpenTelemetry in by another way: the session would not show the kit without it."""
    session.run("python", "-c", "import importlib.util as u; assert u.find_spec('opentelemetry') is None, 'installed'")


@nox.session(python="3.11")
def spark40(session: nox.Session) -> None:
    """The Spark batch and streaming sources and the Spark tutorials on pyspark 4.0.x (DBR 17.3's set),
    without OpenTelemetry."""
    _install_runtime(
        session, "17.3", "-e", ".[notebook,websockets]", "pyspark[connect]>=4.0,<4.1", tools=TEST_TOOLS_WITHOUT_TRACING
    )
    session.run("python", "-c", "import pyspark; print('pyspark', pyspark.__version__)")
    _without_opentelemetry(session)
    _pytest(session, suites.spark40(), "2", left_out=suites.WITHOUT_TRACING)


@nox.session(python="3.11", name="sdk-floor")
def sdk_floor(session: nox.Session) -> None:
    """What dbr15 runs, on the oldest azure-servicebus pyproject.toml allows, exactly, the newest of the
    rest (the browser test's JupyterLab 4, which ipywidgets 8 pairs with), and without OpenTelemetry."""
    pin = suites.sdk_floor_pin()
    # The websockets extra in every session: aiohttp for the kit's connections over WebSockets (the SDK's
    # async transport), websocket-client for the tests' sync clients over wss (one-port, TLS).
    session.install("-e", ".[notebook,websockets]", pin, *TEST_TOOLS_WITHOUT_TRACING, "jupyterlab>=4", PLAYWRIGHT)
    installed = "from importlib.metadata import version; print('azure-servicebus', version('azure-servicebus'))"
    session.run("python", "-c", installed)
    _without_opentelemetry(session)
    left_out = ",".join((suites.WITHOUT_SPARK, suites.WITHOUT_TRACING, suites.WITHOUT_PARQUET))
    _pytest(session, suites.dbr15(), "4", left_out=left_out)
