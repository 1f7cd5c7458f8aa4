"""The release as a user gets it (docs/releasing.md): the built sdist and wheel pass ``twine check``,
carry the license, the changelog and every tutorial, and the wheel alone, in a fresh venv, runs the
demo, ``sbnotebook tutorials``, ``%load_ext sbnotebook``, the emulator and a Spark read from a folder
outside the repository, with hints that fit a wheel install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

import sbnotebook
from sbnotebook.core import counts
from tests.project.release_build import ROOT, built, need_build_tools

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_twine_check_passes_on_both() -> None:
    need_build_tools()
    dist = built()
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2


def test_the_wheel_carries_the_license_the_version_and_every_tutorial_byte_for_byte() -> None:
    wheel = built().wheel
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = z.read(metadata).decode()
        licenses = [n for n in names if ".dist-info/licenses/" in n]
        assert [n.rsplit("/", 1)[1] for n in licenses] == ["LICENSE"]
        assert z.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
        packaged = {n.rsplit("/", 1)[1]: z.read(n) for n in names if n.startswith("sbnotebook/tutorials/")}
    assert f"\nVersion: {sbnotebook.__version__}\n" in meta  # the one version, read from the package
    assert "\nLicense-Expression: MIT\n" in meta
    assert NOTEBOOKS and packaged == {p.name: p.read_bytes() for p in NOTEBOOKS}


def test_the_sdist_builds_the_same_wheel_contents() -> None:
    """The wheel is built from the sdist: the sdist must carry notebooks/, LICENSE and the changelog."""
    with tarfile.open(built().sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"LICENSE", "CHANGELOG.md", "setup.py", "MANIFEST.in", "pyproject.toml"} <= names
    assert {f"notebooks/{p.name}" for p in NOTEBOOKS} <= names


def test_the_changelog_names_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    release = re.sub(r"\.dev\d+$", "", sbnotebook.__version__)
    assert headings and release in headings[0], f"CHANGELOG.md's first heading {headings[:1]} is not {release}"


# ------------------------------------------------------------------ the wheel alone, in a fresh venv


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages, nothing of this checkout) holding the built wheel with the
    notebook and spark extras, installed the way a user would."""
    wheel = built().wheel
    home = tmp_path_factory.mktemp("wheel-venv")
    venv.create(home, with_pip=True, symlinks=True)
    started = time.monotonic()
    done = subprocess.run(
        [
            str(home / "bin" / "python"),
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            # No .pyc files for the venv's modules at install: the ones the tests import are compiled
            # when first imported (as from any source tree), the rest (most of plotly and pyspark) never.
            "--no-compile",
            f"{wheel}[notebook,spark]",
        ],
        capture_output=True,
        text=True,
        timeout=800,
        env=_without_checkout(os.environ),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"wheel venv installed in {time.monotonic() - started:.0f} s")
    return home


