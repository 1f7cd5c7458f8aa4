"""Settlement panel for a locked batch: lock countdowns, auto-renewal, and per-row outcomes."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as W

from ...core import LockedBatch, Outcome, Report
from .render import detail_html, guard, row_label


class SettlementPanel(W.VBox):
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
        self.detail = W.HTML()
        self.auto_renew.observe(lambda change: setattr(self.batch, "auto_renew", change["new"]), names="value")
        for name, button in self.buttons.items():
            button.on_click(guard(self.status, lambda action=name: self.act(action)))
        self.rows.observe(self._on_select, names="value")
        super().__init__(
            [
                self.status,
                self.rows,
                W.HBox([self.auto_renew]),
                W.HBox(list(self.buttons.values())),
                W.HBox([self.reason, self.description_box]),
                self.detail,
            ]
        )
        self.refresh()
        self._stop = threading.Event()
        if tick > 0 and batch.mode == "peek-lock":
            threading.Thread(target=self._tick, args=(tick,), daemon=True, name="sbnotebook-countdown").start()

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            if self.batch.closed or not self.batch.unsettled:
                return
            self.refresh()

    def close(self) -> None:
        self._stop.set()
        super().close()

    # ---------------------------------------------------------- view

    def row_state(self, i: int) -> str:
        """What a row shows after its label: the lock countdown, or the outcome of its settlement."""
        problem = self.problems.get(i)
        if problem is not None:
            operation, outcome = problem
            why = f" ({outcome.error})" if outcome.error else ""
            return f"{operation}: {outcome.outcome.replace('_', ' ')}{why}"
        status = self.batch.status(i)
        if status == "locked":
            left = self.batch.seconds_left()[i]
            return f"locked, {left:.0f} s left" if left else "lock expired"
        return status.replace("_", " ")

    def refresh(self) -> None:
        records = self.batch.records
        selected = self.rows.value
        self.rows.options = [(row_label(r, f"  — {self.row_state(i)}"), i) for i, r in enumerate(records)]
        self.rows.value = tuple(i for i in selected if i < len(records))
        open_ = len(self.batch.unsettled)
        self.status.value = (
            f"<b>{self.batch.entity}</b>: {len(records)} messages, {open_} unsettled ({self.batch.mode})"
        )

    def _on_select(self, _: Any) -> None:
        chosen = list(self.rows.value)
        self.detail.value = detail_html(self.batch.records[chosen[-1]]) if chosen else ""

    # ---------------------------------------------------------- actions

    def select(self, rows: list[int]) -> None:
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
        self.refresh()
        self.status.value += f"<br>{html.escape(report.summary())}"
        return report
