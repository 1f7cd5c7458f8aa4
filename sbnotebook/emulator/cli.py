"""``sbnotebook emulator`` / ``python -m sbnotebook.emulator``."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from . import clockcli, userprocess
from .broker.faults import FaultError
from .endpoints import advertised_host, is_loopback
from .journey import export
from .net.limits import MAX_CONNECTIONS
from .ports import AMQP_PORT
from .security.sas import DEFAULT_KEY
from .server import Emulator
from .topology import TopologyError

STOP_POLL = 0.1  # seconds between looks at whether a signal asked the emulator to stop
PORT_HELP = (
    f"AMQP port; 0 picks a free one (default {AMQP_PORT}); with --advance or --status: the emulator listening there"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1); any other than loopback refuses the published "
        "default key and makes a random one unless --key/--key-file is given",
    )
    parser.add_argument("--port", type=int, default=AMQP_PORT, action=clockcli.GivenAction, help=PORT_HELP)
    parser.add_argument(
        "--admin-port",
        type=int,
        default=None,
        help="an extra HTTP port for the administration API, which the AMQP port always serves too "
        "(default: the AMQP port + 1, or a free one with --port 0)",
    )
    parser.add_argument("--data-dir", help="keep accepted messages on disk here (SQLite), so a restart loses nothing")
    parser.add_argument("--config", help="topology file in the format of Microsoft's Service Bus emulator")
    parser.add_argument(
        "--key",
        default=None,
        help=f"shared access key clients must sign with (default on loopback: {DEFAULT_KEY}; elsewhere random)",
    )
    parser.add_argument(
        "--key-file", help="read the shared access key from this file (kept off the command line, which others see)"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve AMQP, WebSockets and the admin API over TLS only, with a certificate from a local CA "
        "(made once under --data-dir/tls, else $SBNOTEBOOK_HOME/tls); clients trust the printed CA file",
    )
    parser.add_argument("--tls-cert", help="with --tls: a PEM server certificate (chain) of your own instead")
    parser.add_argument("--tls-key", help="with --tls: the PEM private key of --tls-cert")
    parser.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="CLIENT_ID:SECRET:ROLE[,ROLE]",
        help="with --tls: an Entra ID service principal the emulator issues tokens for, with its roles "
        "(Azure Service Bus Data Owner/Sender/Receiver, or Owner/Sender/Receiver); repeatable. "
        "SECRET as env:NAME reads it from that environment variable (a command line shows in ps)",
    )
    parser.add_argument(
        "--state-file", help="once listening, write host, port and pid here as JSON (no key); removed on stop"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing (in particular not the connection string)")
    shared = parser.add_argument_group(
        "the shared emulator (the notebooks' default, in $SBNOTEBOOK_HOME/emulator, default ~/.sbnotebook/emulator)"
    )
    manage = shared.add_mutually_exclusive_group()
    manage.add_argument("--status", action="store_true", help="say whether it runs, where, and where its data is")
    manage.add_argument("--start", action="store_true", help="start it in the background if it is not running")
    manage.add_argument("--stop", action="store_true", help="stop it (its messages stay on disk)")
    manage.add_argument("--reset", action="store_true", help="stop it and delete its messages and key")
    clockcli.add_arguments(parser, manage)  # --clock; --advance (beside --status, --start, ...)
    _add_fault_and_limit_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log connections and refused tokens")


def _add_fault_and_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """Latency, fault injection and the connection cap: how the emulator misbehaves on purpose."""
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="add this many milliseconds to every broker reply"
    )
    parser.add_argument(
        "--reject-sends",
        action="append",
        default=[],
        metavar="ENTITY=COUNT[:CONDITION]",
        help="refuse the next COUNT sends to ENTITY (condition: server-busy, quota-exceeded, entity-disabled)",
    )
    parser.add_argument(
        "--slow", action="append", default=[], metavar="ENTITY=MS", help="add MS to every reply on ENTITY"
    )
    parser.add_argument(
        "--drop-after",
        action="append",
        default=[],
        metavar="ENTITY=N",
        help="abruptly close a receiving connection on ENTITY after N deliveries",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"AMQP connections open at once (default {MAX_CONNECTIONS}, Service Bus Standard's); the next is "
        "refused at its open with amqp:resource-limit-exceeded, as Service Bus refuses it",
    )


def manage_shared(args: argparse.Namespace) -> int:
    """--status / --start / --stop / --reset on the shared emulator (see sbnotebook.emulator.userprocess)."""
    where = userprocess.home()
    if args.start:
        running = userprocess.ensure(where, clock=args.clock)
        print(f"Shared emulator running on {running.host}:{running.port} (pid {running.pid}); data in {where}")
        print(clockcli.time_line(running.host, running.port, running.key))
    elif args.stop:
        pid = userprocess.stop(where)
        print(f"Shared emulator stopped (pid {pid}); its messages stay in {where}" if pid else "None was running.")
    elif args.reset:
        userprocess.reset(where)
        print(f"Shared emulator stopped and its messages and key deleted from {where}.")
    else:
        found = userprocess.status(where)
        print(
            f"Shared emulator running on {found.host}:{found.port} (pid {found.pid}); data in {where}"
            if found
            else f"No shared emulator running (its data, if any, is in {where})."
        )
        if found:
            print(clockcli.time_line(found.host, found.port, found.key))
        counts = userprocess.connections(found) if found else None
        if counts:
            print(f"AMQP connections open: {counts['connections']} of {counts['max_connections']} allowed")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the emulator until SIGINT/SIGTERM (or manage the shared one); the exit code: 0, 1 (it could
    not start or stopped unexpectedly) or 2 (bad arguments)."""
    if args.advance is not None or (args.status and clockcli.targets_another(args)):
        return clockcli.run(args)
    if args.status or args.start or args.stop or args.reset:
        return _manage(args)
    refused = _refused(args)
    if refused is not None:
        return refused
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    export.configure()  # the broker's spans, when OTEL_* asks for them (flushed at exit by the provider)
    try:
        emulator = _started(args)
    except (TopologyError, FaultError, ValueError) as exc:
        print(f"sbnotebook emulator: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:
        print(f"sbnotebook emulator: cannot start: {exc}", file=sys.stderr)
        return 1
    # A broker process allocates many short-lived wrappers per message: collect less often.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    signals = _recorded_signals()
    assert emulator.port is not None
    if args.state_file:
        userprocess.write_state(Path(args.state_file), advertised_host(emulator.host), emulator.port, os.getpid())
    if not args.quiet:
        _print_banner(emulator, args)
    return _serve(emulator, args, signals)


def _manage(args: argparse.Namespace) -> int:
    """``manage_shared``, its refusals printed as the command's error (exit code 1)."""
    try:
        return manage_shared(args)
    except RuntimeError as exc:
        print(f"sbnotebook emulator: {exc}", file=sys.stderr)
        return 1


def _random_key(args: argparse.Namespace) -> bool:
    """No key given and listening beyond loopback: the emulator makes a random key for this run."""
    return args.key is None and not is_loopback(args.host)


def _refused(args: argparse.Namespace) -> int | None:
    """Read ``--key-file`` into ``args.key``; the exit code (2) of arguments that do not go together,
    after saying why, or None."""
    if args.key_file:
        try:
            with open(args.key_file, encoding="ascii") as f:
                args.key = f.read().strip()
        except OSError as exc:
            print(f"sbnotebook emulator: cannot read the key file: {exc.strerror}", file=sys.stderr)
            return 2
    if (args.tls_cert or args.tls_key or args.principal) and not args.tls:
        print("sbnotebook emulator: --tls-cert, --tls-key and --principal go with --tls", file=sys.stderr)
        return 2
    if _random_key(args) and args.quiet:
        print(
            f"sbnotebook emulator: on {args.host} the key is random and printed once; with --quiet give "
            "--key-file (a file only you can read)",
            file=sys.stderr,
        )
        return 2
    return None


def _started(args: argparse.Namespace) -> Emulator:
    """The emulator the arguments describe, with their faults, listening."""
    emulator = Emulator(
        args.config,
        host=args.host,
        port=args.port,
        key=args.key,
        latency_ms=args.latency_ms,
        data_dir=args.data_dir,
        admin_port=args.admin_port if args.admin_port is not None else (args.port + 1 if args.port else 0),
        tls=args.tls,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_dir=None if args.data_dir else userprocess.home().parent / "tls",
        principals=args.principal,
        clock=args.clock,
        max_connections=args.max_connections,
    )
    _apply_fault_flags(emulator, args)
    emulator.start()
    return emulator


def _recorded_signals() -> list[int]:
    """SIGINT and SIGTERM from now on only recorded, in the list returned (the main loop looks at it)."""
    # The handler only records the signal. It runs between two bytecodes of the main thread, which
    # may hold a lock just then: an Event's set() there takes its Condition's lock again and hangs
    # the process for good (once in a CI run: nothing 15 s after SIGTERM; 1 in 40 stops of a loop
    # waiting 0.5 ms with a busy thread beside it).
    signals: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return signals


def _print_banner(emulator: Emulator, args: argparse.Namespace) -> None:
    """Where the emulator listens, what it serves and the connection strings (the root one last)."""
    entities = ", ".join(e.name for e in emulator.broker.entities)
    print(f"Service Bus emulator listening on {emulator.host}:{emulator.port} (entities: {entities})")
    if args.data_dir:
        print(f"Durable store in {args.data_dir}: restored {emulator.broker.restored} message(s)")
    also = f" and http://{advertised_host(emulator.host)}:{emulator.admin_port}" if emulator.admin_port else ""
    print(f"Administration API on {emulator.admin_url} (the AMQP port){also} (see docs/emulator.md)")
    if emulator.clock_kind == "manual":
        now = f"{emulator.now():%Y-%m-%dT%H:%M:%SZ}"
        print(f"Manual clock at {now}: it moves only with `sbnotebook emulator --advance 10m` (or 90s, 2h, 1d)")
    if emulator.issuer is not None:
        print(f"Entra authority: {emulator.entra_authority}")
        print(f"Tenant: {emulator.tenant}")
    if emulator.ca_file is not None:
        print(f"CA certificate: {emulator.ca_file}")
    if _random_key(args):
        print("Listening beyond loopback: a random key for this run (shown once, in the connection string)")
    for policy in emulator.policies[1:]:  # the topology's shared access policies (the root key is last)
        owner = f"of {policy.entity}" if policy.entity is not None else "of the namespace"
        rights = ", ".join(sorted(policy.rights))
        conn = emulator.policy_connection_string(policy.name, policy.entity)
        print(f"Policy {policy.name!r} {owner} ({rights}): {conn}")
    print(emulator.connection_string, flush=True)


def _serve(emulator: Emulator, args: argparse.Namespace, signals: list[int]) -> int:
    """Until a signal is recorded: then stop the emulator (exit code 0). 1 if it stopped by itself.
    The state file goes either way."""
    try:
        while not signals:
            time.sleep(STOP_POLL)
            if emulator.stopped.is_set():
                print("sbnotebook emulator: stopped unexpectedly", file=sys.stderr)
                return 1
        emulator.stop()
    finally:
        if args.state_file:
            userprocess.clear_state(Path(args.state_file), os.getpid())
    if not args.quiet:
        print("Service Bus emulator stopped", flush=True)
    return 0


def _pair(text: str, flag: str) -> tuple[str, str]:
    entity, sep, value = text.partition("=")
    if not sep or not entity or not value:
        raise FaultError(f"{flag} expects ENTITY=VALUE, got {text!r}")
    return entity, value


def _apply_fault_flags(emulator: Emulator, args: argparse.Namespace) -> None:
    try:
        for spec in args.reject_sends:
            entity, value = _pair(spec, "--reject-sends")
            count, _, condition = value.partition(":")
            emulator.reject_sends(entity, int(count), condition or "server-busy")
        for spec in args.slow:
            entity, value = _pair(spec, "--slow")
            emulator.slow_down(entity, latency_ms=float(value))
        for spec in args.drop_after:
            entity, value = _pair(spec, "--drop-after")
            emulator.drop_connections_after(entity, int(value))
    except ValueError as exc:
        raise FaultError(str(exc)) from None
    except Exception as exc:  # unknown entity
        raise FaultError(getattr(exc, "description", str(exc)).split(" TrackingId:")[0]) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sbnotebook.emulator", description="Run the Service Bus emulator.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
