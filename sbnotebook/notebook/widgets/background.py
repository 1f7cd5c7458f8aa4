"""Long panel work (counting a million dead-lettered messages) on a thread of its own, so the
panel's Stop button is heard while it runs: a cell's kernel is busy until it returns, and a click
is only handled between cells. One job at a time per panel; ``wait()`` waits in a cell, where a
kernel interrupt stops the job instead of leaving it running."""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Callable
from typing import Any

from ...core import SbError

log = logging.getLogger(__name__)
Job = Callable[[threading.Event], None]


class Background:
    """Runs one job at a time; ``stop()`` asks it to end (it checks its event between pages)."""

    def __init__(self, status: Any, on_change: Callable[[bool], None]) -> None:
        self.status = status  # a W.HTML where a job's error is shown
        self.on_change = on_change  # called with True when a job starts, False when it ends
        self.thread: threading.Thread | None = None
        self.event = threading.Event()

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, name: str, job: Job) -> None:
        if self.thread is threading.current_thread():
            raise RuntimeError("a panel job cannot start another from its own thread")
        self.stop()
        self.wait()
        self.event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(job, self.event), name=f"sbnotebook-{name}", daemon=True)
        self.on_change(True)
        self.thread.start()

    def _run(self, job: Job, event: threading.Event) -> None:
        try:
            job(event)
        except SbError as exc:
            self.status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
        except Exception as exc:  # a bug: shown where the reader looks, and logged in full
            log.exception("panel work failed")
            why = html.escape(f"{type(exc).__name__}: {exc}")
            self.status.value = f"<span style='color:#b00'>{why}</span>"
        finally:
            self.on_change(False)

    def stop(self) -> None:
        self.event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job; an interrupted cell stops it (and waits for it to stop). True when none runs."""
        thread = self.thread
        if thread is None:
            return True
        try:
            thread.join(timeout)
        except KeyboardInterrupt:
            self.stop()
            thread.join()
            log.info("panel work stopped by a kernel interrupt")
        return not thread.is_alive()


def bars_html(rows: list[tuple[str, int]], *, limit: int = 15, colour: str = "#d62728") -> str:
    """Groups as a small table with a bar per row: plain HTML that renders anywhere and can be
    replaced from a thread while counting runs (a plotly chart in an Output widget cannot)."""
    if not rows:
        return ""
    top = max(n for _, n in rows) or 1
    shown = rows[:limit]
    cut = "padding-right:8px;max-width:420px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap"
    cells = "".join(
        f"<tr><td style='{cut}' title='{html.escape(value)}'>{html.escape(value)}</td>"
        f"<td style='text-align:right;padding-right:8px'>{n:,}</td>"
        f"<td style='width:240px'><div style='background:{colour};height:10px;width:{max(1, round(240 * n / top))}px'>"
        "</div></td></tr>"
        for value, n in shown
    )
    more = f"<tr><td colspan='3'><i>{len(rows) - limit} more groups</i></td></tr>" if len(rows) > limit else ""
    return f"<table style='border-collapse:collapse;font-size:90%'>{cells}{more}</table>"
