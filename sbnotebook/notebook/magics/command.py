"""What every %sb_* command shares: its argument parser (with -h and examples) and the one error
handler that turns a user's mistake or a service error into one line saying what to do, and fails
the cell.

The convention (IPython's, which jupysql follows): a command that fails raises ``CommandFailed``, a
``UsageError``. IPython shows its one line (no traceback) and the cell fails, so Run All, nbmake and
a scheduled job stop there. What fails a cell:

- a user error: bad arguments or option values, an unknown entity, a missing batch (``UsageError``,
  ``SbError``);
- a service error: refused access, a timeout, a broker error (``SbError``, the SDK's ``AzureError``),
  and a file that cannot be read or written (``OSError``);
- a declined confirmation, or one nobody can answer (a job): ``nothing done: ...``;
- a ``Report`` that is not ok (failed messages, lost locks, messages left): the command shows it as
  it would have returned it, keeps it in the user's ``sb_last_report`` and fails with its counts
  (``finished`` below: the one place every command's Report passes).

``%config SbMagics.full_tracebacks = True`` raises the original exception instead (with its
traceback). Anything else (a bug) keeps its traceback. Panels' buttons never raise: they report in
the panel."""

from __future__ import annotations

import argparse
import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from IPython.core.error import UsageError
from IPython.display import display

from ...core import (
    RATE_FORMS,
    SERVICE_ERRORS,
    InvalidInputError,
    Report,
    SbError,
    check_max_in_flight,
    deprecated,
    is_message_not_found,
    parse_rate,
    redact,
    requires_sessions,
)
from .progress import errors_of
from .targets import bound_entity, label_report, named_in

if TYPE_CHECKING:
    from .state import MagicsState


class HelpShown(SbError):
    """-h was given: the help is printed, nothing else happens (caught by ``command``, never shown)."""

    def __init__(self, message: str = "help shown") -> None:
        super().__init__(message)


class Declined(SbError):
    """The user did not confirm a destructive action (or nobody can: no input in a job)."""


class CommandFailed(SbError, UsageError):
    """A command failed: IPython shows this one line instead of a traceback (``_render_traceback_``;
    a plain ``UsageError`` shows as one line too) and the cell fails."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def _render_traceback_(self) -> list[str]:
        return [self.line]


@dataclass(frozen=True)
class Reported:
    """A command's value that is not its Report (``%sb_settle`` returns the Report's DataFrame):
    the Report rides along, so the command's end checks it as it checks a returned Report."""

    report: Report
    value: Any


LAST_REPORT = "sb_last_report"  # the user's variable holding the last Report a command made


def finished(state: MagicsState, prog: str, result: Any) -> Any:
    """A command's value, with its Report checked: every Report (or list of them) is kept in the
    user's ``sb_last_report``; one that is not ok (a failed, lost or left message) is shown as the
    cell would have shown it, then fails the cell with its counts, so Run All and a job stop there.
    An ok Report is returned as it is (``r = %sb_purge q --yes`` binds it)."""
    if isinstance(result, Reported):
        reports, value = [result.report], result.value
    elif isinstance(result, Report):
        reports, value = [result], result
    elif isinstance(result, list) and result and all(isinstance(r, Report) for r in result):
        reports, value = result, result
    else:
        return result
    kept = state.shell is not None
    if kept:
        state.shell.user_ns[LAST_REPORT] = reports[0] if len(reports) == 1 else list(reports)
    failed = [r for r in reports if not r.ok]
    if not failed:
        return value
    display(value)  # what the cell would have shown: the Report's summary and its failures
    said = "; ".join((f"{r.entity}: " if len(reports) > 1 else "") + _counts(r) for r in failed)
    where = "the report above" if len(reports) == 1 else "the reports above"
    also = f"; {'it is' if len(reports) == 1 else 'they are'} also in {LAST_REPORT}" if kept else ""
    raise CommandFailed(f"{prog}: {said} ({where}{also})")


def _counts(report: Report) -> str:
    """``45 purged, 5 left of 50``, and the errors (``1 purged of 1, 1 ERROR``): a report whose
    outcomes all went as asked fails by its errors, which the line must not leave out."""
    text = f"{report.tally() or 'nothing done'} of {report.total}"
    return text + (f", {errors_of(report)}" if report.errors else "")


