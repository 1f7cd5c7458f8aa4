"""mkdocs hooks for the docs site (mkdocs.yml ``hooks``).

The tutorials link their screenshots as ``../docs/images/...``: right when a notebook is opened from
``notebooks/`` in Jupyter or on GitHub. On the site a tutorial is ``tutorials/NAME.html`` (flat URLs),
so the same link asks for ``docs/images/`` at the site's root: the images are copied there too.

The magics' reference (docs/reference/magics.md) is each command's ``-h`` text, made here from the
commands' own parsers (``sbnotebook.notebook.magics.PARSERS``) when the page is built.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

MAGICS_PAGE = "reference/magics.md"
MAGICS_MARK = "<!-- the help of every magic is put here when the site is built -->"


def magics_help() -> str:
    """Every magic's ``-h`` text, one section each, in the order the kit registers them."""
    from sbnotebook.notebook import magics

    sections = []
    for parser in magics.PARSERS:
        sections.append(f"## `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == MAGICS_PAGE:
        if MAGICS_MARK not in markdown:
            raise ValueError(f"{MAGICS_PAGE} lost its mark {MAGICS_MARK!r}: the magics' help has nowhere to go")
        return markdown.replace(MAGICS_MARK, magics_help())
    return markdown


def on_post_build(config: Any, **_: Any) -> None:
    images = Path(config["docs_dir"]) / "images"
    shutil.copytree(images, Path(config["site_dir"]) / "docs" / "images", dirs_exist_ok=True)
