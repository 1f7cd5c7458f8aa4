"""Without OpenTelemetry (the kit installed without its ``tracing`` extra) the kit imports none of it,
its operations run and a copy still drops its original's context (issue 60's last Done-when).

This file asks nothing of OpenTelemetry but the check that can fail: it runs in ``nox -s sdk-floor``,
which installs the kit without the extra and leaves OpenTelemetry out (tests/suites.py
``WITHOUT_TRACING``), and in every other run. The kit runs in a process of its own, where an import
of ``opentelemetry`` is made to fail from the start (where it is not installed it fails anyway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sbnotebook.about import install
from sbnotebook.core.tracing import ORIGINAL_TRACEPARENT
from tests.required import require_module

ROOT = Path(__file__).resolve().parents[2]

# Run in a process of its own, opentelemetry made missing (or not): the kit's operations, a copy of a
# message that carries a context, connect(trace=True); what it prints is what the test checks.
WITHOUT_OPENTELEMETRY = """
import json, sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if BLOCK and name.split(".")[0] == "opentelemetry":
            raise ImportError(f"{name} is made missing")
        return None

BLOCK = sys.argv[1] == "block"
sys.meta_path.insert(0, Missing())
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from sbnotebook import core
from sbnotebook.emulator import Emulator

config = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": {}},
          {"Name": "r", "Properties": {}}], "Topics": []}], "Logging": {"Type": "Console"}}}
original = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
with Emulator(config) as emu:
    conn = core.connect(emu.connection_string)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            props = {"traceparent": original, "Diagnostic-Id": original, "tracestate": "k=v", "kept": 7}
            sender.send_messages(ServiceBusMessage("poison", application_properties=props))
    core.send("q", ["plain"], connection=conn).raise_for_failures()
    core.peek("q", connection=conn)
    with core.receive("q", max_messages=2, wait_seconds=5, connection=conn) as batch:
        batch.abandon().raise_for_failures()
    core.copy("q", "r", connection=conn).raise_for_failures()
    core.resubmit("q", target="r", connection=conn).raise_for_failures()
    copies = [m for m in core.peek("r", connection=conn).records if m["body_text"] == "poison"]
    try:
        core.connect(emu.connection_string, trace=True)
        refused = None
    except core.ConfigurationError as exc:
        refused = str(exc)
    core.close_all()
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print(json.dumps({"loaded": loaded, "copies": [c["application_properties"] for c in copies], "refused": refused}))
"""


def _run_without(block: bool) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENTELEMETRY, "block" if block else "allow"],
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_without_opentelemetry_the_kit_imports_none_of_it_and_copies_still_drop_the_originals_context() -> None:
    """After a run of the kit's operations (send, peek, receive, abandon, copy, resubmit, connect with
    ``trace=True`` refused) no ``opentelemetry`` module is in ``sys.modules``."""
    missing = _run_without(block=True)
    assert missing["loaded"] == []
    # How to install the extra where this kit came from (a checkout here), not the index, which has no kit.
    assert install().pip_install("tracing") in missing["refused"]
    assert "[tracing]" in missing["refused"] and "pip install 'sbnotebook[" not in missing["refused"]
    assert len(missing["copies"]) == 2  # copied, and resubmitted
    for props in missing["copies"]:
        assert {k.lower() for k in props} & {"traceparent", "diagnostic-id", "tracestate"} == set()
        assert props[ORIGINAL_TRACEPARENT] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        assert props["kept"] == "7"  # as a peek's record shows a long


def test_the_check_above_fails_where_opentelemetry_can_be_imported() -> None:
    """The same run with opentelemetry importable loads it (the kit's spans), and connects traced."""
    require_module("opentelemetry.trace")
    present = _run_without(block=False)
    assert "opentelemetry.trace" in present["loaded"]
    assert present["refused"] is None
