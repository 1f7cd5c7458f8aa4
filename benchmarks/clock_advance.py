"""What ``Emulator.advance()`` costs when many things fall due at once, against receiving as many
messages with the SDK, in the same run (issue 54: advance over 10^4 due messages must cost less
than receiving them).

Two cases, each on a fresh in-process emulator with a manual clock:

- ``locks``: ``--messages`` messages sent and received peek-lock by the SDK (the receive is timed),
  the receiver closed (its locks stay, as in Service Bus), then ``advance("61s")`` past their
  1-minute locks (timed): every lock expires and every message is back with its delivery count 1;
- ``schedules``: ``--messages`` messages scheduled an hour ahead, then ``advance("1h")`` (timed):
  every one becomes active; then they are received peek-lock by the SDK (timed).

Each advance is checked against the broker's own state before its time counts (no lock left, every
message active, delivery counts raised). Reports the median of ``--rounds`` and the ratio
advance / receive of each round.

    python benchmarks/clock_advance.py [--messages 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime, timedelta

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.emulator import Emulator

TOPOLOGY = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "bench",
                "Queues": [
                    {"Name": "locks", "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 10}},
                    {"Name": "schedules", "Properties": {"LockDuration": "PT1M"}},
                ],
            }
        ]
    }
}
BATCH = 250  # messages per send, schedule or receive call


def _send(client: ServiceBusClient, queue: str, count: int, at: datetime | None = None) -> None:
    with client.get_queue_sender(queue, keep_alive=0) as sender:
        for start in range(0, count, BATCH):
            batch = [ServiceBusMessage(f"m{i}") for i in range(start, min(start + BATCH, count))]
            if at is None:
                sender.send_messages(batch)
            else:
                sender.schedule_messages(batch, at)


def _receive(client: ServiceBusClient, queue: str, count: int) -> float:
    """Seconds to receive ``count`` messages peek-lock (left locked: not settled)."""
    got = 0
    with client.get_queue_receiver(queue, keep_alive=0, prefetch_count=BATCH) as receiver:
        start = time.perf_counter()
        while got < count:
            batch = receiver.receive_messages(max_message_count=BATCH, max_wait_time=5)
            if not batch:
                raise SystemExit(f"{queue}: received {got} of {count}")
            got += len(batch)
        return time.perf_counter() - start


def _check(emu: Emulator, queue: str, count: int, delivery_count: int) -> None:
    source = emu.broker.resolve_source(queue)
    counts = emu.broker.counts(queue)
    stored = emu.broker.peek(source, 1, count + 1)
    held = [m for m in stored if m.lock_token is not None]
    counted = {m.delivery_count for m in stored}
    if counts["active"] != count or held or counted != {delivery_count}:
        raise SystemExit(f"{queue}: {counts}, {len(held)} still locked, delivery counts {counted}")


def locks_round(count: int) -> tuple[float, float]:
    with (
        Emulator(TOPOLOGY, clock="manual", admin_port=None) as emu,
        ServiceBusClient.from_connection_string(emu.connection_string) as client,
    ):
        _send(client, "locks", count)
        receive = _receive(client, "locks", count)
        start = time.perf_counter()
        emu.advance(timedelta(seconds=61))
        advance = time.perf_counter() - start
        _check(emu, "locks", count, delivery_count=1)
        return advance, receive


def schedules_round(count: int) -> tuple[float, float]:
    with (
        Emulator(TOPOLOGY, clock="manual", admin_port=None) as emu,
        ServiceBusClient.from_connection_string(emu.connection_string) as client,
    ):
        _send(client, "schedules", count, at=emu.now() + timedelta(minutes=59))
        if emu.broker.counts("schedules")["scheduled"] != count:
            raise SystemExit("schedules: not all scheduled")
        start = time.perf_counter()
        emu.advance(timedelta(hours=1))
        advance = time.perf_counter() - start
        _check(emu, "schedules", count, delivery_count=0)
        receive = _receive(client, "schedules", count)
        return advance, receive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.messages} messages, {args.rounds} rounds (median; ratio = advance / receive, per round)")
    print(f"{'case':<10} {'advance ms':>11} {'receive s':>10} {'ratio':>8}  rounds' ratios")
    for name, one_round in (("locks", locks_round), ("schedules", schedules_round)):
        rounds = [one_round(args.messages) for _ in range(args.rounds)]
        ratios = [a / r for a, r in rounds]
        advance = statistics.median(a for a, _ in rounds)
        receive = statistics.median(r for _, r in rounds)
        shown = ", ".join(f"{r:.4f}" for r in ratios)
        print(f"{name:<10} {advance * 1000:>11.1f} {receive:>10.2f} {statistics.median(ratios):>8.4f}  {shown}")


if __name__ == "__main__":
    main()
