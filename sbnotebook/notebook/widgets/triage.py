"""Dead-letter triage: group by reason, error description, subject or signature, inspect, repair in
bulk, resubmit (copy first), or discard.

Opening costs the runtime counts (one round trip) and one peeked page, whatever the size of the
dead-letter queue. When that page is the whole queue its groups are exact at once; otherwise
**Count groups** counts every message by reason, description, subject and signature over the scanner on a
thread of its own (progress and rate shown, **Stop** or a kernel interrupt in ``wait()`` ends it),
keeping counters only: a million dead-lettered messages never become a million rows in the kernel
unless **Load as DataFrame** is asked for, with its limit."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ipywidgets as W

from ... import core
from ...core import (
    GROUP_OTHER,
    ConnectionLike,
    EntityPath,
    GroupCounts,
    InvalidInputError,
    group_value,
    live_connection,
    renamed,
)
from .background import Background, bars_html
from .grid import BASE_COLUMNS, BODY_COLUMN, DEAD_LETTER_COLUMNS, GridSelection, MessageGrid
from .render import guard
from .triage_actions import TriageActions

_ALL = "\x00all"  # the group dropdown's "all" entry (a None value would show an empty dropdown)
BY_LABELS = {
    "dead_letter_reason": "reason",
    "dead_letter_error_description": "error description",
    "subject": "subject",
    "signature": "signature",  # reason and description with their variable parts masked
}
PAGE = core.PAGE_SIZE  # one peek: what the panel loads when it opens
FRAME_LIMIT = 10_000  # the default cap of "Load as DataFrame"
PROGRESS_EVERY = 0.25  # seconds between two redraws while counting


class TriagePanel(GridSelection, W.VBox, TriageActions):
    """Dead-letter triage of ``entity``'s dead-letter queue (``entity``: the queue or subscription, or
    its dead-letter queue): its messages grouped by reason, error description, subject or signature, from a first page
    of ``max_messages``; inspect, repair in bulk, resubmit (copy first) or discard. Everything
    destructive (resubmit moves, discard removes) waits for an explicit confirmation."""

    @renamed(limit="max_messages")
    def __init__(self, entity: str, *, connection: ConnectionLike = None, max_messages: int = PAGE) -> None:
        """``max_messages``: at most this many messages in the first page (one peek), 1 to ``PAGE``."""
        self.connection = live_connection(connection)
        self.source = EntityPath.parse(entity).parent
        self.dlq = str(self.source.dead_letter)
        if not isinstance(max_messages, int) or not 1 <= max_messages <= PAGE:
            raise InvalidInputError(f"max_messages is the first page's size, 1 to {PAGE}, not {max_messages!r}.")
        self.max_messages = max_messages
        self.total: int | None = None  # dead-lettered messages, from the runtime properties
        self.first_page: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []  # what is loaded: the first page, or a group's page
        self.visible: list[dict[str, Any]] = []
        self.grouping: GroupCounts | None = None
        self.frame: Any = None  # "Load as DataFrame" puts its DataFrame here
        self._drawn = 0.0
        self._updating = False  # the dropdown is being refilled: its value changes are not the reader's
        self._found: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (field, value) -> a page found by scanning
        wide = W.Layout(width="100%", max_width="100%")
        label = {"description_width": "initial"}  # labels at their full width, never cut
        self.title = W.HTML()
        self.reload_button = W.Button(description="Reload", icon="refresh", tooltip="counts and the first page again")
        self.by = W.Dropdown(
            options=[(v, k) for k, v in BY_LABELS.items()],
            description="Group by",
            style=label,
            layout=W.Layout(width="auto"),
        )
        self.count_button = W.Button(
            description="Count groups", icon="bar-chart", tooltip="count every dead-lettered message (peeks, no locks)"
        )
        self.stop_button = W.Button(description="Stop", icon="stop", disabled=True, tooltip="stop counting or loading")
        self.progress = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="240px"))
        self.progress.layout.display = "none"
        self.progress_text = W.HTML()
        self.chart = W.HTML(layout=wide)  # the groups as bars, redrawn while counting
        self.groups = W.Dropdown(options=[], description="Group", style=label, layout=W.Layout(width="auto"))
        self.rows = MessageGrid(columns=[*BASE_COLUMNS, *DEAD_LETTER_COLUMNS, BODY_COLUMN], rows=10)
        self.rows_note = W.HTML()
        self.detail = W.HTML(layout=wide)
        self.frame_limit = W.BoundedIntText(
            value=FRAME_LIMIT, min=1, max=10_000_000, description="at most", style=label, layout=W.Layout(width="180px")
        )
        self.frame_button = W.Button(
            description="Load as DataFrame",
            icon="table",
            tooltip="the group's messages into panel.frame (pandas)",
            layout=W.Layout(width="auto"),  # its full label, never cut
        )
        self.status = W.HTML(layout=wide)  # right under the action buttons: prompts, outcomes, mistakes
        acting = self._action_widgets("" if self.source.is_subscription else str(self.source))
        self.work = Background(self.status, self._working)
        self.reload_button.on_click(guard(self.status, self.reload))
        self.count_button.on_click(guard(self.status, self.count))
        self.stop_button.on_click(guard(self.status, self.stop))
        self.frame_button.on_click(guard(self.status, self._load_frame_in_background))
        self.journey_button = self._journey_button()
        self.by.observe(lambda _: self._show_groups(), names="value")
        self.groups.observe(lambda _: None if self._updating else self._show_group(), names="value")
        self.rows.on_select(self._on_select)
        row = W.Layout(flex_flow="row wrap", align_items="center", width="100%")
        super().__init__(
            [
                W.HBox([self.title, self.reload_button], layout=W.Layout(align_items="center", flex_flow="row wrap")),
                W.HBox([self.by, self.count_button, self.stop_button, self.progress, self.progress_text], layout=row),
                self.chart,
                self.groups,
                self.rows_note,
                self.rows.widget,
                W.HTML(self.rows.note),
                W.HBox([self.frame_button, self.frame_limit, self.journey_button], layout=row),
                self.detail,
                *acting,
            ],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.reload()

    # ---------------------------------------------------------- loading (one round trip + one page)

    def reload(self) -> None:
        """The runtime counts and the first page; exact groups when that page is the whole queue."""
        self.work.stop()
        self.work.wait()
        self.confirm_row.cancel()  # what was asked was about the rows as they were
        # The runtime counts (administration API) and the first page (a peek) at once: one round trip.
        with ThreadPoolExecutor(1, thread_name_prefix="sbnotebook-counts") as pool:
            counted = pool.submit(core.counts, self.source, connection=self.connection)
            self.first_page = core.peek(self.dlq, max_messages=self.max_messages, connection=self.connection).records
            self.total = counted.result().dead_letter
        self.records = self.first_page
        self._found.clear()
        whole = len(self.first_page) < self.max_messages  # the peek reached the end: nothing else to count
        self.grouping = GroupCounts.of(self.first_page, self.dlq) if whole else None
        self.progress.layout.display = "none"
        self.progress_text.value = "" if whole else "<i>counts per group: press Count groups</i>"
        self._show_groups()

    @property
    def complete(self) -> bool:
        """The groups count every dead-lettered message (not only the first page)."""
        return self.grouping is not None and self.grouping.done

    def count(self, *, wait: bool = False) -> GroupCounts:
        """Count every dead-lettered message by reason, description, subject and signature (on a thread;
        ``wait=True`` waits in the cell, where a kernel interrupt stops it). Returns the counts,
        filled in as the scan goes."""
        counting = GroupCounts(self.dlq, total=self.total)
        self.grouping = counting
        self._found.clear()
        self.progress.max = max(1, self.total or 1)
        self.progress.layout.display = "flex"

        def job(stop: threading.Event) -> None:
            core.group_counts(
                self.dlq, into=counting, progress=self._drawn_progress, cancel=stop, connection=self.connection
            )

        self.work.start("count", job)
        if wait:
            self.wait()
        return counting

    def stop(self) -> None:
        """Stop counting or loading after the page in flight (the counts so far stay, marked partial)."""
        self.work.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for counting or loading to end (a kernel interrupt stops it). True when it has."""
        return self.work.wait(timeout)

    def _working(self, busy: bool) -> None:
        self.stop_button.disabled = not busy
        self.count_button.disabled = busy
        self.frame_button.disabled = busy
        if not busy and self.grouping is not None:  # on the job's thread: redraw, start nothing
            self._draw_progress(self.grouping)
            self._show_groups(find=False)

    def _drawn_progress(self, counting: GroupCounts) -> None:
        import time

        if time.monotonic() - self._drawn >= PROGRESS_EVERY:
            self._drawn = time.monotonic()
            self._draw_progress(counting)
            self.chart.value = bars_html(self._rows())

    def _draw_progress(self, counting: GroupCounts) -> None:
        self.progress.max = max(1, counting.total or counting.scanned, counting.scanned)
        self.progress.value = counting.scanned
        self.progress_text.value = html.escape(counting.progress_text())

    def _rows(self) -> list[tuple[str, int]]:
        source = self.grouping
        if source is None:
            source = GroupCounts.of(self.first_page, self.dlq)
        return [(g.value, g.messages) for g in source.table(self.by.value)]

    def _show_groups(self, *, find: bool = True) -> None:
        """The dropdown and bars for the chosen field: every message once counted, else the first page."""
        rows = self._rows()
        scope = "" if self.complete else (" (counting…)" if self.work.running else " (first page)")
        if self.grouping is not None and self.grouping.cancelled:
            scope = " (partial: stopped)"
        options = [(f"{value} ({n:,})", value) for value, n in rows]
        everything = self.total if self.total is not None else len(self.first_page)
        keep = self.groups.value
        self._updating = True
        try:
            self.groups.options = [(f"all ({everything:,})", _ALL), *options]
            self.groups.value = keep if keep in {v for _, v in options} else _ALL
        finally:
            self._updating = False
        self.groups.description = f"{BY_LABELS[self.by.value].capitalize()}{scope}"
        self.chart.value = bars_html(rows)
        shown = "" if everything <= len(self.first_page) else f"; the first {len(self.first_page):,} loaded"
        self.title.value = (
            f"<b>{html.escape(self.dlq)}</b>: {everything:,} dead-lettered messages{shown}, "
            f"{len(rows)} {BY_LABELS[self.by.value]}s{scope}"
        )
        self._show_group(find=find)

    @property
    def reasons(self) -> dict[str, int]:
        """Messages per dead-letter reason: every message once counted, else the first page."""
        source = self.grouping if self.grouping is not None else GroupCounts.of(self.first_page, self.dlq)
        return source.counts("dead_letter_reason")

    def select_group(self, value: str | None) -> None:
        """Show one group's messages (None: the first page of all of them)."""
        self.groups.value = _ALL if value is None else value

    def _chosen(self) -> str | None:
        return None if self.groups.value in (_ALL, None) else str(self.groups.value)

    def _in_group(self, value: str | None) -> Callable[[dict[str, Any]], bool]:
        by = self.by.value
        if value is None:
            return lambda r: True
        if value == GROUP_OTHER and self.grouping is not None:  # the values past the cap: not among those kept
            kept = set(self.grouping.groups.get(by, {})) - {GROUP_OTHER}
            return lambda r: group_value(r, by) not in kept
        return lambda r: group_value(r, by) == value

    def _show_group(self, *, find: bool = True) -> None:
        value = self._chosen()
        keep = self._in_group(value)
        in_page = [r for r in self.first_page if keep(r)]
        wanted = self._group_size(value)
        found = self._found.get((self.by.value, value or ""))
        if found is not None:
            self._show(found, wanted)
            return
        if value is None or wanted is None or len(in_page) >= min(wanted, self.max_messages) or not find:
            self._show(in_page, wanted)
            return
        # The group has messages past the first page: find a page of them with the scanner.
        self._show(in_page, wanted, finding=True)
        self.work.start("find", lambda stop: self._find(value, keep, stop))

    def _group_size(self, value: str | None) -> int | None:
        if value is None:
            return self.total
        if self.grouping is None:
            return None
        group = self.grouping.groups.get(self.by.value, {}).get(value)
        return group.messages if group is not None else None

    def _find(self, value: str, keep: Callable[[dict[str, Any]], bool], stop: threading.Event) -> None:
        by = self.by.value
        group = (self.grouping.groups.get(by, {}) if self.grouping else {}).get(value)
        start = int(group.first_sequence_number or 1) if group is not None else 1
        found = self._collect(keep, self.max_messages, stop, start=start, moved_on=lambda: self._chosen() != value)
        wanted = self._chosen() == value and self.by.value == by  # still the group the reader wants
        if wanted and not stop.is_set():
            self._found[(by, value)] = found
        if wanted:
            self._show(found, self._group_size(value), stopped=stop.is_set())

    def _collect(
        self,
        keep: Callable[[dict[str, Any]], bool],
        limit: int,
        stop: threading.Event | None,
        *,
        start: int = 1,
        max_scanned: int | None = None,
        moved_on: Callable[[], bool] = lambda: False,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` dead-lettered messages that ``keep`` takes, scanned from ``start`` (at most
        ``max_scanned`` looked at); ends early on ``stop`` or when the reader has ``moved_on``."""
        found: list[dict[str, Any]] = []
        pages = core.scan(self.dlq, from_sequence_number=start, max_messages=max_scanned, connection=self.connection)
        try:
            for page in pages:
                found.extend(r for r in page if keep(r))
                if len(found) >= limit or (stop is not None and stop.is_set()) or moved_on():
                    break
        finally:
            pages.close()
        return found[:limit]

    def _show(
        self, records: list[dict[str, Any]], of: int | None, *, finding: bool = False, stopped: bool = False
    ) -> None:
        self.visible = records
        self.rows.show(records)
        self.detail.value = ""
        more = f" of {of:,}" if of is not None and of > len(records) else ""
        state = "; finding more…" if finding else ("; stopped before a page was found" if stopped else "")
        self.rows_note.value = f"<i>{len(records):,}{more} messages shown{state}</i>"

    # ---------------------------------------------------------- a DataFrame, when asked for

    @renamed(limit="max_messages", stop="cancel")
    def to_pandas(self, max_messages: int = FRAME_LIMIT, *, cancel: threading.Event | None = None) -> Any:
        """Up to ``max_messages`` messages of the chosen group (or of the whole queue) as a DataFrame
        in the record schema, read with the scanner; the explicit way to hold many rows in the kernel.
        ``cancel``: set it (from another thread) to stop with what was read so far."""
        core.check_whole_number(max_messages, "max_messages")
        value = self._chosen()
        max_scanned = max_messages if value is None else None
        found = self._collect(self._in_group(value), max_messages, cancel, max_scanned=max_scanned)
        return core.to_dataframe(found)

    def _journey_button(self) -> W.Button:
        self.journey_frame: Any = None  # "Journey" puts the selected message's journey here (core.journey)
        button = W.Button(
            description="Journey",
            icon="road",
            tooltip="what happened to the selected message, oldest first (into panel.journey_frame)",
            layout=W.Layout(width="auto"),
        )
        button.on_click(guard(self.status, self.journey))
        return button

    def journey(self) -> Any:
        """The journey of the selected message (the last one selected), shown under the rows and kept
        in ``journey_frame``: on the emulator the broker's record, on Azure what the message carries."""
        if not self.rows.value:
            raise InvalidInputError("Select a message first: its journey is shown here.")
        record = self.rows.records[self.rows.value[-1]]
        found = core.journey(self.dlq, sequence_number=int(record["sequence_number"]), connection=self.connection)
        self.journey_frame = found.to_pandas()
        shown = self.journey_frame[["time", "event", "entity", "delivery_count", "reason", "to", "operation"]]
        notes = "".join(f"<p><i>{html.escape(n)}</i></p>" for n in found.notes)
        self.detail.value = f"<b>Journey of #{record['sequence_number']}</b>{notes}{shown.to_html(index=False)}"
        return found

    def _load_frame_in_background(self) -> None:
        limit = int(self.frame_limit.value)

        def job(stop: threading.Event) -> None:
            self.frame = self.to_pandas(limit, cancel=stop)
            partial = " (stopped: partial)" if stop.is_set() else ""
            self.status.value = f"<code>panel.frame</code>: a DataFrame of {len(self.frame):,} messages{partial}"

        self.status.value = f"Loading up to {limit:,} messages into <code>panel.frame</code>…"
        self.work.start("frame", job)

    def _of(self) -> str:
        """' (shown, of 6,667 in the group)' when the rows shown are not all of the group's messages."""
        size = self._group_size(self._chosen())
        if size is None or size <= len(self.visible):
            return ""
        return f" (shown, of {size:,} in {'the queue' if self._chosen() is None else 'the group'})"
