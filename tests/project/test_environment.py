"""environment.yml gives what ``pip install -e ".[dev,docs]"`` gives (the README says so): every
requirement of pyproject.toml's runtime dependencies and of its dev and docs extras (through the
extras they name: ``sbnotebook[notebook]``, ...), with the same extras, floor and ceiling, and nothing
else but Python, OpenJDK and pip. The last test changes each of these on a made-up pair and sees
the check fail."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BESIDE = {"python", "openjdk", "pip"}  # what conda brings that pyproject.toml cannot say
Bounds = tuple[frozenset[str], Version | None, Version | None]  # extras, floor (>=), ceiling (<)


def bounds(reqs: Iterable[Requirement]) -> dict[str, Bounds]:
    """Each package's extras and the tightest floor and ceiling its requirements give; a bound other
    than >= and < (==, ~=, <=, !=) is refused, so nothing is compared loosely."""
    found: dict[str, Bounds] = {}
    for req in reqs:
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        extras, floor, ceiling = found.get(name, (frozenset(), None, None))
        for spec in req.specifier:
            assert spec.operator in (">=", "<"), f"{req}: only >= and < are compared"
            version = Version(spec.version)
            if spec.operator == ">=":
                floor = version if floor is None else max(floor, version)
            else:
                ceiling = version if ceiling is None else min(ceiling, version)
        found[name] = (extras | frozenset(req.extras), floor, ceiling)
    return found


def wanted(pyproject: dict[str, object], extras: Iterable[str] = ("dev", "docs")) -> dict[str, Bounds]:
    """pyproject.toml's runtime dependencies and the named extras, following sbnotebook[...]."""
    project: dict = pyproject["project"]  # type: ignore[assignment]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    reqs, todo, seen = [Requirement(r) for r in project["dependencies"]], list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional[extra]:
            req = Requirement(text)
            if req.name == project["name"]:
                todo += sorted(req.extras)
            else:
                reqs.append(req)
    return bounds(reqs)


def listed(environment: str) -> dict[str, Bounds]:
    """environment.yml's conda and pip requirements (``pip install -e .`` and what BESIDE names
    left out). Conda's ``name>=1,<2`` is pip's syntax too."""
    specs = []
    for line in environment.split("\ndependencies:\n", 1)[1].splitlines():
        item = re.match(r"\s+- ([^#]+?)\s*(?:#.*)?$", line)
        if item is None or item.group(1).endswith(":") or item.group(1).startswith("-e "):
            continue
        text = item.group(1)
        if re.match(r"[\w-]+=[^=]", text):  # conda's name=version: a version prefix
            assert text.split("=")[0] in BESIDE, f"environment.yml: {text}: pin with >= and < as pyproject does"
        specs.append(Requirement(text.replace("=", "==", 1) if re.match(r"[\w-]+=[^=]", text) else text))
    assert {r.name for r in specs} >= BESIDE, f"environment.yml lacks one of {sorted(BESIDE)}"
    return bounds(r for r in specs if r.name not in BESIDE)


def differences(want: dict[str, Bounds], have: dict[str, Bounds]) -> list[str]:
    def said(b: Bounds) -> str:
        extras = f"[{','.join(sorted(b[0]))}]" if b[0] else ""
        return f"{extras} >={b[1] or '(none)'} <{b[2] or '(none)'}"

    found = [f"{n}: missing (pyproject.toml: {said(want[n])})" for n in sorted(want.keys() - have.keys())]
    found += [f"{n}: not in pyproject.toml" for n in sorted(have.keys() - want.keys())]
    found += [
        f"{n}: {said(have[n])} where pyproject.toml says {said(want[n])}"
        for n in sorted(want.keys() & have.keys())
        if want[n] != have[n]
    ]
    return found


def test_environment_yml_gives_pyprojects_dependencies() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    environment = (ROOT / "environment.yml").read_text(encoding="utf-8")
    wrong = differences(wanted(pyproject), listed(environment))
    assert not wrong, "environment.yml against pyproject.toml (runtime, dev and docs):\n" + "\n".join(wrong)


def test_environment_yml_gives_python_as_pyproject_requires_it() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    python = re.search(r"^\s+- python=(\S+)", (ROOT / "environment.yml").read_text(encoding="utf-8"), re.M)
    assert (
        python is not None
        and Version(python.group(1)) in Requirement(f"python{pyproject['project']['requires-python']}").specifier
    )


def test_the_check_fails_on_a_made_up_mismatch() -> None:
    pyproject = {
        "project": {
            "name": "kit",
            "dependencies": ["pandas>=1.5.3,<3"],
            "optional-dependencies": {
                "dev": ["kit[spark]", "pytest>=8"],
                "docs": ["mkdocs>=1.6"],
                "spark": ["pyspark[connect]>=4.0"],
            },
        }
    }
    good = "name: kit\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n  - openjdk=17\n"
    good += "  - pandas>=1.5.3,<3\n  - pytest>=8  # tests\n"
    good += "  - mkdocs>=1.6\n  - pip:\n      - pyspark[connect]>=4.0\n      - -e .\n"
    assert differences(wanted(pyproject), listed(good)) == []
    for broken, why in (
        (good.replace("  - pytest>=8  # tests\n", ""), "pytest: missing"),
        (good.replace("pandas>=1.5.3,<3", "pandas>=2.1,<3"), "pandas: "),  # another floor
        (good.replace("pandas>=1.5.3,<3", "pandas>=1.5.3"), "pandas: "),  # no ceiling
        (good.replace("pyspark[connect]", "pyspark"), "pyspark: "),  # the extra dropped
        (good + "  - anywidget\n", "anywidget: not in pyproject.toml"),
        (good.replace("  - mkdocs>=1.6\n", ""), "mkdocs: missing"),  # the docs extra
    ):
        assert any(why in line for line in differences(wanted(pyproject), listed(broken))), why
