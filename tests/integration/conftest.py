"""The real-host tier: fixtures that boot the emulated NUMA machine, and a summary of timings."""

import time

import pytest

from tests.testhost.fixtures import (  # noqa: F401
    boot_testhost,
    numa_host,
    origin_host_of,
    testhost_image,
    testhost_image_of,
)

TIMINGS: list[tuple[str, float]] = []


class Stopwatch:
    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> "Stopwatch":
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        TIMINGS.append((self.label, time.monotonic() - self.started))


@pytest.fixture
def stopwatch():
    return Stopwatch


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    terminalreporter.section("test host timings")
    for label, seconds in TIMINGS:
        terminalreporter.write_line(f"{label:<60} {seconds:7.1f} s")
