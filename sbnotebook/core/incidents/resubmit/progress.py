"""A resubmit's record: what a run that did not finish (interrupted, or with messages left or in two
places) leaves for the next run of the same resubmit, so that nothing is moved twice.

An interrupted run leaves every message in one place (``api.py``: each batch in flight is
finished, a copy confirmed and then its original completed, or given back whole). One case is in
two places: a copy the target confirmed whose original could not be completed (its lock lost, the
connection gone): ``duplicated``. The record names each such original by its source sequence number
and its copy's identity (``copies.copy_id``: the source, the number, the original's message id, its
resubmit count). The next run, resumed or not, completes that original without sending another copy
when the message it receives has that identity (an entity deleted and created again numbers its
messages from 1: another message with the same number has another identity). The record also counts
the messages the runs moved, which a resumed run's ``max_messages`` counts against.

One small JSON file per namespace, source and target, in ``resubmits/`` beside the copies' records
(``$SBNOTEBOOK_HOME``), replaced atomically, removed when a run ends complete. A process killed
between a copy's confirmation and its original's completion writes none: the next run sends that
copy again with the same message id (``copy_id``), which a target with duplicate detection drops.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...connections.live import LiveConnection
from ...entities import EntityPath
from ...errors import InvalidInputError
from ...files.resumable import write_atomically
from ...operations.copies import copy_id
from ..copy.progress import copy_records


@dataclass
class ResubmitProgress:
    """What the runs of one resubmit from ``source`` to ``target`` did: ``moved`` messages moved, and
    ``copied``: each original whose copy the target confirmed but which was not completed (its
    sequence number and its copy's identity), completed by the next run without a copy."""

    source: str
    target: str
    moved: int = 0
    copied: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "copied": {str(seq): ident for seq, ident in sorted(self.copied.items())}}

    @classmethod
    def from_json(cls, info: dict[str, Any]) -> ResubmitProgress:
        copied = {int(seq): str(ident) for seq, ident in dict(info.get("copied", {})).items()}
        return cls(str(info["source"]), str(info["target"]), int(info.get("moved", 0)), copied)

    def same_copy(self, msg: Any) -> bool:
        """Whether ``msg`` is an original this record says was copied (by its number and identity)."""
        seq = int(msg.sequence_number or 0)
        return seq in self.copied and self.copied[seq] == identity(msg, self.source)


def identity(msg: Any, source: str) -> str:
    """What names a resubmitted original and its copy: ``copy_id`` from the source it was read from."""
    return copy_id(msg, source)


def record_path(conn: LiveConnection, source: EntityPath, target: EntityPath) -> Path:
    key = {
        "namespace": conn.fully_qualified_namespace.lower(),
        "source": str(source).lower(),
        "target": str(target).lower(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return copy_records().parent / "resubmits" / f"resubmit-{digest}.json"


def load(path: Path) -> ResubmitProgress | None:
    """The record at ``path``, or None. One that cannot be read is refused, not started over: the
    originals it names as copied would be copied again."""
    try:
        return ResubmitProgress.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(
            f"{path} (where a resubmit stopped) is unreadable ({type(exc).__name__}). Delete it to start afresh: "
            "the originals it names as copied, if still there, are then copied again."
        ) from None


def save(path: Path, progress: ResubmitProgress | None) -> None:
    """Keep ``progress`` for the next run, or (None: the run ended complete) remove the record."""
    if progress is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, progress.to_json())
