"""``%sb_copy`` against ``%sb_export`` + ``%sb_import`` of the same messages, as a user runs them (issue
71): two emulators, each in its own process at ``--latency-ms`` (80: a notebook far from both
namespaces), named connections ``prod`` and ``home`` in an IPython shell with the extension loaded,
``--messages`` (5,000) JSON bodies of about 1 KB in ``prod:bulk``. Every link is warmed first (one
export, one import, one small copy), then each round times ``%sb_export prod:bulk FILE``,
``%sb_import home:landing FILE`` and ``%sb_copy prod:bulk home:landing --yes`` in turn (a fresh file
each round: an import of the same file again would only send what is left), and checks that each put
``--messages`` more in ``home:landing``. Reports each round's seconds and the ratio of the copy to
export + import, per round and of the medians.

Then the peek of ``--peek-messages`` (2 x 10^4) messages of 1 KB, ``core.scan`` of the whole queue
(what ``%sb_peek --where``, ``%sb_export`` and the browser read through), at ``--latency-ms`` and at
0 ms (a third emulator, in its own process): one scan each to open the links, then ``--rounds``
scans of each in turn; the ratio of the medians, far over near.

Targets (issue 71): the copy within 1.1x export + import; the peek at 80 ms within 1.3x of 0 ms.

    python benchmarks/copy_magic.py [--messages 5000] [--peek-messages 20000] [--rounds 3] [--latency-ms 80]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from IPython.core.interactiveshell import InteractiveShell

from sbnotebook import core
from sbnotebook.notebook import load_ipython_extension


def timed(shell: InteractiveShell, line: str) -> float:
    name, _, rest = line.partition(" ")
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_line_magic(name, rest)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=80.0)
    parser.add_argument("--peek-messages", type=int, default=20000)
    args = parser.parse_args()
    (prod_proc, prod), (home_proc, home) = start_emulator(args.latency_ms), start_emulator(args.latency_ms)
    try:
        shell = InteractiveShell.instance()
        load_ipython_extension(shell)
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_line_magic("sb_connect", f"--as prod {prod}")
            shell.run_line_magic("sb_connect", f"--as home {home}")
        core.create_entity("bulk", connection=prod)
        core.create_entity("landing", connection=home)
        body = {"order": 0, "customer": {"id": "c-1", "name": "x" * 900}, "total": 1.5}
        core.send("bulk", ({**body, "order": i} for i in range(args.messages)), connection=prod)
        work = Path(tempfile.mkdtemp(prefix="copy-magic-"))
        # Warm every link the timed commands use: an export, an import and a small copy.
        timed(shell, f"sb_export prod:bulk {work / 'warm.jsonl'}")
        timed(shell, f"sb_import home:landing {work / 'warm.jsonl'}")
        timed(shell, "sb_copy prod:bulk home:landing -n 10 --yes")
        exports, imports, copies = [], [], []
        for r in range(args.rounds):
            file = work / f"round-{r}.jsonl"
            before = core.counts("landing", connection=home).active
            exports.append(timed(shell, f"sb_export prod:bulk {file}"))
            imports.append(timed(shell, f"sb_import home:landing {file}"))
            copies.append(timed(shell, "sb_copy prod:bulk home:landing --yes"))
            landed = core.counts("landing", connection=home).active - before
            assert landed == 2 * args.messages, f"round {r}: {landed} landed, not {2 * args.messages}"
            print(
                f"round {r}: export {exports[-1]:.2f} s, import {imports[-1]:.2f} s, copy {copies[-1]:.2f} s: "
                f"copy / (export + import) {copies[-1] / (exports[-1] + imports[-1]):.2f}",
                flush=True,
            )
        med = statistics.median
        print(
            f"{args.messages} messages at {args.latency_ms:g} ms, medians of {args.rounds}: "
            f"export {med(exports):.2f} s, import {med(imports):.2f} s, copy {med(copies):.2f} s: "
            f"copy / (export + import) {med(copies) / (med(exports) + med(imports)):.2f}"
        )
        peeks(prod, args)
    finally:
        for proc in (prod_proc, home_proc):
            proc.terminate()
            proc.wait(10)


def peeks(far: str, args: argparse.Namespace) -> None:
    """``core.scan`` of the same queue at ``--latency-ms`` (``far``, the prod emulator) and at 0 ms."""
    near_proc, near = start_emulator(0.0)
    try:
        body = "x" * 1000
        for cs in (far, near):
            core.create_entity("peeked", connection=cs)
            core.send("peeked", (body for _ in range(args.peek_messages)), max_in_flight=16, connection=cs)

        def scan(cs: str) -> float:
            started = time.perf_counter()
            seen = sum(len(page) for page in core.scan("peeked", connection=cs))
            assert seen == args.peek_messages, f"{seen} peeked of {args.peek_messages}"
            return time.perf_counter() - started

        scan(far), scan(near)  # the links opened
        times: dict[str, list[float]] = {far: [], near: []}
        for _ in range(args.rounds):
            for cs in (near, far):
                times[cs].append(scan(cs))
        med = statistics.median
        print(
            f"peek of {args.peek_messages} at {args.latency_ms:g} ms: "
            f"{', '.join(f'{t:.2f}' for t in times[far])} s; at 0 ms: {', '.join(f'{t:.2f}' for t in times[near])} s; "
            f"medians {med(times[far]):.2f} / {med(times[near]):.2f} = {med(times[far]) / med(times[near]):.2f}"
        )
    finally:
        near_proc.terminate()
        near_proc.wait(10)


if __name__ == "__main__":
    main()
