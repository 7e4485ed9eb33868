"""pytest fixtures for tests that need the emulated NUMA host.

tests/conftest.py imports them, once for every tier: a session fixture imported in two places
would be made twice (two origin machines).

Booting costs about 25 s of TCG emulation on 2 host cores, so the origin
machine (`numa_host`) is booted once per session and shared; tests that
need a fresh or differently shaped machine ask `boot_testhost` for one.
A missing qemu or mmdebstrap makes these fixtures error: the tier fails,
it is never skipped.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tests import realtools

from . import recipe
from .host import DEFAULT_MEMORY_MIB, TestHost, boot
from .image import Image, ensure_image
from .pci import PciDeviceLike
from .qemu import API_PORT_FILE, running_test_hosts
from .topology import ORIGIN, TopologyLike

# The origin machine's PCI devices: what the real-cluster tier's device scenarios offer (one drive
# on node 0, two on node 1, one no Node may offer); they cost its boot nothing measurable.
ORIGIN_PCI = ("nvme@0", "nvme@1", "nvme@1", "nvme@-1")

# The origin machine listens where Pulumi.dev.yaml (and `make testhost`) point, so the Quick start
# test runs as written on it, not on a machine of its own (a boot and a kubelet copy saved).
ORIGIN_SSH_PORT = 2222

BootTestHost = Callable[..., TestHost]


def beside_other_work(own: Iterable[TestHost] = ()) -> bool:
    """Whether a machine (re)booted now shares this machine's two cores with other heavy work: a
    machine of another test process (`own`, this process's machines, are idle while it boots one:
    it runs one test at a time) or the build beside the tests. Its vCPUs then run in one host
    thread: see host.boot for what that saves beside other work and costs alone."""
    others = set(running_test_hosts()) - {host.qemu.pid for host in own}
    return bool(others) or realtools.the_build_is_running()


def boots_beside_other_work(own: Iterable[TestHost] = ()) -> bool:
    """beside_other_work() for a first boot, and when the session runs in two test workers (tests/run.sh,
    tests/conftest.py): the other worker's machine may be booting at this moment, not yet running."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 or beside_other_work(own)


