"""The pytest plugin ``servicebus`` as another project uses it: pytest sessions of their own
(pytester), with the real SDK against the namespaces the plugin gives. The outer test then checks,
independently of the inner run, what the run left behind (threads, ports, folders)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# Loaded here, before any in-process inner run: pytester unloads what an inner run imported, and
# cryptography's Rust bindings do not survive being imported a second time in one process.
import cryptography.hazmat.primitives.asymmetric.ec
import cryptography.x509  # noqa: F401
import pytest

from tests.processes import port_open
from tests.testing.sessions import (
    HEAVY,
    KIT_LAYERS,
    QUIET,
    RECORD,
    USER_TESTS,
    no_plugin_args,
    plugin_args,
    plugin_extra_modules,
    records,
    run,
)
from tests.waiting import HANG


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(RECORD)
    monkeypatch.setenv("SB_RECORD", str(pytester.path / "record.jsonl"))
    return pytester


def _emulator_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sbnotebook-emulator"]


def test_loading_the_plugin_imports_nothing_more_than_a_run_without_it(project: pytest.Pytester) -> None:
    """An unrelated test run with the plugin imports what it does with ``-p no:servicebus``, plus the
    plugin's own module: not the SDK, proton, pandas, IPython, cryptography, nor the kit's layers."""
    project.makeconftest(
        """
import json, os, sys
def pytest_sessionfinish(session):
    with open(os.environ["SB_MODULES"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""
    )
    project.makepyfile(test_unrelated="def test_arithmetic():\n    assert 1 + 1 == 2\n")
    seen = {}
    for label, args in (("with", plugin_args()), ("without", no_plugin_args())):
        out = project.path / f"modules-{label}.json"
        os.environ["SB_MODULES"] = str(out)
        try:
            result = project.runpytest_subprocess(*QUIET, *args, timeout=60)
        finally:
            del os.environ["SB_MODULES"]
        result.assert_outcomes(passed=1)
        seen[label] = set(json.loads(out.read_text()))
    assert "sbnotebook.pytest_plugin" in seen["with"]  # it really was loaded
    assert plugin_extra_modules(seen["with"], seen["without"]) == []
    heavy = sorted(m for m in seen["with"] if m.split(".")[0] in HEAVY or m.startswith(KIT_LAYERS))
    assert heavy == []


def test_each_test_gets_a_fresh_namespace(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

pytestmark = pytest.mark.servicebus_topology(queues=["orders"], topics={"events": ["audit", "billing"]})

@pytest.mark.parametrize("run", [1, 2, 3])
def test_sees_only_its_own_messages(servicebus_client, servicebus_emulator, run):
    with servicebus_client.get_queue_receiver("orders") as receiver:
        assert receiver.peek_messages(max_message_count=10) == []
    assert servicebus_emulator.broker.counts("orders")["active"] == 0
    assert servicebus_emulator.broker.counts("events/subscriptions/audit")["active"] == 0
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage(f"from test {run}"))
    with servicebus_client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage(f"event {run}"))
    assert servicebus_emulator.broker.counts("orders")["active"] == 1
    assert servicebus_emulator.broker.counts("events/subscriptions/billing")["active"] == 1
    record(port=servicebus_emulator.port)
"""
    )
    result = run(project)
    result.assert_outcomes(passed=3)
    ports = [r["port"] for r in records(project.path / "record.jsonl")]
    assert len(ports) == 3
    assert _emulator_threads() == []
    assert not any(port_open(p) for p in ports)


def test_marker_entities_with_properties_and_a_config_file(project: pytest.Pytester) -> None:
    (project.path / "config").mkdir()
    (project.path / "config" / "Config.json").write_text(
        """{"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [
            {"Name": "from-file", "Properties": {"MaxDeliveryCount": 2}}]}]}}"""
    )
    project.makepyfile(
        """
import datetime
import pytest
from azure.servicebus import ServiceBusMessage, NEXT_AVAILABLE_SESSION

