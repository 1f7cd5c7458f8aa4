"""The JSON lines export format lives in the core (``sbnotebook.core.files.jsonl``); the panels use it from here."""

from __future__ import annotations

from ..core import from_json_record, iter_jsonl, read_jsonl, to_json_record, write_jsonl

__all__ = ["from_json_record", "iter_jsonl", "read_jsonl", "to_json_record", "write_jsonl"]
