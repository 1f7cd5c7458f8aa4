"""Receiving: a locked batch keeps its receiver, renews its locks while held, and settles.

Settlement after processing, never before: nothing here completes a message on its own.
Each settlement reports an outcome per message; a lost lock is one of those outcomes,
never a crash of the whole batch. Settlements are pipelined with at most
``max_in_flight`` outstanding.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .background import background
from .clients import receiver as open_receiver
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import InvalidInputError, SbError, from_sdk, tracking_id_of
from .records import to_dataframe, to_record

Mode = Literal["peek-lock", "receive-and-delete"]
Action = Literal["complete", "abandon", "dead_letter", "defer"]
DEFAULT_MAX_RENEWAL = 300.0
TOKENS_PER_REQUEST = 100  # lock tokens per update-disposition request


@dataclass(frozen=True)
class SettleOutcome:
    sequence_number: int
    action: str
    status: Literal["done", "lock_lost", "failed", "already_settled"]
    error: str | None = None
    tracking_id: str | None = None


class LockedBatch:
    """Messages received in peek-lock (or receive-and-delete), with their receiver.

    Use it as a context manager or call ``close()``: closing gives back every lock still held
    (the messages become available again and, as for any abandoned delivery, count an attempt).
    """

    def __init__(
        self,
        entity: str,
        mode: Mode,
        client: Any,
        receiver: Any,
        messages: list[Any],
        *,
        max_in_flight: int,
        auto_renew: bool,
        max_renewal: float,
        client_factory: Any = None,
    ) -> None:
        self.entity = entity
        self.mode = mode
        self.messages = messages
        self.max_in_flight = max_in_flight
        self.auto_renew = auto_renew
        self.max_renewal = max_renewal
        self._client = client
        self._receiver = receiver
        self._received_at = time.monotonic()
        self._settled: dict[int, SettleOutcome] = {}
        self._lost: set[int] = set()
        self._lapsing: set[int] = set()  # left to expire on purpose: not renewed
        self._client_factory = client_factory
        self._closed = False
        left = [x for x in self.seconds_left() if x is not None]
        self._lock_duration = max(left) if left else 0.0
        self._renewer = background.spawn(self._renew_loop()) if mode == "peek-lock" and messages else None

    # --------------------------------------------------------------- views

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        open_ = len(self.unsettled)
        state = "closed" if self._closed else f"{open_} unsettled"
        return f"<LockedBatch {self.entity}: {len(self.messages)} messages ({self.mode}), {state}>"

    def _repr_html_(self) -> str:
        columns = ["sequence_number", "settlement", "seconds_left", "delivery_count", "message_id", "subject"]
        table = self.to_pandas()[[*columns, "body_text"]].to_html(max_rows=50, notebook=True)
        return f"<p>{html.escape(repr(self))}</p>{table}"

    @property
    def unsettled(self) -> list[int]:
        return [i for i in range(len(self.messages)) if i not in self._settled and i not in self._lost]

    def seconds_left(self) -> list[float | None]:
        """Seconds each lock has left (None once settled, lost, or in receive-and-delete mode)."""
        now = dt.datetime.now(dt.UTC)
        out: list[float | None] = []
        for i, m in enumerate(self.messages):
            if self.mode != "peek-lock" or i in self._settled or i in self._lost:
                out.append(None)
                continue
            out.append(max(0.0, (m.locked_until_utc - now).total_seconds()))
        return out

    @property
    def records(self) -> list[dict[str, Any]]:
        recs = []
        for i, m in enumerate(self.messages):
            rec = to_record(m, self.entity)
            rec["settlement"] = self._status(i)
            recs.append(rec)
        return recs

    def _status(self, i: int) -> str:
        if i in self._settled:
            o = self._settled[i]
            return o.action if o.status == "done" else o.status
        if i in self._lost:
            return "lock_lost"
        return "locked" if self.mode == "peek-lock" else "received"

    def to_pandas(self) -> Any:
        frame = to_dataframe(self.records)
        frame["settlement"] = [self._status(i) for i in range(len(self.messages))]
        frame["seconds_left"] = self.seconds_left()
        return frame

    # ---------------------------------------------------------- settlement

    def complete(self, which: Any = None) -> list[SettleOutcome]:
        """Complete (the work is done: remove the messages)."""
        return self._settle("complete", which)

    def abandon(self, which: Any = None, *, properties: dict[str, Any] | None = None) -> list[SettleOutcome]:
        """Give the messages back now; their delivery count rises (MaxDeliveryCount -> DLQ)."""
        return self._settle("abandon", which, properties=properties)

    def dead_letter(
        self, which: Any = None, *, reason: str | None = None, description: str | None = None
    ) -> list[SettleOutcome]:
        return self._settle("dead_letter", which, reason=reason, description=description)

    def defer(self, which: Any = None) -> list[SettleOutcome]:
        """Set aside; fetch again with ``receive_deferred(entity, sequence_numbers)``."""
        return self._settle("defer", which)

    def renew(self) -> list[SettleOutcome]:
        """Renew every unsettled lock now (auto-renewal does this on its own)."""
        return background.run(self._renew_all())

    def _indexes(self, which: Any) -> list[int]:
        if which is None:
            return self.unsettled
        if isinstance(which, int):
            which = [which]
        if hasattr(which, "tolist"):  # a pandas index or numpy array of row positions
            which = which.tolist()
        indexes = list(which)
        for i in indexes:
            if not isinstance(i, int) or not 0 <= i < len(self.messages):
                raise InvalidInputError(f"{i!r} is not a row of this batch (0..{len(self.messages) - 1}).")
        return indexes

    def _settle(self, action: Action, which: Any, **kwargs: Any) -> list[SettleOutcome]:
        if self.mode != "peek-lock":
            raise InvalidInputError("Messages received in receive-and-delete mode are already removed.")
        if self._closed:
            raise InvalidInputError("This batch is closed: its locks were given back.")
        return background.run(self._settle_many(action, self._indexes(which), kwargs))

    async def _settle_many(self, action: Action, indexes: Sequence[int], kwargs: dict[str, Any]) -> list[SettleOutcome]:
        slots = asyncio.Semaphore(self.max_in_flight)
        already = {i for i in indexes if i in self._settled}
        fresh = [i for i in indexes if i not in already and i not in self._lost]
        if len(fresh) > 1 and not (action == "abandon" and kwargs.get("properties")):
            chunks = [fresh[k : k + TOKENS_PER_REQUEST] for k in range(0, len(fresh), TOKENS_PER_REQUEST)]
            await asyncio.gather(*(self._settle_chunk(action, chunk, kwargs, slots) for chunk in chunks))

        async def one(i: int) -> SettleOutcome:
            msg = self.messages[i]
            seq = int(msg.sequence_number or 0)
            if i in already:
                return SettleOutcome(seq, action, "already_settled")
            if i in self._settled:
                return self._settled[i]  # settled just now by a batch request
            if i in self._lost:
                return SettleOutcome(seq, action, "lock_lost", "the lock was lost before settlement")
            async with slots:
                outcome = await self._settle_one(action, msg, kwargs)
            if outcome.status == "done":
                self._settled[i] = outcome
            elif outcome.status == "lock_lost":
                self._lost.add(i)
            return outcome

        return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def _settle_chunk(
        self, action: Action, chunk: list[int], kwargs: dict[str, Any], slots: asyncio.Semaphore
    ) -> None:
        """Settle many locks in one management request (update-disposition). If it fails, nothing
        was settled and the messages take the per-message path, which reports each outcome."""
        from azure.servicebus._common.constants import MESSAGE_MGMT_SETTLEMENT_TERM_MAP

        op = {"complete": "complete", "abandon": "abandon", "dead_letter": "dead-letter", "defer": "defer"}
        details = None
        if action == "dead_letter":
            details = {
                "deadletter-reason": kwargs.get("reason") or "",
                "deadletter-description": kwargs.get("description") or "",
            }
        msgs = [self.messages[i] for i in chunk]
        async with slots:
            try:
                await self._receiver._settle_message_via_mgmt_link(
                    MESSAGE_MGMT_SETTLEMENT_TERM_MAP[op[action]],
                    [m.lock_token for m in msgs],
                    dead_letter_details=details,
                )
            except Exception:
                return
        for i, m in zip(chunk, msgs, strict=True):
            m._settled = True
            self._settled[i] = SettleOutcome(int(m.sequence_number or 0), action, "done")

    async def _settle_one(self, action: Action, msg: Any, kwargs: dict[str, Any]) -> SettleOutcome:
        from azure.servicebus.exceptions import MessageLockLostError, SessionLockLostError

        seq = int(msg.sequence_number or 0)
        r = self._receiver
        try:
            if action == "complete":
                await r.complete_message(msg)
            elif action == "abandon":
                props = kwargs.get("properties")
                if props:
                    await _abandon_with_properties(r, msg, props)
                else:
                    await r.abandon_message(msg)
            elif action == "dead_letter":
                await r.dead_letter_message(
                    msg, reason=kwargs.get("reason"), error_description=kwargs.get("description")
                )
            else:
                await r.defer_message(msg)
        except (MessageLockLostError, SessionLockLostError) as exc:
            return SettleOutcome(seq, action, "lock_lost", from_sdk(exc).message, tracking_id_of(exc))
        except Exception as exc:
            return SettleOutcome(seq, action, "failed", from_sdk(exc, entity=self.entity).message, tracking_id_of(exc))
        return SettleOutcome(seq, action, "done")

    # ------------------------------------------------------------- renewal

    async def _renew_all(self) -> list[SettleOutcome]:
        from azure.servicebus.exceptions import MessageLockLostError

        slots = asyncio.Semaphore(self.max_in_flight)

        async def one(i: int) -> SettleOutcome:
            msg = self.messages[i]
            seq = int(msg.sequence_number or 0)
            async with slots:
                try:
                    await self._receiver.renew_message_lock(msg)
                except MessageLockLostError as exc:
                    self._lost.add(i)
                    return SettleOutcome(seq, "renew", "lock_lost", from_sdk(exc).message, tracking_id_of(exc))
                except Exception as exc:
                    return SettleOutcome(seq, "renew", "failed", from_sdk(exc).message, tracking_id_of(exc))
            return SettleOutcome(seq, "renew", "done")

        return list(await asyncio.gather(*(one(i) for i in self.unsettled if i not in self._lapsing)))

    async def _renew_loop(self) -> None:
        """Renew locks at half their remaining time while someone holds the batch, up to max_renewal."""
        while not self._closed:
            await asyncio.sleep(0.25)
            if not self.auto_renew or time.monotonic() - self._received_at > self.max_renewal:
                continue
            left = [s for i, s in enumerate(self.seconds_left()) if s is not None and i not in self._lapsing]
            if not left:
                continue
            if min(left) < max(0.2, self._lock_duration / 2):
                await self._renew_all()

    # --------------------------------------------------------------- close

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        background.run(self._close())

    async def _close(self) -> None:
        try:
            await self._receiver.close()
        finally:
            await self._client.close()

    def __enter__(self) -> LockedBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                background.spawn(self._close())
                self._closed = True
            except Exception:
                pass


async def _abandon_with_properties(receiver: Any, msg: Any, properties: dict[str, Any]) -> None:
    """Abandon with properties to modify: the wire form Service Bus defines (modified + annotations).
    The Python SDK has no public parameter for it."""
    handler = receiver._handler
    await handler.settle_messages_async(
        msg._delivery_id,
        msg._delivery_tag,
        "modified",
        delivery_failed=True,
        undeliverable_here=False,
        message_annotations=dict(properties),
        await_outcome=True,
    )
    msg._settled = True


# ------------------------------------------------------------------- API


def _check(count: int, wait: float, max_in_flight: int) -> None:
    if not isinstance(count, int) or count < 1:
        raise InvalidInputError(f"count must be a positive whole number, not {count!r}.")
    if wait < 0:
        raise InvalidInputError("wait must be 0 seconds or more.")
    if not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise InvalidInputError(f"max_in_flight must be a positive whole number, not {max_in_flight!r}.")


async def _open_batch(
    conn: Connection,
    path: EntityPath,
    mode: Mode,
    fetch: Any,
    *,
    max_in_flight: int,
    auto_renew: bool,
    max_renewal: float,
    session_id: str | None,
    client_options: dict[str, Any] | None = None,
) -> LockedBatch:
    from azure.servicebus import ServiceBusReceiveMode

    receive_mode = ServiceBusReceiveMode.PEEK_LOCK if mode == "peek-lock" else ServiceBusReceiveMode.RECEIVE_AND_DELETE
    client = conn.async_client(**(client_options or {}))
    kwargs: dict[str, Any] = {"receive_mode": receive_mode}
    if session_id is not None:
        kwargs["session_id"] = session_id
    rcv = open_receiver(client, path, **kwargs)
    try:
        await rcv.__aenter__()
        messages = await fetch(rcv)
    except Exception as exc:
        await rcv.close()
        await client.close()
        if isinstance(exc, SbError):
            raise
        raise from_sdk(exc, entity=str(path)) from None
    return LockedBatch(
        str(path),
        mode,
        client,
        rcv,
        list(messages),
        max_in_flight=max_in_flight,
        auto_renew=auto_renew,
        max_renewal=max_renewal,
        client_factory=conn.async_client,
    )


def receive(
    entity: str | EntityPath,
    *,
    count: int = 10,
    mode: Mode = "peek-lock",
    wait: float = 5.0,
    max_in_flight: int = 10,
    auto_renew: bool = True,
    max_renewal: float = DEFAULT_MAX_RENEWAL,
    session_id: str | None = None,
    connection: str | Connection | None = None,
) -> LockedBatch:
    """Receive up to ``count`` messages, waiting at most ``wait`` seconds for the first.

    ``mode="receive-and-delete"`` removes them from Service Bus as they are delivered:
    if this process dies before the work is done, they are gone (at-most-once).
    """
    path = EntityPath.parse(entity)
    if mode not in ("peek-lock", "receive-and-delete"):
        raise InvalidInputError(f"mode must be 'peek-lock' or 'receive-and-delete', not {mode!r}.")
    _check(count, wait, max_in_flight)
    conn = resolve(connection)

    async def fetch(rcv: Any) -> list[Any]:
        out: list[Any] = []
        deadline = time.monotonic() + wait
        while len(out) < count:
            # Wait up to `wait` for the first messages; after that take only what is there now,
            # so that no lock ticks away before the batch (and its renewal) exists.
            left = max(deadline - time.monotonic(), 0.5) if not out else 0.2
            got = await rcv.receive_messages(max_message_count=count - len(out), max_wait_time=left)
            if not got:
                break
            out.extend(got)
        return out

    return background.run(
        _open_batch(
            conn,
            path,
            mode,
            fetch,
            max_in_flight=max_in_flight,
            auto_renew=auto_renew,
            max_renewal=max_renewal,
            session_id=session_id,
        )
    )


def receive_deferred(
    entity: str | EntityPath,
    sequence_numbers: Iterable[int],
    *,
    max_in_flight: int = 10,
    auto_renew: bool = True,
    max_renewal: float = DEFAULT_MAX_RENEWAL,
    connection: str | Connection | None = None,
    retries: int | None = None,
) -> LockedBatch:
    """Fetch deferred messages by sequence number, locked, for settlement.

    A number that is not (or no longer) deferred fails the whole request with EntityNotFound-like
    MessageNotFoundError, which the SDK retries like any error (about 11 s with its defaults):
    ``retries=0`` fails fast when the caller expects some numbers to be gone."""
    path = EntityPath.parse(entity)
    seqs = list(sequence_numbers)
    if not seqs or not all(isinstance(s, int) and s > 0 for s in seqs):
        raise InvalidInputError("Give one or more sequence numbers (positive whole numbers).")
    conn = resolve(connection)

    async def fetch(rcv: Any) -> list[Any]:
        return list(await rcv.receive_deferred_messages(seqs))

    return background.run(
        _open_batch(
            conn,
            path,
            "peek-lock",
            fetch,
            max_in_flight=max_in_flight,
            auto_renew=auto_renew,
            max_renewal=max_renewal,
            session_id=None,
            client_options={"retry_total": retries} if retries is not None else None,
        )
    )