@pytest.mark.servicebus_topology(
    queues={"orders": {"requires_session": True, "lock_duration": datetime.timedelta(seconds=5)},
            "plain": None, "dedup": {"requires_duplicate_detection": True,
                                     "duplicate_detection_history_time_window": "PT1M"}},
    topics={"events": {"eu": {"sql_filter": "region = 'eu'"}, "all": {"max_delivery_count": 3}}},
)
def test_properties(servicebus_admin_client, servicebus_client, servicebus_emulator):
    orders = servicebus_admin_client.get_queue("orders")
    assert orders.requires_session and orders.lock_duration == datetime.timedelta(seconds=5)
    assert not servicebus_admin_client.get_queue("plain").requires_session
    dedup = servicebus_admin_client.get_queue("dedup")
    assert dedup.duplicate_detection_history_time_window == datetime.timedelta(minutes=1)
    assert servicebus_admin_client.get_subscription("events", "all").max_delivery_count == 3
    with servicebus_client.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage("eu", application_properties={"region": "eu"}),
                              ServiceBusMessage("us", application_properties={"region": "us"})])
    assert servicebus_emulator.broker.counts("events/subscriptions/eu")["active"] == 1
    assert servicebus_emulator.broker.counts("events/subscriptions/all")["active"] == 2
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("s", session_id="a"))
    with servicebus_client.get_queue_receiver("orders", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as r:
        assert r.session.session_id == "a"

@pytest.mark.servicebus_topology(config="config/Config.json", queues=["extra"])
def test_config_file_plus_marker(servicebus_admin_client, servicebus_namespace):
    assert servicebus_admin_client.get_queue("from-file").max_delivery_count == 2
    assert servicebus_namespace.names == {"from-file": "from-file", "extra": "extra"}

def test_no_marker_is_an_empty_namespace(servicebus_admin_client, servicebus_emulator):
    assert list(servicebus_admin_client.list_queues()) == []
    assert servicebus_emulator.broker.entities == []

@pytest.mark.servicebus_topology(queues={"orders": {"requires_sessions": True}})
def test_a_misspelt_property(servicebus_emulator):
    pass

@pytest.mark.servicebus_topology(config="missing.json")
def test_a_missing_file(servicebus_emulator):
    pass
"""
    )
    result = run(project)
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*servicebus_topology queues?'orders'?: unknown property 'requires_sessions' (known: *requires_session*",
            "*config='missing.json': cannot read*",
        ]
    )


def test_fault_controls_and_latency_per_test(project: pytest.Pytester) -> None:
    """The user's module that tests/testing/test_plugin_project.py runs from a venv (six tests, a
    refused send among them), and beside it a lost lock and a slow reply."""
    project.makepyfile(test_servicebus=USER_TESTS.read_text())
    project.makepyfile(
        test_faults="""
import time
import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import MessageLockLostError

pytestmark = pytest.mark.servicebus_topology(queues=["orders"])

def test_lost_lock(servicebus_emulator, servicebus_client):
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("m"))
    with servicebus_client.get_queue_receiver("orders", max_wait_time=5) as receiver:
        [message] = receiver.receive_messages(max_wait_time=5)
        assert servicebus_emulator.lose_locks("orders") == 1
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(message)

def test_latency(servicebus_emulator, servicebus_client):
    servicebus_emulator.latency_ms = 150
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))
        start = time.perf_counter()
        sender.send_messages(ServiceBusMessage("timed"))
        assert time.perf_counter() - start >= 0.15
"""
    )
    run(project).assert_outcomes(passed=8)


def test_latency_option_delays_every_reply(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import time
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

@pytest.mark.servicebus_topology(queues=["orders"])
def test_timed_send(servicebus_client, servicebus_emulator):
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))  # the link is open: what follows is one send
        start = time.perf_counter()
        sender.send_messages(ServiceBusMessage("timed"))
        record(seconds=time.perf_counter() - start, latency_ms=servicebus_emulator.latency_ms)
"""
    )
    run(project, "--servicebus-latency-ms", "80").assert_outcomes(passed=1)
    run(project).assert_outcomes(passed=1)
    slow, plain = records(project.path / "record.jsonl")
    assert slow["latency_ms"] == 80 and plain["latency_ms"] == 0
    assert slow["seconds"] >= 0.08
    result = run(project, "--servicebus-latency-ms", "-5")
    result.stderr.fnmatch_lines(["*--servicebus-latency-ms cannot be negative*"])


