"""Dead-letter signatures (issue 40 point 2): the reason and description with their variable parts
masked, counted over the scanner (``core.group_counts(by="signature")``), shown by ``%sb_dlq --summary
--by signature`` and the triage panel's Group by, and selecting messages for resubmit and discard
(``--where 'signature == ...'``, the panel's group). Broker state is read back independently."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core.operations.triage import OTHER, group_counts
from sbnotebook.core.views.signatures import mask, signature
from sbnotebook.emulator import Emulator
from tests import shell
from tests.core.operations.test_triage import dead_letter
from tests.helpers import drain

DLQ = "q/$deadletterqueue"


ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)

# (what a consumer wrote, its signature); docs/magics.md shows the same examples.
MASKED = [
    (
        "Order 48213 failed after 312 ms: timeout calling https://api.contoso.com/orders/4f1c9a2b?attempt=3.",
        "Order <NUM> failed after <NUM> ms: timeout calling https://api.contoso.com/orders/<*>?attempt=<*>.",
    ),
    (
        "Customer 'c-7 west' unknown (jane.doe@contoso.com) at 2026-11-26T08:33:49.123Z",
        "Customer '<*>' unknown (<EMAIL>) at <TIME>",
    ),
    (
        "Lock lost. TrackingId:7d0e1c5a-2b1f-4a4e-8a9b-4f1c9a2b3c4d_G12, Timestamp:11/26/2026 8:33:49 AM",
        "Lock lost. TrackingId:<GUID>_G<NUM>, Timestamp:<TIME> <TIME> AM",
    ),
    (
        "can't parse customer's order ord8f3k2L9 from 10.0.0.4:8080, digest 0xDEADBEEF / abcdef12 deadbeefcafe,"
        " total -5.50",
        "can't parse customer's order <ID> from <IP>, digest <HEX> / <HEX> <HEX>, total <NUM>",
    ),
    ('Field "total" must be >= 0 in {"order": 48213}', 'Field "<*>" must be >= <NUM> in {"<*>": <NUM>}'),
    ("GET https://svc-7.contoso.com:8443/api/users/jane/orders/12345#top: 503", None),
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_mask_replaces_each_kind_of_variable_part(text: str, expected: str | None) -> None:
    if expected is None:  # the host's number, the id segment and the fragment; words and the port stay
        expected = "GET https://svc-<NUM>.contoso.com:8443/api/users/jane/orders/<*>#<*>: <NUM>"
    assert mask(text) == expected


def test_mask_is_bounded_and_spaces_are_one() -> None:
    assert mask("a \n\t b") == "a b"
    long = mask("word " * 1_000)
    assert len(long) == 300 and long.endswith("…")
    assert signature({}) is None
    assert signature({"dead_letter_reason": "MaxDeliveryCountExceeded"}) == "MaxDeliveryCountExceeded"
    assert signature({"dead_letter_error_description": "x 1"}) == "x <NUM>"


def failing(n: int, start: int = 0) -> list[tuple[str, str]]:
    """``n`` dead-letter (reason, description) pairs as a consumer writes them: three templates whose
    ids, numbers, GUIDs and times differ in every message."""
    out = []
    for i in range(start, start + n):
        kind = i % 3
        if kind == 0:
            out.append(("Timeout", f"Order {48_000 + i} failed after {100 + i} ms calling https://api.x.com/o/{i}"))
        elif kind == 1:
            trace = uuid.uuid5(uuid.NAMESPACE_URL, str(i))  # the same every run: no test left to luck
            out.append(("Validation", f"Customer 'c-{i}' unknown; trace {trace} at 2026-11-26T08:{i % 60:02d}:00Z"))
        else:
            out.append(("Validation", f"total {-i} below zero for {0xABC000 + 7919 * i:08x}"))
    return out


TIMEOUT = "Timeout: Order <NUM> failed after <NUM> ms calling https://api.x.com/o/<*>"
CUSTOMER = "Validation: Customer '<*>' unknown; trace <GUID> at <TIME>"
TOTAL = "Validation: total <NUM> below zero for <HEX>"


def test_group_counts_by_signature_one_row_per_template(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", failing(30))
    counted = group_counts(DLQ, by=["signature"], connection=emulator.connection_string)
    assert counted.done and counted.scanned == 30
    assert counted.counts("signature") == {TIMEOUT: 10, CUSTOMER: 10, TOTAL: 10}
    frame = counted.to_pandas("signature")
    assert frame["messages"].dtype == "int64" and frame["messages"].tolist() == [10, 10, 10]
    assert list(frame.columns[:4]) == ["signature", "messages", "oldest", "newest"]
    assert (frame["oldest"] <= frame["newest"]).all() and frame["oldest"].dt.tz is not None
    # One example each: a real description of the group's first message (sequence number 1, 2, 3).
    examples = dict(zip(frame["signature"], frame["example_description"], strict=True))
    assert examples[TIMEOUT] == failing(1)[0][1] and frame["first_sequence_number"].tolist() == [1, 2, 3]
    assert not any(GUID.search(s) or re.search(r"\d{3,}", s) for s in frame["signature"])  # no id shown
    # By exact text, every description is its own group: what signatures are for.
    by_text = group_counts(DLQ, by=["dead_letter_error_description"], connection=emulator.connection_string)
    assert len(by_text.counts("dead_letter_error_description")) == 30


def test_signatures_past_max_groups_are_counted_under_other(emulator: Emulator, client: ServiceBusClient) -> None:
    dead_letter(client, "q", failing(9))
    counted = group_counts(DLQ, by=["signature"], max_groups=2, connection=emulator.connection_string)
    assert counted.counts("signature") == {TIMEOUT: 3, CUSTOMER: 3, OTHER: 3}
    assert counted.notes == ["signature: more than 2 distinct values; the rest are counted under '(other values)'"]


def test_where_on_the_signature_selects_what_resubmit_and_discard_move(
    emulator: Emulator, client: ServiceBusClient, sb: Any, capsys: Any
) -> None:
    conn = emulator.connection_string
    dead_letter(client, "q", failing(12))
    ip = sb.shell
    report = ip.run_line_magic("sb_resubmit", f"q --where 'signature == \"{TOTAL}\"' --target dl-target --yes")
    assert report.count("resubmitted") == 4, capsys.readouterr()
    assert sorted(str(m) for m in drain(client, "dl-target", wait=0.5, count=4)) == ["x11", "x2", "x5", "x8"]
    report = core.discard(DLQ, where=core.compile_where(f"signature == {CUSTOMER!r}"), connection=conn)
    assert report.count("discarded") == 4, report.summary()
    left = core.scan_records(DLQ, connection=conn)
    assert len(left) == 4 and {signature(r) for r in left} == {TIMEOUT}
    assert core.counts("q", connection=conn).dead_letter == 4  # the broker's own count


def test_peek_where_names_the_signature_and_an_unknown_name_lists_it(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    conn = emulator.connection_string
    dead_letter(client, "q", failing(6))
    page = core.peek(DLQ, where='"failed after" in signature', connection=conn)
    assert [r["dead_letter_reason"] for r in page] == ["Timeout", "Timeout"]
    with pytest.raises(core.InvalidInputError, match="Known names: body_json, props, text, signature"):
        core.peek(DLQ, where="signatur == 1", connection=conn)


def test_triage_panel_groups_by_signature_and_resubmits_one_signature(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    conn = emulator.connection_string
    dead_letter(client, "q", failing(9))
    panel = TriagePanel("q", connection=conn)
    assert "signature" in [value for _, value in panel.by.options]
    panel.by.value = "signature"
    assert panel.grouping is not None and panel.grouping.counts("signature") == {TIMEOUT: 3, CUSTOMER: 3, TOTAL: 3}
    assert "3 signatures" in panel.title.value
    panel.select_group(TOTAL)
    assert [signature(r) for r in panel.visible] == [TOTAL] * 3
    assert "Resubmit 3 messages" in panel.ask_resubmit("dl-target")
    report = panel.confirm("resubmit")
    assert report is not None and report.count("resubmitted") == 3
    assert sorted(str(m) for m in drain(client, "dl-target", wait=0.5, count=3)) == ["x2", "x5", "x8"]
    assert core.counts("q", connection=conn).dead_letter == 6


def test_dlq_summary_by_signature_magic(sb: Any, client: ServiceBusClient, capsys: Any) -> None:
    dead_letter(client, "q", failing(6))
    table = sb.shell.run_line_magic("sb_dlq", "q --summary --by signature")
    assert table["signature"].tolist() == [TIMEOUT, CUSTOMER, TOTAL]
    assert table["messages"].dtype == "int64" and table["messages"].tolist() == [2, 2, 2]
    assert "6 dead-lettered messages in q by signature" in capsys.readouterr().out


def test_resubmit_where_with_a_limit_counts_selected_messages_not_those_passed_on_the_way(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Found with signatures: ``%sb_resubmit --where`` passes the count it showed as the limit, and the
    limit counted every message received, so 4 selected among 12 moved 1 (the first 4 received held
    one of them). The limit is on the selected messages."""
    conn = emulator.connection_string
    dead_letter(client, "q", failing(12))
    where = core.compile_where(f"signature == {TOTAL!r}")
    report = core.resubmit(DLQ, where=where, target="dl-target", max_messages=3, connection=conn)
    assert report.count("resubmitted") == 3, report.summary()
    assert sorted(str(m) for m in drain(client, "dl-target", wait=0.5, count=3)) == ["x2", "x5", "x8"]
    assert core.counts("q", connection=conn).dead_letter == 9


