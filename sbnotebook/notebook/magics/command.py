"""What every %sb_* command shares: its argument parser (with -h and examples) and the one error
handler that turns a user's mistake or a service error into one line saying what to do."""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import StdinNotImplementedError, UsageError

from ...core import SbError, is_message_not_found, redact, requires_sessions
from .targets import bound_entity

if TYPE_CHECKING:
    from .state import MagicsState


class HelpShown(Exception):
    """-h was given: the help is printed, nothing else happens."""


class Declined(Exception):
    """The user did not confirm a destructive action."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} -h)")

    def options(self) -> dict[str, argparse.Action]:
        """Every option string (``--dlq``, ``-n``) and its action: what Tab completion offers."""
        return dict(self._option_string_actions)

    def positionals(self) -> list[argparse.Action]:
        return [a for a in self._actions if not a.option_strings]

    def parse_line(self, line: str) -> argparse.Namespace:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{self.prog}: {exc}") from None
        if "-h" in argv or "--help" in argv:
            print(self.format_help())
            raise HelpShown
        return self.parse_args(argv)


PARSERS: list[Parser] = []  # every command's parser, for the docs test


def parser(name: str, description: str, examples: str) -> Parser:
    made = Parser(
        prog=f"%{name}",
        description=description,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    PARSERS.append(made)
    return made


def command(parser: Parser, *, cell: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Parse the line, print help for -h, and turn user errors into one line."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: MagicsState, line: str, cell_text: str | None) -> Any:
            args = None
            try:
                args = parser.parse_line(line)
                with bound_entity(self, args):
                    return fn(self, args, cell_text) if cell else fn(self, args)
            except HelpShown:
                return None
            except (SbError, UsageError, Declined, StdinNotImplementedError) as exc:
                if self.full_tracebacks:
                    raise
                fail(explain(exc, args))
                return None
            finally:
                self.sdk_logs.summarise()

        wrapper: Callable[..., Any]
        if cell:

            @functools.wraps(fn)
            def cell_wrapper(self: MagicsState, line: str, cell_text: str | None = None) -> Any:
                if cell_text is None and not {"-h", "--help"} & set(line.split()):
                    fail(UsageError(f"{parser.prog} is a cell magic: %{parser.prog} ENTITY, messages below."))
                    return None
                return run(self, line, cell_text or "")

            wrapper = cell_wrapper
        else:

            @functools.wraps(fn)
            def line_wrapper(self: MagicsState, line: str) -> Any:
                return run(self, line, None)

            wrapper = line_wrapper
        wrapper.__doc__ = parser.format_help()
        return wrapper

    return decorate


_BYTES_REPR = re.compile(r"""\bb(['"])(.*?)\1""")


def fail(exc: BaseException) -> None:
    """The one line a user sees for an error: its kind and what to do, never a secret."""
    kind = "sbnotebook" if isinstance(exc, UsageError | Declined) else type(exc).__name__
    message = str(exc) or "input is not available here; repeat the command with --yes"
    message = _BYTES_REPR.sub(lambda m: m.group(2), " ".join(message.split()))
    print(f"{kind}: {redact(message)}", file=sys.stderr)


def explain(exc: BaseException, args: argparse.Namespace | None) -> BaseException:
    """A service error a user can act on, said in their terms (what to type next)."""
    if not isinstance(exc, SbError) or args is None or not getattr(args, "entity", None):
        return exc
    entity = args.entity
    if requires_sessions(exc):
        command = "%sb_receive" if getattr(args, "mode", None) else "%sb_peek"
        return UsageError(
            f"{entity} requires sessions: name one with --session ID (for example {command} {entity} --session s-1)."
        )
    if getattr(args, "deferred", None) and is_message_not_found(exc):
        return UsageError(
            f"No deferred message with sequence number {args.deferred} in {entity}: "
            f"%sb_peek {entity} shows the sequence numbers whose state is 'deferred'."
        )
    return exc
