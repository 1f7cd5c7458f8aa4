"""The message list of the browser and triage panels: a real grid (itables' ``ITable`` widget:
sortable columns, selectable rows, the body in its own column), or a plain multi-select list where
itables is not installed (said once in the log and on the panel).

Selection is by position in the records shown (``value``), whatever order the reader sorted the
grid into, so a panel maps a selected row back to its record the same way in both forms.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as W
import pandas as pd

from ...about import install
from .render import detail_html, row_label

log = logging.getLogger(__name__)
Record = dict[str, Any]
BODY_PREVIEW = 120  # characters of the body in the grid; the detail view below shows all of it

# (column title, how a record fills it); the panels add their own columns (reason, lock state).
Column = tuple[str, Callable[[Record], Any]]


def body_preview(record: Record) -> str:
    body = record.get("body_text")
    text = body if body is not None else f"<{len(record.get('body') or b'')} binary bytes>"
    text = " ".join(text.split())
    return text if len(text) <= BODY_PREVIEW else text[: BODY_PREVIEW - 1] + "…"


def _time(record: Record, name: str) -> str:
    value = record.get(name)
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


BASE_COLUMNS: list[Column] = [
    ("seq", lambda r: int(r.get("sequence_number") or 0)),
    ("enqueued (UTC)", lambda r: _time(r, "enqueued_time")),
    ("subject", lambda r: r.get("subject") or ""),
    ("message id", lambda r: r.get("message_id") or ""),
    ("deliveries", lambda r: int(r.get("delivery_count") or 0)),
]
BODY_COLUMN: Column = ("body", body_preview)
DEAD_LETTER_COLUMNS: list[Column] = [
    ("reason", lambda r: r.get("dead_letter_reason") or "(none)"),
    ("description", lambda r: r.get("dead_letter_error_description") or ""),
]

_warned = False

# "auto": itables' grid, except on Databricks (DATABRICKS_RUNTIME_VERSION set), where anywidget-based
# widgets are not known to load: there the plain core-ipywidgets list. "itables" or "plain" force one.
# Set with %config SbMagics.grid = "itables" (docs/widgets.md): the setting lives on the magics
# object only, and a panel reads it when it draws its list.
GRID_MODES = ("auto", "itables", "plain")


def configured_mode() -> str:
    """``SbMagics.grid`` of the running IPython's loaded extension; "auto" where there is none."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = shell.magics_manager.registry.get("SbMagics") if shell is not None else None
    return str(getattr(magics, "grid", "auto"))


def on_databricks() -> bool:
    return bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))


def grid_available() -> bool:
    """Whether itables' widget is used here; the first time it is not, say why in the log."""
    global _warned
    mode = configured_mode()
    if mode == "plain" or (mode == "auto" and on_databricks()):
        if not _warned:
            _warned = True
            log.info(
                "sbnotebook panels show plain lists: %s",
                "SbMagics.grid = 'plain'"
                if mode == "plain"
                else "on Databricks the grid is off by default (%config SbMagics.grid = 'itables' to try it)",
            )
        return False
    try:
        import itables.widget  # noqa: F401
    except ImportError as exc:
        if not _warned:
            _warned = True
            log.warning(
                "sbnotebook panels show plain lists instead of sortable grids: %s (%s installs itables)",
                exc,
                install().pip_install("notebook"),
            )
        return False
    return True


