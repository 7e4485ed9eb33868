"""The real-host tier: fixtures that boot the emulated NUMA machine, and a summary of timings."""

import time

import pytest

from tests.testhost.fixtures import (  # noqa: F401
    boot_testhost,
    numa_host,
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


@pytest.fixture(scope="session")
def origin_kubelet(request):
    """The built kubelet at GUEST_KUBELET on the shared origin machine (`numa_host`), for each
    module that runs it there: copied once (about 15 s), removed at the end of the session. Its
    version."""
    # Imported here: realkubelet imports this module's Stopwatch.
    from tests.integration.hostcheck import HostView
    from tests.integration.realkubelet import GUEST_KUBELET, install_built_program

    host = request.getfixturevalue("numa_host")
    version = install_built_program(HostView(host))
    yield version
    host.run(f"rm -f {GUEST_KUBELET}", check=False)


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    terminalreporter.section("test host timings")
    for label, seconds in TIMINGS:
        terminalreporter.write_line(f"{label:<60} {seconds:7.1f} s")
