import gc
from collections import defaultdict

import pytest
from hypothesis import settings
from xdist.scheduler import LoadScopeScheduling

from tests import realtools, timings
from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import GUEST_KUBELET, install_built_program
from tests.realcluster.fixtures import control_plane  # noqa: F401  (one per session, for every tier)

# The emulated machines' fixtures, here once for every tier: a session fixture imported in two
# conftests (or a test module) is made twice, e.g. two origin machines.
from tests.testhost.fixtures import (  # noqa: F401
    boot_testhost,
    numa_host,
    session_origin_machine,
    testhost_image,
    testhost_image_of,
)


@pytest.fixture(scope="session")
def origin_kubelet(request):
    """The built kubelet at GUEST_KUBELET on the shared origin machine (`numa_host`), for each
    module that runs it there: copied once (about 15 s), removed at the end of the session. Its
    version."""
    host = request.getfixturevalue("session_origin_machine")
    version = install_built_program(HostView(host))
    yield version
    host.run(f"rm -f {GUEST_KUBELET}", check=False)


# Timing belongs in benchmarks: a property test must not fail because CI is busy (e.g. with
# the test host's qemu, which stays up for the whole session).
settings.register_profile("numa-kubelets", deadline=None)
settings.load_profile("numa-kubelets")

# Seconds spent per tier (tests/<tier>/...), setup and teardown included: a booted test host
# counts towards the tier whose test first needed it.
_seconds_per_tier: defaultdict[str, float] = defaultdict(float)
_figures = timings.Summary()

# tests/run.sh runs the tests in two pytest-xdist workers (NUMA_KUBELETS_TEST_WORKERS, default 2).
# Each emulated machine's modules go, as one unit and in order, to one worker: they build on the
# machine's state and share its session fixture. The two machines run at once, one per worker
# (measured warm: the namespace scenarios took 23 minutes beside the interleaved machine's module,
# 18 without it; that module 22, 12 alone: 45 minutes of guests in 23). Not three machines at once:
# each then got two thirds of a core, lived longer and cost more in all, and a starved guest's
# containerd missed a deadline (a cold run of 90 minutes, docs/testing.md). Every other module, whole or
# in the runs the build order splits it into, goes to whichever worker is free, after the machines'
# (pytest_collection_modifyitems). The control plane is a session fixture: each worker that needs
# it starts its own. xdist's scheduler sees only test ids: the modules are
# named here, and the collection fails when a test boots a machine outside them.
ORIGIN_MACHINE_UNIT = "the origin machine"
INTERLEAVED_MACHINE_UNIT = "the interleaved machine"
MACHINE_UNITS = {
    **{
        f"tests/integration/{name}.py": ORIGIN_MACHINE_UNIT
        for name in (
            "test_testhost_smoke",
            "test_lifecycle",
            "test_network_namespaces",
            "test_real_cluster",
            "test_real_engine",
        )
    },
    "tests/e2e/test_quick_start.py": ORIGIN_MACHINE_UNIT,
    "tests/integration/test_real_kubelet.py": INTERLEAVED_MACHINE_UNIT,
}
GUEST_MODULES = frozenset(MACHINE_UNITS)
# The fixtures that boot or reuse an emulated machine (tests/testhost/fixtures.py).
MACHINE_FIXTURES = frozenset({"numa_host", "session_origin_machine", "boot_testhost", "testhost_image"})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def work_units(collection: list[str]) -> dict[str, str]:
    """Each test's unit, for the tests in collection order: its machine's unit, or its module's
    contiguous run (a module whose tests need different families of the build is split by the
    collection's order, and each run waits only for its own family)."""
    units: dict[str, str] = {}
    runs: defaultdict[str, int] = defaultdict(int)
    previous_module = None
    for nodeid in collection:
        module = module_of(nodeid)
        if module in MACHINE_UNITS:
            units[nodeid] = MACHINE_UNITS[module]
        else:
            if module != previous_module:
                runs[module] += 1
            units[nodeid] = module if runs[module] == 1 else f"{module} (run {runs[module]})"
        previous_module = module
    return units


