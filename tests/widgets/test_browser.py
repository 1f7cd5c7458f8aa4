"""Real-browser tests: JupyterLab on localhost, headless Debian Chromium driven by Playwright.

A notebook opens the triage and browser panels against the kernel's embedded emulator; the test
checks that they render, that a click reaches the kernel and changes the panel, and keeps
screenshots of both states (under the pytest tmp dir) for a look. It runs twice: with the grid
(itables' widget) and as on Databricks (DATABRICKS_RUNTIME_VERSION set: the plain core-ipywidgets
list).

The lab is picked by the installed ipywidgets' major version: ipywidgets 8 runs in JupyterLab 4,
ipywidgets 7 (Databricks' LTS runtimes have 7.7.2) in JupyterLab 3 with jupyterlab_widgets 1.x, its
frontend (``nox -s dbr15`` installs that pairing from tests/widgets/browser-widgets7.txt).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest

from sbnotebook.emulator import userprocess
from tests.processes import free_port, stop_process, wait_for_server
from tests.widgets.lab_pages import (
    CELL_EDITOR,
    KERNEL_IDLE,
    browse_search_then_clear_it_and_export_the_whole_entity,
    chromium,
    no_error_shown,
    notebook_page,
    panel,
    playwright,
    resubmit_with_a_patch_shown_before_confirm_and_cleared_after,
    shot,
    the_lists_are,
)

pytestmark = [
    pytest.mark.slow,
    # JupyterLab's first start on a fresh machine, a kernel, Chromium and a dozen clicks: past the
    # suite's 120 s in CI (the fixture's setup counts), so this one file has its own limit.
    pytest.mark.timeout(420),
]


@pytest.fixture(scope="module", autouse=True)
def _browser_present() -> None:
    """Playwright and chromium, before the lab starts (module scope): without them the tests skip, or
    under CI=true fail, since a skip there would leave every panel unchecked in a real browser while
    the run still passed (issue 39; tests/required.py)."""
    playwright()
    chromium()


def _major(package: str) -> int:
    return int(version(package).split(".")[0])


WIDGETS = _major("ipywidgets")
# ipywidgets' major version -> (JupyterLab major, jupyterlab_widgets major) of its frontend.
LABS = {7: (3, 1), 8: (4, 3)}


def check_the_lab_fits_the_widgets() -> None:
    """Widgets of one major version do not render in the other's frontend: say so plainly instead
    of timing out on an empty output area."""
    want = LABS.get(WIDGETS)
    have = (_major("jupyterlab"), _major("jupyterlab_widgets"))
    if want is None or have != want:
        pytest.fail(
            f"ipywidgets {version('ipywidgets')} needs JupyterLab {want and want[0]} with jupyterlab_widgets "
            f"{want and want[1]}.x, found JupyterLab {version('jupyterlab')} with jupyterlab_widgets "
            f"{version('jupyterlab_widgets')} (nox -s dbr15 installs the ipywidgets 7 pairing)"
        )


# Every other panel, each against its own entity of the default topology, one display each.
MORE_PANELS = """
%load_ext sbnotebook
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from sbnotebook import core

conn = core.connect()
with ServiceBusClient.from_connection_string(conn.settings.connection_string) as c:
    with c.get_queue_sender("results") as s:
        s.send_messages([ServiceBusMessage(f'{{"result": {i}}}') for i in range(2)])
    with c.get_queue_sender("sessions") as s:
        s.send_messages(ServiceBusMessage('{"step": 1}', session_id="s-browser"))
compose = %sb_compose retries
settle = %sb_receive results -n 2 --wait-seconds 10 --panel
entities = %sb_entities --panel
purge = %sb_purge retries --panel
sessions = %sb_sessions sessions --panel
tail = %sb_tail retries --panel
for panel in (compose, settle, entities, purge, sessions, tail):
    display(panel)
"""

SETUP = """
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from sbnotebook import core

conn = core.connect()  # the live connection %sb_dlq and %sb_browse will use below
with ServiceBusClient.from_connection_string(conn.settings.connection_string) as c:
    with c.get_queue_sender("orders") as s:
        s.send_messages([ServiceBusMessage(f'{{"order": {i}}}') for i in range(3)])
    with c.get_queue_receiver("orders") as r:
        for m in r.receive_messages(max_message_count=3, max_wait_time=10):
            r.dead_letter_message(m, reason="bad-currency", error_description="EURO")
