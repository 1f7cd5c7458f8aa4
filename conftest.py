"""Suite-wide timeouts that explain themselves (tests and tutorials alike).

- Every test has a timeout (pytest-timeout, ``timeout`` in pyproject.toml, signal method): on
  expiry it prints every thread's stack and fails that one test; the run goes on.
- A test that cannot even be interrupted (a thread wedged in C, the signal blocked): the
  interpreter's C-level watchdog prints every thread's stack ``_WEDGED_GRACE`` seconds later and
  ends the process, so the run fails instead of hanging.
- A tutorial has ``NOTEBOOK_TIMEOUT`` as a whole and nbmake's per-cell timeout
  (``--nbmake-timeout`` in pyproject.toml, shorter). ``_KERNEL_DUMP_LEAD`` seconds before a cell's
  timeout, the kernel (SIGUSR1, installed by an IPython startup file) and this process dump all
  their threads into the test's report: a stalled cell shows where both sides were waiting.

Isolation: for every pytest run (tests and the tutorials under nbmake): never touch the user's real
shared emulator. ``SBNOTEBOOK_HOME`` points at a temporary directory for the whole run (kernels,
JupyterLab and other subprocesses inherit it), each tutorial gets one of its own, so it runs on an
empty emulator as on a fresh machine, and every shared emulator started here is stopped at the end.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.emulator import userprocess
from tests.doc_examples import pytest_collect_file  # noqa: F401  README.md and docs/*.md: their Python blocks (Sybil)
from tests.xdist_groups import make_scheduler, spark_group, spread

pytest_plugins = ["pytester"]  # tests/testing/test_plugin*.py run pytest sessions of their own

NOTEBOOK_TIMEOUT = 240  # seconds for a whole tutorial; its cells have nbmake's (shorter) timeout
_WEDGED_GRACE = 30  # after a test's timeout, if pytest-timeout could not stop it: dump and exit
_KERNEL_DUMP_LEAD = 10  # seconds before a cell's timeout at which the kernel's threads are dumped

# Run by every kernel nbmake starts (IPython startup file): SIGUSR1 dumps all its threads to a file.
_KERNEL_STARTUP = """
def _sbnotebook_test_dumps():
    import faulthandler, os, signal
    folder = os.environ.get("SBNOTEBOOK_KERNEL_DUMPS")
    if folder:
        fd = os.open(os.path.join(folder, f"kernel-{os.getpid()}.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)
_sbnotebook_test_dumps()
del _sbnotebook_test_dumps
"""

_dump_dir: Path | None = None
_real_stderr: int | None = None  # a copy of fd 2 taken before output capture: where a dying process writes
_notebook_dumps: list[tuple[str, str]] = []  # (title, text) for the notebook test running now


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The kit's own pytest plugin (``servicebus``, sbnotebook/pytest_plugin.py) comes with an install
    (entry point ``pytest11``); an editable install made before the entry point existed lacks it:
    register it here then. ``-p no:servicebus`` still turns it off."""
    if pluginmanager.get_plugin("servicebus") is None and not pluginmanager.is_blocked("servicebus"):
        from sbnotebook import pytest_plugin

        pluginmanager.register(pytest_plugin, "servicebus")


def pytest_configure(config: pytest.Config) -> None:
    global _dump_dir, _real_stderr
    if _real_stderr is None:
        _real_stderr = os.dup(2)  # capture is suspended while plugins configure
    if hasattr(config, "workerinput") or _dump_dir is not None:
        _watch_notebook_cells()  # xdist workers run the tutorials; the folders come through the environment
        _no_output_widget_echo()
        _kernels_over_ipc()
        return
    _dump_dir = Path(tempfile.mkdtemp(prefix="sbnotebook-test-dumps-"))
    startup = _dump_dir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-sbnotebook-thread-dumps.py").write_text(_KERNEL_STARTUP)
    (_dump_dir / "kernels").mkdir()
    os.environ["IPYTHONDIR"] = str(_dump_dir / "ipython")
    os.environ["SBNOTEBOOK_KERNEL_DUMPS"] = str(_dump_dir / "kernels")
    # What the run's processes build once and share (the release's wheel: tests/project/release_build.py)
    (_dump_dir / "shared").mkdir()
    os.environ["SBNOTEBOOK_TEST_SHARED"] = str(_dump_dir / "shared")
    _watch_notebook_cells()
    _no_output_widget_echo()
    _kernels_over_ipc()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _dump_dir is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(_dump_dir, ignore_errors=True)
    _stop_all()
    shutil.rmtree(_BASE, ignore_errors=True)


SPARK_TIMEOUT = 300  # a JVM started under the suite's contention is slow to start


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    spread(items)
    for item in items:
        if spark_group(item.nodeid) is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT))
        if _is_notebook(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))


