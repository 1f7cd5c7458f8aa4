"""Playbooks: an incident procedure written once (a YAML file) and run as a job, with a plan first,
an audit of every message, and nothing moved twice (docs/playbooks.md). Top down:

- ``running.py``: ``run(playbook)`` does it, each rule through the kit's own resubmit and discard;
- ``planning.py``: ``plan(playbook)`` says what it would do, from one scan of each dead-letter queue;
- ``audit.py``: the audit a run writes, row by row, and ``audit(FOLDER)`` reading it back;
- ``selection.py``: which rule a message is for (the first whose ``when`` holds);
- ``schema.py``: ``load(FILE)``, the file read and checked (file, line and column of a mistake).
"""

from __future__ import annotations

from .audit import COLUMNS, OUTCOMES, audit
from .planning import Plan, plan
from .running import (
    BAD_PLAYBOOK_EXIT,
    DONE_EXIT,
    FAILED_EXIT,
    INTERRUPTED_EXIT,
    STOPPED_EXIT,
    PlaybookRun,
    run,
    state_path,
)
from .schema import Playbook, PlaybookError, Rule, load

__all__ = [
    "BAD_PLAYBOOK_EXIT",
    "COLUMNS",
    "DONE_EXIT",
    "FAILED_EXIT",
    "INTERRUPTED_EXIT",
    "OUTCOMES",
    "STOPPED_EXIT",
    "Plan",
    "Playbook",
    "PlaybookError",
    "PlaybookRun",
    "Rule",
    "audit",
    "load",
    "plan",
    "run",
    "state_path",
]
