"""Tab completion for the %sb_* magics, through a real IPython shell's completer (the path
JupyterLab, Notebook 7, VS Code and Databricks take: ``Completer.completions``, and the older
``shell.complete``), against the embedded emulator."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter

from sbnotebook.core import close_all
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics, completion
from sbnotebook.notebook.magics.completion import Completer
from tests import shell
from tests.conftest import TEST_TOPOLOGY
from tests.waiting import wait_until

QUEUES = ["dedup", "dl-fwd", "dl-target", "fwd-dst", "fwd-src", "once", "q", "short", "sq", "sq60", "tiny", "ttl-dl"]


ip, sb = shell.ip, shell.sb  # the shell fixtures: a real IPython shell with the extension loaded


def completions(ip: Any, text: str) -> list[str]:
    """What the frontends get (the kernel's complete_request goes through ``completions``)."""
    with provisionalcompleter():
        found = list(ip.Completer.completions(text, len(text)))
    # Every completion replaces the word under the cursor, whole.
    word = text.rsplit(" ", 1)[-1]
    assert all(text[c.start : c.end] == word for c in found), [(c.start, c.end, c.text) for c in found]
    return [c.text for c in found]


def completer(sb: SbMagics) -> Completer:
    assert isinstance(sb.completer, Completer)
    return sb.completer


def test_entities_subscriptions_named_connections_options_and_actions(
    ip: Any, sb: SbMagics, emulator: Emulator, capsys: Any
) -> None:
    with Emulator(TEST_TOPOLOGY) as prod:
        ip.run_line_magic("sb_connect", f"--as prod {prod.connection_string}")
        ip.run_line_magic("sb_entities", "create queue only-here")  # on the default connection
        names = completer(sb).names_of(sb.conn())
        wait_until(lambda: "only-here" in names.top(wait=0)[0])
        assert completions(ip, "%sb_peek only") == ["only-here"]
        assert set(completions(ip, "%sb_peek ")) >= {*QUEUES, "st", "t", "prod:"}
        assert "abs" not in completions(ip, "%sb_peek ")  # no Python builtins
        assert completions(ip, "%sb_peek d") == ["dedup", "dl-fwd", "dl-target"]
        assert completions(ip, "df = %sb_peek sq") == ["sq", "sq60"]
        # A completion waits a round trip for names it has none of: on a loaded machine the listing takes
        # longer, so the test waits for it first (as for "only-here" above) and then completes.
        wait_until(lambda: len(names.subscriptions("t", wait=0)) == 3)
        assert completions(ip, "%sb_peek t/") == ["t/subscriptions/all", "t/subscriptions/corr", "t/subscriptions/sql"]
        assert completions(ip, "%sb_peek t/subscriptions/a") == ["t/subscriptions/all"]
        assert "t/subscriptions/all/$deadletterqueue" in completions(ip, "%sb_peek t/subscriptions/all/")
        assert completions(ip, "%sb_peek q/") == ["q/$deadletterqueue"]
        assert completions(ip, "%sb_peek pr") == ["prod:"]
        assert completions(ip, "%sb_peek prod:f") == ["prod:fwd-dst", "prod:fwd-src"]
        assert completions(ip, "%sb_peek prod:only") == ["prod:only"]  # not in prod: nothing new offered
        assert completions(ip, "%sb_copy prod:q/$deadletterqueue d") == ["dedup", "dl-fwd", "dl-target"]
        assert completions(ip, "%sb_resubmit q --target fwd-") == ["fwd-dst", "fwd-src"]
        assert completions(ip, "%sb_entities show fwd") == ["fwd-dst", "fwd-src"]
        assert completions(ip, "%sb_entities ") == ["show", "create", "update", "delete", "rules", "rule", "prod:"]
        assert completions(ip, "%sb_entities pr") == ["prod:"]  # %sb_entities prod: lists prod's entities
        assert completions(ip, "%sb_entities --connection ") == ["prod"]
        # Options from the command's argparse spec, choices of options and positionals.
        assert completions(ip, "%sb_peek q --") == [
            "--dlq",
            "--enqueued-after",
            "--enqueued-before",
            "--from-sequence-number",
            "--json",
            "--max-messages",
            "--max-scanned",
            "--session-id",
            "--where",
        ]
        assert completions(ip, "%sb_peek q --w") == ["--where"]
        assert completions(ip, "%sb_settle ") == ["complete", "abandon", "dead-letter", "defer", "renew", "close"]
        assert completions(ip, "%sb_settle d") == ["dead-letter", "defer"]
        assert {"dead_letter_reason", "dead_letter_error_description", "subject"} <= set(
            completions(ip, "%sb_dlq q --summary --by ")
        )
        assert completions(ip, "%sb_receive q --mode r") == ["receive-and-delete"]
        # The older API (terminal IPython, some frontends) finds the same.
        assert ip.complete(None, "%sb_peek t/") == (
            "t/",
            ["t/subscriptions/all", "t/subscriptions/corr", "t/subscriptions/sql"],
        )
        assert ip.complete(None, "%sb_peek --w") == ("--w", ["--where"])
        # Other lines are left to IPython: its own Python matcher, not jedi, which returns nothing when
        # it fails (IPython hides its errors; once in a loaded full run "ab" got no completion at all).
        jedi = ip.Completer.use_jedi
        ip.Completer.use_jedi = False
        try:
            assert "abs" in completions(ip, "ab")
        finally:
            ip.Completer.use_jedi = jedi
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err


def admin_requests(emulator: Emulator) -> int:
    """The administration API's requests the emulator has answered (each listing is one or more)."""
    return sum(n for name, n in emulator.requests.items() if name.startswith("admin "))


def test_a_cold_cache_waits_about_one_round_trip_and_a_warm_one_none(ip: Any, capsys: Any) -> None:
    """0.5 s per round trip, so a listing waited for would show: a cold completion returns within
    completion.WAIT (offering what it has, not the listing's names), the names arrive in the
    background, a warm completion costs no round trip (none reaches the broker)."""
    unload_ipython_extension(ip)
    sb = load_ipython_extension(ip)
    try:
        with Emulator(TEST_TOPOLOGY, latency_ms=500) as far:
            ip.run_line_magic("sb_connect", far.connection_string)
            names = completer(sb).names_of(sb.conn())
            wait_until(lambda: names.top(wait=0)[0] != [])  # %sb_connect listed them in the background
            completer(sb).names.clear()  # cold again
            assert completion.WAIT < 0.5  # shorter than a round trip here
            # Not timed (a loaded machine may take longer for reasons of its own): a completion that
            # waited for the listing would offer its names, not the word itself.
            cold = completions(ip, "%sb_peek d")
            assert cold == ["d"]  # nothing known yet: the word itself (IPython's own matchers kept quiet)
            names = completer(sb).names_of(sb.conn())
            wait_until(lambda: names.top(wait=0)[0] != [])
            listings = admin_requests(far)
            assert listings > 0  # the listings so far are counted there
            warm = completions(ip, "%sb_peek d")
            assert warm == ["dedup", "dl-fwd", "dl-target"]
            assert admin_requests(far) == listings  # no round trip: counted at the broker, not timed
            close_all()
    finally:
        unload_ipython_extension(ip)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err


def test_entity_changes_and_listings_refresh_the_names(ip: Any, sb: SbMagics, emulator: Emulator) -> None:
    assert "fresh" not in completions(ip, "%sb_peek fr")
    ip.run_line_magic("sb_entities", "create queue fresh")
    names = completer(sb).names_of(sb.conn())
    wait_until(lambda: "fresh" in names.top(wait=0)[0])  # listed again in the background
    assert completions(ip, "%sb_peek fr") == ["fresh"]
    # Made through the kit anywhere (code, a panel): listed again too.
    from sbnotebook.core import create_entity
    from sbnotebook.core.sdk.admin import emulator_admin_client

    create_entity("by-code", kind="queue", connection=sb.conn())
    wait_until(lambda: completions(ip, "%sb_peek by-") == ["by-code"])
    # Made elsewhere (another notebook, the portal): %sb_entities lists it, and the completion knows
    # it at once; until then the cache (fresh for completion.TTL) does not.
    with emulator_admin_client(emulator.connection_string) as admin:
        admin.create_queue("elsewhere")
    assert completions(ip, "%sb_peek elsew") == ["elsew"]
    ip.run_line_magic("sb_entities", "")
    assert completions(ip, "%sb_peek elsew") == ["elsewhere"]
    ip.run_line_magic("sb_entities", "delete fresh --yes")
    wait_until(lambda: "fresh" not in names.top(wait=0)[0])


def test_a_completion_never_raises_or_prints(
    ip: Any, sb: SbMagics, monkeypatch: pytest.MonkeyPatch, capsys: Any, caplog: Any
) -> None:
    # A named connection whose namespace is gone: the listing fails, the completion offers nothing.
    with Emulator(TEST_TOPOLOGY) as gone:
        ip.run_line_magic("sb_connect", f"--as gone {gone.connection_string}")
        conn = sb.connections["gone"]
        completer(sb).names.pop(conn, None)
        capsys.readouterr()
    conn.close()
    assert completions(ip, "%sb_peek gone:q") == ["gone:q"]  # not timed: the failed listing ends at once anyway
    assert completions(ip, "%sb_peek nope:q") == ["nope:q"]  # an unknown name: nothing
    # Whatever goes wrong inside, the completer is not disturbed and nothing is printed.
    monkeypatch.setattr(Completer, "offer", lambda *a: 1 / 0)
    assert "q" not in completions(ip, "%sb_peek q")  # nothing of ours; IPython's own matchers go on
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and "ZeroDivision" not in err
    monkeypatch.undo()
    # Without a connection yet, a completion does not open one (it would start an emulator).
    unload_ipython_extension(ip)
    fresh = load_ipython_extension(ip)
    assert completions(ip, "%sb_peek q") == ["q"] and fresh.connection is None
