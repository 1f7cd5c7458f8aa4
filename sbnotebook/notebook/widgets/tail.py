"""The live tail as a panel (``%sb_tail ENTITY --panel``): ``core.tail`` on a thread of its own, so
the cell returns at once and the table and rate line keep updating until **Stop** (``stop()``) or
the tail's seconds are up. Peeks only: nothing locked, removed or counted."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, EntityPath, Tail, live_connection
from .background import Background
from .grid import BASE_COLUMNS, BODY_COLUMN, DEAD_LETTER_COLUMNS, MessageGrid

SHOWN = 200  # rows the panel's table keeps (the tail keeps more for to_pandas())


class TailPanel(W.VBox):
    """``core.tail`` as a panel, on a thread of its own: the messages arriving in ``entity`` (peeked
    every ``interval`` seconds, for ``seconds`` or until ``stop()``; ``where``: a search;
    ``from_sequence_number``: where to start) and their rate, while the cell returns at once."""

    def __init__(
        self,
        entity: str | EntityPath,
        *,
        interval: float = core.TAIL_INTERVAL,
        seconds: float | None = None,
        where: str | None = None,
        from_sequence_number: int | None = None,
        connection: ConnectionLike = None,
    ) -> None:
        self.connection = live_connection(connection)
        self.tail: Tail = core.tail(
            entity,
            interval=interval,
            seconds=seconds,
            where=where,
            from_sequence_number=from_sequence_number,
            connection=self.connection,
        )
        dead = self.tail.path.is_dead_letter
        self.rows = MessageGrid(columns=[*BASE_COLUMNS, *(DEAD_LETTER_COLUMNS if dead else []), BODY_COLUMN], rows=12)
        self.shown: list[dict[str, Any]] = []
        self.status = W.HTML()
        self.stop_button = W.Button(description="Stop", icon="stop", tooltip="stop tailing")
        self.stop_button.on_click(lambda _: self.stop())
        self.work = Background(self.status, self._working)
        super().__init__(
            [
                W.HTML(f"<b>Tail of {html.escape(self.tail.entity)}</b> (peeks: nothing locked or counted)"),
                W.HBox([self.stop_button, self.status], layout=W.Layout(align_items="center")),
                self.rows.widget,
            ],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self._draw("Waiting for messages")
        self.work.start("tail", self._run)

    def _run(self, stop: threading.Event) -> None:
        for records in self.tail:
            if records:
                self.shown = (self.shown + records)[-SHOWN:]
                self.rows.show(self.shown)
            self._draw("Tailing")
            if stop.is_set():
                self.tail.stop()

    def _working(self, busy: bool) -> None:
        self.stop_button.disabled = not busy
        if not busy:
            self._draw("Ended")

    def _draw(self, state: str) -> None:
        self.status.value = html.escape(f"{state}: {self.tail.status()}.")

    def stop(self) -> None:
        """Stop after the poll in flight."""
        self.tail.stop()
        self.work.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the tail to end (its seconds, or stop()); a kernel interrupt stops it."""
        return self.work.wait(timeout)

    def to_pandas(self) -> Any:
        """What the tail showed, in the record schema."""
        return self.tail.to_pandas()
