"""mkdocs hooks for the docs site (mkdocs.yml ``hooks``).

The tutorials link their screenshots as ``../docs/images/...``: right when a notebook is opened from
``notebooks/`` in Jupyter or on GitHub. On the site a tutorial is ``tutorials/NAME.html`` (flat URLs),
so the same link asks for ``docs/images/`` at the site's root: the images are copied there too.

The magics' reference (docs/reference/magics.md) is each command's ``-h`` text, made here from the
commands' own parsers (``sbnotebook.notebook.magics.PARSERS``) when the page is built. The errors'
reference (docs/reference/errors.md) gets an entry for each class of the tree, found in the code
(``reference_check.error_classes``, beside this file; mkdocs puts this folder on the path).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from reference_check import error_classes  # tools/, on the path while mkdocs loads this file

MAGICS_PAGE = "reference/magics.md"
MAGICS_MARK = "<!-- the help of every magic is put here when the site is built -->"
ERRORS_PAGE = "reference/errors.md"
ERRORS_MARK = "<!-- an entry for each error class is put here when the site is built -->"


def magics_help() -> str:
    """Every magic's ``-h`` text, one section each, in the order the kit registers them."""
    from sbnotebook.notebook import magics

    sections = []
    for parser in magics.PARSERS:
        sections.append(f"## `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(sections)


def error_entries() -> str:
    """A mkdocstrings entry for each error class of the tree, where it is defined, in the tree's order."""
    options = "    options:\n      show_root_heading: true\n      show_root_toc_entry: true\n"
    return "\n".join(f"::: {cls.__module__}.{cls.__qualname__}\n{options}" for cls in error_classes())


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    made = {MAGICS_PAGE: (MAGICS_MARK, magics_help), ERRORS_PAGE: (ERRORS_MARK, error_entries)}
    if page.file.src_uri in made:
        mark, make = made[page.file.src_uri]
        if mark not in markdown:
            raise ValueError(f"{page.file.src_uri} lost its mark {mark!r}: what is made for it has nowhere to go")
        return markdown.replace(mark, make())
    return markdown


def on_post_build(config: Any, **_: Any) -> None:
    images = Path(config["docs_dir"]) / "images"
    shutil.copytree(images, Path(config["site_dir"]) / "docs" / "images", dirs_exist_ok=True)
