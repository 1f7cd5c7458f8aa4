"""mkdocs hooks for the docs site (mkdocs.yml ``hooks``).

The tutorials link their screenshots as ``../docs/images/...``: right when a notebook is opened from
``notebooks/`` in Jupyter or on GitHub. On the site a tutorial is ``tutorials/NAME.html`` (flat URLs),
so the same link asks for ``docs/images/`` at the site's root: the images are copied there too.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def on_post_build(config: Any, **_: Any) -> None:
    images = Path(config["docs_dir"]) / "images"
    shutil.copytree(images, Path(config["site_dir"]) / "docs" / "images", dirs_exist_ok=True)
