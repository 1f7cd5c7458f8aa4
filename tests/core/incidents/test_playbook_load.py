"""A bad playbook is refused on load in one line: its file, line and column, and for a key the
nearest valid name; nothing is read from a namespace (the CLI's exit status 2, the broker untouched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbnotebook import cli, core
from sbnotebook.core.incidents.playbook import schema
from sbnotebook.emulator import Emulator
from tests.core.incidents.playbook_incident import TOPOLOGY, make_incident, playbook_text

GOOD = """\
playbook: p
entities: [orders]
rules:
  - name: timeouts
    when: {signature: "TimeoutException: *", enqueued_before: 10m}
    do: resubmit
    rate: 50/s
    stop_if_dead_letters: 20
  - name: old
    when: {where: "body_json.version < 2"}
    do: park
    to: parked
  - name: expired
    when: {reason: TTLExpiredException, enqueued_before: 7d}
    do: discard
  - name: rest
    do: keep
audit: audit
"""

BAD = [  # (what is changed in GOOD, the line:column said, words the line says)
    (("entities:", "entites:"), "2:1", "unknown key 'entites' in the playbook (did you mean 'entities'?)"),
    (("stop_if_dead_letters:", "stop_if_dead_leters:"), "8:5", "(did you mean 'stop_if_dead_letters'?)"),
    (("do: discard", "do: discrad"), "15:9", "do is one of resubmit, park, discard, keep, not 'discrad'"),
    (('"body_json.version < 2"', '"body_json.version <"'), "10:19", "Cannot read the search expression"),
    (
        ("enqueued_before: 7d", "enqueued_before: 7 parsecs"),
        "14:58",
        "when.enqueued_before: enqueued_before takes ISO 8601",
    ),
    (("    to: parked\n", ""), "9:5", "park needs 'to'"),
    (("name: rest", "name: old"), "16:5", "two rules are named 'old'"),
    (("rate: 50/s", "rate: fast"), "7:11", "rate"),
    (("    do: keep", "    do: keep\n    target: q"), "18:13", "'target' does not go with do: keep"),
    (("rules:", "rules: ["), "4:3", "not YAML"),
    (("audit: audit\n", ""), "1:1", "the playbook needs 'audit'"),
    (("    to: parked\n", "    to: parked\n    edit: {patch: {version: 2}, subjet: x}\n"), "13:11", "subjet"),
    (("    to: parked\n", "    to: parked\n    edit: {time_to_live: soon}\n"), "13:11", "time_to_live"),
    (("format", "format"), None, None),  # the good playbook loads
]


@pytest.mark.parametrize(("change", "at", "said"), BAD)
def test_a_bad_playbook_is_one_line_with_file_line_and_column(
    tmp_path: Path, change: tuple[str, str], at: str | None, said: str | None
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace(*change), encoding="utf-8")
    if at is None:
        book = core.playbook.load(path)
        assert [r.do for r in book.rules] == ["resubmit", "park", "discard", "keep"]
        assert book.rules[0].brake == core.Brake(stop_if_dead_letters=20) and book.audit == tmp_path / "audit"
        return
    with pytest.raises(core.PlaybookError) as caught:
        core.playbook.load(path)
    text = str(caught.value)
    assert text.startswith(f"{path}:{at}: ") and said in text and "\n" not in text, text


def test_a_parquet_audit_without_an_engine_is_refused_at_load_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(GOOD + "format: parquet\n", encoding="utf-8")
    # as on a machine with the notebook extra alone (nox -s sdk-floor): no engine pandas writes Parquet with
    monkeypatch.setattr(schema, "PARQUET_ENGINES", ("sbnotebook_no_such_engine",))
    with pytest.raises(core.PlaybookError) as caught:
        core.playbook.load(path)
    line = GOOD.count("\n") + 1
    assert str(caught.value).startswith(f"{path}:{line}:9: format: parquet needs sbnotebook_no_such_engine"), caught
    assert "pip install pyarrow" in str(caught.value)


def test_the_cli_refuses_a_bad_playbook_with_exit_2_and_touches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Emulator(TOPOLOGY, clock="manual") as emulator:
        make_incident(emulator)
        before = {e: emulator.broker.counts(e) for e in ("orders", "payments", "retry", "parked")}
        path = tmp_path / "p.yaml"
        path.write_text(playbook_text().replace("do: discard", "do: discrad"), encoding="utf-8")
        code = cli.main(["playbook", "run", str(path), "--yes"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and f"{path}:" in err[0] and "did you mean 'discard'" in err[0], err
        assert {e: emulator.broker.counts(e) for e in before} == before
        assert not (tmp_path / "audit").exists()