# What a command turns into one line; anything else is a bug and keeps its traceback.
ONE_LINE_ERRORS = (*SERVICE_ERRORS, UsageError, Declined, OSError)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed: dict[str, str] = {}  # an old flag -> its new name (docs/names.md)

    def rename(self, old: str, new: str) -> None:
        """Keep the flag ``old`` working for one release as ``new``: it is not in ``-h`` or Tab
        completion, and using it says once what replaced it (core/renames.py)."""
        if new not in self._option_string_actions or old in self._option_string_actions:
            raise ValueError(f"{self.prog}: cannot rename {old} to {new}")
        self.renamed[old] = new

    def _new_names(self, argv: list[str]) -> list[str]:
        """The words with each old flag (``--limit``, ``--limit=5``, or a short one: ``-n 5``,
        ``-n5``) turned into its new name. Done before argparse sees them: argparse would take
        ``--wait`` as an abbreviation of ``--wait-seconds`` by itself, silently."""
        out = []
        for word in argv:
            flag, eq, value = word.partition("=")
            if flag not in self.renamed and not word.startswith("--") and word[:2] in self.renamed:
                flag, eq, value = word[:2], "=", word[2:]  # a short flag with its value attached: -n5
            new = self.renamed.get(flag)
            if new is not None:
                deprecated(f"{self.prog} {flag}", f"{self.prog} {new}", stacklevel=4)
                word = new + eq + value
            out.append(word)
        return out

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}{self._closest(message)} (see {self.prog} -h)")

    def _closest(self, message: str) -> str:
        """``: did you mean --count?`` for a misspelt flag (the closest option string, difflib)."""
        import difflib

        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        for word in message[len(prefix) :].split():
            if word.startswith("-"):
                flag = word.split("=", 1)[0]
                close = difflib.get_close_matches(flag, [o for o in self.options() if o.startswith("--")], n=1)
                if close:
                    return f": did you mean {close[0]}?"
        return ""

    def options(self) -> dict[str, argparse.Action]:
        """Every option string (``--dlq``, ``-n``) and its action: what Tab completion offers."""
        return dict(self._option_string_actions)

    def positionals(self) -> list[argparse.Action]:
        return [a for a in self._actions if not a.option_strings]

    def parse_line(self, line: str) -> argparse.Namespace:
        try:
            argv = shlex.split(without_comment(line))
        except ValueError as exc:
            raise UsageError(f"{self.prog}: {exc}") from None
        if "-h" in argv or "--help" in argv:
            print(self.format_help())
            raise HelpShown
        return self.parse_args(self._new_names(argv))


PARSERS: list[Parser] = []  # every command's parser, for the docs test


def without_comment(line: str) -> str:
    """The line up to a ``#`` that begins a word outside quotes, as a shell reads it: IPython hands a
    line magic its whole line, so ``%sb_connect  # the emulator`` would pass the comment as arguments.
    A ``#`` inside a word (``--session-id a#b``) or in quotes (``--where '"#" in text'``) stays."""
    quote = ""
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def whole(minimum: int) -> Callable[[str], int]:
    """An option's type: a whole number of at least ``minimum``. Anything else is refused, naming
    the option (argparse adds it), never replaced by a default."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return parse


def seconds(*, zero: bool) -> Callable[[str], float]:
    """An option's type: seconds, more than 0 (or 0 or more where 0 means something: ``zero``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes seconds, not {text!r}") from None
        if not value >= 0:  # NaN too
            raise argparse.ArgumentTypeError(f"must be 0 seconds or more, not {text}")
        if value == 0 and not zero:
            raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
        return value

    return parse


COUNT = whole(1)  # how many messages, samples: 1 or more


def in_flight(text: str) -> int:
    """``--max-in-flight``'s type: the kit's one check of an in-flight limit (``core.check_max_in_flight``),
    its refusal said as argparse says any bad value (``argument --max-in-flight: must be ...``)."""
    try:
        number: object = int(text)
    except ValueError:
        number = text
    try:
        return check_max_in_flight(number, "--max-in-flight")
    except InvalidInputError as exc:  # a ValueError: argparse would put its own words instead
        raise argparse.ArgumentTypeError(exc.message.removeprefix("--max-in-flight ").removesuffix(".")) from None


def add_max_in_flight(parser: Parser) -> None:
    """``--max-in-flight N`` on ``parser``; not given: the setting ``SbMagics.max_in_flight``."""
    parser.add_argument("--max-in-flight", type=in_flight, dest="max_in_flight", help="default: SbMagics.max_in_flight")


def rate(text: str) -> float:
    """``--rate``'s type: core's one rate grammar (``core.parse_rate``, docs/names.md, Rates), its
    refusal said as argparse says any bad value (``argument --rate: takes ... 50/s, 3000/m; not '5'``)."""
    try:
        return parse_rate(text, name="--rate") or 0.0  # never None: the text is a str
    except InvalidInputError as exc:  # a ValueError: argparse would put its own words instead
        raise argparse.ArgumentTypeError(exc.message.removeprefix("--rate ").removesuffix(".")) from None


