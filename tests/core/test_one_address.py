"""One address: the dead-letter form of a path comes only from core's ``EntityPath`` (the suffix is
spelled in core/entities.py alone, outside the emulator, which imports nothing from the rest), and a
command parses its entity once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook.core import EntityPath
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from tests.helpers import counted_parses, send

PACKAGE = Path(__file__).resolve().parents[2] / "sbnotebook"


def test_the_dead_letter_suffix_is_spelled_in_core_entities_only() -> None:
    spelled = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "emulator" not in path.relative_to(PACKAGE).parts[:1]
        for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "$deadletterqueue" in text.lower()
    ]
    assert spelled and all(s.startswith("core/entities.py:") for s in spelled), spelled


def test_dead_letter_forms() -> None:
    sub = EntityPath.parse("events/subscriptions/audit")
    assert str(sub.dead_letter) == "events/subscriptions/audit/$deadletterqueue"
    assert str(sub.transfer_dead_letter) == "events/subscriptions/audit/$transfer/$deadletterqueue"
    assert EntityPath.parse("orders/$dlq").dead_letter == EntityPath.parse("orders/$DeadLetterQueue")
    assert EntityPath.parse("orders/$transfer/$deadletterqueue").dead_letter.parent == EntityPath("orders")


@pytest.fixture
def ip(emulator: Emulator) -> Iterator[Any]:
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    unload_ipython_extension(shell)
    load_ipython_extension(shell)
    shell.run_line_magic("sb_connect", emulator.connection_string)
    yield shell
    unload_ipython_extension(shell)


def test_a_peek_of_a_dead_letter_queue_parses_its_entity_once(
    ip: Any, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    send(client, "q", "kept", "dead")
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        for message in receiver.receive_messages(max_message_count=2, max_wait_time=5):
            if str(message) == "dead":
                receiver.dead_letter_message(message, reason="broken")
            else:
                receiver.abandon_message(message)
    parsed = counted_parses(monkeypatch)
    capsys.readouterr()
    frame = ip.run_line_magic("sb_peek", "q --dlq")
    assert frame["body_text"].tolist() == ["dead"] and frame["dead_letter_reason"].tolist() == ["broken"]
    assert "1 messages from q/$deadletterqueue" in capsys.readouterr().out
    assert sum(parsed.values()) == 1, parsed
