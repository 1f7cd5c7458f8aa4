"""The broker state machine alone, on a ManualClock: time-dependent rules in microseconds."""

from __future__ import annotations

import uuid

import pytest

from sbnotebook.emulator import Broker, ManualClock, Topology
from sbnotebook.emulator.broker.entities import Source
from sbnotebook.emulator.broker.model import MessageData, MessageState, StoredMessage
from sbnotebook.emulator.errors import BadRequest, LockLost, MessageNotFound, MessageSizeExceeded

TOPO = Topology.from_dict(
    {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "ns",
                    "Queues": [
                        {"Name": "q", "Properties": {"LockDuration": "PT10S", "MaxDeliveryCount": 2}},
                        {
                            "Name": "ttl",
                            "Properties": {
                                "DefaultMessageTimeToLive": "PT5S",
                                "DeadLetteringOnMessageExpiration": True,
                            },
                        },
                        {
                            "Name": "dd",
                            "Properties": {
                                "RequiresDuplicateDetection": True,
                                "DuplicateDetectionHistoryTimeWindow": "PT1M",
                            },
                        },
                    ],
                    "Topics": [
                        {"Name": "t", "Subscriptions": [{"Name": "a"}, {"Name": "b"}]},
                    ],
                }
            ]
        }
    }
)


def data(body: bytes = b"x", **kw: object) -> MessageData:
    return MessageData(raw_properties=b"", raw_body=body, size=len(body) + 20, **kw)  # type: ignore[arg-type]


def one_locked(broker: Broker, entity: str) -> tuple[Source, StoredMessage]:
    """Send one message to ``entity`` and receive it under a lock: the entity's source and the message."""
    broker.send(entity, [data()])
    src = broker.resolve_source(entity)
    (m,) = broker.receive(src, 1, peek_lock=True)
    return src, m


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(clock: ManualClock) -> Broker:
    return Broker(TOPO, clock)


def test_lock_expiry_counts_a_delivery_and_dead_letters_at_max(broker: Broker, clock: ManualClock) -> None:
    src, m = one_locked(broker, "q")
    clock.advance(9.9)
    broker.tick()
    assert broker.receive(src, 1, peek_lock=True) == []  # still locked
    clock.advance(0.2)
    broker.tick()
    (m,) = broker.receive(src, 1, peek_lock=True)
    assert m.delivery_count == 1
    clock.advance(10.1)
    broker.tick()  # second expiry reaches MaxDeliveryCount 2
    assert broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}
    (dead,) = broker.peek(broker.resolve_source("q/$DeadLetterQueue"), 0, 10)
    assert dead.application_properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"


def test_renewal_moves_expiry_and_old_timer_is_ignored(broker: Broker, clock: ManualClock) -> None:
    _, m = one_locked(broker, "q")
    assert m.lock_token is not None
    clock.advance(8)
    (until,) = broker.renew([m.lock_token])
    assert until == clock.now() + 10
    clock.advance(5)
    broker.tick()
    assert m.locked  # the first lock's timer fired but the renewal holds
    broker.complete(m.lock_token)
    assert broker.counts("q")["active"] == 0


def test_settling_after_expiry_is_lock_lost(broker: Broker, clock: ManualClock) -> None:
    _, m = one_locked(broker, "q")
    token = m.lock_token
    assert token is not None
    clock.advance(11)
    broker.tick()
    with pytest.raises(LockLost) as err:
        broker.complete(token)
    assert "TrackingId:" in err.value.description
    with pytest.raises(LockLost):
        broker.complete(uuid.uuid4())


def test_ttl_dead_letters_and_dead_letter_queue_never_expires(broker: Broker, clock: ManualClock) -> None:
    broker.send("ttl", [data()])
    clock.advance(5.1)
    broker.tick()
    dlq = broker.resolve_source("ttl/$deadletterqueue")
    (dead,) = broker.peek(dlq, 0, 5)
    assert dead.application_properties["DeadLetterReason"] == "TTLExpiredException"
    clock.advance(3600)
    broker.tick()
    assert len(broker.peek(dlq, 0, 5)) == 1


def test_locked_message_expires_only_when_its_lock_ends(broker: Broker, clock: ManualClock) -> None:
    _, m = one_locked(broker, "ttl")
    clock.advance(6)
    broker.tick()
    assert m.locked and broker.counts("ttl")["dead_letter"] == 0
    assert m.lock_token is not None
    broker.abandon(m.lock_token)
    assert broker.counts("ttl")["dead_letter"] == 1


def test_scheduled_message_is_numbered_again_when_it_becomes_active(broker: Broker, clock: ManualClock) -> None:
    """Rule (Azure's message-sequencing page): a scheduled message's number is valid while it is
    scheduled; when it falls due it is appended as if enqueued then, with a new number."""
    (seq,) = broker.send("q", [data(scheduled_enqueue_time=clock.now() + 30)])
    (plain,) = broker.send("q", [data()])
    src = broker.resolve_source("q")
    peeked = broker.peek(src, 0, 5)
    assert [(p.sequence_number, p.state) for p in peeked] == [
        (seq, MessageState.SCHEDULED),
        (plain, MessageState.ACTIVE),
    ]
    clock.advance(30)
    broker.tick()
    assert [p.sequence_number for p in broker.peek(src, 0, 5)] == [plain, plain + 1]
    with pytest.raises(MessageNotFound):
        broker.cancel_scheduled("q", [seq])
    got = broker.receive(src, 2, peek_lock=False)
    assert [m.sequence_number for m in got] == [plain, plain + 1]
    assert got[1].enqueued_time == clock.now()
    assert broker.peek(src, 0, 5) == []


