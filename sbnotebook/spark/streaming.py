"""`spark.readStream.format("servicebus")`: a micro-batch source that settles after commit.

How a micro-batch moves through Service Bus (docs/spark.md, "Structured Streaming"):

1. ``latestOffset`` (driver): first complete the messages of the batch that ends at ``start``:
   Spark calls it only after that batch has committed. Then receive up to the trigger's limit in
   peek-lock and hold them, locks renewed; the new offset lists their sequence numbers.
2. Spark writes that offset to its checkpoint, then calls ``partitions`` (driver): now the
   messages are recorded, so they are **deferred**. A driver that dies before this point held
   only locks: they lapse and the messages come back, nothing is stranded in deferral.
3. ``read`` (executors): fetch the deferred messages by sequence number and abandon at once: the
   message stays deferred, and each read counts one delivery attempt, so a batch that keeps
   failing takes its messages to the dead-letter queue by the entity's max delivery count.
4. ``commit``: complete them too (idempotent: what ``latestOffset`` completed is skipped).

A query stopped or killed before its batch committed restarts from its checkpoint and reads the
same deferred messages again: at-least-once, nothing lost, no lock that could expire mid-batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:  # admission control and Trigger.AvailableNow for Python sources: pyspark 4.1+
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

    ADMISSION_CONTROL = True
except ImportError:  # pyspark 4.0, and every Databricks LTS runtime today
    ADMISSION_CONTROL = False
    ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Absent before pyspark 4.1: Spark wraps the source and asks ``latestOffset()`` once."""


from ..core import (
    NEXT_AVAILABLE_SESSION,
    LockedBatch,
    Report,
    SbError,
    is_no_session_available,
    live_connection,
    receive,
    receive_deferred,
    redact,
    requires_sessions,
    scan_records,
    snapshot,
)
from .deferred import CHUNK, fetch, settle_chunk, still_deferred
from .options import OptionError
from .reading import traced
from .schema import arrow_schema, to_arrow
from .spec import ALL_SESSIONS, StreamOptions

log = logging.getLogger("sbnotebook.spark.streaming")

ALL_AVAILABLE_CAP = 10_000  # what one trigger takes when Spark asks for "all available"
AVAILABLE_NOW_RETRIES = 5  # empty receives tolerated while messages below the AvailableNow bound remain
Runs = list[list[int]]  # [[first, last], ...]: a batch's sequence numbers, compactly


Groups = dict[str | None, list[int]]  # session id (None: no sessions) -> sequence numbers


# ------------------------------------------------------------------ offsets


def to_runs(seqs: list[int]) -> Runs:
    """Sorted sequence numbers as [first, last] runs: a queue's batch is mostly one run."""
    runs: Runs = []
    for s in sorted(set(seqs)):
        if runs and runs[-1][1] == s - 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    return runs


def from_runs(runs: Runs) -> list[int]:
    return [s for first, last in runs for s in range(first, last + 1)]


def make_offset(batch: int, groups: Groups) -> dict[str, Any]:
    """{"batch": n, "runs": [...]} or, on a session-enabled entity, {"batch": n, "sessions": {id: runs}}."""
    if set(groups) <= {None}:
        return {"batch": batch, "runs": to_runs(groups.get(None, []))}
    return {
        "batch": batch,
        "sessions": {str(k): to_runs(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))},
    }


def groups_of(offset: dict[str, Any]) -> Groups:
    if "sessions" in offset:
        return {k: from_runs(v) for k, v in offset["sessions"].items()}
    seqs = from_runs(offset.get("runs", []))
    return {None: seqs} if seqs else {}


@dataclass(frozen=True)
class SequenceChunk:
    """One read task: deferred messages to fetch by sequence number (of one session, if any)."""

    index: int
    seqs: list[int]
    session_id: str | None = None


