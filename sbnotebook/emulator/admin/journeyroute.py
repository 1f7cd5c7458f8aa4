"""``GET /$emulator/journey`` on the administration API: one message's journey through the broker
(journey/), as JSON, for ``core.journey`` and ``%sb_trace`` in another process.

Not a Service Bus API. The caller is authorized as for every request of the API (a token with
Manage on the namespace) before this is reached. Query: ``entity`` and one of ``message-id``,
``sequence-number``, ``trace-id``; ``limit`` (1 to the log's capacity) optional. Anything else,
or a value given twice, is refused (400) with the reason.
"""

from __future__ import annotations

from collections.abc import Callable

from ..journey.queries import JourneyAnswer, JourneyQuery, JourneyQueryError
from .atom import error_xml

PARAMETERS = {"entity", "message-id", "sequence-number", "trace-id", "limit"}

Reader = Callable[[JourneyQuery], JourneyAnswer]


def _number(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or len(text) > 19:
        raise JourneyQueryError(f"{name} is a whole number, not {text[:40]!r}.")
    return int(text)


def parse(query: dict[str, list[str]]) -> JourneyQuery:
    unknown = sorted(set(query) - PARAMETERS)
    if unknown:
        raise JourneyQueryError(
            f"Unknown parameter {unknown[0][:40]!r}: the journey takes {', '.join(sorted(PARAMETERS))}."
        )
    twice = sorted(k for k, v in query.items() if len(v) > 1)
    if twice:
        raise JourneyQueryError(f"{twice[0]} is given more than once.")
    one = {k: v[0] for k, v in query.items()}
    limit = _number(one.get("limit"), "limit")
    return JourneyQuery(
        one.get("entity", ""),
        message_id=one.get("message-id"),
        sequence_number=_number(one.get("sequence-number"), "sequence-number"),
        trace_id=one.get("trace-id"),
        **({} if limit is None else {"limit": limit}),
    )


def serve_journey(read: Reader, method: str, query: dict[str, list[str]]) -> tuple[int, str]:
    if method != "GET":
        return 405, error_xml(405, "The journey takes GET.")
    try:
        return 200, read(parse(query)).to_json()
    except JourneyQueryError as exc:
        return 400, error_xml(400, str(exc))
