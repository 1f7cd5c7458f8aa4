"""What the kit's envelope reserve costs, and what batches filled to the SDK's limit would gain
(issue 63, point 6), as ratios measured in one run.

The kit packs a batch with ``add_to_batch``, which reserves with the first message the bytes the
batch's envelope gains when that message's ids are copied into it (``envelope_growth``: 56 for a
GUID id), as the .NET SDK does; the SDK's ``ServiceBusMessageBatch`` does not, so a batch it fills
to its limit can transfer more than the link allows, and Service Bus (and the emulator) refuse it
(docs/emulator.md, "A batch's size"). Sends also close a batch at ``pipeline.MAX_BATCH_MESSAGES``
(500) messages, whatever its bytes. Compared, in the same run:

  packing (no broker): messages per batch for bodies of about 20, 1,000 and 4,000 letters (each
    length drawn from half to one and a half times it, seeded), packed as the kit packs them with
    no count cap, the reserve on (the kit) and off (the SDK's limit, ``--before``), and how many of
    the latter's batches transfer over the limit
  sends: ``core.send`` of ``--messages`` (10^4) messages of 20 letters at each ``--latency-ms`` (0
    and 80; the emulator in its own process), the modes alternated, ``--rounds`` times (best, median):
      kit        : the reserve, batches of at most 500 messages (as the kit sends)
      sdk-limit  : no reserve (the SDK's limit), batches of at most 500
      no-cap     : the reserve, batches closed at 4,500 messages (Service Bus's count) instead of
                   500: the bytes bind, as far as the SDK's batch admits
    every send's report checked: every message sent, none failed

    python benchmarks/batch_fill.py [--messages 10000] [--latency-ms 0 80] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Iterator

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import BatchMessage
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.exceptions import MessageSizeExceededError

from sbnotebook import core
from sbnotebook.core.operations import pipeline
from sbnotebook.core.sdk import messages as sdk_messages

QUEUE = "results"  # a queue of the emulator's default topology
LIMIT = 256 * 1024  # its link's max-message-size (Standard tier)
SERVICE_COUNT = 4500  # the most messages Service Bus takes in one batch (docs/emulator.md)
LENGTHS = (20, 1000, 4000)
MODES = {"kit": (True, None), "sdk-limit": (False, None), "no-cap": (True, SERVICE_COUNT)}


@contextlib.contextmanager
def packing(*, reserve: bool, cap: int | None = None) -> Iterator[None]:
    """The kit's packing with its reserve off (``envelope_growth`` counting 0 bytes: the SDK's own
    count) and its count cap changed, for the duration."""
    saved = sdk_messages.envelope_growth, pipeline.MAX_BATCH_MESSAGES
    if not reserve:
        sdk_messages.envelope_growth = lambda batch, first: 0
    if cap is not None:
        pipeline.MAX_BATCH_MESSAGES = cap
    try:
        yield
    finally:
        sdk_messages.envelope_growth, pipeline.MAX_BATCH_MESSAGES = saved


def transfer_size(batch: ServiceBusMessageBatch) -> int:
    out = bytearray()
    encode_payload(out, BatchMessage(*batch._message))
    return len(out)


def pack(lengths: list[int], *, reserve: bool) -> tuple[list[int], int]:
    """Messages of these body lengths packed into batches as the kit packs them (``add_to_batch``),
    no count cap: (messages per batch, batches transferring over LIMIT)."""
    counts, over = [], 0
    batch = None
    with packing(reserve=reserve):
        for length in lengths:
            msg = ServiceBusMessage("x" * length)
            for _ in range(2):
                if batch is None:
                    batch = ServiceBusMessageBatch(max_size_in_bytes=LIMIT, amqp_transport=PyamqpTransport)
                try:
                    sdk_messages.add_to_batch(batch, msg, tracing=False)
                    break
                except MessageSizeExceededError:
                    counts.append(len(batch))
                    over += transfer_size(batch) > LIMIT
                    batch = None
    return counts, over  # the last, partly filled batch left out


def packing_table(seed: int) -> list[str]:
    rows = []
    for mean in LENGTHS:
        rng = random.Random(seed + mean)
        n = 60 * LIMIT // (mean + 66)  # about 60 full batches (a message costs ~66 bytes more)
        lengths = [rng.randint(mean // 2, mean * 3 // 2) for _ in range(n)]
        kit, kit_over = pack(lengths, reserve=True)
        sdk, sdk_over = pack(lengths, reserve=False)
        k, s = sum(kit) / len(kit), sum(sdk) / len(sdk)
        rows.append(
            f"  ~{mean:>5} letters: kit {k:8.1f} msg/batch ({kit_over} of {len(kit)} over the limit), "
            f"SDK's limit {s:8.1f} ({sdk_over} of {len(sdk)} over: refused) -> {s / k:.4f}x"
        )
    return rows


def timed_send(n: int, conn: str, mode: str) -> float:
    reserve, cap = MODES[mode]
    with packing(reserve=reserve, cap=cap):
        started = time.perf_counter()
        report = core.send(QUEUE, ("x" * 20 for _ in range(n)), connection=conn)
        took = time.perf_counter() - started
    assert report.count("sent") == n and report.ok, (mode, report)
    return took


def sends(n: int, latency_ms: float, rounds: int) -> dict[str, list[float]]:
    """Each mode's times, the modes alternated (forwards, then backwards) round after round."""
    proc, conn = start_emulator(latency_ms)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        core.send(QUEUE, ["warm-up"], connection=conn).raise_for_failures()
        for r in range(rounds):
            for mode in list(MODES) if r % 2 == 0 else list(reversed(MODES)):
                times[mode].append(timed_send(n, conn, mode))
                core.purge(QUEUE, connection=conn)
    finally:
        core.close_all()
        proc.terminate()
        proc.wait(10)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 80.0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=63)
    args = parser.parse_args(argv)
    print("packing, no count cap (messages per full batch, mean):")
    for row in packing_table(args.seed):
        print(row)
    fit = pack([20] * 2 * SERVICE_COUNT, reserve=True)[0][0]  # what 256 KB holds of 20-letter messages
    per_batch = {mode: min(cap or pipeline.MAX_BATCH_MESSAGES, fit) for mode, (_, cap) in MODES.items()}
    for latency in args.latency_ms:
        times = sends(args.messages, latency, args.rounds)
        kit = min(times["kit"]), statistics.median(times["kit"])
        print(f"sends of {args.messages} messages of 20 letters at {latency:.0f} ms ({args.rounds} rounds):")
        for mode, took in times.items():
            best, median = min(took), statistics.median(took)
            print(
                f"  {mode:9} best {best:6.3f} s, median {median:6.3f} s  (up to {per_batch[mode]} per batch)  "
                f"rate vs the kit's: best {kit[0] / best:.3f}x, median {kit[1] / median:.3f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
