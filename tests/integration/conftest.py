"""The real-host tier: its steps timed (the emulated machines' fixtures are in tests/conftest.py)."""

import pytest

from tests.timings import Stopwatch


@pytest.fixture
def stopwatch():
    return Stopwatch