class MessageGrid:
    """One message list. ``show(records)`` fills it; ``value`` is the selected positions;
    ``labels`` one text line per row (what the plain list shows, and handy in tests)."""

    def __init__(self, *, columns: Sequence[Column], rows: int = 12) -> None:
        self.columns = list(columns)
        self.records: list[Record] = []
        self.extra: list[str] = []
        self.is_grid = grid_available()
        self.widget: Any
        if self.is_grid:
            from itables.widget import ITable

            self._options: dict[str, Any] = {
                "select": {"style": "os", "info": False},
                # Pages, not a scrolling body: DataTables' scrollY draws the header as a separate table
                # that loses its column widths when the panel is laid out again (seen in JupyterLab).
                "paging": True,
                "pageLength": rows,
                "lengthMenu": [rows, 25, 50, 100],
                "showIndex": False,
                "maxBytes": 0,  # never downsample: every record has its row, so positions map back
                "order": [],  # the records' order until the reader sorts
                "classes": "display compact cell-border",
                "style": "width:100%;margin:0;table-layout:auto",
                "autoWidth": False,
            }
            self.widget = ITable(self._frame(), **self._options)
        else:
            self.widget = W.SelectMultiple(options=[], rows=rows, layout=W.Layout(width="100%"))
        self.note = "" if self.is_grid else _plain_note()

    # ------------------------------------------------------------ content

    def _frame(self) -> pd.DataFrame:
        data: dict[str, list[Any]] = {title: [fill(r) for r in self.records] for title, fill in self.columns}
        if self.extra:
            data["state"] = list(self.extra)
        return pd.DataFrame(data, columns=[*(t for t, _ in self.columns), *(["state"] if self.extra else [])])

    def show(self, records: list[Record], extra: Sequence[str] | None = None) -> None:
        """Show these records (and, per row, an extra state column), selecting none."""
        self.records = list(records)
        self.extra = list(extra or [])
        if self.is_grid:
            self.widget.update(self._frame(), selected_rows=[])
        else:
            self.widget.options = [(label, i) for i, label in enumerate(self.labels)]
            self.widget.value = ()

    @property
    def labels(self) -> list[str]:
        """One line per row: the record, then the panel's own columns (the dead-letter reason and
        description), then the extra state: the plain list shows what the grid's columns show."""
        own = [(title, fill) for title, fill in self.columns if (title, fill) not in (*BASE_COLUMNS, BODY_COLUMN)]
        lines = []
        for i, r in enumerate(self.records):
            parts = [f"{title}: {value}" for title, fill in own if (value := fill(r)) not in ("", None)]
            if i < len(self.extra) and self.extra[i]:
                parts.append(self.extra[i])
            lines.append(row_label(r, "".join(f"  — {part}" for part in parts)))
        return lines

    # ------------------------------------------------------------ selection

    @property
    def value(self) -> tuple[int, ...]:
        chosen = self.widget.selected_rows if self.is_grid else self.widget.value
        return tuple(int(i) for i in chosen if 0 <= int(i) < len(self.records))

    @value.setter
    def value(self, rows: Sequence[int]) -> None:
        if self.is_grid:
            self.widget.selected_rows = list(rows)
        else:
            self.widget.value = tuple(rows)

    def chosen(self) -> list[Record]:
        """The selected records, or every record shown when none is selected (what a panel's action
        applies to)."""
        return [self.records[i] for i in self.value] or list(self.records)

    def detail_of_last_chosen(self) -> str:
        """The detail pane's HTML for the row selected last, empty when none is."""
        chosen = self.value
        return detail_html(self.records[chosen[-1]]) if chosen else ""

    def on_select(self, callback: Callable[[], None]) -> None:
        self.widget.observe(lambda _: callback(), names="selected_rows" if self.is_grid else "value")


def _plain_note() -> str:
    mode = configured_mode()
    if mode == "plain":
        return ""
    if mode == "auto" and on_databricks():
        return "<i>plain list on Databricks: %config SbMagics.grid = 'itables' for sortable grids</i>"
    command = html.escape(install().pip_install("notebook"))
    return f"<i>plain list (itables is not installed): {command} for sortable grids</i>"


class GridSelection:
    """Selection for a panel that shows rows in ``self.rows`` (a MessageGrid) and the last selected
    row's detail in ``self.detail``: its actions apply to ``selected``."""

    rows: MessageGrid
    detail: W.HTML

    def select(self, rows: list[int]) -> None:
        self.rows.value = tuple(rows)

    @property
    def selected(self) -> list[Record]:
        """The selected rows, or every row shown when none is selected."""
        return self.rows.chosen()

    def _on_select(self) -> None:
        self.detail.value = self.rows.detail_of_last_chosen()
