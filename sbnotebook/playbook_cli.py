"""``sbnotebook playbook plan FILE`` and ``sbnotebook playbook run FILE --yes [--resume]``: a playbook
(docs/playbooks.md) from a job or cron, through ``core.playbook``.

Exit status: 0 done, 1 something failed (the last line says what), 2 a bad playbook or command (one
line: file, line, column; nothing touched), 3 a brake or a canary stopped the run (the audit says
where; ``--resume`` goes on), 130 interrupted (``--resume`` goes on). The last line says what
happened in counts the broker confirmed.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    for name, said in (
        ("plan", "what the playbook would do now: one scan of each dead-letter queue, nothing touched"),
        ("run", "run the playbook: plan, then each rule through resubmit and discard, audited"),
    ):
        action = actions.add_parser(name, help=said, description=said)
        action.add_argument("file", help="the playbook (YAML)")
        action.add_argument(
            "--secret",
            metavar="REF",
            help="read the connection string from a secret reference, env:NAME or secret:SCOPE/KEY, instead of "
            "the playbook's connection (default: the playbook's, else SERVICEBUS_CONNECTION_STRING, else the emulator)",
        )
        if name == "run":
            action.add_argument("--yes", action="store_true", help="run without asking (a job has nobody to ask)")
            action.add_argument("--resume", action="store_true", help="go on with a run that did not finish")


def run(args: argparse.Namespace) -> int:
    from .core import ConfigurationError, InvalidInputError, SbError, parse_secret_ref, read_secret
    from .core import playbook as playbooks
    from .core.incidents.playbook.running import BAD_PLAYBOOK_EXIT, FAILED_EXIT

    try:
        book = playbooks.load(args.file)
        connection = None
        if args.secret is not None:
            connection = read_secret(parse_secret_ref(args.secret, option="--secret"), option="--secret")
        if args.action == "plan":
            for line in playbooks.plan(book, connection=connection).lines():
                print(line)
            return 0
        if not args.yes:
            print(f"sbnotebook playbook run: add --yes to run {args.file} (it moves and removes messages; "
                  "`sbnotebook playbook plan` shows what it would do).", file=sys.stderr)  # fmt: skip
            return BAD_PLAYBOOK_EXIT
        done = playbooks.run(book, resume=args.resume, connection=connection, progress=lambda line: print(line))
    except (InvalidInputError, ConfigurationError) as exc:
        print(f"sbnotebook playbook {args.action}: {exc}", file=sys.stderr)
        return BAD_PLAYBOOK_EXIT
    except SbError as exc:
        print(f"sbnotebook playbook {args.action}: {exc}", file=sys.stderr)
        return FAILED_EXIT
    print(f"Audit: {done.audit_file}")
    print(done.summary())
    return done.exit_code
