"""``sbnotebook emulator --advance 10m`` and the time ``--status`` shows: a running emulator's clock,
read and moved from another process over its administration API (``/$emulator/clock``,
admin/clockroute.py), signed with its key as any admin request is.

Which emulator: ``--state-file F`` the one that file names (the key: ``--key``/``--key-file``, else
the ``key`` file beside F, else the published default); ``--port P`` (with ``--host``) the one
listening there; neither: the shared one if it runs, else the one on ``--host``:``--port`` (default
127.0.0.1:5672, where ``sbnotebook emulator --clock manual`` listens).
"""

from __future__ import annotations

import argparse
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import userprocess
from .broker.clock import CLOCK_KINDS, span_seconds
from .journey.client import admin_request
from .security.sas import DEFAULT_KEY, DEFAULT_KEY_NAME, sign

TOKEN_LIFETIME = 300.0


class GivenAction(argparse.Action):
    """Stores the value and notes that it was typed (``args.given``): an explicit ``--port 5672``
    means that emulator, where the default means "the shared one if it runs"."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def add_arguments(parser: argparse.ArgumentParser, manage: Any) -> None:
    """``--clock`` for the emulator this command starts; ``--advance`` among the commands that act on
    a running one (``manage``: the group of --status, --start, --stop, --reset)."""
    parser.add_argument(
        "--clock",
        choices=CLOCK_KINDS,
        default="system",
        help="manual: the broker's time starts at real now and moves only with --advance (lock expiry, "
        "time to live, schedules); token lifetimes keep real time (default: system)",
    )
    manage.add_argument(
        "--advance",
        metavar="DURATION",
        help="move a running --clock manual emulator's time on (90s, 10m, 2h, 1d) and fire what fell due: "
        "the shared one, or the one --port or --state-file names",
    )


def run(args: argparse.Namespace) -> int:
    """--advance, and --status of the emulator --port or --state-file names; the exit code, with a
    one-line reason on stderr: 2 for a bad duration, 1 when it cannot be done."""
    try:
        return advance(args) if args.advance is not None else status(args)
    except ValueError as exc:
        print(f"sbnotebook emulator: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:
        print(f"sbnotebook emulator: {exc}", file=sys.stderr)
        return 1


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    key: str
    what: str  # how the messages name it


@dataclass(frozen=True)
class ClockReading:
    kind: str
    now: datetime

    def line(self) -> str:
        """``2026-01-02T09:00:00Z (manual clock, 1d 0h 0m ahead of real time)``"""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.kind != "manual":
            return f"{stamp} ({self.kind} clock)"
        offset = self.now.timestamp() - time.time()
        if abs(offset) < 1:
            return f"{stamp} (manual clock, at real time)"
        side = "ahead of" if offset > 0 else "behind"
        return f"{stamp} (manual clock, {_span(abs(offset))} {side} real time)"


def _span(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    if days or hours:
        parts.append(f"{hours}h")
    return " ".join([*parts, f"{minutes}m", f"{secs}s"])


def targets_another(args: argparse.Namespace) -> bool:
    """``--state-file`` or a typed ``--port``: ``--status`` describes that emulator, not the shared one."""
    return bool(args.state_file) or "port" in getattr(args, "given", ())


def _given_key(args: argparse.Namespace) -> str | None:
    if args.key_file:
        return Path(args.key_file).read_text(encoding="ascii").strip()
    return str(args.key) if args.key else None


def find(args: argparse.Namespace) -> Target:
    key = _given_key(args)
    if args.state_file:
        path = Path(args.state_file)
        state = userprocess.read_state_file(path)
        if state is None or not userprocess.alive(state):
            raise RuntimeError(f"no emulator is running by the state file {path}")
        beside = path.parent / "key"
        if key is None and beside.exists():
            key = beside.read_text(encoding="ascii").strip()
        return Target(state.host, state.port, key or DEFAULT_KEY, f"the emulator on {state.host}:{state.port}")
    if "port" not in getattr(args, "given", ()):
        running = userprocess.status()
        if running is not None:
            return Target(running.host, running.port, key or running.key, "the shared emulator")
    return Target(args.host, args.port, key or DEFAULT_KEY, f"the emulator on {args.host}:{args.port}")


def ask(target: Target, method: str, query: str = "") -> ClockReading:
    """GET or POST ``/$emulator/clock``; the emulator's answer, or a RuntimeError in its words."""
    token = sign(f"sb://{target.host}:{target.port}/", DEFAULT_KEY_NAME, target.key, time.time() + TOKEN_LIFETIME)
    status, body = admin_request(target.host, target.port, token, method, f"/$emulator/clock{query}", target.what)
    try:
        doc = ET.fromstring(body)
    except ET.ParseError:
        raise RuntimeError(f"{target.what} did not answer as an sbnotebook emulator (HTTP {status})") from None
    if status != 200:
        raise RuntimeError(f"{target.what} refused: {doc.findtext('Detail') or f'HTTP {status}'}")
    stamp = (doc.findtext("Now") or "").removesuffix("Z")
    return ClockReading(doc.findtext("Kind") or "?", datetime.fromisoformat(stamp).replace(tzinfo=UTC))


def advance(args: argparse.Namespace) -> int:
    """``--advance DURATION``: 0 once the emulator has fired what fell due; 2 for a bad duration; 1
    when no emulator answers or it runs on the system clock (its one-line reason on stderr)."""
    try:
        seconds = span_seconds(args.advance)
    except ValueError as exc:
        raise ValueError(f"--advance: {exc}") from None
    if seconds < 0:
        raise ValueError("--advance: time only moves forward")
    target = find(args)
    reading = ask(target, "POST", f"?advance={seconds!r}")
    if not args.quiet:
        print(f"Advanced {target.what} by {args.advance}: its time is {reading.line()}")
    return 0


def status(args: argparse.Namespace) -> int:
    """``--status`` with ``--state-file`` or ``--port``: that emulator's address and time."""
    target = find(args)
    reading = ask(target, "GET")
    print(f"Emulator running on {target.host}:{target.port}; its time: {reading.line()}")
    return 0


def time_line(host: str, port: int, key: str) -> str:
    """The shared emulator's time for ``--status``/``--start`` (its reason if it cannot say)."""
    try:
        return f"Its time: {ask(Target(host, port, key, 'the shared emulator'), 'GET').line()}"
    except RuntimeError as exc:
        return f"Its time: unknown ({exc})"
