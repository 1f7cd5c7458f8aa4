"""Build the docs site with every tutorial executed, and prove it shows no secret.

    .venv/bin/pip install -e ".[docs]" && .venv/bin/python tools/build_docs.py

The tutorials run in nav order (mkdocs-jupyter) on a shared emulator of their own: a throwaway
``SBNOTEBOOK_HOME``, so the build never touches your emulator's messages and starts as empty as a
fresh machine. Afterwards that emulator is stopped and the whole site is searched for its key and for
any ``SharedAccessKey=`` value other than the documented placeholder. Exit status: 0 when the site
is built and clean, 1 otherwise (the offending files are named, never the secret).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_KEYS = {"SAS_KEY_VALUE", "<key>", "KEY"}  # shown in docs as examples, not secrets
KEY_VALUE = re.compile(r"SharedAccessKey=([^;\"'<\s&\\]+)")  # a JSON escape (\\n) ends a value too


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site-dir", type=Path, default=ROOT / "site", help="where to write the site (default: site/)")
    args = parser.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="sbnotebook-docs-home-"))
    # Charts: a kernel run by nbclient gives plotly's mimetype only, which a static page cannot
    # draw; the HTML renderer too (plotly.js from its CDN) makes them show on the site.
    env = {**os.environ, "SBNOTEBOOK_HOME": str(home), "PLOTLY_RENDERER": "plotly_mimetype+notebook_connected"}
    env.pop("SERVICEBUS_CONNECTION_STRING", None)  # the tutorials run on the emulator, never a real namespace
    started = time.monotonic()
    print(f"Building the docs into {args.site_dir} (executing the tutorials; a few minutes) ...", flush=True)
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--clean", "--site-dir", str(args.site_dir)],
        cwd=ROOT,
        env=env,
    )
    key_file = home / "emulator" / "key"
    secrets = {key_file.read_text(encoding="ascii").strip()} if key_file.exists() else set()
    subprocess.run([sys.executable, "-m", "sbnotebook.cli", "emulator", "--stop"], env=env, check=False)
    if built.returncode != 0:
        print(f"FAILED: mkdocs build exited {built.returncode} (a tutorial cell failed? see above)")
        return 1
    if not secrets:
        # The tutorials use the shared emulator: no key means they were not run (a cache?), and the
        # outputs on the site would not be this run's, nor checked against this run's key.
        print("FAILED: no tutorial started the shared emulator; were they executed? (mkdocs.yml: cache: false)")
        return 1
    leaks = scan(args.site_dir, secrets)
    if leaks:
        print("FAILED: a secret appears in the site, in: " + ", ".join(leaks))
        return 1
    pages = len(list(args.site_dir.rglob("*.html")))
    print(
        f"Built {pages} pages in {time.monotonic() - started:.0f} s, the tutorials executed; no key in the site "
        "(the emulator's key and every SharedAccessKey= value checked)."
    )
    return 0


def scan(site: Path, secrets: set[str]) -> list[str]:
    """Files of the site that hold one of ``secrets`` or a non-placeholder ``SharedAccessKey=`` value."""
    leaks = []
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.suffix not in {".html", ".js", ".json", ".xml", ".txt", ".ipynb"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        values = {v for v in KEY_VALUE.findall(text) if v not in PLACEHOLDER_KEYS}
        if values or any(s and s in text for s in secrets):
            leaks.append(str(path.relative_to(site)))
    return leaks


if __name__ == "__main__":
    raise SystemExit(main())
