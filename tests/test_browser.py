"""One real-browser test: JupyterLab on localhost, headless Debian Chromium driven by Playwright.

A notebook opens the triage and browser panels against the kernel's embedded emulator; the test
checks that they render, that a click reaches the kernel and changes the panel, and keeps
screenshots of both states (under the pytest tmp dir) for a look.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)"),
]

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


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook()
    # One cell: a single Shift+Enter runs it all (keys sent while the page settles can be lost,
    # and one cell can simply be run again).
    panels = "triage = %sb_dlq orders\nbrowser = %sb_browse orders --dlq\ndisplay(triage, browser)"
    nb.cells = [nbformat.v4.new_code_cell("%load_ext sbnotebook\n" + SETUP.strip() + "\n" + panels)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "triage.ipynb")
    port, token = free_port(), "sbnotebook-test-token"
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
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield f"{base}/lab/tree/triage.ipynb?token={token}", root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_panels_render_in_jupyterlab_and_respond_to_a_click(lab: tuple[str, Path]) -> None:
    url, root = lab
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page: Any = browser.new_page(viewport={"width": 1400, "height": 2200})
        try:
            page.goto(url, timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            resubmit = page.locator("button", has_text="Resubmit selected").first
            for attempt in range(3):
                page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
                page.keyboard.press("Shift+Enter")
                try:
                    resubmit.wait_for(state="visible", timeout=90_000)
                    break
                except playwright_api.TimeoutError:
                    if attempt == 2:
                        raise
            page.locator("button", has_text="Next").first.wait_for(state="visible", timeout=60_000)
            page.get_by_text(re.compile(r"\d+ dead-lettered messages, 1 reasons")).first.wait_for(
                state="visible", timeout=60_000
            )
            before = root / "panels.png"
            page.screenshot(path=str(before), full_page=True)

            page.locator("button", has_text="Discard selected").first.click()
            prompt = page.get_by_text("and press Confirm").first
            prompt.wait_for(state="visible", timeout=60_000)  # the kernel answered the click
            page.get_by_placeholder("type the word shown").first.wait_for(state="visible", timeout=30_000)
            after = root / "panels-after-click.png"
            page.screenshot(path=str(after), full_page=True)
        except Exception:
            page.screenshot(path=str(root / "failure.png"), full_page=True)  # what the page showed
            raise
        finally:
            browser.close()
    assert before.stat().st_size > 20_000 and after.stat().st_size > 20_000  # rendered, not blank
    assert before.read_bytes() != after.read_bytes()