def _is_notebook(item: pytest.Item) -> bool:
    return type(item).__name__ == "NotebookItem"


def _item_timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Backstop under pytest-timeout: if a test outlives its timeout by ``_WEDGED_GRACE`` (the
    interpreter could not run pytest-timeout's handler), the C-level watchdog prints every
    thread's stack and ends the process: a failed run, never a hung one."""
    timeout = _item_timeout(item)
    if timeout > 0 and _real_stderr is not None:
        faulthandler.dump_traceback_later(timeout + _WEDGED_GRACE, exit=True, file=_real_stderr)
    _notebook_dumps.clear()
    try:
        yield
    finally:
        if timeout > 0 and _real_stderr is not None:
            faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if call.when == "call" and _notebook_dumps:
        report = outcome.get_result()
        for title, text in _notebook_dumps:
            report.sections.append((title, text))


def _watch_notebook_cells() -> None:
    """Arm a timer around every notebook cell nbmake runs: ``_KERNEL_DUMP_LEAD`` seconds before
    the cell's timeout, the kernel (SIGUSR1, see ``_KERNEL_STARTUP``) and this process dump all
    their threads, so a cell that times out shows where the kernel and the client were waiting."""
    try:
        from nbclient import NotebookClient
    except ImportError:
        return
    original = NotebookClient.async_execute_cell
    if getattr(original, "_sbnotebook_watch", False):
        return

    async def execute_cell(self: Any, cell: Any, cell_index: int, *args: Any, **kwargs: Any) -> Any:
        timeout = self._get_timeout(cell) if cell.get("cell_type") == "code" else None
        timer = None
        if timeout:
            timer = threading.Timer(
                max(1.0, timeout - _KERNEL_DUMP_LEAD), _dump_notebook_threads, args=(self, cell_index, timeout)
            )
            timer.daemon = True
            timer.start()
        try:
            return await original(self, cell, cell_index, *args, **kwargs)
        finally:
            if timer is not None:
                timer.cancel()

    execute_cell._sbnotebook_watch = True  # type: ignore[attr-defined]
    NotebookClient.async_execute_cell = execute_cell  # type: ignore[method-assign]


def _kernels_over_ipc() -> None:
    """Tutorial kernels talk to nbmake over Unix sockets, not TCP ports. jupyter_client picks a
    kernel's five ports by binding port 0 and letting go; the kernel binds them a moment later, and
    in a full run another process can take one in between (a contended run failed with "Kernel died
    before replying to kernel_info": ZMQError Address already in use, 127.0.0.1:49257). A Unix socket
    path is the kernel's own, unique name: nothing else can take it. Checked by
    tests/project/test_notebook_harness.py."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager
    from nbclient import NotebookClient
    from nbmake import nb_run
    from traitlets import CaselessStrEnum, Type, default

    class IpcKernelManager(AsyncKernelManager):  # type: ignore[misc]
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self) -> str:
            # Absolute and unique: the kernel runs in the notebook's folder, nbmake in the repository's,
            # and four workers start kernels at once (the default "kernel-ipc" is relative and shared).
            return os.path.join(tempfile.gettempdir(), f"sbnb-kernel-{uuid.uuid4().hex[:12]}")

    class IpcNotebookClient(NotebookClient):  # type: ignore[misc]
        kernel_manager_class = Type(default_value=IpcKernelManager, klass=KernelManager, config=True)

    nb_run.NotebookClient = IpcNotebookClient  # type: ignore[misc]


def _no_output_widget_echo() -> None:
    """The tutorials' cells stalled until their timeout under load (notebooks/04 took 131 s instead
    of 14 in a contended full run; before the per-cell timeout was cut to 120 s, it "hung past 300 s").
    Not the kit: nbclient, which nbmake runs, plays the front end of ipywidgets' ``Output`` widget and
    echoes every output it captures back to the kernel as a ``comm_msg`` on the shell socket. It sends
    from the task that reads IOPub while another task awaits the cell's ``execute_reply`` on that same
    socket; when the send lands as the reply arrives, it takes the socket's (edge-triggered) readiness
    wake-up, and the reply sits unread until the poll's timeout (jupyter/nbclient#312, open). Seen
    with py-spy: kernel idle, client idle in its poll. The echo only mirrors outputs into the
    kernel's copy of the widget, which no test reads; nbclient still captures them (``widget_state``).
    ``tests/project/test_notebook_harness.py`` checks that a tutorial run sends nothing but requests on shell."""
    try:
        from nbclient.output_widget import OutputWidget
    except ImportError:
        return
    OutputWidget.sync_state = lambda self: None  # type: ignore[method-assign]


def _dump_notebook_threads(client: Any, cell_index: int, timeout: float) -> None:
    header = f"cell {cell_index} still running {timeout - _KERNEL_DUMP_LEAD:.0f} s in (timeout {timeout} s)"
    pid = getattr(getattr(getattr(client, "km", None), "provisioner", None), "pid", None)
    folder = os.environ.get("SBNOTEBOOK_KERNEL_DUMPS")
    kernel_text = "kernel pid unknown"
    if pid and folder:
        path = Path(folder) / f"kernel-{pid}.txt"
        try:
            os.kill(pid, signal.SIGUSR1)
            threading.Event().wait(2.0)  # the kernel writes from its signal handler
            kernel_text = path.read_text() or "the kernel wrote nothing (signal handler not installed?)"
        except OSError as exc:
            kernel_text = f"could not dump the kernel's threads: {exc}"
    with tempfile.TemporaryFile("w+") as own:
        faulthandler.dump_traceback(file=own, all_threads=True)
        own.seek(0)
        client_text = own.read()
    _notebook_dumps.append((f"kernel threads ({header})", kernel_text))
    _notebook_dumps.append((f"test process threads ({header})", client_text))


# The JVMs the suite starts (Spark sessions, a Connect server, a local cluster's executors, the
# tutorials' kernels, the wheel's venv) each live for seconds to minutes on small data: the C2
# compiler's warm-up is most of their CPU and never pays back, and on 2 cores it starves the other
# workers. C1 alone and the serial collector roughly halve a Spark test file's JVM CPU ("The suite's
# time" in docs/benchmarks.md). Kept if the caller set JAVA_TOOL_OPTIONS; each JVM says it picked it up.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# Isolation from the user's shared emulator (see the module docstring).
_BASE = Path(tempfile.mkdtemp(prefix="sbnotebook-home-"))
os.environ[userprocess.ENV_HOME] = str(_BASE / "run")


def _stop_all() -> None:
    for state in _BASE.glob("**/emulator/state.json"):
        userprocess.stop(state.parent)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.path.suffix == ".ipynb":  # a tutorial under nbmake: an emulator home of its own
        os.environ[userprocess.ENV_HOME] = tempfile.mkdtemp(prefix=f"{item.path.stem}-", dir=_BASE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    if item.path.suffix == ".ipynb":
        userprocess.stop(userprocess.home())
        os.environ[userprocess.ENV_HOME] = str(_BASE / "run")
    yield
    # What the test left for the cyclic collector (the SDK's unclosed aiohttp sessions over
    # WebSockets among it) is collected here, after its fixtures. Seen once in a dbr15 run: 8 tests
    # of one worker failed with CPython 3.11.7's "SystemError: AST constructor recursion depth
    # mismatch" while pytest rewrote a module imported lazily, their setup log full of those
    # sessions' finalizers; the likely path is a collection set off inside the AST constructor whose
    # finalizers' error reports parse source with the ast module again (3.11's traceback carets).
    #
    # A full collection walks every object the process holds: 0.13-0.3 s of CPU in a worker that has
    # collected the suite and imported Spark and IPython, after each of a thousand tests (most of the
    # teardown phase, which was a fifth of a full run's worker time). What survives a test's
    # collection is frozen (gc.freeze: left out of later collections), so the next test's walks only
    # what has come since; when the next
    # test is in another file (its module-scoped fixtures are gone now) or there is none, everything
    # is thawed and walked again. Garbage that a test leaves hanging off a survivor of an earlier
    # test of its file waits for that file's last collection.
    if nextitem is None or nextitem.path != item.path:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