"""


# "grid": itables' widget (outside Databricks); "databricks": DATABRICKS_RUNTIME_VERSION set in the
# kernel, so the message lists are the plain core-ipywidgets form.
FORMS = {"grid": {}, "databricks": {"DATABRICKS_RUNTIME_VERSION": "15.4"}}
# With DATABRICKS_RUNTIME_VERSION set plotly picks its 'databricks' renderer, which draws through
# the notebook's displayHTML: a Databricks built-in, not there in JupyterLab (the triage chart showed
# plotly's "Unable to detect the Databricks displayHTML function"). The stand-in form draws charts as
# JupyterLab does; how a chart draws on a workspace is not verified here (docs/azure-and-databricks.md).
CHARTS = {"grid": "", "databricks": "import plotly.io as pio\npio.renderers.default = 'plotly_mimetype'\n"}


@pytest.fixture(scope="module", params=list(FORMS))
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    check_the_lab_fits_the_widgets()
    form: str = request.param
    root = tmp_path_factory.mktemp(f"lab-{form}")
    nb = nbformat.v4.new_notebook()
    # One cell: a single Shift+Enter runs it all (keys sent while the page settles can be lost,
    # and one cell can simply be run again).
    panels = "triage = %sb_dlq orders\nbrowser = %sb_browse orders --dlq --page-size 2\ndisplay(triage, browser)"
    nb.cells = [nbformat.v4.new_code_cell("%load_ext sbnotebook\n" + CHARTS[form] + SETUP.strip() + "\n" + panels)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "triage.ipynb")
    more = nbformat.v4.new_notebook()
    more.cells = [nbformat.v4.new_code_cell(CHARTS[form] + MORE_PANELS.strip())]
    more.metadata["kernelspec"] = nb.metadata["kernelspec"]
    nbformat.write(more, root / "panels.ipynb")
    complete = nbformat.v4.new_notebook()
    complete.cells = [nbformat.v4.new_code_cell("%load_ext sbnotebook\n%sb_connect")]
    complete.metadata["kernelspec"] = nb.metadata["kernelspec"]
    nbformat.write(complete, root / "complete.ipynb")
    port, token = free_port(), "sbnotebook-test-token"
    # Each form's kernels share an emulator of their own (the whole run's would carry the other
    # form's messages over), stopped with the lab.
    home = Path(os.environ[userprocess.ENV_HOME]).parent / f"browser-{form}-{port}"
    log = (root / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            "--allow-root",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **FORMS[form], userprocess.ENV_HOME: str(home)},  # the kernels inherit it
    )
    base = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
            return bool(r.status == 200)

    try:
        wait_for_server(proc, serving, "JupyterLab", root / "lab.log", timeout=90)
        # reset: each test's notebook alone (JupyterLab would restore the one opened before beside it)
        yield f"{base}/lab/tree/{{notebook}}?reset&token={token}", root, form
    finally:
        stop_process(proc, timeout=20)
        log.close()
        userprocess.stop(home / "emulator")


def test_panels_render_in_jupyterlab_and_respond_to_a_click(lab: tuple[str, Path, str]) -> None:
    url, root, form = lab
    with notebook_page(url, "triage.ipynb", height=2200, failure=root / "failure.png") as page:
        page.locator("button", has_text="Resubmit selected").first.wait_for(state="visible", timeout=120_000)
        page.locator("button", has_text="Next").first.wait_for(state="visible", timeout=60_000)
        page.get_by_text(re.compile(r"\d+ dead-lettered messages, 1 reasons")).first.wait_for(
            state="visible", timeout=60_000
        )
        the_lists_are(page, form)
        before = root / "panels.png"
        page.screenshot(path=str(before), full_page=True)
        shot(page, root, form, "triage-panel.png", "dead-lettered messages")

        page.locator("button", has_text="Discard selected").first.click()
        prompt = page.get_by_text("and press Confirm").first
        prompt.wait_for(state="visible", timeout=60_000)  # the kernel answered the click
        page.get_by_placeholder("type the word shown").first.wait_for(state="visible", timeout=30_000)
        after = root / "panels-after-click.png"
        page.screenshot(path=str(after), full_page=True)
        page.get_by_role("button", name="Cancel", exact=True).first.click()
        page.get_by_text("Cancelled: nothing was changed").first.wait_for(state="visible", timeout=30_000)

        browse_search_then_clear_it_and_export_the_whole_entity(page, root, form)
        resubmit_with_a_patch_shown_before_confirm_and_cleared_after(page, root, form)
        page_had_no_traceback = no_error_shown(page)
    assert page_had_no_traceback  # every panel drew and answered without an error
    assert before.stat().st_size > 20_000 and after.stat().st_size > 20_000  # rendered, not blank
    assert before.read_bytes() != after.read_bytes()


def test_every_other_panel_renders_and_answers_a_click(lab: tuple[str, Path, str]) -> None:
    """The send, settlement, entity, purge, sessions and tail panels: each renders, and a click in
    each reaches the kernel and changes what the panel shows (the tail shows the message the send
    panel sent, and stops at its Stop button). Each panel's screenshot, after its click, is the
    one docs/widgets.md shows (tests/project/test_docs.py checks every panel has one)."""
    url, root, form = lab
    with notebook_page(url, "panels.ipynb", height=2600, failure=root / "failure-more-panels.png") as page:
        sessions = panel(page, "Sessions of sessions")
        sessions.wait_for(state="visible", timeout=120_000)
        page.screenshot(path=str(root / "more-panels.png"), full_page=True)

        compose = panel(page, "Content type")
        compose.get_by_placeholder('{"order": 1}').fill('{"from": "the browser"}')
        compose.get_by_role("button", name="Send", exact=True).click()
        compose.get_by_text(re.compile(r"send retries: 1 sent of 1")).wait_for(state="visible", timeout=60_000)
        shot(page, root, form, "send-panel.png", "Content type")

        tail = panel(page, "Tail of retries")  # the message just sent arrives in the live tail
        tail.get_by_text(re.compile(r"Tailing: 1 message in")).wait_for(state="visible", timeout=30_000)
        tail.locator("button", has_text="Stop").first.click()
        tail.get_by_text(re.compile(r"Ended: 1 message in")).wait_for(state="visible", timeout=30_000)
        shot(page, root, form, "tail-panel.png", "Tail of retries")

        settle = panel(page, "unsettled (peek-lock)")
        settle.get_by_text(re.compile(r"results</b>|results: 2 messages, 2 unsettled")).first.wait_for(
            state="visible", timeout=30_000
        )
        settle.locator("select").first.select_option(index=0)
        settle.get_by_role("button", name="Complete", exact=True).click()
        settle.get_by_text(re.compile(r"complete results: 1 completed of 1")).wait_for(state="visible", timeout=60_000)
        settle.get_by_text(re.compile(r"2 messages, 1 unsettled")).wait_for(state="visible", timeout=30_000)
        shot(page, root, form, "settlement-panel.png", "unsettled (peek-lock)")

        entities = panel(page, "Update selected")
        entities.get_by_placeholder("orders, or topic/subscriptions/name").fill("made-in-browser")
        entities.get_by_role("button", name="Create", exact=True).click()
        entities.get_by_text("Created queue made-in-browser.").wait_for(state="visible", timeout=60_000)
        assert entities.locator("select option", has_text="made-in-browser").count() == 1
        shot(page, root, form, "entity-panel.png", "Update selected")

        purge = panel(page, "Purge retries")
        purge.get_by_role("button", name="Purge…", exact=True).click()
        purge.get_by_text(re.compile(r"Type purge:")).wait_for(state="visible", timeout=60_000)
        purge.get_by_placeholder("type the word shown").fill("purge")
        purge.get_by_role("button", name="Confirm", exact=True).click()
        purge.get_by_text(re.compile(r"purge retries: 1 purged of 1")).first.wait_for(state="visible", timeout=60_000)
        shot(page, root, form, "purge-panel.png", "Purge retries")

        sessions.get_by_text(re.compile(r"^1 sessions$")).wait_for(state="visible", timeout=30_000)
        sessions.get_by_role("button", name="Peek messages", exact=True).click()
        sessions.get_by_text(re.compile(r'"step": 1')).first.wait_for(state="visible", timeout=60_000)
        shot(page, root, form, "sessions-panel.png", "Sessions of sessions")
        page.screenshot(path=str(root / "more-panels-after-clicks.png"), full_page=True)
        assert no_error_shown(page)  # no panel failed to draw or to answer


def test_tab_completes_entities_and_actions_in_jupyterlab(lab: tuple[str, Path, str]) -> None:
    """Tab in a cell: JupyterLab asks the kernel (complete_request, IPython's completer), which
    offers the live connection's entity names and a command's actions."""
    url, root, _ = lab
    # the cell: %sb_connect, which lists the names in the background
    with notebook_page(url, "complete.ipynb", height=1200, failure=root / "completion-failure.png") as page:
        page.get_by_text(re.compile(r"Connected to ")).first.wait_for(state="visible", timeout=120_000)
        page.wait_for_selector(KERNEL_IDLE, timeout=60_000)
        editor = page.locator(CELL_EDITOR).nth(1)  # Shift+Enter made a new cell below
        editor.click()
        page.keyboard.type("%sb_peek ord")
        page.keyboard.press("Tab")
        completer = page.locator(".jp-Completer")
        items = completer.locator(".jp-Completer-item .jp-Completer-match")
        in_cell = "sel => [...document.querySelectorAll(sel)].some(e => e.textContent.includes('%sb_peek orders'))"
        # JupyterLab 4 lists the one match; JupyterLab 3 (ipywidgets 7's lab) puts a single match
        # straight into the cell. Either way the kernel offered "orders" and no Python names.
        page.wait_for_function(
            f"sel => !!document.querySelector('.jp-Completer .jp-Completer-item') || ({in_cell})(sel)",
            arg=CELL_EDITOR,
            timeout=60_000,
        )
        page.screenshot(path=str(root / "completion.png"), full_page=True)
        if items.count():
            assert [t.strip() for t in items.all_inner_texts()] == ["orders"]  # no Python names
            page.keyboard.press("Enter")  # JupyterLab puts it in the cell
        page.wait_for_function(in_cell, arg=CELL_EDITOR, timeout=30_000)
        page.keyboard.press("Enter")
        page.keyboard.type("%sb_settle d")
        page.keyboard.press("Tab")  # the command's actions
        completer.get_by_text("dead-letter").first.wait_for(state="visible", timeout=60_000)
        assert sorted(t.strip() for t in items.all_inner_texts()) == ["dead-letter", "defer"]