def session_api_port_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's control plane writes its port for every guest the session boots
    (qemu.py GUEST_API_ADDRESS)."""
    return tmp_path_factory.getbasetemp() / API_PORT_FILE


@pytest.fixture(scope="session")
def testhost_image(request: pytest.FixtureRequest) -> Image:
    """The cached image of the default suite (built on first use, about two minutes). The images
    of the other suites the session boots machines of are then built beside the tests, not when
    their machine boots (under tests/run.sh after the whole build), and not before the kubelet is
    built: until then every real-host test waits for the build, whose CPU an image build would
    take. `ensure_image` waits for such a build under its lock, or builds what it left."""
    image = ensure_image()
    later = suites_booted_later(request.session.items) - {image.suite}
    if later:
        session_over = threading.Event()
        builder = threading.Thread(
            target=build_images, args=(sorted(later), session_over), name="testhost images", daemon=True
        )
        builder.start()

        def stop_and_join() -> None:  # a session that ends sooner leaves no mmdebstrap behind
            session_over.set()
            builder.join()

        request.addfinalizer(stop_and_join)
    return image


# The module fixture of test_real_kubelet.py whose parameter is the suite of the machine it boots.
STANDALONE_MACHINE_FIXTURE = "real"


def suites_booted_later(items: Iterable[pytest.Item]) -> set[str]:
    """The suites of the standalone machines the collected tests boot (their fixture's parameter)."""
    return {
        item.callspec.params[STANDALONE_MACHINE_FIXTURE]
        for item in items
        if STANDALONE_MACHINE_FIXTURE in getattr(getattr(item, "callspec", None), "params", {})
    }


def build_images(suites: Iterable[str], session_over: threading.Event) -> None:
    """Builds (or finds) these suites' images, once the kubelet is built when the build runs beside
    the tests; not if the session is over first. A failure is not reported here: the machine's own
    `ensure_image` call builds again and fails with the error."""
    while realtools.the_build_is_running() and not realtools.is_built("kubelet"):
        if session_over.wait(2):
            return
    for suite in suites:
        try:
            ensure_image(suite=suite)
        except Exception:  # reported where the image is needed
            return


@pytest.fixture(scope="session")
def testhost_image_of(testhost_image: Image) -> Callable[[str], Image]:
    """Factory: the cached image of a Debian suite (recipe.SUITES), built on first use."""

    def image_of(suite: str) -> Image:
        return testhost_image if suite == testhost_image.suite else ensure_image(suite=suite)

    return image_of


@pytest.fixture(scope="session")
def boot_testhost(
    testhost_image_of: Callable[[str], Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BootTestHost]:
    """Factory: `boot_testhost(topology, memory_mib=2048, suite="bookworm", pci=(), ssh_port=None,
    one_host_thread=None)` -> a running TestHost, stopped at session end; `pci` e.g. `["nvme@0",
    "nvme@1", "nvme@-1"]` (pci.py); `ssh_port` None picks a free one; `one_host_thread`: host.boot,
    None: one host thread while the machine runs beside other work (boots_beside_other_work at the
    boot, beside_other_work at each reboot)."""
    started: list[TestHost] = []

    def boot_one(
        topology: TopologyLike = ORIGIN,
        memory_mib: int | None = None,
        suite: str = recipe.DEFAULT_SUITE,
        pci: Iterable[PciDeviceLike] = (),
        ssh_port: int | None = None,
        one_host_thread: bool | None = None,
    ) -> TestHost:
        workdir: Path = tmp_path_factory.mktemp("testhost")
        host = boot(
            topology,
            workdir,
            ssh_port,
            image=testhost_image_of(suite),
            memory_mib=memory_mib or DEFAULT_MEMORY_MIB,
            api_port_file=session_api_port_file(tmp_path_factory),
            pci=pci,
            one_host_thread=boots_beside_other_work(started) if one_host_thread is None else one_host_thread,
            one_host_thread_at_reboot=(lambda: beside_other_work(started)) if one_host_thread is None else None,
        )
        started.append(host)
        return host

    yield boot_one
    for host in started:
        host.shutdown()


@pytest.fixture(scope="session")
def session_origin_machine(boot_testhost: BootTestHost) -> TestHost:
    """The origin machine (2 sockets; CPUs 0-3 on NUMA node 0, 4-7 on node 1), shared by the
    session, with NVMe drives on both NUMA nodes and one without affinity (ORIGIN_PCI), on the dev
    stack's port (ORIGIN_SSH_PORT)."""
    return boot_testhost(ORIGIN, pci=ORIGIN_PCI, ssh_port=ORIGIN_SSH_PORT)


# How many modules the session's origin machine has served so far.
MODULES_SERVED = pytest.StashKey[int]()


@pytest.fixture(scope="module")
def numa_host(session_origin_machine: TestHost, request: pytest.FixtureRequest) -> TestHost:
    """The session's origin machine for a module, power-cycled first when its vCPUs' threads no
    longer fit the work beside it: booted (or last rebooted) in one host thread beside the build or
    another machine that has ended since, it runs the module with a thread per vCPU, which alone
    does the same guest work in about two thirds of the time (host.boot). A module starts from a
    host its last module cleaned up, so nothing of the module's is lost in the power cycle. Not
    for the first module: its boot has just chosen (boots_beside_other_work), counting the other
    test worker's machine that may not be up yet."""
    served = request.session.stash.get(MODULES_SERVED, 0)
    if served and not session_origin_machine.vcpu_threads_fit():
        session_origin_machine.reboot()
    request.session.stash[MODULES_SERVED] = served + 1
    return session_origin_machine


# The test host OSes the standalone real-kubelet scenarios run on (test_real_kubelet.py, each on a
# 3-node machine of its own): comma-separated names of recipe.SUITES. Default: every one but the
# default suite, whose real kubelets the real-cluster module runs on the origin machine.
STANDALONE_SUITES = tuple(
    os.environ.get(
        "NUMA_KUBELETS_STANDALONE_SUITES", ",".join(s for s in recipe.SUITES if s != recipe.DEFAULT_SUITE)
    ).split(",")
)
