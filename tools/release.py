"""Everything a release needs up to the upload, in one command (docs/releasing.md).

    python tools/release.py            # from a clone with the dev extra installed

1. clones HEAD into a temporary folder (what is committed, nothing else);
2. reads the version from sbnotebook/_version.py and checks CHANGELOG.md's first heading names it
   (a release: ``## X.Y.Z - YYYY-MM-DD``; a development version ``X.Y.Z.devN``: ``## Unreleased (X.Y.Z)``);
3. ``python -m build`` into dist/ (sdist, and the wheel built from that sdist) and ``twine check --strict``;
4. runs tests/project/test_release.py and tests/project/test_packaging.py of that clone against these files
   (SBNOTEBOOK_DIST): the wheel alone in a fresh venv runs the demo, the tutorials command,
   ``%load_ext sbnotebook``, the emulator and a Spark read from another folder; the Databricks install
   replaces nothing of any runtime set;
5. prints the upload and tag commands. It uploads nothing: that needs the project's PyPI credentials.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*argv: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    print("$", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"release: failed ({done.returncode}): {' '.join(argv)}\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return done.stdout


def version_of(tree: Path) -> str:
    text = (tree / "sbnotebook" / "_version.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, flags=re.M)
    if not found:
        sys.exit("release: no __version__ in sbnotebook/_version.py")
    return found.group(1)


def check_changelog(tree: Path, version: str) -> bool:
    """True for a release version whose heading is dated; False for a development version."""
    headings = re.findall(r"^## (.+)$", (tree / "CHANGELOG.md").read_text(encoding="utf-8"), flags=re.M)
    first = headings[0] if headings else ""
    dev = re.fullmatch(r"(\d+\.\d+\.\d+)\.dev\d+", version)
    if dev:
        if first != f"Unreleased ({dev.group(1)})":
            sys.exit(f"release: CHANGELOG.md's first heading is {first!r}, expected 'Unreleased ({dev.group(1)})'")
        return False
    if not re.fullmatch(rf"{re.escape(version)} - \d{{4}}-\d{{2}}-\d{{2}}", first):
        sys.exit(f"release: CHANGELOG.md's first heading is {first!r}, expected '{version} - YYYY-MM-DD'")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dist", default=str(ROOT / "dist"), help="where the files go (default: %(default)s)")
    parser.add_argument("--no-tests", action="store_true", help="build and twine check only")
    args = parser.parse_args(argv)
    if run("git", "status", "--porcelain").strip():
        print("release: the working tree has uncommitted changes; they are NOT in this build (HEAD is)")
    head = run("git", "rev-parse", "HEAD").strip()
    dist = Path(args.dist).resolve()
    with tempfile.TemporaryDirectory(prefix="sbnotebook-release-") as work:
        tree = Path(work) / "sbnotebook"
        run("git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(tree))
        run("git", "checkout", "--quiet", head, cwd=tree)
        version = version_of(tree)
        final = check_changelog(tree, version)
        shutil.rmtree(dist, ignore_errors=True)
        run(sys.executable, "-m", "build", "--outdir", str(dist), str(tree))
        files = sorted(str(p) for p in dist.iterdir() if p.suffix in (".whl", ".gz"))
        print(run(sys.executable, "-m", "twine", "check", "--strict", *files), end="")
        if not args.no_tests:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env |= {"SBNOTEBOOK_DIST": str(dist), "PYTHONPATH": str(tree)}
            tests = ["tests/project/test_release.py", "tests/project/test_packaging.py"]
            out = run(
                sys.executable, "-m", "pytest", "-p", "no:randomly", "-o", "addopts=", "-q", *tests, cwd=tree, env=env
            )
            print(out.strip().splitlines()[-1])
    print(f"\nBuilt and checked sbnotebook {version} from {head[:12]}: {', '.join(Path(f).name for f in files)}")
    if not final:
        print("A development version: not for upload. To release, docs/releasing.md.")
        return 0
    print("Up to the upload, done. The upload needs the PyPI credentials of the sbnotebook project:")
    print(f"  python -m twine upload {dist}/*")
    print(f"  git tag -a v{version} -m 'sbnotebook {version}' {head[:12]} && git push origin v{version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