class MachineUnitScheduling(LoadScopeScheduling):
    """xdist's scheduling by unit (work_units), handed out in collection order (realtools' order,
    which the build follows)."""

    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed and self._check_nodes_have_same_collection():
            self._units = work_units(list(next(iter(self.registered_collections.values()))))
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        return self._units[nodeid]


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> MachineUnitScheduling:
    config.option.loadscopereorder = False  # xdist would put the largest units first
    return MachineUnitScheduling(config, log)


def check_guest_modules(items: list[pytest.Item]) -> None:
    strays = sorted(
        {module_of(item.nodeid) for item in items if MACHINE_FIXTURES & set(getattr(item, "fixturenames", ()))}
        - GUEST_MODULES
    )
    if strays:
        raise pytest.UsageError(
            f"{', '.join(strays)} boot an emulated machine: add them to tests/conftest.py MACHINE_UNITS, "
            "or two workers could boot the same machine"
        )


# The ranks family_rank gives: no family, each family of the build, after the build.
FAMILY_RANKS = len(realtools.BUILD_ORDER) + 2


def family_rank(item: pytest.Item) -> int:
    """0 for a test that needs no built program, then the `realtools` families in the order
    tools/build.sh builds them, then `after_the_build`."""
    if item.get_closest_marker("after_the_build"):
        return FAMILY_RANKS - 1
    marker = item.get_closest_marker("realtools")
    if marker is None:
        return 0
    if len(marker.args) != 1 or marker.args[0] not in realtools.BUILD_ORDER:
        raise pytest.UsageError(
            f"{item.nodeid}: realtools takes one family of {realtools.BUILD_ORDER}, not {marker.args}"
        )
    return 1 + realtools.BUILD_ORDER.index(marker.args[0])


@pytest.hookimpl(trylast=True)  # after pytest's own grouping by fixture scope, which this keeps
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The emulated machines' tests first, in the order tools/build.sh builds the families they
    need (under tests/run.sh the build runs beside them), then every other test, the last families
    first. On 2 cores everything beside the build takes CPU it needs: the host-side tests, run
    before the kubelet was built, delayed it, and the origin machine's scenarios with it, which wait
    for it; after the build the origin machine runs alone at the end and leaves a core idle, where
    the host-side tests now run. Their last families first: a worker whose machine is done takes
    the next unit left, and the ones left at the end are then quick (no family: unit tests)."""

    def rank(item: pytest.Item) -> int:
        family = family_rank(item)
        return family if module_of(item.nodeid) in MACHINE_UNITS else 2 * FAMILY_RANKS - 1 - family

    items.sort(key=rank)  # stable: a module's tests stay together and in file order
    check_guest_modules(items)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # around every other makereport hook
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    # No garbage collection while a report is rendered. Before CPython 3.11.8 (this venv: 3.11.7)
    # ast.parse is not reentrant (python/cpython#106905, fixed by #113035): pytest parses the failed
    # test's source to render it, a collection inside that parse may finalize an object whose
    # exception pytest's unraisable hook formats (the traceback module parses again), and the outer
    # parse then fails: "AST constructor recursion depth mismatch", an INTERNALERROR that ended a CI
    # run and hid the test that failed (an SDK coroutine left by an inline Pulumi program was
    # collected). tests/test_report_rendering.py shows it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        outcome = yield
    finally:
        if collecting:
            gc.enable()
    report = outcome.get_result()
    if report.when == "teardown":
        timings.attach_to(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _figures.collect(report)
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _seconds_per_tier[tier] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _figures.write(terminalreporter)
    if not _seconds_per_tier:
        return
    terminalreporter.write_sep("-", "time per tier")
    for tier, seconds in sorted(_seconds_per_tier.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{tier:<12} {seconds:8.1f} s")