def chunks(groups: Groups, partitions: int) -> list[SequenceChunk]:
    """Without sessions: `partitions` even slices. With sessions: one task per session (a session
    is fetched through its session lock, which one receiver holds at a time)."""
    out: list[SequenceChunk] = []
    for session_id, seqs in groups.items():
        if not seqs:
            continue
        n = 1 if session_id is not None else max(1, min(partitions, len(seqs)))
        size = -(-len(seqs) // n)
        out += [
            SequenceChunk(len(out) + i, seqs[k : k + size], session_id) for i, k in enumerate(range(0, len(seqs), size))
        ]
    return out


# ------------------------------------------------------------------ the reader


class ServiceBusStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One instance lives in a Python process on the driver for the whole query (Spark's streaming
    source runner), so it can hold the received batches between ``latestOffset`` and ``partitions``.
    ``read`` runs on executors from a pickled copy and uses none of that state."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._last: dict[str, Any] | None = None  # pyspark 4.0: the end of the last batch (no `start` given)
        self._pending: tuple[dict[str, Any], list[LockedBatch]] | None = None  # received, not yet planned
        self._completed_batches: set[int] = set()  # batch numbers completed by this process
        self._retry: Groups = {}  # sequence numbers whose completion failed, retried at the next trigger
        self._target: int | None = None  # Trigger.AvailableNow: the last sequence number to take

    def __getstate__(self) -> dict[str, Any]:  # executors get the options only
        return {
            "options": self.options,
            "_last": None,
            "_pending": None,
            "_completed_batches": set(),
            "_retry": {},
            "_target": None,
        }

    # -------------------------------------------------------- driver side

    def initialOffset(self) -> dict[str, Any]:
        return make_offset(0, {})

    def getDefaultReadLimit(self) -> Any:  # pyspark 4.1+ only
        return ReadMaxRows(self.options.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Take what is there now: up to the highest sequence number present at this moment."""
        o = self.options
        if o.session is not None:
            # Peeking a session-enabled entity needs each session's lock: no snapshot bound here.
            log.info("servicebus stream %s: available now = until no session has messages", o.entity)
            return
        try:
            conn = o.conn()
            found = snapshot(conn, o.entity, 1)
        except SbError as exc:
            raise _cannot_read(o, exc) from None
        self._target = found[1] if found else 0
        log.info("servicebus stream %s: available now up to sequence number %d", o.entity, self._target)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """pyspark 4.1+ passes the batch's start and the read limit (admission control); 4.0 calls
        ``latestOffset()`` with neither (no admission control): then the start is the end this
        reader saw last and the limit is maxMessagesPerTrigger, which this source applies itself."""
        if start is None:
            _say_no_admission_control()
            start = self._last or self.initialOffset()
            wanted = self.options.max_per_trigger
        else:
            # ReadAllAvailable (or any other limit): everything there is, up to a cap per trigger.
            wanted = limit.max_rows if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) else ALL_AVAILABLE_CAP
        self._settle(start)  # Spark asks for the next batch only after the one ending at `start` committed
        self._release_unplanned()
        if self._target == 0:
            return start
        batches = self._receive(wanted)
        if not batches and self._target is not None:
            batches = self._receive_until_target(wanted)
        if not batches:
            return start
        groups: Groups = {}
        for b in batches:
            for i in b.unsettled:
                groups.setdefault(self._session_of(b.messages[i]), []).append(int(b.messages[i].sequence_number))
        end = make_offset(int(start.get("batch", 0)) + 1, groups)
        self._pending = (end, batches)
        self._last = end
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        self._last = end  # a batch replanned from the checkpoint after a restart
        groups = groups_of(end)
        if self._pending is not None and self._pending[0] == end:
            groups = self._defer_pending()
        return [InputPartition(c) for c in chunks(groups, self.options.num_partitions)]

    def commit(self, end: dict[str, Any]) -> None:
        self._last = end
        self._settle(end)

    def stop(self) -> None:
        self._release_unplanned()

    def _session_of(self, message: Any) -> str | None:
        return str(message.session_id) if self.options.session is not None else None

    def _receive(self, wanted: int) -> list[LockedBatch]:
        """Up to `wanted` messages in peek-lock, held (and renewed) until `partitions` defers them.
        With sessionIds=*, one session after another (each stays locked) until `wanted` or none is left."""
        o = self.options
        out: list[LockedBatch] = []
        while wanted > 0:
            batch = self._receive_one(wanted)
            if batch is None:
                break
            out.append(batch)
            wanted -= len(batch.unsettled)
            if o.session != ALL_SESSIONS:
                break
        return out

    def _receive_until_target(self, wanted: int) -> list[LockedBatch]:
        """Trigger.AvailableNow ends the query at the first empty batch, so an empty receive is not
        taken for "nothing left" while a peek still shows active messages up to the snapshot's bound
        (a receive on a starved machine can come back empty before the first transfer arrives)."""
        o = self.options
        assert self._target is not None
        for attempt in range(1, AVAILABLE_NOW_RETRIES + 1):
            left = scan_records(
                o.entity,
                from_sequence_number=1,
                before_sequence_number=self._target + 1,
                max_messages=1,
                states=("active",),
                connection=o.conn(),
            )
            if not left:
                return []
            log.info(
                "servicebus stream %s: empty receive with messages up to %d still active; again (%d of %d)",
                o.entity,
                self._target,
                attempt,
                AVAILABLE_NOW_RETRIES,
            )
            batches = self._receive(wanted)
            if batches:
                return batches
        log.warning(
            "servicebus stream %s: stopping with active messages up to sequence number %d left "
            "(held by another receiver?); the next run takes them",
            o.entity,
            self._target,
        )
        return []

    def _receive_one(self, wanted: int) -> LockedBatch | None:
        o = self.options
        session: Any = NEXT_AVAILABLE_SESSION if o.session == ALL_SESSIONS else o.session
        try:
            batch = receive(
                o.entity,
                max_messages=wanted,
                wait_seconds=o.wait_seconds,
                max_in_flight=o.max_in_flight,
                session_id=session,
                connection=o.conn(),
            )
        except SbError as exc:
            if o.session == ALL_SESSIONS and is_no_session_available(exc):
                return None  # every session with messages is held (or there is none): the trigger is full
            raise _cannot_read(o, exc) from None
        if self._target is not None:
            beyond = [i for i, m in enumerate(batch.messages) if int(m.sequence_number) > self._target]
            if beyond:  # arrived after the AvailableNow snapshot: give back without counting a delivery
                batch.connection.run(batch.release_async(beyond))
        if not batch.unsettled:
            batch.close()
            return None
        return batch

    def _defer_pending(self) -> Groups:
        """The offset is in the checkpoint now: defer, and keep what was deferred. Closing a session
        batch lets its session go, so that the executors can take it."""
        assert self._pending is not None
        end, batches = self._pending
        self._pending = None
        groups: Groups = {}
        for batch in batches:
            with batch:
                held = batch.unsettled
                report = batch.defer(held)
                for i in held:
                    if batch.status(i) == "deferred":
                        m = batch.messages[i]
                        groups.setdefault(self._session_of(m), []).append(int(m.sequence_number))
            if report.failed:
                log.warning(
                    "servicebus stream %s batch %s: %d messages could not be deferred (%s); they return "
                    "to the entity and come in a later batch",
                    self.options.entity,
                    end.get("batch"),
                    report.failed,
                    report,
                )
        return groups

    def _release_unplanned(self) -> None:
        """Received batches whose offset Spark never planned (query stopped in between): give the
        locks back without counting a delivery."""
        if self._pending is None:
            return
        _, batches = self._pending
        self._pending = None
        for batch in batches:
            batch.connection.run(batch.release_async(batch.unsettled))
            batch.close()

    def _settle(self, end: dict[str, Any]) -> Report:
        """Complete the deferred messages of a committed batch (those still deferred), and retry
        earlier completions that failed (a transient error must not strand a message in deferral)."""
        number = int(end.get("batch", 0))
        groups: Groups = {} if number in self._completed_batches else groups_of(end)
        for session_id, seqs in self._retry.items():
            groups[session_id] = sorted(set(groups.get(session_id, [])) | set(seqs))
        report = Report("complete", str(self.options.entity))
        if not any(groups.values()):
            return report
        conn = live_connection(self.options.conn())
        retry: Groups = {}
        for session_id, seqs in groups.items():
            for k in range(0, len(seqs), CHUNK):
                part = settle_chunk(str(self.options.entity), seqs[k : k + CHUNK], "complete", conn, {}, session_id)
                report.merge(part)
                failed = [int(o.sequence_number or 0) for o in part.failures if o.outcome in ("failed", "lock_lost")]
                if failed:
                    retry.setdefault(session_id, []).extend(failed)
        self._completed_batches.add(number)
        self._retry = retry
        # not_found: already completed (by commit() before a restart) or dead-lettered meanwhile.
        log.info("servicebus stream %s batch %d committed: %s", self.options.entity, number, report)
        if retry:
            log.warning(
                "servicebus stream %s batch %d: %d completions failed; retried at the next trigger (%s)",
                self.options.entity,
                number,
                sum(len(v) for v in retry.values()),
                report,
            )
        return report

    # -------------------------------------------------------- executor side

    def read(self, partition: InputPartition) -> Iterator[Any]:
        chunk: SequenceChunk = partition.value
        yield from traced("stream", self.options, read_deferred(self.options, chunk.seqs, chunk.session_id))


_said = False


def _say_no_admission_control() -> None:
    """Once per process: what pyspark 4.0 (no streaming admission control) changes for the user."""
    global _said
    if _said:
        return
    _said = True
    import pyspark

    log.warning(
        "servicebus stream: pyspark %s has no admission control for Python sources (4.1+): each trigger "
        "still takes up to maxMessagesPerTrigger, but Trigger.AvailableNow takes one micro-batch of at most "
        "maxMessagesPerTrigger messages and stops (on 4.1+ it takes everything present, batch after batch)",
        pyspark.__version__,
    )


def _fetch_present(entity_name: str, wanted: list[int], conn: Any, session_id: str | None) -> Any:
    """One request for the deferred messages; if one is missing (a request is all or nothing), find
    the present ones by peeking (no lock, nothing counted) and fetch those."""
    try:
        return receive_deferred(entity_name, wanted, session_id=session_id, connection=conn)
    except SbError:
        present = still_deferred(entity_name, wanted, conn, session_id)
    # Dead-lettered (max delivery count) or settled elsewhere since the batch was planned.
    log.info("servicebus stream %s: %d deferred messages no longer there", entity_name, len(wanted) - len(present))
    return fetch(entity_name, present, conn, session_id)[0] if present else None


def _cannot_read(o: StreamOptions, exc: SbError) -> OptionError:
    text = redact(str(exc)).splitlines()[0]
    hint = " Set the sessionIds option (a session id, or * for all sessions)." if requires_sessions(exc) else ""
    return OptionError(f"servicebus: cannot read {o.entity}: {text}{hint}")


def read_deferred(o: StreamOptions, seqs: list[int], session_id: str | None = None) -> Iterator[Any]:
    """Fetch deferred messages by sequence number, abandon at once (they stay deferred; the
    delivery count rises by one per read), and yield them as Arrow batches."""
    conn = live_connection(o.conn())
    schema = arrow_schema()
    entity_name = str(o.entity)
    for k in range(0, len(seqs), CHUNK):
        batch = _fetch_present(entity_name, seqs[k : k + CHUNK], conn, session_id)
        if batch is None:
            continue
        with batch:
            records = batch.records
            batch.abandon()
        for record in records:
            record.update(state="deferred", lock_token=None, locked_until=None)
        yield to_arrow(records, schema)
