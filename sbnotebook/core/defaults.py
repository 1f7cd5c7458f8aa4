"""The defaults more than one layer starts from, each declared once: the core functions take them as
their defaults, and the magics' settings, the panels and the Spark data source import them from here
(``tests/project/test_defaults.py`` reads every signature, flag, setting and option that means one of
them). And the one check of an in-flight limit.

(``MAX_SCANNED``, ``PAGE_SIZE`` and ``TAIL_INTERVAL`` are declared beside the code they bound:
``operations/peek.py``, ``operations/scan.py``, ``operations/tail.py``.)"""

from __future__ import annotations

from .errors import InvalidInputError

MAX_IN_FLIGHT = 10
"""Operations one call keeps in flight at once unless told otherwise (``max_in_flight=``): sends
(``send``, ``copy``, ``copy_many``, ``import_jsonl``), settlement requests of a received batch
(``receive``, ``receive_deferred``), a resubmit's or discard's batches. ``SbMagics.max_in_flight``,
the send panel, ``sbspark.write`` and the Spark option ``maxInFlight`` start from it."""

MAX_HELD_BYTES = 16 * 1024 * 1024
"""Bytes of source messages (their encoded size) a copy holds in memory at most unless told
otherwise (``max_held_bytes=``): ``copy`` and ``copy_many``, from the peek that may bring a message
until the target confirms its copy (core/incidents/copy/read_ahead.py)."""

PEEK_MAX_MESSAGES = 100
"""Messages a peek returns unless told otherwise: ``core.peek(max_messages=)`` and
``SbMagics.peek_max_messages`` (``%sb_peek -n``)."""

RECEIVE_MAX_MESSAGES = 10
"""Messages a receive takes unless told otherwise: ``core.receive(max_messages=)`` and
``SbMagics.receive_max_messages`` (``%sb_receive -n``)."""

WAIT_SECONDS = 5.0
"""Seconds a receive waits for its first message unless told otherwise: ``core.receive``,
``SbMagics.wait_seconds`` (``%sb_receive``) and a destructive Spark read's ``waitSeconds``."""

MAX_RENEWAL_SECONDS = 300.0
"""Seconds a received batch's locks are renewed for while it is open, unless told otherwise:
``core.receive``, ``core.receive_deferred`` and ``SbMagics.max_renewal_seconds``."""

MAX_SESSIONS = 100
"""Sessions a listing returns at most unless told otherwise: ``core.list_sessions``, the sessions
panel and ``%sb_sessions --max-sessions``."""


def check_whole_number(value: object, name: str, minimum: int = 1) -> int:
    """``value`` when it is a whole number of ``minimum`` or more (an ``int``, not a ``bool``);
    otherwise an ``InvalidInputError`` naming ``name``, in one line. The kit's one check of a count
    (``max_messages``, ``batch_size``, a brake's thresholds, a canary, a panel's row limit)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name} must be a whole number of {minimum} or more, not {value!r}.")
    return value


def check_seconds(value: object, name: str) -> float:
    """``value`` as a float when it is a number of seconds above 0 (not a ``bool``); otherwise an
    ``InvalidInputError`` naming ``name``, in one line (a brake's ``watch_interval``, a canary's
    ``canary_timeout``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInputError(f"{name} must be a number of seconds above 0, not {value!r}.")
    return float(value)


def check_max_in_flight(value: object, name: str = "max_in_flight") -> int:
    """``check_whole_number`` of an in-flight limit. Every in-flight limit of the kit is checked
    here: core's keywords, ``--max-in-flight``, ``SbMagics.max_in_flight``, the send panel and the
    Spark option ``maxInFlight``."""
    return check_whole_number(value, name)
