"""The real-host tier: fixtures that boot the emulated NUMA machine and time its steps."""

import pytest

from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import GUEST_KUBELET, install_built_program
from tests.testhost.fixtures import (  # noqa: F401
    boot_testhost,
    numa_host,
    testhost_image,
    testhost_image_of,
)
from tests.timings import Stopwatch


@pytest.fixture
def stopwatch():
    return Stopwatch


@pytest.fixture(scope="session")
def origin_kubelet(request):
    """The built kubelet at GUEST_KUBELET on the shared origin machine (`numa_host`), for each
    module that runs it there: copied once (about 15 s), removed at the end of the session. Its
    version."""
    host = request.getfixturevalue("numa_host")
    version = install_built_program(HostView(host))
    yield version
    host.run(f"rm -f {GUEST_KUBELET}", check=False)
