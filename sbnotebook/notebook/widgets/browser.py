"""Message browser: page through an entity or its DLQ by sequence number, search, inspect, export."""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, EntityPath, LiveConnection, live_connection, renamed
from ..addresses import lookup, resolve
from ..export import to_json_record
from .grid import BASE_COLUMNS, BODY_COLUMN, DEAD_LETTER_COLUMNS, Column, GridSelection, MessageGrid
from .render import guard

# Messages a page shows unless told otherwise (%sb_browse --page-size too); core.PAGE_SIZE is a peek's.
ROWS_A_PAGE = 50


class MessageBrowser(GridSelection, W.VBox):
    """Page through ``entity`` (its dead-letter queue with ``dlq=True``) by sequence number,
    ``page_size`` messages at a time; search (looking through at most ``max_scanned`` messages),
    inspect a message, export the entity. Read-only: peeks never lock and never count a delivery.
    ``connections``: the named connections an entity typed as ``NAME:ENTITY`` is looked up in."""

    @renamed(dead_letter="dlq", scan_limit="max_scanned")
    def __init__(
        self,
        entity: str,
        *,
        dlq: bool = False,
        page_size: int = ROWS_A_PAGE,
        connection: ConnectionLike = None,
        max_scanned: int = core.MAX_SCANNED,
        connections: Mapping[str, LiveConnection] | None = None,
    ) -> None:
        """``dlq``: browse the dead-letter queue (as ``--dlq``); ``page_size`` messages a page; a
        search looks through at most ``max_scanned`` messages."""
        self.default_connection = live_connection(connection)
        self.named = lookup(connections or {})  # NAME:ENTITY typed into the entity box
        self.page_size = page_size
        self.max_scanned = max_scanned
        self.records: list[dict[str, Any]] = []
        self.history: list[int] = []  # where earlier pages started, for "previous"
        self.start = 1
        self.next_start = 1
        self.where: str | None = None
        self._echo: str | None = None  # what search() is writing into the search box
        name, _, bare = entity.rpartition(":")
        shown = str(EntityPath.parse(bare).parent)
        self.entity_box = W.Text(value=f"{name}:{shown}" if name else shown, description="Entity")
        self.dlq_box = W.Checkbox(value=dlq, description="Dead-letter queue")
        # continuous_update=False: the frontend sends the text only when the user commits it (Enter
        # or leaving the box), so observing 'value' runs one search per commit, not one per
        # keystroke. Text.on_submit did this before; ipywidgets 8 deprecates it (7.7 has both).
        self.search_box = W.Text(
            placeholder='body_json.customer.id == "c-7" or props.priority == "high"',
            description="Search",
            continuous_update=False,
        )
        # The label is the first sequence number's name (docs/names.md: --from-sequence-number), in full.
        self.jump_box = W.BoundedIntText(
            value=1, min=0, max=2**62, description="From sequence number", style={"description_width": "initial"}
        )
        self.prev_button = W.Button(description="◀ Previous")
        self.next_button = W.Button(description="Next ▶")
        self.jump_button = W.Button(description="Go")
        self.rows = MessageGrid(columns=self._columns(dlq))
        self.detail = W.HTML()
        self.status = W.HTML()
        self.export_csv_button = W.Button(description="Export CSV")
        self.export_json_button = W.Button(description="Export JSON")
        self.export_path = W.Text(value="messages", description="File")
        self.export_progress = W.IntProgress(value=0, min=0, max=1, description="Export")
        self.export_progress.layout.display = "none"
        # One action at a time: the kernel may handle two widget messages at once (ipykernel 7.4 can
        # dispatch comm messages concurrently). A search box commit and a Go click arrive together;
        # unserialized, JupyterLab showed one load's filtered rows under the other's unfiltered status.
        self._one_at_a_time = threading.RLock()
        self.prev_button.on_click(guard(self.status, self._serial(self.previous_page)))
        self.next_button.on_click(guard(self.status, self._serial(self.next_page)))
        self.jump_button.on_click(guard(self.status, self._serial(self.go)))
        self.search_box.observe(guard(self.status, self._serial(self._search_committed)), names="value")
        self.dlq_box.observe(guard(self.status, self._serial(lambda: self.jump(1))), names="value")
        self.rows.on_select(self._on_select)
        self.export_csv_button.on_click(guard(self.status, lambda: self.export_csv(self.export_file(".csv"))))
        self.export_json_button.on_click(guard(self.status, lambda: self.export_json(self.export_file(".jsonl"))))
        super().__init__(
            [
                W.HBox([self.entity_box, self.dlq_box]),
                W.HBox([self.search_box, self.jump_box, self.jump_button]),
                W.HBox([self.prev_button, self.next_button, self.status]),
                self.rows.widget,
                W.HTML(self.rows.note),
                W.HBox([self.export_path, self.export_csv_button, self.export_json_button, self.export_progress]),
                self.detail,
            ]
        )
        self.jump(1)

    def _serial(self, action: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            with self._one_at_a_time:
                action()

        return run

    @property
    def connection(self) -> LiveConnection:
        """The entity box's connection: the panel's own, or a named one (``prod:orders``)."""
        return resolve(self.entity_box.value, lambda: self.default_connection, self.named)[1]

    @property
    def entity(self) -> str:
        text = resolve(self.entity_box.value, lambda: self.default_connection, self.named)[0]
        path = EntityPath.parse(text)
        return str(path.dead_letter if self.dlq_box.value else path)

    # ---------------------------------------------------------- paging

    def _load(self, start: int) -> None:
        found = core.peek(
            self.entity,
            from_sequence_number=start,
            max_messages=self.page_size,
            where=self.where,
            max_scanned=self.max_scanned,
            connection=self.connection,
        )
        self.start, self.next_start, self.records = start, found.next_sequence_number, found.records
        self.rows.columns = self._columns(self.dlq_box.value)
        self.rows.show(found.records)
        self.detail.value = ""
        searched = f", {found.scanned} scanned for the search" if self.where else ""
        span = (
            f"sequence numbers {found.records[0]['sequence_number']}..{found.records[-1]['sequence_number']}"
            if found.records
            else "no messages"
        )
        hint = found.hint()
        hint_html = f"<br>{html.escape(hint)}" if hint else ""
        self.status.value = f"{html.escape(self.entity)}: {len(found.records)} messages, {span}{searched}{hint_html}"

    @staticmethod
    def _columns(dead_letter: bool) -> list[Column]:
        return [*BASE_COLUMNS, *(DEAD_LETTER_COLUMNS if dead_letter else []), BODY_COLUMN]

    def go(self) -> None:
        """The Go button: the search box as it is now (empty: no filter), from the sequence number box."""
        expression = self.search_box.value.strip() or None
        if expression is not None:
            core.compile_where(expression)
        self.where = expression
        self.jump(self.jump_box.value)

    def jump(self, sequence_number: int) -> None:
        """Show the page that starts at ``sequence_number``."""
        self.history.clear()
        self._load(max(int(sequence_number), 1))

    def next_page(self) -> None:
        """Show the next page."""
        if not self.records:
            return
        self.history.append(self.start)
        self._load(self.next_start)

    def previous_page(self) -> None:
        """Show the page before this one."""
        if self.history:
            self._load(self.history.pop())

    def _search_committed(self) -> None:
        """The user committed the search box's text. search() writes the box too (the expression
        stripped): that write is its own echo, not a commit, and does not search twice."""
        if self.search_box.value != self._echo:
            self.search(self.search_box.value)

    def search(self, expression: str | None) -> None:
        """Filter on properties and body fields (see sbnotebook.core.views.search); '' clears the search."""
        expression = (expression or "").strip() or None
        if expression is not None:
            core.compile_where(expression)  # bad syntax fails here, before any peek
        self.where = expression
        self._echo = expression or ""  # observers run inside the write below
        try:
            self.search_box.value = expression or ""
        finally:
            self._echo = None
        self.jump(1)

    # ---------------------------------------------------------- selection

    # ---------------------------------------------------------- export

    def to_pandas(self) -> Any:
        """The selection (or the whole page) as a DataFrame in the record schema."""
        return core.to_dataframe(self.selected)

    def export_file(self, suffix: str) -> Path:
        """The file name in the box with ``suffix`` added once (``out.jsonl`` stays ``out.jsonl``)."""
        name = self.export_path.value.strip() or "messages"
        for known in (".jsonl", ".json", ".csv"):
            if name.lower().endswith(known):
                name = name[: -len(known)]
                break
        return Path(name + suffix)

    def export_records(self, *, selection: bool = False) -> list[dict[str, Any]]:
        """What a CSV export writes: the selected rows with ``selection=True``; otherwise the whole
        entity (or, with a search, every match in it), read through ``core.scan`` with progress."""
        if selection and self.rows.value:
            return [self.records[i] for i in self.rows.value]
        matches = core.compile_where(self.where) if self.where else None
        progress = self._export_progress()
        out: list[dict[str, Any]] = []
        for page in core.scan(self.entity, progress=progress, connection=self.connection):
            out.extend(r for r in page if matches is None or matches(r))
        self._export_done()
        return out

    def _export_progress(self) -> Callable[[int], None]:
        """The export bar shown, against the entity's count when there is one; what it calls with
        the messages read so far."""
        total = 0
        try:
            counts = core.counts(str(EntityPath.parse(self.entity).parent), connection=self.connection)
            total = counts.dead_letter if self.dlq_box.value else counts.active + counts.scheduled
        except core.SbError:
            total = 0  # no counts (no Manage right): the bar shows what was read so far
        bar = self.export_progress
        bar.max, bar.value, bar.layout.display = max(total, 1), 0, "flex"

        def progress(done: int) -> None:
            bar.max = max(bar.max, done)
            bar.value = done
            self.status.value = f"Exporting {self.entity}: {done} messages read" + (f" of {total}" if total else "")

        return progress

    def _export_done(self) -> None:
        bar = self.export_progress
        bar.max = max(bar.value, 1)
        bar.value = bar.max

    def export_json(self, path: str | Path, *, selection: bool = False) -> Path:
        """The whole entity or search result (``selection=True``: the selected rows) written by
        ``core.export_jsonl``, what ``%sb_export`` writes: every property, the body's kind and the
        application properties' AMQP types, so ``core.import_jsonl`` sends the same messages back
        (core/files/jsonl.py). The selected rows are read again from the entity by their
        sequence numbers (a page's records hold no types); one gone since is said."""
        out = Path(path)
        chosen = {int(self.records[i]["sequence_number"]) for i in self.rows.value} if selection else set()
        where = _numbered(chosen) if chosen else self.where
        progress = self._export_progress()
        n = core.export_jsonl(
            self.entity, out, where=where, progress=lambda read, _: progress(read), connection=self.connection
        )
        self._export_done()
        gone = f" ({len(chosen) - n} of the selected rows are no longer in {self.entity})" if n < len(chosen) else ""
        self.status.value = f"Exported {n} messages to {out}{gone}"
        return out

    def export_csv(self, path: str | Path, *, selection: bool = False) -> Path:
        """The same messages as CSV in the record schema's columns (application properties as JSON)."""
        out = Path(path)
        records = self.export_records(selection=selection)
        frame = core.to_dataframe([to_json_record(r) for r in records])
        frame["application_properties"] = [json.dumps(p) for p in frame["application_properties"]]
        frame.to_csv(out, index=False)
        self.status.value = f"Exported {len(records)} messages to {out}"
        return out


def _numbered(numbers: set[int]) -> Callable[[dict[str, Any]], bool]:
    """A search for the messages with these sequence numbers."""

    def where(record: dict[str, Any]) -> bool:
        return record["sequence_number"] in numbers

    return where
