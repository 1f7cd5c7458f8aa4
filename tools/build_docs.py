"""Build the docs site with every tutorial executed, and prove it shows no secret.

    .venv/bin/pip install -e ".[docs]" && .venv/bin/python tools/build_docs.py

The tutorials run in nav order (mkdocs-jupyter) on a shared emulator of their own: a throwaway
``SBNOTEBOOK_HOME``, so the build never touches your emulator's messages and starts as empty as a
fresh machine. Afterwards that emulator is stopped and the whole site is searched for its key and for
any ``SharedAccessKey=`` value other than the documented placeholder, and the API reference is
checked: every public name has its entry with its docstring, every public callable its parameters
(tools/reference_check.py reads the built pages), every magic its help. Exit
status: 0 when the site is built and clean, 1 otherwise (the offending files are named, never the secret).

``--reference-only`` builds the same site without the tutorials (seconds, not minutes: mkdocs.yml
less its mkdocs-jupyter plugin and its Tutorials section), to check the pages and the API reference.
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
    parser.add_argument(
        "--reference-only",
        action="store_true",
        help="build without the tutorials: the pages and the API reference only (a quick check)",
    )
    args = parser.parse_args(argv)
    if args.reference_only:
        return build_reference_only(args.site_dir)

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
    missing = reference_gaps(args.site_dir)
    if missing:
        print("FAILED: the API reference: " + "; ".join(missing))
        return 1
    pages = len(list(args.site_dir.rglob("*.html")))
    print(
        f"Built {pages} pages in {time.monotonic() - started:.0f} s, the tutorials executed; no key in the site "
        "(the emulator's key and every SharedAccessKey= value checked); the API reference complete."
    )
    return 0


def build_reference_only(site: Path) -> int:
    """The site without the tutorials: mkdocs.yml less mkdocs-jupyter and its Tutorials section,
    written beside it (its relative paths hold) for the build, then removed."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["plugins"] = [p for p in config["plugins"] if not (isinstance(p, dict) and "mkdocs-jupyter" in p)]
    config["nav"] = [entry for entry in config["nav"] if not (isinstance(entry, dict) and "Tutorials" in entry)]
    started = time.monotonic()
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix=".mkdocs-reference-", dir=ROOT) as file:
        yaml.safe_dump(config, file, sort_keys=False)
        file.flush()
        built = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--clean", "-f", file.name, "--site-dir", str(site)], cwd=ROOT
        )
    if built.returncode != 0:
        print(f"FAILED: mkdocs build exited {built.returncode}")
        return 1
    problems = [f"a secret in {name}" for name in scan(site, set())] + reference_gaps(site)
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(f"Built the pages and the API reference (no tutorials) in {time.monotonic() - started:.0f} s: complete.")
    return 0


def reference_gaps(site: Path) -> list[str]:
    """What the API reference shows wrong (tools/reference_check.py: every public name's entry with
    its docstring, every callable's parameters, read from the built pages), and each magic's help
    missing from its page."""
    from reference_check import gaps  # beside this file, which Python runs as a script

    from sbnotebook.notebook import magics

    text = _page(site, "magics")
    helps = [f"reference/magics.html: {p.prog} -h" for p in magics.PARSERS if f"usage: {p.prog}" not in text]
    return gaps(site) + helps


def _page(site: Path, name: str) -> str:
    path = site / "reference" / f"{name}.html"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


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
