"""A running emulator's journey of one message, asked from another process (``core.journey``,
``%sb_trace``) over its administration API (``GET /$emulator/journey``, admin/journeyroute.py),
signed with the connection string's key as any admin request is."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from ..ports import AMQP_PORT
from ..security.sas import sign
from .log import MAX_EVENTS
from .queries import TIME_FORMAT, JourneyAnswer, JourneyQuery

REQUEST_TIMEOUT = 30.0  # seconds: a clock advance over many due messages fires them all before answering
TOKEN_LIFETIME = 300.0


def _fields(connection_string: str) -> dict[str, str]:
    """The kit's connection-string grammar (``sbnotebook/core/connection_string.py``), copied: the
    emulator imports nothing from the kit. tests/core/test_connection_string.py holds them equal."""
    found: dict[str, str] = {}
    for part in connection_string.strip().split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError("A connection string segment is not Key=Value.")
        found[key.strip().lower()] = value.strip()
    return found


def _address(fields: dict[str, str]) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(fields.get("endpoint", ""))
    if not parts.hostname:
        raise ValueError("The connection string names no Endpoint.")
    return parts.hostname, parts.port or AMQP_PORT


def _token(fields: dict[str, str], host: str, port: int) -> str:
    if "sharedaccesssignature" in fields:
        return fields["sharedaccesssignature"]
    if "sharedaccesskeyname" not in fields or "sharedaccesskey" not in fields:
        raise ValueError("Reading the journey needs a key: SharedAccessKeyName and SharedAccessKey.")
    return sign(
        f"sb://{host}:{port}/", fields["sharedaccesskeyname"], fields["sharedaccesskey"], time.time() + TOKEN_LIFETIME
    )


def admin_request(host: str, port: int, token: str, method: str, path: str, what: str = "") -> tuple[int, bytes]:
    """One request to a running emulator's administration API (its status and body), signed with
    ``token``; ``RuntimeError`` when it cannot be reached (``what`` names it: the emulator on host:port)."""
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request(method, path, headers={"Authorization": token, "Content-Length": "0"})
        reply = conn.getresponse()
        return reply.status, reply.read()
    except OSError as exc:
        raise RuntimeError(f"cannot reach {what or f'the emulator on {host}:{port}'}: {exc}") from None
    finally:
        conn.close()


def _query(q: JourneyQuery) -> str:
    given = {
        "entity": q.entity,
        "message-id": q.message_id,
        "sequence-number": q.sequence_number,
        "trace-id": q.trace_id,
        "limit": q.limit if q.limit != MAX_EVENTS else None,
    }
    return urllib.parse.urlencode({k: v for k, v in given.items() if v is not None})


def read_journey(
    connection_string: str,
    entity: str,
    *,
    message_id: str | None = None,
    sequence_number: int | None = None,
    trace_id: str | None = None,
    limit: int = MAX_EVENTS,
) -> JourneyAnswer:
    """The journey the emulator at the connection string's endpoint kept of one message (see
    ``Emulator.journey``). A question it cannot answer raises ``ValueError`` before anything is
    sent; an emulator that refuses or cannot be reached, ``RuntimeError`` in its words."""
    query = JourneyQuery(entity, message_id, sequence_number, trace_id, limit)
    fields = _fields(connection_string)
    host, port = _address(fields)
    status, body = admin_request(host, port, _token(fields, host, port), "GET", f"/$emulator/journey?{_query(query)}")
    if status != 200:
        try:
            detail = ET.fromstring(body).findtext("Detail")
        except ET.ParseError:
            detail = None
        raise RuntimeError(f"the emulator on {host}:{port} refused: {detail or f'HTTP {status}'}")
    found = json.loads(body)
    rows = [{**row, "time": datetime.strptime(row["time"], TIME_FORMAT).replace(tzinfo=UTC)} for row in found["events"]]
    return JourneyAnswer(rows, found["truncated"], found["dropped"], found["capacity"])
