"""``sbnotebook emulator`` / ``python -m sbnotebook.emulator``."""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from types import FrameType

from .sas import DEFAULT_KEY
from .server import Emulator
from .topology import TopologyError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5672, help="AMQP port; 0 picks a free one (default 5672)")
    parser.add_argument("--config", help="topology file in the format of Microsoft's Service Bus emulator")
    parser.add_argument("--key", default=DEFAULT_KEY, help="shared access key clients must sign with")
    parser.add_argument("-v", "--verbose", action="store_true", help="log connections and refused tokens")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        emulator = Emulator(args.config, host=args.host, port=args.port, key=args.key).start()
    except TopologyError as exc:
        print(f"sbnotebook emulator: bad topology: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:
        print(f"sbnotebook emulator: cannot start: {exc}", file=sys.stderr)
        return 1
    # A broker process allocates many short-lived wrappers per message: collect less often.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    entities = ", ".join(e.name for e in emulator.broker.entities)
    print(f"Service Bus emulator listening on {emulator.host}:{emulator.port} (entities: {entities})")
    print(emulator.connection_string, flush=True)
    while not stop.wait(0.5):
        if emulator._stopped.is_set():
            print("sbnotebook emulator: stopped unexpectedly", file=sys.stderr)
            return 1
    emulator.stop()
    print("Service Bus emulator stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sbnotebook.emulator", description="Run the Service Bus emulator.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
