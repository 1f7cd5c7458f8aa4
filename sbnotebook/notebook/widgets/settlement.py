"""Settlement panel for a locked batch: lock countdowns, auto-renewal, and per-row outcomes.

The countdown ticks on a thread of its own, so it writes one widget nobody edits (the locks line)
and the row list only when a row's state changes: rewriting a list's options every second resets
a selection the browser has in flight, and rewriting the status line erased the last outcome."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as W

from ...core import LockedBatch, Outcome, Report
from .render import detail_html, guard, row_label


class SettlementPanel(W.VBox):
    """Settle the rows of a locked ``batch`` (``core.receive``): Complete, Abandon, Dead-letter or
    Defer the selected rows (``act(operation, rows)`` returns the ``Report``), with each lock's
    countdown refreshed every ``tick`` seconds (0: no countdown) and auto-renewal bound to the batch."""

    def __init__(self, batch: LockedBatch, *, tick: float = 1.0) -> None:
        self.batch = batch
        self.problems: dict[int, tuple[str, Outcome]] = {}  # row -> (operation, what went wrong)
        self.rows = W.SelectMultiple(options=[], rows=min(max(len(batch), 3), 15), layout=W.Layout(width="100%"))
        self.auto_renew = W.Checkbox(value=batch.auto_renew, description="Renew locks automatically")
        self.reason = W.Text(description="Reason", placeholder="dead-letter reason")
        self.description_box = W.Text(description="Description")
        self.buttons = {
            name: W.Button(description=label, button_style=style)
            for name, label, style in [
                ("complete", "Complete", "success"),
                ("abandon", "Abandon", ""),
                ("dead_letter", "Dead-letter", "danger"),
                ("defer", "Defer", "warning"),
                ("renew", "Renew now", "info"),
            ]
        }
        self.status = W.HTML()
        self.locks = W.HTML()
        self.detail = W.HTML()
        self._view = threading.RLock()  # the countdown thread and a click never redraw at once
        self.auto_renew.observe(lambda change: setattr(self.batch, "auto_renew", change["new"]), names="value")
        for name, button in self.buttons.items():
            button.on_click(guard(self.status, lambda action=name: self.act(action)))
        self.rows.observe(self._on_select, names="value")
        super().__init__(
            [
                self.status,
                self.locks,
                self.rows,
                W.HBox([self.auto_renew]),
                W.HBox(list(self.buttons.values())),
                W.HBox([self.reason, self.description_box]),
                self.detail,
            ]
        )
        self.refresh()
        self._stop = threading.Event()
        if tick > 0 and batch.mode == "peek_lock":
            threading.Thread(target=self._tick, args=(tick,), daemon=True, name="sbnotebook-countdown").start()

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            if self.batch.closed or not self.batch.unsettled:
                self._show_locks()
                return
            with self._view:
                self._show_locks()
                self._relabel()

    def close(self) -> None:
        """Stop the countdown and close the panel (the batch stays as it is)."""
        self._stop.set()
        super().close()

    # ---------------------------------------------------------- view

    def row_state(self, i: int, left: list[float | None] | None = None) -> str:
        """What a row shows after its label: its lock, or the outcome of its settlement."""
        problem = self.problems.get(i)
        if problem is not None:
            operation, outcome = problem
            why = f" ({outcome.error})" if outcome.error else ""
            return f"{operation}: {outcome.outcome.replace('_', ' ')}{why}"
        status = self.batch.status(i)
        if status == "locked":
            return "locked" if (left or self.batch.seconds_left())[i] else "lock expired"
        return status.replace("_", " ")

    def locks_line(self) -> str:
        """The countdown: how many locks are held and when the soonest ends."""
        left = [s for s in self.batch.seconds_left() if s is not None]
        if not left:
            return ""
        held = [s for s in left if s > 0]
        expired = len(left) - len(held)
        parts = [f"{len(held)} locked, the soonest ends in {min(held):.0f} s"] if held else []
        if expired:
            parts.append(f"{expired} lock{'s' if expired > 1 else ''} expired")
        renewing = " (renewed automatically)" if self.batch.auto_renew and held else ""
        return "Locks: " + ", ".join(parts) + renewing

    def _show_locks(self) -> None:
        line = html.escape(self.locks_line())
        if self.locks.value != line:
            self.locks.value = line

    def _relabel(self) -> None:
        """Rewrite the row labels if a row's state changed, keeping what is selected (a new list of
        options clears the selection)."""
        left = self.batch.seconds_left()
        options = [(row_label(r, f"  — {self.row_state(i, left)}"), i) for i, r in enumerate(self.batch.records)]
        if list(self.rows.options) == options:
            return
        with self.rows.hold_sync():
            selected = self.rows.value
            self.rows.options = options
            self.rows.value = tuple(i for i in selected if i < len(options))

    def refresh(self) -> None:
        """Redraw the rows' labels, the locks line and the status line."""
        with self._view:
            self._relabel()
            self._show_locks()
            open_ = len(self.batch.unsettled)
            where = html.escape(self.batch.label)  # prod:orders for a batch of a named connection
            mode = self.batch.mode.replace("_", "-")  # as %sb_receive --mode types it
            self.status.value = f"<b>{where}</b>: {len(self.batch.records)} messages, {open_} unsettled ({mode})"

    def _on_select(self, _: Any) -> None:
        chosen = list(self.rows.value)
        self.detail.value = detail_html(self.batch.records[chosen[-1]]) if chosen else ""

    # ---------------------------------------------------------- actions

    def select(self, rows: list[int]) -> None:
        """Select these rows (what the actions act on by default)."""
        self.rows.value = tuple(rows)

    def act(self, action: str, rows: list[int] | None = None) -> Report | None:
        """Settle the given rows (default: the selected ones) and show each outcome."""
        chosen = list(self.rows.value) if rows is None else rows
        if action != "renew" and not chosen:
            self.status.value = "Select one or more rows first."
            return None
        if action == "renew":
            report = self.batch.renew()
        elif action == "dead_letter":
            report = self.batch.dead_letter(
                chosen, reason=self.reason.value or None, description=self.description_box.value or None
            )
        else:
            report = getattr(self.batch, action)(chosen)
        # What went well shows through the batch's own status; a problem stays shown until a later
        # settlement of that row succeeds.
        for o in report.outcomes:
            if o.index is None or o.outcome == "already_settled":
                continue
            if o.ok:
                self.problems.pop(o.index, None)
            else:
                self.problems[o.index] = (report.operation, o)
        with self._view:
            self.refresh()
            self.status.value += f"<br>{html.escape(report.summary())}"
        return report