def test_topic_scheduled_message_fans_out_at_its_time(broker: Broker, clock: ManualClock) -> None:
    broker.send("t", [data(scheduled_enqueue_time=clock.now() + 1)])
    assert broker.counts("t/subscriptions/a")["active"] == 0
    clock.advance(1)
    broker.tick()
    assert broker.counts("t/subscriptions/a")["active"] == 1
    assert broker.counts("t/subscriptions/b")["active"] == 1


def test_duplicate_window_expires(broker: Broker, clock: ManualClock) -> None:
    assert broker.send("dd", [data(message_id="m")])[0] > 0
    assert broker.send("dd", [data(message_id="m")]) == [0]
    clock.advance(61)
    assert broker.send("dd", [data(message_id="m")])[0] > 0
    assert broker.counts("dd")["active"] == 2


def test_deferred_message_abandoned_stays_deferred(broker: Broker) -> None:
    src, m = one_locked(broker, "q")
    assert m.lock_token is not None
    broker.defer(m.lock_token)
    (again,) = broker.receive_deferred(src, [m.sequence_number], peek_lock=True)
    assert again.lock_token is not None
    broker.abandon(again.lock_token)
    assert again.state is MessageState.DEFERRED
    assert broker.receive(src, 1, peek_lock=True) == []


def test_release_does_not_count_a_delivery(broker: Broker) -> None:
    src, m = one_locked(broker, "q")
    assert m.lock_token is not None
    broker.release(m.lock_token)
    (m,) = broker.receive(src, 1, peek_lock=True)
    assert m.delivery_count == 0


def test_batch_is_all_or_nothing(broker: Broker) -> None:
    with pytest.raises(MessageSizeExceeded):
        broker.send("q", [data(), data(b"y" * 300_000)])
    assert broker.counts("q")["active"] == 0


def test_ids_longer_than_128_characters_are_refused(broker: Broker) -> None:
    with pytest.raises(BadRequest):
        broker.send("q", [data(message_id="m" * 129)])


def test_peek_pages_by_sequence_number_over_a_large_log(broker: Broker) -> None:
    broker.send("q", [data() for _ in range(5000)])
    src = broker.resolve_source("q")
    taken = broker.receive(src, 2500, peek_lock=False)  # leaves stale entries behind
    assert len(taken) == 2500
    seen: list[int] = []
    start = 0
    while page := broker.peek(src, start, 250):
        seen += [m.sequence_number for m in page]
        start = page[-1].sequence_number + 1
    assert seen == list(range(2501, 5001))


def test_a_dead_letter_queue_message_cannot_be_dead_lettered_again(broker: Broker) -> None:
    _, m = one_locked(broker, "q")
    assert m.lock_token is not None
    broker.dead_letter(m.lock_token, "first")
    dlq = broker.resolve_source("q/$DeadLetterQueue")
    (d,) = broker.receive(dlq, 1, peek_lock=True)
    assert d.lock_token is not None
    with pytest.raises(BadRequest, match="already in a dead-letter queue"):
        broker.dead_letter(d.lock_token, "second")
    assert d.locked  # nothing lost: still held, can be completed
    broker.complete(d.lock_token)
    assert broker.counts("q")["dead_letter"] == 0


SESSION_TOPO = Topology.from_dict(
    {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "ns",
                    "Queues": [{"Name": "s", "Properties": {"RequiresSession": True, "LockDuration": "PT10S"}}],
                }
            ]
        }
    }
)


def test_session_lock_lapse_releases_messages_and_reports_session_lock_lost(clock: ManualClock) -> None:
    from sbnotebook.emulator.errors import NotAllowed, SessionCannotBeLocked, SessionLockLost

    broker = Broker(SESSION_TOPO, clock)
    with pytest.raises(NotAllowed):
        broker.send("s", [data()])  # no session id
    broker.send("s", [data(session_id="a"), data(session_id="b"), data(session_id="a")])
    src = broker.resolve_source("s")
    owner, other = object(), object()
    session = broker.accept_session(src, None, owner)
    assert session is not None and session.id == "a"  # the session with the oldest message
    with pytest.raises(SessionCannotBeLocked):
        broker.accept_session(src, "a", other)
    got = broker.receive(src, 10, peek_lock=True, owner=owner, session_id="a")
    assert [m.data.session_id for m in got] == ["a", "a"]
    assert got[0].locked_until == session.locked_until
    clock.advance(9)
    broker.renew_session_lock(src, "a")
    clock.advance(9)
    broker.tick()
    assert got[0].lock_token is not None
    broker.complete(got[0].lock_token)
    token = got[1].lock_token
    assert token is not None
    clock.advance(11)
    broker.tick()
    with pytest.raises(SessionLockLost):
        broker.complete(token)
    assert got[1].delivery_count == 1
    assert broker.accept_session(src, "a", other) is not None  # free again


def test_plain_receive_on_session_entity_is_not_allowed(clock: ManualClock) -> None:
    from sbnotebook.emulator.errors import NotAllowed

    broker = Broker(SESSION_TOPO, clock)
    with pytest.raises(NotAllowed, match="sessionful"):
        broker.receive(broker.resolve_source("s"), 1, peek_lock=True)