def test_max_connections_option_fails_a_test_that_leaks_clients(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError

@pytest.mark.servicebus_topology(queues=["orders"])
def test_leaks(servicebus_connection_string, servicebus_emulator):
    assert servicebus_emulator.max_connections == 1
    leaked = ServiceBusClient.from_connection_string(servicebus_connection_string).get_queue_sender("orders")
    leaked.__enter__()  # opened and never closed: the one connection allowed
    sender = ServiceBusClient.from_connection_string(servicebus_connection_string).get_queue_sender("orders")
    with pytest.raises(ServiceBusConnectionError, match="resource-limit-exceeded"), sender:
        sender.send_messages(ServiceBusMessage("over the cap"))
    leaked.close()
"""
    )
    run(project, "--servicebus-max-connections", "1").assert_outcomes(passed=1)
    result = run(project, "--servicebus-max-connections", "0")
    result.stderr.fnmatch_lines(["*--servicebus-max-connections must be at least 1*"])


def test_tls_option_serves_the_sdk_production_path(project: pytest.Pytester) -> None:
    """Over TLS: no UseDevelopmentEmulator in the connection string, the CA trusted for the test
    (the client options, and the CA settings the admin clients honour), and untrusted after it. The
    user's module (its six tests send, receive and refuse through the SDK) passes as it is."""
    before = {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "SBNOTEBOOK_CA_BUNDLE")}
    project.makepyfile(test_servicebus=USER_TESTS.read_text())
    project.makepyfile(
        test_tls="""
import json
import os
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

@pytest.mark.servicebus_topology(queues=["orders"])
def test_over_tls(servicebus_namespace, servicebus_emulator, servicebus_admin_client):
    assert servicebus_emulator.tls
    assert "UseDevelopmentEmulator" not in servicebus_namespace.connection_string
    bundle = os.environ["SSL_CERT_FILE"]
    assert servicebus_emulator.ca_file.read_text() in open(bundle).read()
    assert servicebus_admin_client.get_queue_runtime_properties("orders").active_message_count == 0
    record(folder=str(servicebus_emulator.ca_file.parent.parent), port=servicebus_emulator.port)

@pytest.mark.servicebus_topology(queues=["orders"])
async def test_over_tls_async(servicebus_namespace):
    async with servicebus_namespace.client(aio=True) as client:
        async with client.get_queue_sender("orders") as sender:
            await sender.send_messages(ServiceBusMessage("secure"))
    async with servicebus_namespace.admin_client(aio=True) as admin:
        assert (await admin.get_queue_runtime_properties("orders")).active_message_count == 1
"""
    )
    run(project, "--servicebus-tls", "-o", "asyncio_mode=auto").assert_outcomes(passed=8)
    [seen] = [r for r in records(project.path / "record.jsonl") if "folder" in r]  # test_over_tls's
    assert not Path(seen["folder"]).exists()  # the session's CA folder is gone
    assert not port_open(seen["port"])
    assert {k: os.environ.get(k) for k in before} == before


def test_async_tests_with_the_sdk_aio_clients(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient

pytestmark = pytest.mark.servicebus_topology(queues=["orders"], topics={"events": ["audit", "billing"]})

@pytest.mark.asyncio
async def test_send_and_receive(servicebus_connection_string, servicebus_emulator):
    async with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        async with client.get_topic_sender("events") as sender:
            await sender.send_messages(ServiceBusMessage("e"))
        for sub in ("audit", "billing"):
            async with client.get_subscription_receiver("events", sub, max_wait_time=5) as receiver:
                got = await receiver.receive_messages(max_wait_time=5)
                assert [str(m) for m in got] == ["e"]
                await receiver.complete_message(got[0])
    assert servicebus_emulator.broker.counts("events/subscriptions/audit")["active"] == 0

@pytest.mark.asyncio
async def test_reject_async(servicebus_namespace, servicebus_emulator):
    servicebus_emulator.reject_sends("orders", 1, "server-busy")
    async with servicebus_namespace.client(aio=True, retry_total=0) as client:
        async with client.get_queue_sender("orders") as sender:
            with pytest.raises(Exception, match="server is busy|ServerBusy|server-busy"):
                await sender.send_messages(ServiceBusMessage("x"))
"""
    )
    run(project).assert_outcomes(passed=2)


def test_each_xdist_worker_has_its_own(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
import json
import os
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

@pytest.mark.servicebus_topology(queues=["orders"])
@pytest.mark.parametrize("n", range(6))
def test_one(servicebus_client, servicebus_emulator, n):
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage(str(n)))
    assert servicebus_emulator.broker.counts("orders")["active"] == 1
    record(worker=os.environ.get("PYTEST_XDIST_WORKER"), pid=os.getpid(), port=servicebus_emulator.port)
"""
    )
    run(project, "-n", "2", subprocess=True, timeout=120).assert_outcomes(passed=6)
    seen = records(project.path / "record.jsonl")
    assert len(seen) == 6 and len({r["worker"] for r in seen}) == 2
    assert len({r["pid"] for r in seen}) == 2  # each worker a process with emulators of its own


