"""The emulator under load, measured from outside its process (issue 56).

- **Idle connections held**: N connections of each kind (plain AMQP, TLS, AMQP over WebSockets and
  over secure WebSockets) that open, say the protocol header and stay quiet: the emulator's threads
  and resident memory before and after, how fast they opened (connections/s, one after another),
  and a new SDK client's round trip (open, send, receive, complete) meanwhile against one on the
  idle emulator. Targets (TLS): at most 64 threads, at most +150 MiB.
- **Stalled peers**: N connections that send half a protocol header and stop, with the default
  deadlines: seconds until the emulator has closed them all (target: 90), a client served meanwhile.
- **The cap**: with ``--max-connections N`` and N connections held, seconds until the SDK's
  connection N+1 fails and what it raises (target: 2 s, an error); after 10 close, 10 new clients;
  without the option, 1,000 connections served.
- **Concurrent clients**: C async SDK clients sending M messages (one per call) and receiving and
  completing them, against one client doing the same: every message received once, the ratio of
  their throughputs (target: at least 1). The clients run in ``--client-processes`` processes, as an
  application's instances would; ``--latency-ms`` gives the emulator a latency for this phase. And
  SDK connections opened per second, one after another.

    python benchmarks/emulator_load.py [--idle 2000] [--stalled 300] [--cap 100] [--clients 100] [--messages 5000]
    python benchmarks/emulator_load.py --skip idle,stalled,cap --latency-ms 2 --messages 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from azure.servicebus import TransportType
from load.clients import Throughput, refused, round_trip, sdk_opens_per_second, throughput
from load.peers import KINDS, close_all, closed_by_server, open_idle, stalled
from load.process import start

THREADS_TARGET = 64
RSS_TARGET = 150.0  # MiB more than the idle emulator
STALL_TARGET = 90.0
REFUSE_TARGET = 2.0
SERVED = 1000  # connections served without the option


def idle(kind: str, count: int) -> dict[str, Any]:
    served = start(tls=kind in ("tls", "wss"))
    transport = TransportType.AmqpOverWebsocket if kind in ("websockets", "wss") else TransportType.Amqp
    try:
        options = served.options(transport)
        alone = min(round_trip(served.conn, options) for _ in range(2))
        threads0, rss0 = served.held()
        peers, seconds = open_idle(kind, count, served.port, served.ca)
        threads, rss = served.held()
        loaded = round_trip(served.conn, options)
        close_all(peers)
        return {
            "kind": kind,
            "connections": count,
            "opened_per_s": count / seconds,
            "threads": [threads0, threads],
            "rss_mib": [round(rss0, 1), round(rss, 1)],
            "rss_growth_mib": round(rss - rss0, 1),
            "round_trip_s": [round(alone, 3), round(loaded, 3)],
        }
    finally:
        served.stop()


def stalls(count: int) -> dict[str, Any]:
    served = start()
    try:
        peers = stalled(count, served.port)
        started = time.perf_counter()
        loaded = round_trip(served.conn, {})
        last = 0.0
        while time.perf_counter() - started < 3 * STALL_TARGET:
            if all(closed_by_server(p) for p in peers):
                last = time.perf_counter() - started
                break
            time.sleep(0.5)
        close_all(peers)
        return {"stalled": count, "all_closed_after_s": round(last, 1) or None, "round_trip_s": round(loaded, 3)}
    finally:
        served.stop()


def cap(limit: int) -> dict[str, Any]:
    served = start("--max-connections", str(limit))
    try:
        peers, _ = open_idle("plain", limit, served.port, None)
        seconds, error = refused(served.conn)
        close_all(peers[:10])
        time.sleep(0.5)  # the emulator sees them go
        after = [round_trip(served.conn, {}) for _ in range(10)]
        close_all(peers)
    finally:
        served.stop()
    served = start()
    try:
        many, _ = open_idle("plain", SERVED, served.port, None)
        unlimited = round_trip(served.conn, {})
        close_all(many)
    finally:
        served.stop()
    return {
        "max_connections": limit,
        "refused_after_s": round(seconds, 2),
        "error": error,
        "served_after_10_closed": len(after),
        f"served_{SERVED}_without_the_option": True,
        "round_trip_beside_them_s": round(unlimited, 3),
    }


def concurrency(clients: int, messages: int, processes: int, latency_ms: float, rounds: int = 2) -> dict[str, Any]:
    """One client, then ``clients`` (in ``processes`` processes), alternated ``rounds`` times on one
    emulator (the machine's other load falls on both); the emulator's CPU seconds show which side is
    the limit."""
    served = start("--latency-ms", str(latency_ms))
    try:
        opens = sdk_opens_per_second(served.conn, 20)
        runs: dict[int, list[tuple[Throughput, float]]] = {1: [], clients: []}
        for _ in range(rounds):
            for n in (1, clients):
                cpu = served.cpu()
                result = throughput(served.conn, n, messages, processes if n > 1 else 1)
                runs[n].append((result, served.cpu() - cpu))
    finally:
        served.stop()
    one = statistics.median(r.rate for r, _ in runs[1])
    many = statistics.median(r.rate for r, _ in runs[clients])
    return {
        "sdk_opens_per_s": round(opens, 1),
        "latency_ms": latency_ms,
        "client_processes": processes,
        "messages": messages,
        "one_client_msg_s": [round(r.rate, 1) for r, _ in runs[1]],
        f"{clients}_clients_msg_s": [round(r.rate, 1) for r, _ in runs[clients]],
        "emulator_cpu_s": {"one": [round(c, 1) for _, c in runs[1]], "many": [round(c, 1) for _, c in runs[clients]]},
        "ratio": round(many / one, 2),
        "every_message_once": all(r.exactly_once for rows in runs.values() for r, _ in rows),
    }


def verdicts(figures: dict[str, Any]) -> list[tuple[str, bool]]:
    """The issue's Done-when lines this run can judge: (what, met)."""
    out = []
    tls = next((row for row in figures.get("idle", []) if row["kind"] == "tls"), None)
    if tls is not None:
        n = tls["connections"]
        out.append((f"{n} idle TLS: at most {THREADS_TARGET} threads", tls["threads"][1] <= THREADS_TARGET))
        out.append((f"{n} idle TLS: at most +{RSS_TARGET:.0f} MiB", tls["rss_growth_mib"] <= RSS_TARGET))
    if "stalled" in figures:
        closed = figures["stalled"]["all_closed_after_s"]
        out.append((f"stalled peers closed within {STALL_TARGET:.0f} s", closed is not None and closed <= STALL_TARGET))
    if "cap" in figures:
        row = figures["cap"]
        in_time = bool(row["error"]) and row["refused_after_s"] <= REFUSE_TARGET
        out.append((f"the connection over the cap refused within {REFUSE_TARGET:.0f} s", in_time))
    if "concurrency" in figures:
        row = figures["concurrency"]
        out.append(("every message received once", row["every_message_once"]))
        out.append(("many clients' throughput at least one client's", row["ratio"] >= 1))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=2000, help="idle connections of each kind")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    parser.add_argument("--stalled", type=int, default=300, help="peers stalled in the protocol header")
    parser.add_argument("--cap", type=int, default=100, help="--max-connections for the refusal")
    parser.add_argument("--clients", type=int, default=100, help="concurrent SDK clients")
    parser.add_argument("--client-processes", type=int, default=4, help="processes the concurrent clients run in")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the emulator's latency for the clients phase")
    parser.add_argument("--skip", default="", help="comma-separated phases to leave out: idle,stalled,cap,concurrency")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    figures: dict[str, Any] = {}
    if "idle" not in skip:
        figures["idle"] = [idle(kind, args.idle) for kind in args.kinds.split(",")]
    if "stalled" not in skip:
        figures["stalled"] = stalls(args.stalled)
    if "cap" not in skip:
        figures["cap"] = cap(args.cap)
    if "concurrency" not in skip:
        figures["concurrency"] = concurrency(args.clients, args.messages, args.client_processes, args.latency_ms)
    checks = verdicts(figures)
    if args.json:
        print(json.dumps(figures | {"checks": dict(checks)}, indent=1))
    else:
        print(json.dumps(figures, indent=1))
        for what, ok in checks:
            print(f"{'meets' if ok else 'MISSES'}: {what}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":  # the clients' processes import this module again (spawn): only the parent runs
    sys.exit(main())
