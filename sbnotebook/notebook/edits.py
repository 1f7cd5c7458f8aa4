"""Edits applied to messages on resubmit, as a notebook shows and takes them: their preview as a
diff, a patch typed in a panel, a property typed on a magic's line. The edit itself
(:class:`MessageEdit`, ``merge_patch``) is core's (``core/incidents/edits.py``); an edit is a function
for ``core.resubmit(edit=...)``; nothing here sends anything."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

from ..core import InvalidInputError, MessageEdit, merge_patch
from .cells import json_object

Record = dict[str, Any]
Edit = Callable[[Record], Record | None]  # None: the message is left where it is


def patch_edit(patch: dict[str, Any]) -> Edit:
    """An edit applying a JSON merge patch to JSON bodies (others are left where they are)."""

    def edit(record: Record) -> Record | None:
        try:
            body = json.loads(record.get("body_text") or "")
        except ValueError:
            return None
        record["body_text"] = json.dumps(merge_patch(body, patch))
        return record

    return edit


def patch_from_text(text: str) -> Edit | None:
    """The edit a merge patch typed as JSON makes (None: nothing typed); a clear error otherwise."""
    patch = json_object(text, "The patch", '{"currency": "EUR"} (a merge patch)')
    return None if patch is None else patch_edit(patch)


def describe_patch(python_edit: bool, text: str) -> str:
    """What a resubmit will change, shown before its confirmation (html)."""
    import html

    if python_edit:
        return "with the Python edit in <code>panel.edit</code> applied to each body"
    if not text.strip():
        return "unchanged (no patch)"
    return f"with this merge patch applied to each JSON body: <code>{html.escape(text.strip())}</code>"


def _pretty(text: str | None) -> list[str]:
    if text is None:
        return ["<binary body>"]
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False).splitlines()
    except ValueError:
        return text.splitlines()


def diff(record: Record, edit: MessageEdit) -> str:
    """What the edit changes in one message: property lines, then a unified diff of the body."""
    after = edit(record)
    label = f"#{record.get('sequence_number')}"
    lines = []
    for name in ("subject", "time_to_live", "session_id", "partition_key"):
        if after.get(name) != record.get(name):
            lines.append(f"{label} {name}: {record.get(name)!r} -> {after.get(name)!r}")
    before_props = record.get("application_properties") or {}
    after_props = after.get("application_properties") or {}
    for key in sorted(set(before_props) | set(after_props)):
        old, new = before_props.get(key), after_props.get(key)
        if key not in after_props:
            lines.append(f"{label} property {key}: {old!r} -> (removed)")
        elif key not in before_props or old != new:
            lines.append(f"{label} property {key}: {old!r} -> {new!r}")
    if after.get("body_text") != record.get("body_text"):
        old_body, new_body = _pretty(record.get("body_text")), _pretty(after.get("body_text"))
        body = difflib.unified_diff(old_body, new_body, f"{label} body", f"{label} body (new)", lineterm="")
        lines.extend(body)
    elif edit.patch is not None:
        lines.append(f"{label} body: not JSON, left as it is")
    return "\n".join(lines) or f"{label}: no change"


def parse_property(item: str) -> tuple[str, Any]:
    """NAME=VALUE (a string) or NAME:=JSON (a typed value: 3, true, 0.5)."""
    if ":=" in item:
        name, _, raw = item.partition(":=")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            raise InvalidInputError(f"{item!r}: after := comes a JSON value such as 3, true or 0.5.") from None
    else:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidInputError(f"{item!r}: give NAME=VALUE (text) or NAME:=JSON (a number or boolean).")
    if not name.strip():
        raise InvalidInputError(f"{item!r} has no property name.")
    return name.strip(), value
