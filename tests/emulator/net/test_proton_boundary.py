"""proton's private API, pinned as the SDK's is (tests/core/test_boundary.py): every name in
``sbnotebook/emulator/net/protonprivate.py`` exists in the installed python-qpid-proton, and only the
modules listed there touch proton's private parts."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import proton

from sbnotebook.emulator.net.protonprivate import MODULES, PRIVATE_NAMES
from tests.project.test_structure import BOUNDARIES

ROOT = Path(__file__).resolve().parents[3]


def _owner(owner: str) -> object:
    module, _, attr = owner.partition(".")
    obj: object = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj


def test_every_private_proton_name_the_emulator_uses_still_exists() -> None:
    # ``_impl`` is set per object: look on real ones (a link and a delivery need no transport).
    link = proton.Connection().session().sender("q")
    objects = {
        "proton.Collector": proton.Collector(),
        "proton.Connection": link.connection,
        "proton.Link": link,
        "proton.Delivery": link.delivery(b"t"),
    }
    for owner, name in PRIVATE_NAMES:
        obj = objects.get(owner, _owner(owner))
        assert hasattr(obj, name), f"the installed proton has no {owner}.{name}: update sbnotebook/emulator"


def _touches(text: str) -> set[str]:
    """Which of proton's private parts a module's source touches."""
    found = set()
    if re.search(r"^\s*(from|import)\s+cproton(_ffi)?\b", text, re.M):
        found.add("cproton")
    if re.search(r"\._impl\b", text):
        found.add("_impl")
    if re.search(r"\b(Collector|Connection|Delivery|Event|Link|Session|Transport)\.wrap\(", text):
        found.add("wrap")
    return found


def test_only_the_listed_modules_touch_protons_private_parts() -> None:
    users = {}
    for path in sorted((ROOT / "sbnotebook").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        touched = _touches(path.read_text(encoding="utf-8"))
        if touched:
            users[module] = touched
    assert sorted(users) == sorted(MODULES), users
    assert set(MODULES) <= BOUNDARIES


def test_the_check_sees_each_kind_of_touch() -> None:
    assert _touches("from cproton import pn_delivery\n") == {"cproton"}
    assert _touches("import cproton_ffi\n") == {"cproton"}
    assert _touches("x = link._impl\n") == {"_impl"}
    assert _touches("e = Event.wrap(impl)\n") == {"wrap"}
    assert _touches("from proton import Link\n") == set()
