"""Azure SDK log noise, summarised: one line per command instead of tracebacks in the output."""

from __future__ import annotations

import logging
import sys

from ...core import redact


class SdkLogSummary(logging.Handler):
    """Azure SDK log records (warnings and errors, often with tracebacks) are counted while the
    extension is loaded, and each command ends with one line saying how many and the last one.
    ``%config SbMagics.full_tracebacks = True`` lets them through as they are."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.last = ""
        self._propagate: bool | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        try:
            self.last = " ".join(record.getMessage().split())[:160]
        except Exception:  # a record that cannot format itself is still counted
            self.last = record.msg if isinstance(record.msg, str) else ""

    def install(self, *, show: bool = False) -> None:
        self.uninstall()
        if show:
            return
        azure = logging.getLogger("azure")
        azure.addHandler(self)
        self._propagate, azure.propagate = azure.propagate, False

    def uninstall(self) -> None:
        azure = logging.getLogger("azure")
        if self in azure.handlers:
            azure.removeHandler(self)
        if self._propagate is not None:
            azure.propagate, self._propagate = self._propagate, None

    def summarise(self) -> None:
        count, last = self.count, self.last
        if not count:
            return
        self.count, self.last = 0, ""
        print(
            f"sbnotebook: the Azure SDK logged {count} warning(s) (last: {redact(last)}); "
            "%config SbMagics.full_tracebacks = True shows them in full.",
            file=sys.stderr,
        )
