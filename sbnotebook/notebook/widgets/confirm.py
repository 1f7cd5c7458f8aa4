"""The one confirmation row of every panel: what is about to happen, the word to type back when the
action is destructive, Confirm and Cancel. Hidden until a panel asks; nothing runs before Confirm."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as W

from ...core import InvalidInputError


@dataclass(frozen=True)
class Pending:
    """An action waiting for Confirm, and what must be typed to run it (None: nothing to type)."""

    action: Callable[[], Any]
    word: str | None = None
    exact: bool = False  # an entity's name is compared as typed; a word shown ignores case and spaces
    refused: str = "nothing was changed"


class ConfirmRow(W.HBox):
    def __init__(
        self,
        *,
        typed: bool = True,
        placeholder: str = "type the word shown",
        width: str = "12em",
        button_style: str = "danger",
        nothing_pending: str = "Nothing to confirm.",
    ) -> None:
        self.question = W.HTML()
        self.box = W.Text(placeholder=placeholder, layout=W.Layout(width=width))
        self.confirm_button = W.Button(description="Confirm", button_style=button_style)
        self.cancel_button = W.Button(description="Cancel")
        self.pending: Pending | None = None
        self.nothing_pending = nothing_pending
        super().__init__([self.question, *([self.box] if typed else []), self.confirm_button, self.cancel_button])
        self.layout.display = "none"

    def ask(self, question_html: str, pending: Pending) -> None:
        """Show the question (HTML the caller escaped) and hold ``pending`` until Confirm or Cancel."""
        self.pending = pending
        self.question.value = question_html
        self.box.value = ""
        self.layout.display = "flex"

    def take(self, typed: str = "") -> Callable[[], Any]:
        """The pending action, if ``typed`` is its word; the row hides and forgets it either way but
        a wrong word, which leaves the question up so the user can type again."""
        if self.pending is None:
            raise InvalidInputError(self.nothing_pending)
        pending = self.pending
        if pending.word is not None:
            matches = typed.strip() == pending.word if pending.exact else typed.strip().lower() == pending.word
            if not matches:
                raise InvalidInputError(f"Type {pending.word!r} to confirm; {pending.refused}.")
        self.cancel()
        return pending.action

    def cancel(self) -> None:
        self.pending = None
        self.question.value = ""
        self.layout.display = "none"
