"""Emulator throughput with the official SDK as the client.

Runs the emulator as a separate process and measures, for N messages:
batched sends, peeks (pages of 250), and peek-lock receive + complete.
Reports messages/s and the ratio of the emulator's CPU time to the client's for
the same work. Target: emulator CPU at most half the client's (the broker is not
the bottleneck).

Also the first message of a receive whose credit asks for all N, against one asking for N/10 (the
baseline): Service Bus streams a large credit, so the first message should not wait for the last
to be locked, and its time should not grow with N. Target: at most FIRST_TARGET times the baseline
(it was ~10x: the emulator locked and encoded all N before writing a byte).

    python benchmarks/emulator_throughput.py --messages 5000
    python benchmarks/emulator_throughput.py --messages 5000 --websockets   # AMQP over WebSockets
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil
from _common import cpu_seconds, endpoint, spawn
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.core.sdk.websockets import websocket_options

TARGET_RATIO = 0.5
FIRST_TARGET = 2.0


@dataclass
class Phase:
    name: str
    messages: int
    wall: float
    client_cpu: float
    emulator_cpu: float

    @property
    def rate(self) -> float:
        return self.messages / self.wall

    @property
    def ratio(self) -> float:
        return self.emulator_cpu / self.client_cpu if self.client_cpu else float("inf")


def measure(name: str, messages: int, emulator: psutil.Process, work: Callable[[], None]) -> Phase:
    e0, c0, w0 = cpu_seconds(emulator), time.process_time(), time.perf_counter()
    work()
    wall = time.perf_counter() - w0
    return Phase(name, messages, wall, time.process_time() - c0, cpu_seconds(emulator) - e0)


def _medians(phases: list[Phase]) -> list[Phase]:
    """One row per phase, each figure the median over the rounds (CPU timings jitter by +-25%)."""
    out = []
    for name in dict.fromkeys(p.name for p in phases):
        rows = [p for p in phases if p.name == name]
        out.append(
            Phase(
                name,
                rows[0].messages,
                statistics.median(p.wall for p in rows),
                statistics.median(p.client_cpu for p in rows),
                statistics.median(p.emulator_cpu for p in rows),
            )
        )
    return out


def first_message_ms(client: ServiceBusClient, queue: str, credit: int) -> float:
    """Milliseconds from asking (a receiver whose prefetch grants ``credit``) to the first message.
    The receiver closes without settling: its messages go back unchanged."""
    with client.get_queue_receiver(queue, prefetch_count=credit, max_wait_time=10) as receiver:
        receiver.peek_messages(1)  # the link is open before the clock starts
        t0 = time.perf_counter()
        next(iter(receiver))
        return (time.perf_counter() - t0) * 1000


def run(n: int, body_size: int, rounds: int, websockets: bool = False) -> tuple[list[Phase], tuple[float, float]]:
    proc = spawn(["--port", "0"])
    try:
        conn = endpoint(proc)
        if not conn:
            raise SystemExit("emulator did not start")
        emulator = psutil.Process(proc.pid)
        body = "x" * body_size
        phases = []
        options = websocket_options(conn) if websockets else {}
        with ServiceBusClient.from_connection_string(conn, **options) as client:
            sender = client.get_queue_sender("results")
            receiver = client.get_queue_receiver("results", max_wait_time=5, prefetch_count=0)
            with sender, receiver:
                sender.send_messages(ServiceBusMessage("warm-up"))
                for m in receiver.receive_messages(max_message_count=1, max_wait_time=5):
                    receiver.complete_message(m)

                def send_all() -> None:
                    left = n
                    while left:
                        batch = sender.create_message_batch()
                        while left:
                            try:
                                batch.add_message(ServiceBusMessage(body))
                            except ValueError:
                                break
                            left -= 1
                        sender.send_messages(batch)

                def peek_all() -> None:
                    seen, start = 0, 1
                    while seen < n:
                        page = receiver.peek_messages(max_message_count=250, sequence_number=start)
                        if not page:
                            raise RuntimeError(f"peek stopped at {seen} of {n}")
                        seen += len(page)
                        start = (page[-1].sequence_number or 0) + 1

                def receive_complete_all() -> None:
                    done = 0
                    while done < n:
                        got = receiver.receive_messages(max_message_count=100, max_wait_time=5)
                        if not got:
                            raise RuntimeError(f"receive stopped at {done} of {n}")
                        for m in got:
                            receiver.complete_message(m)
                        done += len(got)

                for _ in range(rounds):
                    phases.append(measure("send (batched)", n, emulator, send_all))
                    phases.append(measure("peek (pages of 250)", n, emulator, peek_all))
                    phases.append(measure("receive + complete", n, emulator, receive_complete_all))
                send_all()
                tenths, wholes = [], []
                for _ in range(rounds):  # paired: the baseline and the large credit alternate
                    tenths.append(first_message_ms(client, "results", max(n // 10, 1)))
                    wholes.append(first_message_ms(client, "results", n))
                first = (statistics.median(tenths), statistics.median(wholes))
        return _medians(phases), first
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--body-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3, help="repeat each phase; medians are reported")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--websockets", action="store_true", help="AMQP over WebSockets on the same port")
    args = parser.parse_args()
    phases, (first_tenth, first_all) = run(args.messages, args.body_size, args.rounds, args.websockets)
    first_ratio = first_all / max(first_tenth, 0.1)
    total_e = sum(p.emulator_cpu for p in phases)
    total_c = sum(p.client_cpu for p in phases)
    overall = total_e / total_c
    if args.json:
        rows = [p.__dict__ | {"rate": p.rate, "ratio": p.ratio} for p in phases]
        print(json.dumps([*rows, {"overall": overall, "first_ms": [first_tenth, first_all]}]))
    else:
        print(
            f"{args.messages} messages of {args.body_size} bytes{' over WebSockets' if args.websockets else ''}, "
            "SDK client vs emulator process, "
            f"median of {args.rounds} rounds"
        )
        print(f"{'phase':<22}{'msg/s':>10}{'client cpu s':>14}{'emulator cpu s':>16}{'ratio':>8}")
        for p in phases:
            print(f"{p.name:<22}{p.rate:>10.0f}{p.client_cpu:>14.2f}{p.emulator_cpu:>16.2f}{p.ratio:>8.2f}")
        verdict = "meets" if overall <= TARGET_RATIO else "MISSES"
        print(f"overall emulator/client CPU ratio {overall:.2f} ({verdict} the target of <= {TARGET_RATIO})")
        verdict = "meets" if first_ratio <= FIRST_TARGET else "MISSES"
        print(
            f"first message: {first_all:.1f} ms asking for {args.messages}, {first_tenth:.1f} ms asking for "
            f"{max(args.messages // 10, 1)}: "
            f"{first_ratio:.1f}x ({verdict} the target of <= {FIRST_TARGET:.0f}x)"
        )
    return 0 if overall <= TARGET_RATIO and first_ratio <= FIRST_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
