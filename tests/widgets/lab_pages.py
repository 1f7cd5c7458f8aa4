"""Driving JupyterLab in headless Chromium (Playwright) for tests/widgets/test_browser.py: a notebook
opened and its cell run, the panels found, clicked and read, screenshots kept."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.required import require_module, require_tool


def chromium() -> str:
    """Debian's chromium (chromium-browser elsewhere): its path, or the test skipped or failed (tests/required.py)."""
    return require_tool("chromium", "chromium-browser")


def playwright() -> Any:
    """Playwright's sync API, or the test skipped or failed (tests/required.py)."""
    return require_module("playwright.sync_api")


KERNEL_IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
# The cell's editor in both labs (JupyterLab 4 draws CodeMirror 6's .cm-content, 3 CodeMirror 5's).
CELL_EDITOR = ".jp-Notebook .jp-Cell .jp-InputArea-editor"


@contextmanager
def notebook_page(url: str, notebook: str, height: int, failure: Path) -> Iterator[Any]:
    """``notebook`` open in the lab in headless Chromium, its one cell run. On an error the page as
    it was is saved to ``failure``; the browser is closed after."""
    with playwright().sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        page: Any = browser.new_page(viewport={"width": 1400, "height": height})
        try:
            page.goto(url.format(notebook=notebook), timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector(KERNEL_IDLE, timeout=120_000)
            run_the_cell(page)
            yield page
        except Exception:
            page.screenshot(path=str(failure), full_page=True)  # what the page showed
            raise
        finally:
            browser.close()


def no_error_shown(page: Any) -> bool:
    """No traceback in an output, and no widget its frontend could not draw (JupyterLab says "Error
    displaying widget" or "Failed to load model class" where a widget's model did not load)."""
    errors = re.compile(r"Traceback|Error displaying widget|Failed to load model class")
    return page.get_by_text(errors).count() == 0


def panel(page: Any, text: str) -> Any:
    """The output holding one panel, found by a text only it shows."""
    return page.locator(".jp-OutputArea-child", has_text=text).first


def run_the_cell(page: Any) -> None:
    """Shift+Enter on the notebook's one cell until JupyterLab has taken it: it runs (a number or *
    in its prompt) or JupyterLab asks for a kernel first (then it runs the cell itself once one is
    chosen: pressing again would run it twice). A key sent while the page settles can be lost."""
    taken = page.locator(".jp-Notebook .jp-Cell .jp-InputPrompt", has_text=re.compile(r"\[[*\d]+\]"))
    asked = kernel_dialog(page)
    for attempt in range(3):
        page.locator(CELL_EDITOR).first.click()
        page.keyboard.press("Shift+Enter")
        try:
            taken.or_(asked).first.wait_for(state="visible", timeout=30_000)
        except playwright().TimeoutError:
            if attempt == 2:
                raise
            continue
        accept_the_kernel_dialog(page)
        return


def accept_the_kernel_dialog(page: Any) -> None:
    """On a busy host JupyterLab can open the notebook before its kernel session is known and ask
    which kernel to start (seen in a contended suite run: the dialog took every click). The
    notebook's own kernelspec is preselected: accept it."""
    dialog = kernel_dialog(page)
    if dialog.count() and dialog.first.is_visible():
        # Its accept button reads "Select" but is named "Select Kernel" (aria-label): find it by class.
        dialog.first.locator("button.jp-mod-accept").click()
        dialog.first.wait_for(state="hidden", timeout=30_000)
        page.wait_for_selector(KERNEL_IDLE, timeout=120_000)


def kernel_dialog(page: Any) -> Any:
    """JupyterLab's "Select Kernel" dialog, open or not."""
    return page.locator(".jp-Dialog", has_text="Select Kernel")


def wait_text(page: Any, pattern: str, timeout: float = 60_000) -> None:
    page.get_by_text(re.compile(pattern)).first.wait_for(state="visible", timeout=timeout)


def widget_input(page: Any, label: str) -> Any:
    """The input of the ipywidgets Text whose description is ``label``."""
    return page.locator(".widget-text", has=page.locator("label", has_text=re.compile(rf"^{label}$"))).locator("input")


def browse_search_then_clear_it_and_export_the_whole_entity(page: Any, root: Path, form: str) -> None:
    """Issue 16 #8: Go with an empty search box drops the filter; export writes the whole entity
    (3 messages, pages of 2) to the named file, with one suffix. The search box searches when the
    text is committed (Enter), not per keystroke."""
    search = page.get_by_placeholder(re.compile(r"customer\.id")).first
    go = page.get_by_role("button", name="Go", exact=True).first
    search.click()
    page.keyboard.type("body_json.order == 1", delay=20)
    # Per keystroke (continuous_update on) the last key would have searched: the round trip to the
    # kernel takes milliseconds; typed-but-uncommitted text has searched nothing.
    page.wait_for_timeout(1500)
    assert page.get_by_text(re.compile(r"scanned for the search")).count() == 0
    page.keyboard.press("Enter")
    wait_text(page, r"\$deadletterqueue: 1 messages, .* scanned for the search")
    search.fill("")
    go.click()
    wait_text(page, r"\$deadletterqueue: 2 messages, sequence numbers \d+\.\.\d+$")
    search.fill("body_json.order == 1")
    go.click()
    wait_text(page, r"\$deadletterqueue: 1 messages, .* scanned for the search")
    search.fill("")
    go.click()
    wait_text(page, r"\$deadletterqueue: 2 messages, sequence numbers \d+\.\.\d+$")
    widget_input(page, "File").first.fill("dlq-export.jsonl")
    page.get_by_role("button", name="Export JSON", exact=True).first.click()
    wait_text(page, r"Exported 3 messages to dlq-export\.jsonl$")
    exported = root / "dlq-export.jsonl"  # the kernel runs in the notebook's folder
    assert len(exported.read_text().splitlines()) == 3
    shot(page, root, form, "browser-panel.png", "Export JSON")


def the_lists_are(page: Any, form: str) -> None:
    """The grid form draws DataTables tables; the Databricks form core ipywidgets' multi-select lists
    (and says why), and no grid at all."""
    grids = page.locator(".jp-OutputArea-child table.dataTable")
    plain = page.locator(".jp-OutputArea-child .widget-select-multiple select")
    if form == "grid":
        grids.first.wait_for(state="visible", timeout=60_000)
        assert plain.count() == 0
    else:
        plain.first.wait_for(state="visible", timeout=60_000)
        assert plain.count() == 2 and grids.count() == 0  # triage and browser
        wait_text(page, r"plain list on Databricks")
        assert plain.first.locator("option").count() == 3


def resubmit_with_a_patch_shown_before_confirm_and_cleared_after(page: Any, root: Path, form: str) -> None:
    """Issue 16 #1 and #9: rows show the dead-letter reason; the patch is shown in the prompt before
    anything moves; the confirmation sits right under its button; the patch is cleared after use."""
    if form == "grid":
        wait_text(page, r"^bad-currency$")  # the reason column of the grid
    else:
        # the plain list's lines carry the reason too (not only the Reason dropdown's entries)
        rows = page.locator(".widget-select-multiple select option", has_text="reason: bad-currency")
        rows.first.wait_for(state="attached", timeout=30_000)
    patch = page.get_by_placeholder(re.compile(r"JSON merge patch")).first
    patch.fill('{"currency": "EUR"}')
    resubmit = page.locator("button", has_text="Resubmit selected").first
    resubmit.click()
    wait_text(page, r"with this merge patch applied to each JSON body")
    confirm_box = page.get_by_placeholder("type the word shown").first
    confirm_box.wait_for(state="visible", timeout=30_000)
    button, box = resubmit.bounding_box(), confirm_box.bounding_box()
    assert button is not None and box is not None
    assert 0 <= box["y"] - (button["y"] + button["height"]) < 120, (button, box)  # right under its button
    shot(page, root, form, "triage-confirm-resubmit.png", "dead-lettered messages")
    confirm_box.fill("resubmit")
    page.get_by_role("button", name="Confirm", exact=True).first.click()
    wait_text(page, r"What moved where")
    wait_text(page, r"0 dead-lettered messages")
    assert patch.input_value() == ""  # used once: the next resubmit starts clean
    shot(page, root, form, "triage-after-resubmit.png", "dead-lettered messages")


def shot(page: Any, root: Path, form: str, name: str, panel_text: str) -> None:
    """A screenshot of the cell output holding ``panel_text`` (one panel), under the test's folder;
    with SBNOTEBOOK_SCREENSHOTS=DIR also there (the docs' ones are made that way:
    SBNOTEBOOK_SCREENSHOTS=docs/images pytest tests/widgets/test_browser.py)."""
    path = root / name
    # JupyterLab 4's toasts (its "notified about official Jupyter news?" question) float over the
    # page, and so over a panel's picture: hidden for the screenshot only.
    page.add_style_tag(content=".Toastify { display: none !important; }")
    page.locator(".jp-OutputArea-child", has_text=panel_text).first.screenshot(path=str(path))
    folder = os.environ.get("SBNOTEBOOK_SCREENSHOTS")
    if folder and form == "grid":  # the docs show the grid
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(folder) / name)
