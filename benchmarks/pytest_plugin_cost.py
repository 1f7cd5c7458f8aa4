"""What the pytest plugin ``servicebus`` costs a test, and what it costs a run that does not use it.

Runs pytest sessions of their own in a temporary folder (one process each, ``-p no:randomly``,
no xdist) of ``--tests`` tests each, and reports wall time per test:

- ``empty``: tests that ask for no fixture (the baseline: pytest's own cost per test);
- ``namespace``: tests that ask for ``servicebus_emulator`` with a queue and a topic with two
  subscriptions (a fresh namespace each), and do nothing else;
- ``namespace-tls``: the same with ``--servicebus-tls``;
- ``send``: a fresh namespace, an SDK client, one sent and one received message (what a real test
  does; most of it is the SDK's connection);
- ``unrelated``: an unrelated run of ``empty`` with the plugin turned off (``-p no:servicebus``):
  the plugin's cost to a project that does not use it is the difference to ``empty``.

    python benchmarks/pytest_plugin_cost.py [--tests 300] [--send-tests 20] [--rounds 3]

The figure per test is (run time - run time of ``empty``) / tests, the best of ``--rounds``; it
includes, spread over the run, the one-time import of the SDK and the emulator (about 0.3 s). The
``send`` case runs ``--send-tests`` tests (the SDK's open of a sender or a receiver alone takes
about 0.5 s: docs/emulator.md).
Needs the plugin registered (an install of the kit) or ``-p sbnotebook.pytest_plugin``, which it
passes when the entry point is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

TOPOLOGY = 'pytestmark = pytest.mark.servicebus_topology(queues=["orders"], topics={"events": ["audit", "billing"]})'
BODIES = {
    "empty": "def test_{i}():\n    pass\n",
    "namespace": "def test_{i}(servicebus_emulator):\n    pass\n",
    "send": (
        "def test_{i}(servicebus_client):\n"
        "    with servicebus_client.get_queue_sender('orders', keep_alive=0) as s:\n"
        "        s.send_messages(ServiceBusMessage('m'))\n"
        "    with servicebus_client.get_queue_receiver('orders', keep_alive=0, max_wait_time=5,\n"
        "                                              receive_mode='receiveanddelete') as r:\n"
        "        assert len(r.receive_messages(max_wait_time=5)) == 1\n"
    ),
}


def _registered() -> bool:
    return any(e.name == "servicebus" for e in entry_points(group="pytest11"))


def _write(folder: Path, kind: str, tests: int) -> Path:
    body = BODIES[kind]
    head = f"import pytest\nfrom azure.servicebus import ServiceBusMessage\n{TOPOLOGY}\n" if kind != "empty" else ""
    path = folder / f"test_{kind}.py"
    path.write_text(head + "\n".join(body.format(i=i) for i in range(tests)))
    return path


def _run(folder: Path, path: Path, *extra: str) -> float:
    plugin = [] if _registered() or "-p" in extra else ["-p", "sbnotebook.pytest_plugin"]
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *plugin, *extra]
    start = time.perf_counter()
    done = subprocess.run([*args, str(path)], cwd=folder, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{path.name} {extra} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--send-tests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sbnotebook-plugin-bench-") as tmp:
        folder = Path(tmp)
        counts = {kind: opts.send_tests if kind == "send" else opts.tests for kind in BODIES}
        files = {kind: _write(folder, kind, counts[kind]) for kind in BODIES}
        no_plugin = ["-p", "no:servicebus"] if _registered() else []
        cases = {
            "empty": (files["empty"], ()),
            "unrelated": (files["empty"], tuple(no_plugin)),
            "namespace": (files["namespace"], ()),
            "namespace-tls": (files["namespace"], ("--servicebus-tls",)),
            "send": (files["send"], ()),
        }
        best = {
            name: min(_run(folder, path, *extra) for _ in range(opts.rounds)) for name, (path, extra) in cases.items()
        }
    base = best["empty"]  # pytest's start and its own cost for --tests tests of nothing
    print(f"{opts.tests} tests a run ({opts.send_tests} for send), best of {opts.rounds} ({sys.version.split()[0]})")
    for name, took in best.items():
        tests = opts.send_tests if name == "send" else opts.tests
        per_test = (took - base) / tests * 1000  # for send: over a run of --tests empty tests
        print(f"{name:14} run {took:6.2f} s ({tests} tests)   over empty: {per_test:+8.2f} ms a test")


if __name__ == "__main__":
    main()
