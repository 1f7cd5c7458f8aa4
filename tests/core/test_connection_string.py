"""One connection-string grammar (sbnotebook/core/connection_string.py): every reader of a connection
string in the kit accepts every form one of them accepts, and the emulator's copy of the grammar reads
each form as the kit's does. Issue 72: the administration client missed `` Endpoint=``."""

from __future__ import annotations

import pytest

from sbnotebook import core
from sbnotebook.core.connection_string import endpoint_netloc, fields, names_the_emulator
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.core.sdk.websockets import endpoint_of
from sbnotebook.emulator import Emulator, read_journey
from sbnotebook.emulator.journey.client import _fields as emulator_fields


def forms(cs: str) -> list[str]:
    """The same connection string written as people and tools write it."""
    parts = cs.split(";")
    return [
        cs,
        cs + ";",
        ";" + cs,
        " " + "; ".join(parts),  # a space after each separator: " Endpoint=" and " SharedAccessKey="
        ";".join(p.replace("=", " = ", 1) for p in parts),  # spaces around the first "="
        ";".join(p.split("=", 1)[0].upper() + "=" + p.split("=", 1)[1] for p in parts),  # keys in capitals
        ";".join(reversed(parts)),  # any order
        "\n" + cs + "\n",
    ]


def test_the_emulators_copy_of_the_grammar_reads_every_form_as_the_kit_does() -> None:
    cs = "Endpoint=sb://ns.example:5672;SharedAccessKeyName=k;SharedAccessKey=abc==;UseDevelopmentEmulator=true"
    for form in forms(cs):
        assert fields(form) == emulator_fields(form) == fields(cs), form
    with pytest.raises(core.ConfigurationError):
        fields("Endpoint=sb://x;no-equals-sign")
    with pytest.raises(ValueError):
        emulator_fields("Endpoint=sb://x;no-equals-sign")


def test_a_value_keeps_its_own_equals_signs_and_an_error_never_shows_the_key() -> None:
    found = fields("Endpoint=sb://h;SharedAccessKeyName=k;SharedAccessKey=S3cret+/==")
    assert found["sharedaccesskey"] == "S3cret+/=="
    with pytest.raises(core.ConfigurationError) as caught:
        fields("Endpoint=sb://h;SharedAccessKey S3cret")
    assert "S3cret" not in str(caught.value)


def test_every_reader_accepts_every_form(emulator: Emulator) -> None:
    """The connection, the SDK seam's WebSocket address and administration client, the emulator
    check and the emulator's journey client, each on every form of a live emulator's string."""
    cs = emulator.connection_string
    netloc = endpoint_netloc(cs)
    for form in forms(cs):
        assert core.resolve(form).fully_qualified_namespace == netloc, form
        assert core.resolve(form).is_emulator, form
        assert names_the_emulator(form), form
        assert endpoint_of(form) == f"sb://{netloc}", form
        with emulator_admin_client(form) as admin:  # the server answers: the address was read
            assert {q.name for q in admin.list_queues()}, form
        assert read_journey(form, "q", sequence_number=1).events == [], form
        # The SDK is handed the form it reads (its own parser refuses a leading ";" and a key with
        # spaces): a peek answers, on the one live connection every form of the string shares.
        assert core.peek("q", max_messages=1, connection=form).records == [], form
        assert core.live_connection(form) is core.live_connection(cs), form


def test_a_string_without_an_endpoint_is_refused_by_every_reader() -> None:
    cs = "SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
    for read in (core.resolve, endpoint_netloc, endpoint_of, emulator_admin_client):
        with pytest.raises(core.ConfigurationError, match="no Endpoint"):
            read(cs)
