"""The batches of one resubmit (or discard): what its workers share (:class:`Run`), and each worker's
round: receive a batch, move it (copies sent and confirmed, then their originals completed, in one
request), again until the source is empty or the run stops (``api.py`` starts them and ends the run).
A worker receives its next batch while it moves one: two round trips a batch, not three.

A batch is the step an interrupt never cuts in two (``connections/interrupts.py``): once its
messages are in hand, it is moved whole (``uninterrupted``), or, when the run was stopped while its
receive was on the way, given back whole (released, no copy sent). So after a stop every message is
still in the source, or moved; in both places only when its original could not be completed after
its copy was confirmed (``duplicated``: the run's record names it, ``resubmit/progress.py``, and the next
run completes it without another copy).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...connections.interrupts import uninterrupted
from ...connections.live import LiveConnection
from ...connections.loop import stop_if_cancelled
from ...entities import EntityPath
from ...operations.batch import LockedBatch
from ...operations.copies import acopy_then_complete, copy_for
from ...operations.messages import message_id
from ...operations.receive import receive_batch
from ...outcome import Outcome, Report
from ...rates import TokenBucket
from ...sdk.failures import from_sdk
from .progress import identity
from .selection import Selection

log = logging.getLogger(__name__)

Record = dict[str, Any]

# A resubmit batch's cost at a round trip's latency: its move (the copies sent, then the originals
# completed), the next batch's receive riding beside it (``worker``). benchmarks/scale.py's in-flight
# limit: max_in_flight batches of batch_size per this many round trips.
ROUND_TRIPS_A_BATCH = 2


@dataclass
class Run:
    """What the workers of one resubmit share. Memory is bounded by what is in flight, the messages
    held back (not selected, or left by the edit) and the problems: nothing grows per moved message."""

    report: Report
    limit: int | None
    selection: Selection | None
    progress: Callable[[Report], None] | None
    claimed: int = 0  # messages asked for by receives in flight or done (the limit counts these)
    moved: int = 0
    stop: bool = False  # take no more messages: the source is done, a worker failed, or an interrupt
    # A batch was wholly past the selection's last message: take no more, but the batches other
    # workers hold already are moved (received earlier, they may hold selected messages).
    past_last: bool = False
    interrupted: bool = False
    workers: int = 0
    # Copied but not completed (lock lost): reported as duplicated at the end unless it comes back
    # in this run and is completed then. Only problems are kept here, never every message.
    copied: dict[int, Outcome] = field(default_factory=dict)
    # Originals whose copy is in the target (this run's duplicated ones, and those an earlier run
    # recorded): sequence number -> identity. Completed without another copy; what is left is recorded.
    in_target: dict[int, str] = field(default_factory=dict)
    held: list[tuple[LockedBatch, list[int]]] = field(default_factory=list)  # given back at the end
    # The wait of the latest receive that got nothing (it ended its worker); None: none did.
    empty_wait: float | None = None
    bucket: TokenBucket | None = None  # a rate: each batch in hand waits for its tokens
    braked: bool = False  # the brake stopped the run (brake.py): a batch waiting for its tokens goes back

    def want(self, batch_size: int) -> int:
        if self.limit is None:
            return batch_size
        return max(0, min(batch_size, self.limit - self.claimed))

    def tick(self) -> None:
        if self.progress is not None:
            self.progress(self.report)


@dataclass(frozen=True)
class Job:
    """What each worker of one run is asked: from where, to where (None: a discard), and how."""

    conn: LiveConnection
    src: EntityPath
    dst: EntityPath | None
    edit: Callable[[Record], Record | None] | None
    keep_message_id: bool
    batch_size: int
    max_workers: int


async def worker(job: Job, run: Run, start_worker: Callable[[bool], None], first: bool) -> None:
    """Receive a batch, send its copies, complete its originals; again until the source is empty
    or the run stops. Each batch is received while the one before it is being moved, so a batch
    costs the longer of the two (one round trip against two), not their sum: a worker holds two
    batches at most and moves one at a time. The first worker's first batch full means more is
    waiting: the others start."""
    mover = _Mover(job, run)
    # The links the worker will hold open beside its receive, opened while it receives: the first
    # worker's sender (its first move waited for it: a fifth of the time to the first batch moved);
    # a worker started after the first found more waiting, its second receiver too.
    ahead = asyncio.ensure_future(_links_ahead(job, first))
    try:
        await _rounds(job, run, mover, start_worker, first)
    finally:
        try:
            await mover.ended()  # the batch being moved, moved: a failure of its own is raised here
        finally:
            run.workers -= 1
            await asyncio.gather(ahead, return_exceptions=True)  # opened by now; or cancelled with the loop


async def _links_ahead(job: Job, first: bool) -> None:
    """The links a worker holds besides the one its first receive opens, opened at once and left
    idle in the connection's pools: a sender to the target and, but for the first worker (which
    does not know yet whether a second batch is there), a second receiver (its next batch is
    received while the first is held). Opening one takes several round trips, which the worker's
    second receive and first move each waited for. One that cannot be opened is the worker's own
    to report when it opens it (with retries); here it is logged."""
    kinds = [] if first else [("receiver", job.src)]
    kinds += [("sender", job.dst)] if job.dst is not None else []
    await asyncio.gather(*(_opened(job.conn, kind, path) for kind, path in kinds))


async def _opened(conn: LiveConnection, kind: str, path: EntityPath) -> None:
    try:
        async with conn.link(kind, path):
            pass  # borrowed (opened, or an idle one) and given back: the worker takes it from the pool
    except Exception as exc:
        log.info("opening a %s for %s ahead of a worker's batches failed: %s", kind, path, from_sdk(exc).message)


class _Mover:
    """The batch a worker moves (a task) while it receives the next one."""

    def __init__(self, job: Job, run: Run) -> None:
        self.job, self.run = job, run
        self._task: asyncio.Task[None] | None = None
        self._batch: LockedBatch | None = None

    def start(self, batch: LockedBatch) -> None:
        self._task, self._batch = asyncio.ensure_future(_moved_whole(self.job, self.run, batch)), batch

    async def ended(self) -> None:
        """The batch being moved, moved whole (none: returns at once). Its failure is raised; an
        interrupt of the caller meanwhile waits for it, then stops the caller (CancelledError)."""
        task, batch, self._task, self._batch = self._task, self._batch, None, None
        if task is None or batch is None:
            return
        try:
            _, cut = await uninterrupted(task)
        except asyncio.CancelledError:
            # Cancelled before its first step (the loop closing): the move never began, so no row of
            # the batch is settled or held back; it goes back whole. Begun, the move gave it back itself.
            if task.cancelled() and batch.unsettled and all(b is not batch for b, _ in self.run.held):
                await _back(self.run, batch)
            raise
        if cut:
            raise asyncio.CancelledError


async def _rounds(job: Job, run: Run, mover: _Mover, start_worker: Callable[[bool], None], first: bool) -> None:
    wait = 2.0 if first else 0.0  # the first messages may take a moment; later, what is there now (a drain)
    # (`first` stays true until this worker's first full batch has started the others)
    while not run.stop:
        stop_if_cancelled()
        if run.selection is not None and (run.selection.done() or run.past_last):
            return  # every selected message has been handled, or the source is past them: lock no others
        want = run.want(job.batch_size)
        if run.bucket is not None:
            want = min(want, run.bucket.burst)  # its tokens are taken once it is in hand (_paced)
        if want == 0:
            return
        run.claimed += want
        # Peek-lock, locks renewed while the batch is held, settled one request at a time.
        batch = await receive_batch(job.conn, job.src, count=want, wait=wait, max_in_flight=1)
        run.claimed -= want - len(batch.messages)
        batch_wait, wait = wait, 0.0
        if not batch.messages:
            run.empty_wait = batch_wait
            await batch.aclose()
            return
        try:
            await mover.ended()  # the batch before is moved before this one is
        except BaseException:
            await _back(run, batch)
            raise
        # Stopped while this receive was on its way (an interrupt, the brake, a failure elsewhere,
        # or every selected one handled), or a batch past the last selected message: it goes back
        # whole. Another worker's batch past the last does not send this one back: received
        # before that one was, it may hold selected messages (they would be left behind).
        if run.selection is not None and _past(run.selection, batch):
            run.past_last = True
        if run.stop or (run.selection is not None and (run.selection.done() or _past(run.selection, batch))):
            await _back(run, batch)
            return
        if not await _paced(run, batch):
            return
        if first and len(batch.messages) == want:
            first = False
            # A full first batch: more is waiting. The others start at once (each opens its
            # links, about half a second, all in parallel rather than one after the other).
            for _ in range(job.max_workers - run.workers):
                start_worker(False)
        mover.start(batch)


def _past(selection: Selection, batch: LockedBatch) -> bool:
    """Whether every message of ``batch`` lies past the last one the selection holds."""
    return min(seq_of(m) for m in batch.messages) > selection.last


async def _back(run: Run, batch: LockedBatch) -> None:
    """A batch in hand given back whole (released: no delivery counted), whatever cancels the caller."""
    run.claimed -= len(batch.messages)
    await uninterrupted(give_back(batch, batch.unsettled))


async def _paced(run: Run, batch: LockedBatch) -> bool:
    """With a rate: the batch waits for its tokens in hand (its locks renewed), so its copies go as
    they are taken, not a receive later. False: the run was interrupted meanwhile, and the batch went
    back whole (or the brake stopped it)."""
    if run.bucket is None:
        return True
    try:
        await run.bucket.take(len(batch.messages))
    except asyncio.CancelledError:  # the loop closing: the batch goes back
        await _back(run, batch)
        raise
    if run.interrupted or run.braked:
        await _back(run, batch)
        return False
    return True


async def _moved_whole(job: Job, run: Run, batch: LockedBatch) -> None:
    """One batch moved whole, whatever cancels the worker meanwhile (the loop closing: the worker
    ends after it). Rows held back stay locked until the run's end, so receives move past them."""
    try:
        stop_if_cancelled()  # cancelled (the loop closing) as the receive returned: the batch goes back
    except asyncio.CancelledError:
        await _back(run, batch)
        raise
    keep, cut = await uninterrupted(_step(job, run, batch))
    run.report.stats["batches"] += 1
    if keep:
        run.held.append((batch, keep))
    else:
        await batch.aclose()
    run.tick()
    if run.selection is not None and _past(run.selection, batch):
        run.past_last = True  # nothing more to find beyond it (the batches in hand are moved still)
    if cut:
        raise asyncio.CancelledError


