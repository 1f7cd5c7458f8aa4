"""The broker's pieces on their own: registry, locks, sessions, timers, rules, transfer ordering."""

from __future__ import annotations

import struct
import uuid

import pytest
from proton import Data

from sbnotebook.emulator.broker.entities import Registry
from sbnotebook.emulator.broker.locks import LockTable
from sbnotebook.emulator.broker.model import MessageData, StoredMessage
from sbnotebook.emulator.broker.rules import Rule, admit
from sbnotebook.emulator.broker.sessions import Sessions
from sbnotebook.emulator.broker.timers import Timers
from sbnotebook.emulator.errors import Conflict, LockLost, SessionCannotBeLocked
from sbnotebook.emulator.net.sequencing import BATCH_FORMAT, TransferOrder
from sbnotebook.emulator.topology import EntityProperties, QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

pytestmark = pytest.mark.timeout(30)


def _msg(seq: int, **props: object) -> StoredMessage:
    return StoredMessage(MessageData(b"", b"", 0), seq, 0.0, changed_properties=dict(props))


def test_registry_resolves_addresses_case_insensitively() -> None:
    reg = Registry()
    reg.add_queue(QueueConfig("Orders"))
    reg.add_topic(TopicConfig("t"))
    reg.add_subscription("t", SubscriptionConfig("s"))
    assert reg.resolve_source("orders/$deadletterqueue").is_dead_letter
    assert reg.resolve_source("T/Subscriptions/S").entity.name == "s"
    with pytest.raises(Conflict):
        reg.add_queue(QueueConfig("ORDERS"))


def test_locks_outlive_their_owner_until_ended() -> None:
    reg = Registry()
    reg.add_queue(QueueConfig("q"))
    source = reg.resolve_source("q")
    msg = _msg(1)
    source.store.add(msg)
    table = LockTable()
    owner = object()
    token = table.take(source, msg, owner, None)
    assert table.forget_owner(owner) == 1
    assert table.held(token, source.store).owner is None  # still locked, owner forgotten
    table.end(table.held(token))
    with pytest.raises(LockLost):
        table.held(token)
    with pytest.raises(LockLost):
        table.held(uuid.uuid4())


def test_sessions_are_exclusive() -> None:
    reg = Registry()
    reg.add_queue(QueueConfig("sq", EntityProperties(requires_session=True, lock_duration=10)))
    source = reg.resolve_source("sq")
    sessions = Sessions()
    a, b = object(), object()
    assert sessions.accept(source, "s1", a, now=100.0).locked_until == 110.0  # type: ignore[union-attr]
    with pytest.raises(SessionCannotBeLocked):
        sessions.accept(source, "s1", b, now=101.0)
    assert [s.id for s in sessions.owner_gone(a)] == ["s1"]


def test_timers_fire_in_due_order() -> None:
    timers = Timers()
    timers.add(5.0, "ttl", "b")
    timers.add(1.0, "lock", "a")
    timers.add(9.0, "lock", "c")
    assert [key for _, _, key in timers.due(6.0)] == ["a", "b"]
    assert timers.next_due() == 9.0


def test_rules_with_actions_each_make_a_copy() -> None:
    rules = [
        Rule(RuleConfig("plain", sql_expression="1=1")),
        Rule(RuleConfig("tag", sql_expression="n > 1", action="SET n = n + 1; REMOVE x")),
    ]
    numbers = iter([100])
    copies = admit(rules, _msg(7, n=2, x="gone"), lambda: next(numbers))
    assert [(c.sequence_number, c.application_properties) for c in copies] == [
        (7, {"n": 2, "x": "gone"}),
        (100, {"n": 3, "RuleName": "tag"}),
    ]


# ------------------------------------------------------------- transfer order


def _transfer(channel: int, delivery_id: int, tag: bytes, fmt: int = 0) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x14)
    d.put_list()
    d.enter()
    d.put_uint(0)  # handle
    d.put_uint(delivery_id)
    d.put_binary(tag)
    d.put_uint(fmt)
    d.put_bool(False)  # settled
    d.put_bool(False)  # more
    d.exit()
    d.exit()
    body = bytes(d.encode()) + b"\x00\x53\x77\xa1\x01x"  # performative + a tiny amqp-value payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def _ids(stream: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(stream):
        size = struct.unpack_from(">I", stream, pos)[0]
        d = Data()
        d.decode(stream[pos + 8 : pos + size])
        out.append(int(d.get_object().value[1]))
        pos += size
    return out


def test_early_transfers_wait_for_their_turn_and_duplicates_are_renumbered() -> None:
    order = TransferOrder()
    assert _ids(order.feed(_transfer(0, 5, b"a"))) == [5]  # the first id sets the sequence
    assert order.feed(_transfer(0, 7, b"c")) == b""  # early: held
    assert _ids(order.feed(_transfer(0, 6, b"b"))) == [6, 7]
    assert _ids(order.feed(_transfer(0, 6, b"d"))) == [8]  # a duplicate id gets the next one


def test_batch_message_format_is_noted_by_delivery_tag() -> None:
    order = TransferOrder()
    order.feed(_transfer(0, 0, b"t1", BATCH_FORMAT) + _transfer(0, 1, b"t2"))
    assert order.take_batch(b"t1") and not order.take_batch(b"t1") and not order.take_batch(b"t2")


def test_a_restartable_port_is_below_the_ephemeral_range_and_free_with_its_neighbour() -> None:
    # A port from the ephemeral range can go to any outgoing connection while a killed emulator is
    # down, and its restart then fails with "address in use" (a CI run failed on that).
    import socket

    from sbnotebook.emulator.ports import _ephemeral_start, restartable_port

    for _ in range(20):
        port = restartable_port()
        assert 10_000 <= port < _ephemeral_start() - 1
        for p in (port, port + 1):  # the CLI's extra admin port is --port + 1
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
