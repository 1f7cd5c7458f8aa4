"""The ``servicebus_clock`` marker as another project uses it (pytester sessions of their own):
the manual clock where it is asked for (on a test, a class, a module), the system clock elsewhere,
a misspelt kind refused at setup, and ``servicebus_namespace``'s ``now()``/``advance()``. The inner
tests assert the broker's state through the real SDK; docs/testing.md's time examples run in
tests/testing/test_docs_example.py, and under ``--servicebus-live`` there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Loaded here, before any in-process inner run: pytester unloads what an inner run imported, and
# cryptography's Rust bindings do not survive being imported a second time in one process.
import cryptography.hazmat.primitives.asymmetric.ec
import cryptography.x509  # noqa: F401
import pytest

from sbnotebook.testing.model import Namespace
from tests.testing.sessions import run


def test_the_marker_where_it_is_and_the_system_clock_elsewhere(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
from datetime import UTC, datetime, timedelta
import pytest
from azure.servicebus import ServiceBusMessage

pytestmark = pytest.mark.servicebus_topology(queues={"orders": {"lock_duration": 60}})

@pytest.mark.servicebus_clock("manual")
def test_namespace_advance_expires_a_lock(servicebus_namespace, servicebus_client):
    start = servicebus_namespace.now()
    assert abs(start - datetime.now(UTC)) < timedelta(seconds=5)  # it starts at real now
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("x"))
    with servicebus_client.get_queue_receiver("orders") as receiver:
        [m] = receiver.receive_messages(max_wait_time=5)
        assert servicebus_namespace.advance("61s") == servicebus_namespace.now() == start + timedelta(seconds=61)
        [peeked] = receiver.peek_messages(sequence_number=m.sequence_number)
        assert peeked.delivery_count == 1

@pytest.mark.servicebus_clock("manual")
class TestOnAClass:
    def test_manual(self, servicebus_emulator):
        assert servicebus_emulator.clock_kind == "manual"

def test_unmarked_is_the_system_clock(servicebus_emulator, servicebus_namespace):
    assert servicebus_emulator.clock_kind == "system"
    assert abs(servicebus_namespace.now() - datetime.now(UTC)) < timedelta(seconds=5)
    with pytest.raises(RuntimeError) as refused:
        servicebus_namespace.advance(60)
    assert "\\n" not in str(refused.value) and "@pytest.mark.servicebus_clock('manual')" in str(refused.value)

@pytest.mark.servicebus_clock("system")
def test_system_asked_for(servicebus_emulator):
    assert servicebus_emulator.clock_kind == "system"

@pytest.mark.servicebus_clock("manaul")
def test_misspelt(servicebus_emulator):
    pass

@pytest.mark.servicebus_clock()
def test_no_kind(servicebus_emulator):
    pass
"""
    )
    result = run(pytester)
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*servicebus_clock('manaul'): give one of 'manual', 'system'*",
            "*servicebus_clock(): give one of 'manual', 'system'*",
        ]
    )


def test_a_module_marker_gives_every_test_the_manual_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
import pytest

pytestmark = [pytest.mark.servicebus_clock("manual"), pytest.mark.servicebus_topology(queues=["q"])]

@pytest.mark.parametrize("n", [1, 2])
def test_each(servicebus_emulator, n):
    before = servicebus_emulator.now()
    servicebus_emulator.advance("1d")
    assert (servicebus_emulator.now() - before).total_seconds() == 86400
"""
    )
    run(pytester).assert_outcomes(passed=2)


def test_a_live_namespace_tells_real_time_and_refuses_to_advance() -> None:
    live = Namespace(connection_string=None, fully_qualified_namespace="ns.servicebus.windows.net", names={})
    assert abs(live.now() - datetime.now(UTC)) < timedelta(seconds=5)
    with pytest.raises(RuntimeError, match="needs the embedded emulator"):
        live.advance("1m")
