"""What a resubmit changes in each message it moves: a JSON merge patch of the body, application
properties set or removed, the subject, time to live and session id (:class:`MessageEdit`, an
``edit=`` for ``core.resubmit``). The one form of an edit: ``%sb_resubmit``'s options and a
playbook rule's ``edit:`` both make one. Nothing here sends anything."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import InvalidInputError
from ..operations.manage import duration

Record = dict[str, Any]


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


@dataclass
class MessageEdit:
    """What to change in each resubmitted message. Unset parts leave the message as it is; a body
    that is not JSON is sent as it is (a patch applies to JSON bodies)."""

    patch: Any = None  # a JSON merge patch for JSON bodies (other bodies are left as they are)
    set_properties: dict[str, Any] = field(default_factory=dict)
    remove_properties: list[str] = field(default_factory=list)
    subject: str | None = None
    time_to_live: float | None = None  # seconds
    session_id: str | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> MessageEdit:
        """The edit a mapping of these fields' names describes (a playbook's ``edit:``), each checked:
        ``time_to_live`` in the kit's duration grammar (``30m``, ``PT1H``, seconds)."""
        known = [f.name for f in fields(cls)]
        unknown = [k for k in values if k not in known]
        if unknown:
            raise InvalidInputError(f"an edit takes {', '.join(known)}, not {', '.join(map(repr, unknown))}")
        edit = cls(patch=values.get("patch"), subject=_text(values, "subject"), session_id=_text(values, "session_id"))
        props = values.get("set_properties", {})
        if not isinstance(props, Mapping) or not all(isinstance(k, str) for k in props):
            raise InvalidInputError("set_properties is a mapping of property names to values")
        edit.set_properties = dict(props)
        removed = values.get("remove_properties", [])
        if not isinstance(removed, list) or not all(isinstance(k, str) for k in removed):
            raise InvalidInputError("remove_properties is a list of property names")
        edit.remove_properties = list(removed)
        if values.get("time_to_live") is not None:
            edit.time_to_live = duration(values["time_to_live"], "time_to_live").total_seconds()
        if edit.empty:
            raise InvalidInputError("the edit changes nothing")
        return edit

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


def _text(values: Mapping[str, Any], name: str) -> str | None:
    value = values.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{name} is a text, not {value!r}")
    return value
