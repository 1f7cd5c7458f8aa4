"""A copy's record: what a copy (``copying.acopy``) has done, kept on disk so that the same copy again,
interrupted or after a kernel restart, copies only what is left.

A :class:`CopyProgress` records the source sequence numbers copied (every one up to ``done`` but
those in ``failed``), kept while the copy is not complete in ``$SBNOTEBOOK_HOME/copies/`` (default
``~/.sbnotebook/copies/``): one small JSON file per source, target, search, ``keep_message_id`` and
``max_messages``, with the two namespaces (``record_key``, ``record_path``). The record also keeps
when the source and the target were created (``created_times``): an entity deleted and created again
numbers its messages from 1 again and holds none of the copies, so ``load`` sets such a record aside.
``Record`` is a progress as ``resumable.LineTracker`` saves it, with its key.

The seam: this module knows the record's file, key and contents; which record a copy's arguments
name, and the copy itself, are ``copying``'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...connections.live import LiveConnection
from ...entities import EntityPath
from ...files.resumable import LineTracker
from ...operations.manage import created_at

log = logging.getLogger(__name__)

ENV_HOME = "SBNOTEBOOK_HOME"


@dataclass
class CopyProgress:
    """What a copy from ``source`` to ``target`` has done: every source sequence number up to
    ``done`` was copied except those in ``failed``; ``copied`` messages in all (for ``max_messages``).
    ``seed`` makes the copies' fresh message ids the same when they are sent again."""

    source: str
    target: str
    seed: str = field(default_factory=lambda: str(uuid.uuid4()))
    done: int = 0
    failed: set[int] = field(default_factory=set)
    copied: int = 0
    complete: bool = False

    @property
    def pending(self) -> bool:
        return not self.complete and (self.done > 0 or bool(self.failed))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "failed": sorted(self.failed)}

    @classmethod
    def from_json(cls, info: dict[str, Any]) -> CopyProgress:
        return cls(**{**info, "failed": set(info.get("failed", []))})


def copy_records() -> Path:
    """Where unfinished copies are recorded: ``$SBNOTEBOOK_HOME/copies``, default ``~/.sbnotebook/copies``."""
    base = os.environ.get(ENV_HOME) or str(Path.home() / ".sbnotebook")
    return Path(base).expanduser() / "copies"


def created_times(
    src: LiveConnection, source: EntityPath, dst: LiveConnection, target: EntityPath
) -> dict[str, str | None]:
    """When the source (a dead-letter queue: its queue or subscription) and the target were created,
    as the administration API says (two requests at once). A record of a copy keeps them: deleted
    and created again, an entity numbers its messages from 1 again (a resume would skip the new
    source's first messages) and has none of the copies sent before. None where the API does not
    say (a key without the Manage right, ...): logged once, that entity is known by its name only."""

    def created(conn: LiveConnection, path: EntityPath) -> str | None:
        entity = path.parent
        try:
            return created_at(conn.admin(), entity).isoformat()
        except Exception as exc:
            conn.info_once(
                f"copy-created:{entity}",
                "a copy's record knows %s by its name only: its creation time could not be read (%s), so a "
                "resume cannot tell if it was deleted and created again since",
                entity,
                exc,
            )
            return None

    with ThreadPoolExecutor(2, thread_name_prefix="sbnotebook-copy-created") as pool:
        got = pool.submit(created, src, source), pool.submit(created, dst, target)
        return {"source": got[0].result(), "target": got[1].result()}


def record_key(
    src: LiveConnection,
    source: EntityPath,
    dst: LiveConnection,
    target: EntityPath,
    where: str | None,
    keep_message_id: bool,
    max_messages: int | None,
    window: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    # A window is in the key only when given (as given: an age resumes as typed), so records of
    # copies without one keep their keys.
    extra = {"window": list(window)} if window != (None, None) else {}
    return extra | {
        "source_namespace": src.fully_qualified_namespace.lower(),
        "source": str(source).lower(),
        "target_namespace": dst.fully_qualified_namespace.lower(),
        "target": str(target).lower(),
        "where": where,
        # The record's own keys, as before the renames (keep_message_id, max_messages): unfinished copies still resume
        "keep_ids": keep_message_id,
        "limit": max_messages,
    }


def record_path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return copy_records() / f"copy-{digest}.json"


def load(path: Path, created: dict[str, str | None]) -> tuple[CopyProgress | None, str | None]:
    """The record's progress, or None if there is none or it is of entities deleted and created
    again since (a creation time, recorded and now, that differs); and then, why it was set aside."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        progress = CopyProgress.from_json(info["progress"])
        was = info.get("created") or {}
    except FileNotFoundError:
        return None, None
    except (ValueError, KeyError, TypeError) as exc:  # a record cut short by a full disk: start afresh, said
        why = f"the unfinished copy's record {path} could not be read ({type(exc).__name__})"
        log.warning("%s: the copy starts from the beginning", why)
        return None, f"{why}: this copy starts from the beginning (what it had copied is sent again)"
    again = [k for k, when in created.items() if when is not None and was.get(k) not in (None, when)]
    if not again:
        return progress, None
    why = (
        f"the {' and the '.join(again)} of the unfinished copy recorded were deleted and created again since"
        if len(again) > 1
        else f"the {again[0]} of the unfinished copy recorded was deleted and created again since"
    )
    log.info("copy record %s set aside: %s (created %s, now %s)", path, why, was, created)
    return None, f"{why} ({progress.copied} copied then): this copy starts from the beginning"


class Record:
    """A ``CopyProgress`` as the tracker saves it: with its key, in the copy's record file. Its
    ``copied`` counts what ``done`` and ``failed`` say was copied (the tracker's confirmed lines),
    not sends confirmed out of order: a run after a kill sends those again."""

    def __init__(self, state: CopyProgress, key: dict[str, Any], created: dict[str, str | None]) -> None:
        self.state, self.key, self.created = state, key, created
        self.base = state.copied
        self.tracker: LineTracker | None = None

    @property
    def done(self) -> int:
        return self.state.done

    @done.setter
    def done(self, value: int) -> None:
        self.state.done = value

    @property
    def failed(self) -> set[int]:
        return self.state.failed

    def to_json(self) -> dict[str, Any]:
        if self.tracker is not None:
            self.state.copied = self.base + self.tracker.confirmed
        return {"key": self.key, "created": self.created, "progress": self.state.to_json()}