def add_rate(parser: Parser) -> None:
    """``--rate RATE`` on ``parser``: at most that many messages per second over the whole run."""
    parser.add_argument("--rate", type=rate, help=f"at most this many messages per second; RATE: {RATE_FORMS}")


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


def command(
    parser: Parser,
    *,
    cell: bool = False,
    on_failure: Callable[[MagicsState, BaseException, argparse.Namespace | None], None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Parse the line, print help for -h, and fail the cell with one line for an error a user can
    act on (``on_failure`` runs first, whatever the error)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: MagicsState, line: str, cell_text: str | None) -> Any:
            args = None
            name = None  # the connection NAME of a NAME:ENTITY argument: every line says NAME:ENTITY
            try:
                args = parser.parse_line(line)
                args.typed = line  # as typed: a command that stops part-way says the line that goes on
                with bound_entity(self, args):
                    name = self.bound_name
                    result = fn(self, args, cell_text) if cell else fn(self, args)
                    _label_reports(self, result)
                return finished(self, parser.prog, result)
            except HelpShown:
                return None
            except BaseException as exc:
                if on_failure is not None:
                    on_failure(self, exc, args)
                if self.full_tracebacks or isinstance(exc, CommandFailed) or not isinstance(exc, ONE_LINE_ERRORS):
                    raise
                said = one_line(explain(exc, args))
                if name is not None and args is not None and isinstance(getattr(args, "entity", None), str):
                    said = named_in(said, name, args.entity)
                raise CommandFailed(said) from None
            finally:
                self.sdk_logs.summarise()

        wrapper: Callable[..., Any]
        if cell:

            @functools.wraps(fn)
            def cell_wrapper(self: MagicsState, line: str, cell_text: str | None = None) -> Any:
                if cell_text is None and not {"-h", "--help"} & set(line.split()):
                    fail(UsageError(f"{parser.prog} is a cell magic: %{parser.prog} ENTITY, messages below."))
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


def one_line(exc: BaseException) -> str:
    """The one line a user sees for an error: its kind and what to do, never a secret. A declined
    confirmation says ``nothing done: ...`` (its own words)."""
    message = _BYTES_REPR.sub(lambda m: m.group(2), " ".join(str(exc).split()))
    if isinstance(exc, Declined):
        return redact(message)
    kind = "sbnotebook" if isinstance(exc, UsageError) else type(exc).__name__
    return f"{kind}: {redact(message or 'failed')}"


def fail(exc: BaseException) -> NoReturn:
    """Fail the command (and its cell) with ``exc`` said in one line."""
    raise CommandFailed(one_line(exc)) from None


def _label_reports(state: MagicsState, result: Any) -> None:
    """A command on NAME:ENTITY: its Reports name NAME:ENTITY (their summary line, the failed
    cell's one line), not ENTITY, which would read as the default connection's."""
    value = result.report if isinstance(result, Reported) else result
    for report in value if isinstance(value, list) else [value]:
        if isinstance(report, Report):
            label_report(state, report)


def explain(exc: BaseException, args: argparse.Namespace | None) -> BaseException:
    """A service error a user can act on, said in their terms (what to type next)."""
    if not isinstance(exc, SbError) or args is None or not getattr(args, "entity", None):
        return exc
    entity = args.entity
    # core's own one line for a refused session read (sessions_refused) keeps Service Bus's refusal as its cause
    if requires_sessions(exc) or (exc.__cause__ is not None and requires_sessions(exc.__cause__)):
        # Only %sb_peek and %sb_receive read one session (--session-id; %sb_resubmit's --to-session-id
        # sets the copies' session), and the others read none (an export, a count).
        if not hasattr(args, "session_id"):
            return UsageError(
                f"{entity} requires sessions, and this command reads it without one: Service Bus reads a "
                f"session-enabled entity only through one session's lock. %sb_peek {entity} --session-id ID reads "
                f"one session (%sb_sessions {entity} lists them); its dead-letter queue has no sessions."
            )
        command = "%sb_receive" if getattr(args, "mode", None) else "%sb_peek"
        return UsageError(
            f"{entity} requires sessions: name one with --session-id ID "
            f"(for example {command} {entity} --session-id s-1)."
        )
    if getattr(args, "sequence_numbers", None) and is_message_not_found(exc):  # %sb_receive --sequence-numbers
        return UsageError(
            f"No deferred message with sequence number {args.sequence_numbers} in {entity}: "
            f"%sb_peek {entity} shows the sequence numbers whose state is 'deferred'."
        )
    return exc
