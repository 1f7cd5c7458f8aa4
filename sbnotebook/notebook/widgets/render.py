"""How a message looks in a panel: pretty JSON, text, or hex for binary bodies; every property."""

from __future__ import annotations

import html
import json
from typing import Any

from ...core import FIELDS

# The detail view's property table: every schema field except the body and application properties
# (shown on their own above and below it).
SYSTEM_FIELDS: tuple[str, ...] = tuple(
    f.name for f in FIELDS if f.kind not in ("binary", "map") and f.name != "body_text"
)


def hexdump(data: bytes, width: int = 16, limit: int = 4096) -> str:
    lines = []
    for offset in range(0, min(len(data), limit), width):
        chunk = data[offset : offset + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {hexes:<{width * 3}} {text}")
    if len(data) > limit:
        lines.append(f"... {len(data) - limit} more bytes")
    return "\n".join(lines)


def body_view(record: dict[str, Any]) -> tuple[str, str]:
    """(kind, text): 'json' pretty-printed, 'text', or 'binary' as a hex dump."""
    text = record.get("body_text")
    if text is None:
        return "binary", hexdump(bytes(record.get("body") or b""))
    try:
        return "json", json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return "text", text


def detail_html(record: dict[str, Any]) -> str:
    kind, text = body_view(record)
    rows = "".join(
        f"<tr><th style='text-align:left'>{name}</th><td>{html.escape(str(record.get(name)))}</td></tr>"
        for name in SYSTEM_FIELDS
        if record.get(name) is not None
    )
    props = record.get("application_properties") or {}
    prop_rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in props.items()
    )
    return (
        f"<b>Body ({kind})</b><pre style='max-height:320px;overflow:auto'>{html.escape(text)}</pre>"
        f"<b>System properties</b><table>{rows}</table>"
        f"<b>Application properties</b><table>{prop_rows or '<tr><td>(none)</td></tr>'}</table>"
    )


def row_label(record: dict[str, Any], extra: str = "") -> str:
    body = record.get("body_text")
    preview = (body if body is not None else f"<{len(record.get('body') or b'')} binary bytes>").replace("\n", " ")
    subject = f" [{record['subject']}]" if record.get("subject") else ""
    return f"#{record.get('sequence_number')}{subject} {preview[:80]}{extra}"


def guard(status: Any, action: Any) -> Any:
    """A click handler that shows a user's mistake (bad search, bad patch, lost lock) in the panel
    instead of losing it in the widget log."""
    from ...core import SbError

    def run(*_: Any) -> None:
        try:
            action()
        except SbError as exc:
            status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"

    return run