def test_the_masking_table_in_docs_magics_md_is_what_mask_does() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "magics.md").read_text(encoding="utf-8")
    table = text.split("| mask | what | written | becomes |", 1)[1].split("\n\n", 1)[0]
    pairs = []
    for row in table.strip().splitlines()[1:]:
        written, becomes = row.strip("|").split(" | ")[2:4]
        pairs += zip(re.findall(r"`([^`]+)`", written), re.findall(r"`([^`]+)`", becomes), strict=True)
    assert len(pairs) >= 12
    assert [(w, mask(w)) for w, _ in pairs] == pairs


def test_texts_that_differ_only_in_digits_share_one_masking_but_a_kept_digit_is_not_shared() -> None:
    from sbnotebook.core.views import signatures

    signatures._CACHE.clear()
    assert mask("Order 48213 failed after 312 ms") == "Order <NUM> failed after <NUM> ms"
    assert len(signatures._CACHE) == 1
    assert mask("Order 50117 failed after 97 ms") == "Order <NUM> failed after <NUM> ms"  # a lookup
    assert mask("Order 50117 failed after 97 ms") is signatures._CACHE["Order 00000 failed after 00 ms"]
    # A URL's port is kept as it is: such results are not remembered under the digits-as-zeros key.
    assert mask("GET https://x.com:8443/a failed") == "GET https://x.com:8443/a failed"
    assert mask("GET https://x.com:9443/a failed") == "GET https://x.com:9443/a failed"
