"""``sbnotebook`` command line: ``sbnotebook emulator ...`` and ``sbnotebook demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sbnotebook", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    emu = sub.add_parser("emulator", help="run the embedded Service Bus emulator until interrupted")
    from .emulator.cli import add_arguments

    add_arguments(emu)
    sub.add_parser("demo", help="start the emulator, send, peek and settle a few messages, and explain")
    args = parser.parse_args(argv)
    if args.command == "emulator":
        from .emulator.cli import run

        return run(args)
    from .demo import run_demo

    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