def test_nothing_left_behind_after_a_failure(project: pytest.Pytester) -> None:
    """A failing test and an erroring fixture: every emulator thread stopped, its port closed and
    the session's folder removed (checked in this process, where the inner session ran)."""
    project.makepyfile(
        """
import pytest
from azure.servicebus import ServiceBusMessage
from conftest import record

pytestmark = pytest.mark.servicebus_topology(queues=["orders"])

def test_fails(servicebus_client, servicebus_emulator):
    record(port=servicebus_emulator.port, folder=str(servicebus_emulator.ca_file.parent.parent))
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("m"))
    assert False, "a failing test"

@pytest.fixture
def broken(servicebus_emulator):
    record(port=servicebus_emulator.port, folder=str(servicebus_emulator.ca_file.parent.parent))
    raise RuntimeError("a fixture that fails after the namespace started")

def test_errors(broken):
    pass
"""
    )
    result = run(project, "--servicebus-tls")
    result.assert_outcomes(failed=1, errors=1)
    seen = records(project.path / "record.jsonl")
    assert len(seen) == 2
    assert _emulator_threads() == []
    assert not any(port_open(r["port"]) for r in seen)
    assert not any(Path(r["folder"]).exists() for r in seen)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_on_a_running_session_removes_its_folder(project: pytest.Pytester) -> None:
    """SIGINT to a real pytest process while a test waits: its session folder (the TLS CA) goes."""
    project.makepyfile(
        """
import time
from conftest import record

def test_waits(servicebus_emulator):
    record(folder=str(servicebus_emulator.ca_file.parent.parent), port=servicebus_emulator.port)
    time.sleep(60)
"""
    )
    # Without hypothesis's plugin: interrupted, its terminal summary imports hypothesis, which pytest
    # then assertion-rewrites whole (its distribution is a pytest plugin); in a fresh environment,
    # with no rewritten cache and a loaded machine, that took over 60 s (its stack in a dbr15 run).
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "-p", "no:hypothesispytest", *plugin_args(), "--servicebus-tls", "-q"],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # A job started in the background by a non-interactive shell (`.ci/run &`) inherits SIGINT
        # ignored, and Python keeps an ignored SIGINT ignored: the child would sleep through it.
        preexec_fn=_sigint_default,
    )
    try:
        deadline = time.monotonic() + HANG  # a fresh pytest's start on a loaded machine
        while not records(project.path / "record.jsonl") and time.monotonic() < deadline:
            time.sleep(0.05)
        [seen] = records(project.path / "record.jsonl")
        assert Path(seen["folder"]).exists()
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # pytest's faulthandler dumps every thread's stack on SIGABRT
            proc.send_signal(signal.SIGABRT)
            out, _ = proc.communicate(timeout=15)
            raise AssertionError("no exit 60 s after SIGINT:\n" + out.decode(errors="replace")) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode(errors="replace")
    assert not Path(seen["folder"]).exists()
    assert not port_open(seen["port"])


def test_live_mode_refuses_what_it_cannot_do(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile("def test_nothing():\n    pass\n")
    monkeypatch.delenv("SERVICEBUS_CONNECTION_STRING", raising=False)
    monkeypatch.delenv("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE", raising=False)
    result = run(project, "--servicebus-live")
    result.stderr.fnmatch_lines(
        ["*--servicebus-live needs SERVICEBUS_CONNECTION_STRING or SERVICEBUS_FULLY_QUALIFIED_NAMESPACE set*"]
    )
    monkeypatch.setenv("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE", "example.servicebus.windows.net")
    result = run(project, "--servicebus-live", "--servicebus-latency-ms", "80")
    result.stderr.fnmatch_lines(["*--servicebus-latency-ms needs the embedded emulator*"])
