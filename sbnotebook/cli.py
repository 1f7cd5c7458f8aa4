"""``sbnotebook`` command line: ``sbnotebook emulator ...``, ``sbnotebook topology export ...``,
``sbnotebook playbook plan|run ...``, ``sbnotebook demo`` and ``sbnotebook tutorials``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, with its subcommands (tests/project/test_names.py reads its flags)."""
    from .about import versions_line

    parser = argparse.ArgumentParser(prog="sbnotebook", description=__doc__)
    parser.add_argument("--version", action="version", version=versions_line())
    sub = parser.add_subparsers(dest="command", required=True)
    emu = sub.add_parser("emulator", help="run the embedded Service Bus emulator until interrupted")
    from .emulator.cli import add_arguments

    add_arguments(emu)
    from .topology_cli import add_arguments as topology_arguments

    topology_arguments(
        sub.add_parser("topology", help="export a namespace's entities and rules as emulator Config.json")
    )
    from .playbook_cli import add_arguments as playbook_arguments

    playbook_arguments(sub.add_parser("playbook", help="plan or run a playbook (docs/playbooks.md)"))
    sub.add_parser("demo", help="start the emulator, send, peek and settle a few messages, and explain")
    tut = sub.add_parser("tutorials", help="write the tutorial notebooks into a folder")
    tut.add_argument("dir", nargs="?", default="sbnotebook-tutorials", help="where (default: %(default)s)")
    tut.add_argument("--force", action="store_true", help="overwrite tutorials already there")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "emulator":
        from .emulator.cli import run

        return run(args)
    if args.command == "topology":
        from .topology_cli import run as run_topology

        return run_topology(args)
    if args.command == "playbook":
        from .playbook_cli import run as run_playbook

        return run_playbook(args)
    if args.command == "tutorials":
        return write_tutorials(Path(args.dir), force=args.force)
    from .demo import run_demo

    return run_demo()


def write_tutorials(target: Path, *, force: bool = False) -> int:
    """Copy every tutorial this install carries into ``target``; refuse to overwrite without ``force``."""
    from .about import tutorials

    source = tutorials()
    names = sorted(p.name for p in source.iterdir() if p.name.endswith(".ipynb")) if source is not None else []
    if not names:
        print("sbnotebook tutorials: this install carries no tutorials (built without notebooks/?)", file=sys.stderr)
        return 1
    there = [name for name in names if (target / name).exists()]
    if there and not force:
        print(
            f"sbnotebook tutorials: {target} already holds {', '.join(there)}; nothing written "
            "(--force overwrites them).",
            file=sys.stderr,
        )
        return 1
    target.mkdir(parents=True, exist_ok=True)
    assert source is not None
    for name in names:
        (target / name).write_bytes((source / name).read_bytes())
    print(f"Wrote {len(names)} tutorials to {target}{' (overwriting ' + str(len(there)) + ')' if there else ''}:")
    for name in names:
        print(f"  {name}")
    print(f"Start with {target / '01_quickstart.ipynb'}; each runs on the embedded emulator.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