async def _step(job: Job, run: Run, batch: LockedBatch) -> list[int]:
    try:
        return await move(job, run, batch)
    except BaseException:
        # Failed before any copy was confirmed (the target refused the first send, the connection
        # went): the locks go back without a delivery counted.
        await asyncio.shield(give_back(batch, batch.unsettled))
        raise


async def give_back(batch: LockedBatch, indexes: list[int]) -> None:
    try:
        await batch.release_async(indexes)
    finally:
        await batch.aclose()


def seq_of(msg: Any) -> int:
    return int(msg.sequence_number or 0)


def _in_target(run: Run, src: EntityPath, msg: Any) -> bool:
    """Whether this original's copy is in the target already (this run's, or an earlier run's)."""
    seq = seq_of(msg)
    return seq in run.in_target and run.in_target[seq] == identity(msg, str(src))


async def move(job: Job, run: Run, batch: LockedBatch) -> list[int]:
    """One batch: copies sent, then the originals completed. Returns the rows held back."""
    src, dst, report = job.src, job.dst, run.report
    keep: list[int] = []
    todo: list[int] = []  # completed without a copy: discarded, or copied before
    copies: list[tuple[int, Any]] = []
    for i, m in enumerate(batch.messages):
        seq = seq_of(m)
        if run.selection is not None and seq not in run.copied:
            if not run.selection.takes(src, m):
                keep.append(i)
                report.add(Outcome(message_id(m), seq, "skipped", "not selected"))
                continue
            run.selection.found += 1
        if dst is None or _in_target(run, src, m):
            todo.append(i)
            continue
        copy = copy_for(m, str(src), job.edit, job.keep_message_id)
        if copy is None:
            keep.append(i)  # the edit said: leave it where it is
            report.add(Outcome(message_id(m), seq, "skipped", "the edit returned None"))
            continue
        copies.append((i, copy))
    if dst is None:
        settled = await batch.settle_async("complete", todo)
    else:
        settled = await acopy_then_complete(batch, copies, dst, also_complete=todo)
    _count(job, run, batch, settled, keep)
    return keep


def _count(job: Job, run: Run, batch: LockedBatch, settled: Report, keep: list[int]) -> None:
    """Each row's outcome into the run's Report, and what the run keeps in mind of it."""
    report, dst = run.report, job.dst
    done = "resubmitted" if dst is not None else "discarded"
    for o in settled.every():
        seq = int(o.sequence_number or 0)
        if o.outcome == "completed":
            run.copied.pop(seq, None)
            run.in_target.pop(seq, None)
            report.add(Outcome(o.message_id, seq, done))
            run.moved += 1
        elif o.outcome == "duplicated":
            run.copied[seq] = replace(o, index=None)  # reported at the end unless completed later in this run
            if o.index is not None:
                run.in_target[seq] = identity(batch.messages[o.index], str(job.src))
        elif o.outcome == "lock_lost":  # no copy sent, nothing to give back: the original comes back
            report.add(replace(o, index=None))
        elif dst is not None and o.index is not None:  # the copy was not confirmed: the original stays
            keep.append(o.index)  # held back, not retried in this run
            report.add(replace(o, index=None))
        else:
            report.add(Outcome(o.message_id, seq, "failed", o.error))
    for n in settled.notes:
        report.note(n)
