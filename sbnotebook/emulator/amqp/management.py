"""The ``$management`` request/response operations of an entity.

Requests and replies are proton Messages; the broker does the work. Replies carry
``statusCode`` / ``statusDescription`` (and ``errorCondition`` on failure) as the
SDK's management link expects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, cast

from proton import UNDESCRIBED, Array, Data, Message, int32, symbol, timestamp

from ..broker.broker import Broker, Source, Subscription
from ..broker.rules import Rule
from ..errors import BadRequest, BrokerError, Conflict, EntityNotFound, NotImplementedOperation
from ..security.sas import LISTEN, SEND
from .codec import DecodeError, decode_message, encode_stored
from .rules import rule_from_amqp, rule_to_amqp

OK = 200
_YEAR_10000_MS = 253402300800000
NO_CONTENT = 204
MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
SESSION_NOT_FOUND = "com.microsoft:session-not-found"

# Service Bus answers a request that finds nothing with 204 *and* an error condition, and clients
# read it: @azure/service-bus's deleteMessages returns 0 only for 204 with message-not-found (it
# throws "Unexpected response with status code of 204" otherwise); azure-servicebus's
# mgmt_handlers says an empty session listing is 204 with session-not-found. The .NET, Java and
# Python SDKs' peek, and .NET's rule listing, take any 204 as empty.
EMPTY_CONDITIONS = {
    "com.microsoft:peek-message": MESSAGE_NOT_FOUND,
    "com.microsoft:batch-delete-messages": MESSAGE_NOT_FOUND,
    "com.microsoft:get-message-sessions": SESSION_NOT_FOUND,
    "com.microsoft:enumerate-rules": MESSAGE_NOT_FOUND,  # not documented; the one SDK reading it takes any 204
}


def _values(value: Any) -> list[Any]:
    if isinstance(value, Array):
        return list(value.elements)
    if isinstance(value, (list, tuple)):
        return list(value)
    raise BadRequest("expected an array")


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, memoryview)) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise BadRequest(f"{value!r} is not a lock token") from None


def _get(body: dict[Any, Any], key: str, default: Any = ...) -> Any:
    if key in body:
        return body[key]
    sym = symbol(key)
    if sym in body:
        return body[sym]
    if default is ...:
        raise BadRequest(f"The request body lacks '{key}'.")
    return default


def _long_array(values: list[int]) -> Array:
    return Array(cast(Any, UNDESCRIBED), Data.LONG, *values)


def _timestamps(values: list[float]) -> Array:
    return Array(cast(Any, UNDESCRIBED), Data.TIMESTAMP, *[timestamp(int(v * 1000)) for v in values])


# The claim each operation needs (Service Bus's SAS rights; Entra roles give them): a sender
# schedules and cancels, a receiver does the rest, rules included (Microsoft's SAS table: Listen
# creates, deletes and enumerates a subscription's rules).
OPERATION_RIGHTS = {
    "com.microsoft:schedule-message": SEND,
    "com.microsoft:cancel-scheduled-message": SEND,
    "com.microsoft:peek-message": LISTEN,
    "com.microsoft:renew-lock": LISTEN,
    "com.microsoft:receive-by-sequence-number": LISTEN,
    "com.microsoft:update-disposition": LISTEN,
    "com.microsoft:renew-session-lock": LISTEN,
    "com.microsoft:get-session-state": LISTEN,
    "com.microsoft:set-session-state": LISTEN,
    "com.microsoft:get-message-sessions": LISTEN,
    "com.microsoft:add-rule": LISTEN,
    "com.microsoft:remove-rule": LISTEN,
    "com.microsoft:enumerate-rules": LISTEN,
    "com.microsoft:batch-delete-messages": LISTEN,
}


class ManagementHandler:
    """Runs management operations for one entity path on behalf of one link."""

    def __init__(self, broker: Broker, entity_path: str) -> None:
        self.broker = broker
        self.entity_path = entity_path
        self._holder: object | None = None  # the current request's associated receiver link
        self._ops: dict[str, Callable[[dict[Any, Any], object], tuple[int, dict[str, Any] | None]]] = {
            "com.microsoft:peek-message": self._peek,
            "com.microsoft:renew-lock": self._renew,
            "com.microsoft:receive-by-sequence-number": self._receive_by_sequence,
            "com.microsoft:update-disposition": self._update_disposition,
            "com.microsoft:schedule-message": self._schedule,
            "com.microsoft:cancel-scheduled-message": self._cancel_scheduled,
            "com.microsoft:renew-session-lock": self._renew_session_lock,
            "com.microsoft:get-session-state": self._get_session_state,
            "com.microsoft:set-session-state": self._set_session_state,
            "com.microsoft:get-message-sessions": self._get_message_sessions,
            "com.microsoft:add-rule": self._add_rule,
            "com.microsoft:remove-rule": self._remove_rule,
            "com.microsoft:enumerate-rules": self._enumerate_rules,
            "com.microsoft:batch-delete-messages": self._batch_delete,
        }

    def source(self) -> Source:
        return self.broker.resolve_source(self.entity_path)

    def handle(
        self,
        request: Message,
        owner: object,
        check: Callable[[str], None] | None = None,
        holder: object | None = None,
    ) -> Message:
        """``check(operation)`` raises ``Unauthorized`` when the caller lacks the claim it needs.
        ``holder`` is the receiver link the request names as its ``associated-link-name`` (None when
        it names none): a session operation succeeds only while that link holds the session."""
        props: dict[Any, Any] = dict(request.properties or {})
        operation = str(props.get("operation", ""))
        self.broker.requests[operation] += 1
        reply = Message()
        reply.correlation_id = request.id
        self._holder = holder
        try:
            if check is not None:
                check(operation)
            op = self._ops.get(operation)
            if op is None:
                raise NotImplementedOperation(
                    f"The management operation '{operation}' is not supported by the emulator.",
                    entity=self.entity_path,
                )
            body = request.body if isinstance(request.body, dict) else {}
            status, result = op(body, owner)
            properties: dict[str, Any] = {"statusCode": int32(status), "statusDescription": "OK"}
            if status == NO_CONTENT:
                properties["statusDescription"] = "No Content"
                properties["errorCondition"] = symbol(EMPTY_CONDITIONS[operation])
            reply.properties = cast(Any, properties)
            reply.body = result if result is not None else {}
        except BrokerError as exc:
            reply.properties = cast(
                Any,
                {
                    "statusCode": int32(exc.status_code),
                    "statusDescription": exc.description,
                    "errorCondition": symbol(exc.condition),
                },
            )
            reply.body = None
        finally:
            self._holder = None
        return reply

    # -------------------------------------------------------------- operations

    def _peek(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        from_seq = int(_get(body, "from-sequence-number", 0))
        count = int(_get(body, "message-count", 1))
        session_id = _get(body, "session-id", None)
        msgs = self.broker.peek(self.source(), from_seq, count, None if session_id is None else str(session_id))
        self.broker.requests["peeked messages"] += len(msgs)
        if not msgs:
            return NO_CONTENT, None
        return OK, {"messages": [{"message": encode_stored(m, locked_until=m.locked_until)} for m in msgs]}

    def _renew(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        tokens = [_uuid(t) for t in _values(_get(body, "lock-tokens"))]
        source = self.source()
        expirations = self.broker.renew(tokens, store=source.store)
        return OK, {"expirations": _timestamps(expirations)}

    def _receive_by_sequence(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        seqs = [int(s) for s in _values(_get(body, "sequence-numbers"))]
        mode = int(_get(body, "receiver-settle-mode", 1))
        peek_lock = mode == 1
        session_id = _get(body, "session-id", None)
        msgs = self.broker.receive_deferred(
            self.source(),
            seqs,
            peek_lock=peek_lock,
            owner=owner,
            session_id=None if session_id is None else str(session_id),
            holder=self._holder,
        )
        out = []
        for m in msgs:
            entry: dict[str, Any] = {"message": encode_stored(m, locked_until=m.locked_until)}
            if m.lock_token is not None:
                entry["lock-token"] = m.lock_token
            out.append(entry)
        return OK, {"messages": out}

    def _update_disposition(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        status = str(_get(body, "disposition-status"))
        tokens = [_uuid(t) for t in _values(_get(body, "lock-tokens"))]
        props = _get(body, "properties-to-modify", None) or None
        props = {str(k): v for k, v in props.items()} if props else None
        store = self.source().store
        with self.broker.lock:
            # All or nothing: a request naming one lost lock settles none of its messages.
            for token in tokens:
                self.broker.held(token, store)
            self._apply_disposition(status, tokens, props, body, store)
        return OK, None

    def _apply_disposition(
        self, status: str, tokens: list[uuid.UUID], props: dict[str, Any] | None, body: dict[Any, Any], store: Any
    ) -> None:
        for token in tokens:
            if status == "completed":
                self.broker.complete(token, store=store)
            elif status == "abandoned":
                self.broker.abandon(token, props, store=store)
            elif status == "defered":
                self.broker.defer(token, props, store=store)
            elif status == "suspended":
                self.broker.dead_letter(
                    token,
                    _get(body, "deadletter-reason", None),
                    _get(body, "deadletter-description", None),
                    props,
                    store=store,
                )
            else:
                raise BadRequest(f"Unknown disposition status '{status}'.", entity=self.entity_path)

    def _schedule(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        entries = _values(_get(body, "messages"))
        datas = []
        for entry in entries:
            raw = _get(entry, "message")
            try:
                datas.append(decode_message(bytes(raw)))
            except DecodeError as exc:
                raise BadRequest(str(exc), entity=self.entity_path) from None
        seqs = self.broker.schedule(self.entity_path, datas)
        return OK, {"sequence-numbers": _long_array(seqs)}

    def _renew_session_lock(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        until = self.broker.renew_session_lock(self.source(), str(_get(body, "session-id")), self._holder)
        return OK, {"expiration": timestamp(int(until * 1000))}

    def _get_session_state(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        state = self.broker.session_state(self.source(), str(_get(body, "session-id")), self._holder)
        return OK, {"session-state": state}

    def _set_session_state(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        raw = _get(body, "session-state", None)
        state = None if raw is None else bytes(raw) if isinstance(raw, (bytes, memoryview)) else str(raw).encode()
        self.broker.set_session_state(self.source(), str(_get(body, "session-id")), state, self._holder)
        return OK, None

    def _get_message_sessions(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        skip = int(_get(body, "skip", 0))
        top = int(_get(body, "top", 100))
        raw_after = _get(body, "last-updated-time", None)
        after = None
        if raw_after is not None:
            ms = int(raw_after.timestamp() * 1000) if hasattr(raw_after, "timestamp") else int(raw_after)
            # DateTime.MaxValue (year 10000) asks for the default listing: sessions with messages or state.
            after = ms / 1000.0 if 0 < ms < _YEAR_10000_MS else None
        sessions = self.broker.list_sessions(self.source(), after)[skip : skip + top]
        if not sessions:
            return NO_CONTENT, None
        return OK, {"skip": int32(skip + len(sessions)), "sessions-ids": sessions}

    def _subscription(self) -> Subscription:
        source = self.source()
        if not isinstance(source.entity, Subscription) or source.is_dead_letter:
            raise BadRequest(
                f"Rules belong to subscriptions; '{self.entity_path}' is not one.", entity=self.entity_path
            )
        return source.entity

    def _add_rule(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        name = str(_get(body, "rule-name"))
        config = rule_from_amqp(name, _get(body, "rule-description"))
        try:
            rule = Rule(config)
        except ValueError as exc:  # a filter or action that does not parse
            raise BadRequest(f"The rule '{name}' is not valid: {exc}", entity=self.entity_path) from None
        sub = self._subscription()
        with self.broker.lock:
            if any(r.name.lower() == name.lower() for r in sub.rules):
                raise Conflict(f"The rule '{name}' already exists.", entity=self.entity_path)
            self.broker.put_rule(sub, rule)
        return OK, None

    def _remove_rule(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        name = str(_get(body, "rule-name"))
        try:
            self.broker.delete_rule(self._subscription(), name)
        except EntityNotFound:
            # Service Bus words it so; the JS SDK maps that wording to MessagingEntityNotFound.
            raise EntityNotFound(
                f"The messaging entity '{self.entity_path}/Rules/{name}' could not be found.",
                entity=self.entity_path,
            ) from None
        return OK, None

    def _enumerate_rules(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        skip = int(_get(body, "skip", 0))
        top = int(_get(body, "top", 100))
        with self.broker.lock:
            rules = [r.config for r in self._subscription().rules][skip : skip + top]
        if not rules:
            return NO_CONTENT, None
        now = self.broker.clock.now()  # rules keep no creation time: "now", on the broker's clock
        return OK, {"rules": [{"rule-description": rule_to_amqp(r, now)} for r in rules]}

    def _batch_delete(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        count = _get(body, "message-count")
        if isinstance(count, bool) or not isinstance(count, int):
            raise BadRequest("'message-count' must be an int.", entity=self.entity_path)
        raw_before = _get(body, "enqueued-time-utc", None)
        before = None
        if raw_before is not None:
            before = raw_before.timestamp() if hasattr(raw_before, "timestamp") else int(raw_before) / 1000.0
        session_id = _get(body, "session-id", None)
        deleted = self.broker.batch_delete(
            self.source(), int(count), before, None if session_id is None else str(session_id)
        )
        if not deleted:
            return NO_CONTENT, None
        return OK, {"message-count": int32(deleted)}

    def _cancel_scheduled(self, body: dict[Any, Any], owner: object) -> tuple[int, dict[str, Any] | None]:
        seqs = [int(s) for s in _values(_get(body, "sequence-numbers"))]
        self.broker.cancel_scheduled(self.entity_path, seqs)
        return OK, None


__all__ = ["ManagementHandler"]
