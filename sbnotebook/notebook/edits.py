"""Edits applied to messages on resubmit: a JSON merge patch for the body and property edits
(application properties set or removed, subject, time to live, session id), and their preview as
a diff. An edit is a function for ``core.resubmit(edit=...)``; nothing here sends anything."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import InvalidInputError
from .cells import json_object

Record = dict[str, Any]
Edit = Callable[[Record], Record | None]  # None: the message is left where it is


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


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


@dataclass
class MessageEdit:
    """What to change in each resubmitted message. Unset parts leave the message as it is."""

    patch: Any = None  # a JSON merge patch for JSON bodies (other bodies are left as they are)
    set_properties: dict[str, Any] = field(default_factory=dict)
    remove_properties: list[str] = field(default_factory=list)
    subject: str | None = None
    time_to_live: float | None = None  # seconds
    session_id: str | None = None

    @property
    def empty(self) -> bool:
        return (
            self.patch is None
            and not self.set_properties
            and not self.remove_properties
            and self.subject is None
            and self.time_to_live is None
            and self.session_id is None
        )

    def __call__(self, record: Record) -> Record:
        """The edited record (a new dict); ``core.resubmit`` sends what changed."""
        out = dict(record)
        if self.patch is not None:
            try:
                body = json.loads(record.get("body_text") or "")
            except ValueError:
                body = None
            if body is not None:
                out["body_text"] = json.dumps(merge_patch(body, self.patch), ensure_ascii=False)
        if self.set_properties or self.remove_properties:
            props = dict(record.get("application_properties") or {})
            for name in self.remove_properties:
                props.pop(name, None)
            props.update(self.set_properties)
            out["application_properties"] = props
        if self.subject is not None:
            out["subject"] = self.subject
        if self.time_to_live is not None:
            out["time_to_live"] = self.time_to_live
        if self.session_id is not None:
            out["session_id"] = self.session_id
            if record.get("partition_key") is not None:
                out["partition_key"] = self.session_id  # Service Bus wants them equal
        return out

    def describe(self) -> str:
        parts = []
        if self.patch is not None:
            parts.append(f"body patch {json.dumps(self.patch)}")
        parts += [f"set {k}={v!r}" for k, v in self.set_properties.items()]
        parts += [f"remove {k}" for k in self.remove_properties]
        for name in ("subject", "time_to_live", "session_id"):
            if getattr(self, name) is not None:
                parts.append(f"{name} {getattr(self, name)!r}")
        return "; ".join(parts) or "unchanged"


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