def _without_checkout(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The environment with nothing that points back at this checkout or a configured namespace."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    return {k: v for k, v in env.items() if k not in drop and not k.startswith("SERVICEBUS_")}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working folder outside the repository, and a HOME of its own (the shared emulator's state)."""
    folder = tmp_path / "work"
    folder.mkdir()
    assert ROOT not in folder.resolve().parents
    (tmp_path / "home").mkdir()
    return folder


def _run(venv_home: Path, folder: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = _without_checkout(os.environ) | {"HOME": str(folder.parent / "home")}
    return subprocess.run(list(argv), cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_wheel_runs_the_demo_and_writes_the_tutorials_with_hints_for_a_wheel(
    wheel_venv: Path, elsewhere: Path
) -> None:
    cli, py = str(wheel_venv / "bin" / "sbnotebook"), str(wheel_venv / "bin" / "python")
    where = _run(wheel_venv, elsewhere, py, "-c", "import sbnotebook; print(sbnotebook.__file__)")
    assert str(wheel_venv) in where.stdout, where  # the wheel's copy, not this checkout
    sdk = _run(
        wheel_venv, elsewhere, py, "-c", "from importlib.metadata import version; print(version('azure-servicebus'))"
    )
    line = f"sbnotebook {sbnotebook.__version__}, azure-servicebus {sdk.stdout.strip()}, Python "

    version = _run(wheel_venv, elsewhere, cli, "--version")
    assert version.returncode == 0 and version.stdout.startswith(line), version

    demo = _run(wheel_venv, elsewhere, cli, "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert line in demo.stdout and "3 completed, 1 dead-lettered" in demo.stdout
    hints = demo.stdout.split("dead-lettered.", 1)[1]
    # Nothing that exists only in a checkout: no editable install, no notebooks/ or docs/ folder.
    for checkout_only in ("-e ", "notebooks/", "docs/", ".[dev]", "sbnotebook[notebook]"):
        assert checkout_only not in hints, f"{checkout_only!r} in the wheel's hints:\n{hints}"
    (tutorials_line,) = [h for h in hints.splitlines() if h.strip().startswith(f"{cli} tutorials ")]
    # The hint's own command works, as printed, and writes every tutorial byte for byte.
    written = _run(wheel_venv, elsewhere, *shlex.split(tutorials_line))
    assert written.returncode == 0, written
    target = elsewhere / shlex.split(tutorials_line)[-1]
    assert {p.name: p.read_bytes() for p in target.glob("*.ipynb")} == {p.name: p.read_bytes() for p in NOTEBOOKS}

    # Refuses to overwrite without --force, and writes nothing then.
    mine = target / NOTEBOOKS[0].name
    mine.write_text("my edits")
    again = _run(wheel_venv, elsewhere, cli, "tutorials", str(target))
    assert again.returncode == 1 and "--force" in again.stderr and mine.read_text() == "my edits"
    forced = _run(wheel_venv, elsewhere, cli, "tutorials", str(target), "--force")
    assert forced.returncode == 0 and mine.read_bytes() == NOTEBOOKS[0].read_bytes()


@pytest.fixture
def wheel_emulator(wheel_venv: Path, elsewhere: Path) -> Iterator[str]:
    """``sbnotebook emulator`` from the wheel, on a free port: its connection string."""
    env = _without_checkout(os.environ) | {"HOME": str(elsewhere.parent / "home")}
    proc = subprocess.Popen(
        [str(wheel_venv / "bin" / "sbnotebook"), "emulator", "--port", "0"],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        conn = ""
        while not conn and time.monotonic() < deadline:
            text = proc.stdout.readline()
            if not text:
                break
            if text.startswith("Endpoint="):
                conn = text.strip()
        assert conn, "the wheel's emulator printed no connection string"
        yield conn
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_wheel_loads_in_ipython_and_reads_with_spark_from_its_emulator(
    wheel_venv: Path, elsewhere: Path, wheel_emulator: str
) -> None:
    bodies = [json.dumps({"order": i}) for i in range(3)]
    with ServiceBusClient.from_connection_string(wheel_emulator) as client, client.get_queue_sender("orders") as s:
        s.send_messages([ServiceBusMessage(b) for b in bodies])

    magics = _run(
        wheel_venv,
        elsewhere,
        str(wheel_venv / "bin" / "ipython"),
        "--quick",
        "--no-banner",
        "--colors=NoColor",
        "-c",
        f"%load_ext sbnotebook\n%sb_connect {wheel_emulator}\n",
    )
    assert magics.returncode == 0 and "Connected to 127.0.0.1:" in magics.stdout, magics
    assert f"sbnotebook {sbnotebook.__version__}, azure-servicebus " in magics.stdout
    assert "SAS_KEY_VALUE" not in magics.stdout + magics.stderr

    script = (
        "import json, sys\n"
        "from sbnotebook import spark as sbspark\n"
        "spark = sbspark.local_session()\n"
        "df = (spark.read.format('servicebus').option('connectionString', sys.argv[1])\n"
        "      .option('entity', 'orders').option('bodyFormat', 'text').load())\n"
        "print(json.dumps(sorted(r['body_text'] for r in df.select('body_text').collect())))\n"
        "spark.stop()\n"
    )
    read = _run(wheel_venv, elsewhere, str(wheel_venv / "bin" / "python"), "-c", script, wheel_emulator, timeout=400)
    assert read.returncode == 0, read.stdout[-3000:] + read.stderr[-3000:]
    assert json.loads(read.stdout.strip().splitlines()[-1]) == sorted(bodies)
    # A peek read leaves the broker as it was: read by this process's own kit, not the wheel's.
    assert counts("orders", connection=wheel_emulator).active == 3


def test_the_release_tool_checks_the_changelog_against_the_version(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("release", ROOT / "tools" / "release.py")
    assert spec is not None and spec.loader is not None
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    assert release.version_of(ROOT) == sbnotebook.__version__
    release.check_changelog(ROOT, sbnotebook.__version__)  # this tree's own heading fits
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text("# Changelog\n\n## Unreleased (0.3.0)\n\n## 0.2.0 - 2026-12-01\n")
    assert release.check_changelog(tmp_path, "0.3.0.dev0") is False  # a development build
    with pytest.raises(SystemExit, match=re.escape("expected '0.3.0 - YYYY-MM-DD'")):
        release.check_changelog(tmp_path, "0.3.0")  # a release needs its dated heading
    changelog.write_text("# Changelog\n\n## 0.3.0 - 2026-12-24\n")
    assert release.check_changelog(tmp_path, "0.3.0") is True
    with pytest.raises(SystemExit, match="Unreleased"):
        release.check_changelog(tmp_path, "0.4.0.dev0")
