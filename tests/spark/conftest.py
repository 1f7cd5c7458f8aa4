"""The Spark tests' session registered against the test's emulator (tests/conftest.py's ``spark`` and
``emulator``); modules with an emulator or a session of their own define ``sp`` themselves."""

from __future__ import annotations

from typing import Any

import pytest

from sbnotebook.emulator import Emulator


@pytest.fixture
def sp(spark: Any, emulator: Emulator) -> Any:
    """The module's session, registered against this test's emulator."""
    from sbnotebook import spark as sbspark

    return sbspark.register(spark, emulator.connection_string)
