"""Named connections (%sb_connect --as NAME, NAME:ENTITY in every command) and %sb_copy between
namespaces, through a real IPython shell against two embedded emulators ("prod" and the default)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core import EntityNameError, Report, copy_resume_point, counts, split_address
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.magics import SbMagics, copying
from sbnotebook.notebook.widgets import SettlementPanel
from tests import shell
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import HttpOnlyProxy, InterruptAtFirstProgress, drain, magic_fails, send
from tests.interrupting import answered
from tests.shell import answer, line, loaded

ip = shell.ip  # the shell: one real IPython shell per process


@pytest.fixture
def prod() -> Iterator[Emulator]:
    """A second namespace: stands for production."""
    with Emulator(TEST_TOPOLOGY) as emu:
        yield emu


@pytest.fixture
def prod_client(prod: Emulator) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(prod.connection_string) as c:
        yield c


@pytest.fixture
def sb(ip: Any, emulator: Emulator, prod: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    with loaded(ip, capsys, emulator.connection_string, f"--as prod {prod.connection_string}") as magics:
        yield magics


def test_split_address_reads_the_connection_prefix_and_says_what_is_wrong() -> None:
    assert split_address("orders") == (None, split_address("orders")[1])
    name, path = split_address("prod:orders/$dlq")
    assert name == "prod" and str(path) == "orders/$deadletterqueue"
    assert split_address("home-2:events/subscriptions/audit")[0] == "home-2"
    for bad, said in [
        (":orders", "goes before the ':'"),
        ("prod:", "no entity after"),
        ("prod:orders:x", "more than one ':'"),
        ("orders/$deadletterqueue:prod", "a colon only follows a connection name"),
        ("9x:orders", "not a connection name"),
    ]:
        with pytest.raises(EntityNameError, match=said):
            split_address(bad)


def test_named_connections_beside_the_default_and_the_list_never_shows_a_key(
    ip: Any,
    sb: SbMagics,
    emulator: Emulator,
    prod: Emulator,
    prod_client: ServiceBusClient,
    client: ServiceBusClient,
    capsys: Any,
) -> None:
    send(prod_client, "q", "p1", "p2")
    send(client, "q", "h1")
    assert list(line(ip, "sb_peek prod:q")["body_text"]) == ["p1", "p2"]
    assert list(line(ip, "sb_peek q")["body_text"]) == ["h1"]  # the unnamed connection stays the default
    assert list(line(ip, "sb_peek q --dlq")["body_text"]) == []
    assert sb.bound is None and sb.connection is not None
    assert sb.connection.fully_qualified_namespace.endswith(f":{emulator.port}")
    assert sb.connections["prod"].fully_qualified_namespace.endswith(f":{prod.port}")
    listed = line(ip, "sb_connect --list")
    assert list(listed["name"]) == ["(default)", "prod"]
    assert list(listed["namespace"]) == [f"{emulator.host}:{emulator.port}", f"{prod.host}:{prod.port}"]
    out, err = capsys.readouterr()
    shown = out + err + repr(listed) + listed.to_html()
    assert "SAS_KEY_VALUE" not in shown and "SharedAccessKey" not in shown
    # Counts, export, purge, ...: every command takes NAME:ENTITY the same way.
    frame = line(ip, "sb_entities")
    assert frame is not None
    line(ip, "sb_purge prod:q --yes")
    assert capsys.readouterr().out.count("purged") >= 1
    assert list(line(ip, "sb_peek prod:q")["body_text"]) == []
    assert list(line(ip, "sb_peek q")["body_text"]) == ["h1"]


def test_bad_connection_names_are_one_line(ip: Any, sb: SbMagics, capsys: Any) -> None:
    for text, said in [
        ("sb_peek nope:q", "No connection named 'nope' (named: prod)"),
        ("sb_peek prod:q:x", "more than one ':'"),
        ("sb_peek q/$deadletterqueue:prod", "a colon only follows a connection name"),
        ("sb_peek prod:", "no entity after"),
        ("sb_connect --as 9x --emulator", "a name is letters"),
        ("sb_connect --as home", "give CONNECTION, --fully-qualified-namespace, --secret or --emulator"),
        ("sb_resubmit q --target prod:q", "a resubmit moves messages within one namespace"),
    ]:
        shown = magic_fails(ip, text)
        assert said in shown and not capsys.readouterr().err, (text, shown)


# ------------------------------------------------------------------ %sb_copy


def _dead_letter(client: ServiceBusClient, queue: str, n: int) -> None:
    """n messages with typed properties, dead-lettered with a reason and a description."""
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(
            [
                ServiceBusMessage(
                    json.dumps({"order": i}),
                    application_properties={"n": i, "ok": i % 2 == 0, "ratio": i / 4, "who": f"c-{i}"},
                    subject="order",
                    content_type="application/json",
                    correlation_id=f"corr-{i}",
                    time_to_live=dt.timedelta(hours=1),
                )
                for i in range(n)
            ]
        )
    with client.get_queue_receiver(queue, max_wait_time=2) as receiver:
        moved = 0
        while moved < n:
            for msg in receiver.receive_messages(max_message_count=n - moved, max_wait_time=2):
                receiver.dead_letter_message(msg, reason="bad-total", error_description=f"order {moved} failed")
                moved += 1


def _peek_all(client: ServiceBusClient, queue: str, sub_queue: str | None = None) -> list[Any]:
    with client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver:
        out: list[Any] = []
        while page := receiver.peek_messages(
            max_message_count=250, sequence_number=(out[-1].sequence_number + 1) if out else 0
        ):
            out.extend(page)
        return out


def test_copy_between_namespaces_by_peeking_keeps_every_property_and_leaves_the_source(
    ip: Any, sb: SbMagics, prod_client: ServiceBusClient, client: ServiceBusClient, capsys: Any
) -> None:
    _dead_letter(prod_client, "q", 12)
    before = _peek_all(prod_client, "q", "deadletter")
    assert len(before) == 12
    report = line(ip, "sb_copy prod:q/$deadletterqueue q --yes")
    out = capsys.readouterr().out
    assert "Copy 12 message(s) from prod:q/$deadletterqueue to q" in out
    assert str(report).startswith("copy prod:q/$deadletterqueue -> q: 12 sent of 12")
    assert isinstance(report, Report) and report.count("sent") == 12 and report.ok
    # The source, read on its own: the same messages, nothing locked, no delivery counted.
    after = _peek_all(prod_client, "q", "deadletter")
    assert [(m.sequence_number, m.delivery_count) for m in after] == [
        (m.sequence_number, m.delivery_count) for m in before
    ]
    assert counts("q", connection=sb.connections["prod"]).dead_letter == 12
    # The target holds every message with its properties (typed), and a fresh id naming the original.
    copies = drain(client, "q")
    assert len(copies) == 12
    by_original = {c.application_properties[b"sbnotebook-original-message-id"].decode(): c for c in copies}
    for original in before:
        copy = by_original[original.message_id]
        assert copy.message_id != original.message_id
        assert str(copy) == str(original) and copy.subject == "order" and copy.content_type == "application/json"
        assert copy.correlation_id == original.correlation_id and copy.time_to_live == dt.timedelta(hours=1)
        props = {k: v for k, v in copy.application_properties.items() if k != b"sbnotebook-original-message-id"}
        assert props == original.application_properties  # n, ok, ratio keep their types; the reason too
        assert copy.dead_letter_reason == "bad-total" and copy.delivery_count == 0
    # --keep-message-id, --where and --max-messages.
    line(ip, "sb_copy prod:q/$deadletterqueue q --keep-message-id --where 'props.n >= 4' --max-messages 3 --yes")
    kept = drain(client, "q")
    wanted = {
        m.message_id: m.application_properties[b"n"] for m in before if m.application_properties[b"n"] in (4, 5, 6)
    }
    assert {m.message_id: m.application_properties[b"n"] for m in kept} == wanted  # the same ids, the first 3 matches
    assert all(b"sbnotebook-original-message-id" not in m.application_properties for m in kept)
    assert len(_peek_all(prod_client, "q", "deadletter")) == 12


def test_copy_bad_input_is_one_line_and_copies_nothing(
    ip: Any, sb: SbMagics, prod_client: ServiceBusClient, client: ServiceBusClient, capsys: Any
) -> None:
    send(prod_client, "q", "a")
    with prod_client.get_queue_sender("sq") as sender:
        sender.send_messages(ServiceBusMessage("s", session_id="s1"))
    for text, said in [
        ("sb_copy nope:q q", "No connection named 'nope'"),
        ("sb_copy prod:q t/subscriptions/all", "not to t/subscriptions/all"),
        ("sb_copy prod:q q/$deadletterqueue", "not to q/$deadletterqueue"),
        ("sb_copy prod:q q:prod", "No connection named 'q'"),
        ("sb_copy prod:q prod:", "no entity after"),
        ("sb_copy q/$deadletterqueue:prod q", "a colon only follows a connection name"),
        ("sb_copy prod:q nosuchqueue --yes", "nosuchqueue"),
        ("sb_copy q prod:nosuchqueue --yes", "Entity not found (prod:nosuchqueue)"),  # the target's connection
        ("sb_copy prod:q q --max-messages 0", "argument -n/--max-messages: must be 1 or more"),
        ("sb_copy prod:q q --max-in-flight 0", "argument --max-in-flight: must be a whole number of 1 or more"),
        ("sb_copy prod:t q --yes", "receive from one of its subscriptions"),  # a topic holds nothing to peek
        # A session-enabled source: refused before it is counted or asked about (a peek there takes a
        # session's lock from its consumers), saying what can be copied instead.
        ("sb_copy prod:sq q --yes", "prod:sq is session-enabled, and a copy peeks with nothing locked"),
        ("sb_copy prod:sq q --yes", "dead-letter queue has no sessions (prod:sq/$deadletterqueue)"),
    ]:
        shown = magic_fails(ip, text)
        out = capsys.readouterr()
        assert said in shown and not out.err, (text, shown)
        assert "Copy " not in out.out, out.out  # nothing counted, nothing asked
    assert drain(client, "q") == [] and len(_peek_all(prod_client, "q")) == 1
    with prod_client.get_queue_receiver("sq", session_id="s1") as receiver:  # the source as it was
        assert [(str(m), m.delivery_count) for m in receiver.peek_messages(10)] == [("s", 0)]


def test_copy_asks_first_and_an_interrupted_copy_sends_only_what_is_left(
    ip: Any,
    sb: SbMagics,
    prod_client: ServiceBusClient,
    client: ServiceBusClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    with prod_client.get_queue_sender("q") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(700)])
    asked = answer(monkeypatch, "no")
    assert magic_fails(ip, "sb_copy prod:q dedup").startswith("nothing done: 'copy' was not typed")
    assert asked and "Type 'copy'" in asked[0]
    assert counts("dedup", connection=sb.conn()).active == 0
    hook = InterruptAtFirstProgress()

    class Interrupting(copying.Progress):
        def update(self, report: Report) -> None:
            hook(report)
            super().update(report)

    monkeypatch.setattr(copying, "Progress", Interrupting)
    with answered(hook):
        said = magic_fails(ip, "sb_copy prod:q dedup --yes --max-in-flight 1")  # the Report shown, the cell failed
    first = counts("dedup", connection=sb.conn()).active
    assert 0 < first < 700, first
    assert said.startswith("%sb_copy: ") and f"{first} sent" in said and "ERROR" in said, said  # the broker's count
    assert "Interrupted: the same command again copies what is left" in capsys.readouterr().out

    def recorded() -> Any:
        return copy_resume_point("q", "dedup", source_connection=sb.connections["prod"], connection=sb.conn())

    # On disk when the interrupted copy returned: the sends in flight confirmed first.
    assert recorded().pending and recorded().copied == first
    monkeypatch.undo()
    capsys.readouterr()
    report = line(ip, "sb_copy prod:q dedup --yes")
    assert "Resuming the copy" in capsys.readouterr().out
    assert report.count("sent") <= 700 - first + 50  # only what is left (and the one batch in flight)
    bodies = sorted(str(m) for m in drain(client, "dedup"))
    assert bodies == sorted(f"m{i}" for i in range(700))  # each once: re-sent copies kept their ids
    source = _peek_all(prod_client, "q")
    assert len(source) == 700 and all(m.delivery_count == 0 for m in source)


def test_panels_show_and_take_named_entities(
    ip: Any, sb: SbMagics, prod_client: ServiceBusClient, client: ServiceBusClient
) -> None:
    send(prod_client, "q", "p1", "p2")
    send(client, "q", "h1")
    browser = line(ip, "sb_browse prod:q")
    assert browser.entity_box.value == "prod:q" and [r["body_text"] for r in browser.records] == ["p1", "p2"]
    browser.entity_box.value = "q"  # typed into the panel: the default connection's q
    browser.jump(1)
    assert [r["body_text"] for r in browser.records] == ["h1"]
    browser.entity_box.value = "prod:q"
    browser.jump(1)
    assert [r["body_text"] for r in browser.records] == ["p1", "p2"]
    browser.entity_box.value = "nope:q"
    browser.jump_button.click()  # the Go button, as the browser clicks it: the error shown in the panel
    assert "No connection named" in browser.status.value
    panel = line(ip, "sb_compose prod:q")
    panel.body.value = '{"from": "panel"}'
    assert panel.send().count("sent") == 1
    assert [str(m) for m in _peek_all(prod_client, "q")] == ["p1", "p2", '{"from": "panel"}']
    panel.entity_box.value = "dedup"  # no name: the default connection
    assert panel.send().count("sent") == 1
    assert [str(m) for m in drain(client, "dedup")] == ['{"from": "panel"}']


def test_every_line_of_a_command_on_a_named_connection_says_name_colon_entity(
    ip: Any, sb: SbMagics, prod_client: ServiceBusClient, client: ServiceBusClient, capsys: Any, tmp_path: Any
) -> None:
    """'orders' alone reads as the default connection's: the summary, progress and report lines of a
    command on prod:q say prod:q (the default q holds other messages, so a line naming q is wrong)."""
    _dead_letter(prod_client, "q", 3)
    send(prod_client, "q", "p1", "p2")
    send(client, "q", "h1")
    capsys.readouterr()
    line(ip, "sb_dlq prod:q --summary")
    out = capsys.readouterr().out
    assert "3 dead-lettered messages in prod:q by reason." in out, out
    line(ip, "sb_peek prod:q")
    assert "2 messages from prod:q " in capsys.readouterr().out
    line(ip, f"sb_export prod:q --dlq {tmp_path / 'd.jsonl'}")
    assert "Exported 3 messages of prod:q/$deadletterqueue to" in capsys.readouterr().out
    report = line(ip, "sb_purge prod:q --yes")
    out = capsys.readouterr().out
    assert "Purge prod:q: 2 active message(s)" in out and str(report).startswith("purge prod:q: 2 purged"), out
    assert ip.user_ns["sb_last_report"].entity == "prod:q"
    send(prod_client, "q", "r1", "r2")  # a batch received on prod: %sb_settle's lines name prod:q too
    batch = line(ip, "sb_receive prod:q -n 2 --wait-seconds 5")
    capsys.readouterr()
    assert repr(batch).startswith("<LockedBatch prod:q: 2 messages (peek-lock)"), repr(batch)
    assert "&lt;LockedBatch prod:q: 2 messages" in batch._repr_html_()
    renewed = batch.renew()  # the batch's own methods: their reports name prod:q too
    assert renewed.entity == "prod:q" and str(renewed).startswith("renew prod:q: 2 renewed"), str(renewed)
    assert "<b>prod:q</b>: 2 messages, 2 unsettled" in SettlementPanel(batch, tick=0).status.value
    line(ip, "sb_settle complete all --yes")
    out = capsys.readouterr().out
    assert "complete prod:q: 2 completed of 2" in out and ip.user_ns["sb_last_report"].entity == "prod:q", out
    for text in ("sb_peek prod:nosuch", "sb_tail prod:nosuch --seconds 1", "sb_dlq prod:nosuch --summary"):
        shown = magic_fails(ip, text)  # one line, the cell fails, naming prod's entity
        assert "Entity not found (prod:nosuch)" in shown, (text, shown)
    # Every line above named prod's q: nothing said 'q' alone (the default q still holds h1).
    assert [str(m) for m in _peek_all(prod_client, "q")] == [] and [str(m) for m in _peek_all(client, "q")] == ["h1"]


def test_entities_of_a_named_connection(
    ip: Any, sb: SbMagics, prod: Emulator, prod_client: ServiceBusClient, capsys: Any
) -> None:
    send(prod_client, "q", "p1", "p2")
    with emulator_admin_client(prod.connection_string) as admin:
        admin.create_queue("only-in-prod")
        queues = sorted(q.name for q in admin.list_queues())
    for text in ("sb_entities prod:", "sb_entities --connection prod"):
        frame = line(ip, text)
        assert "entities of prod (" in capsys.readouterr().out
        listed = sorted(e for e, k in zip(frame["entity"], frame["kind"], strict=True) if k == "queue")
        assert listed == [f"prod:{q}" for q in queues], (text, listed)
        assert frame.set_index("entity").loc["prod:q", "active"] == 2
    assert "only-in-prod" not in set(line(ip, "sb_entities")["entity"])  # the default connection's list
    for text, said in [
        ("sb_entities nope:", "No connection named 'nope'"),
        ("sb_entities --connection nope", "No connection named 'nope'"),
        ("sb_entities 9x:", "not a connection name"),
    ]:
        shown = magic_fails(ip, text)
        assert said in shown, (text, shown)


def test_connect_over_websockets_where_only_http_gets_through(
    ip: Any, sb: SbMagics, emulator: Emulator, client: ServiceBusClient, capsys: Any
) -> None:
    """%sb_connect --websockets (and the setting websockets) dial AMQP inside WebSockets: behind a
    stand-in firewall that closes AMQP connections, peek, receive and settle work; without it the
    connect fails and commands say so."""
    assert emulator.port is not None
    firewall = HttpOnlyProxy(emulator.port)
    try:
        ip.user_ns["behind"] = firewall.connection_string(emulator)
        send(client, "q", "w1", "w2", "w3")
        magic_fails(ip, "sb_connect $behind")
        assert firewall.blocked >= 1
        line(ip, "sb_connect $behind --websockets")
        assert "over WebSockets" in capsys.readouterr().out
        assert list(line(ip, "sb_peek q")["body_text"]) == ["w1", "w2", "w3"]
        line(ip, "sb_receive q -n 2")
        line(ip, "sb_settle complete 0-1")
        assert emulator.broker.counts("q")["active"] == 1
        sb.websockets = True  # the setting: a plain %sb_connect dials WebSockets too
        line(ip, "sb_connect --as walled $behind")
        assert list(line(ip, "sb_peek walled:q")["body_text"]) == ["w3"]
        blocked = firewall.blocked
        line(ip, "sb_connect $behind")
        assert sb.conn().settings.websockets and firewall.blocked == blocked
    finally:
        firewall.close()
