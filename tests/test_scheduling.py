"""How two workers share the tests (tests/conftest.py, tests/run.sh): xdist's own scheduler, fed this
repository's real collection, hands each emulated machine's modules to one worker as one unit in
collection order, the two machines to different workers, first, and every other module's
contiguous runs each whole to one worker after them."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from xdist.remote import Producer

from tests import conftest


class Worker:
    """What the scheduler calls on a worker: the tests sent to it, run one by one."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.pending: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.pending.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def collected_ids() -> list[str]:
    # Without the caller's PYTEST_ADDOPTS: a `-v` there would cancel `-q` and print a tree.
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        check=True,
        cwd=conftest.realtools.REPO,
        env=env,
    ).stdout
    return [line for line in listing.splitlines() if "::" in line]


def run_on_two_workers(nodeids: list[str]) -> dict[str, list[str]]:
    """The order each worker runs the tests in, a guest's test taking a hundred times as long as
    any other (as a booted machine's scenario does to a unit test)."""
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"] if name == "tx" else None, option=SimpleNamespace())
    scheduler = conftest.pytest_xdist_make_scheduler(config, log=Producer("test", enabled=False))
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, nodeids)
    scheduler.schedule()
    ran: dict[str, list[str]] = {worker.gateway.id: [] for worker in workers}
    clock = {worker.gateway.id: 0 for worker in workers}
    while busy := [worker for worker in workers if worker.pending]:
        worker = min(busy, key=lambda w: clock[w.gateway.id])  # the one that finishes its test first
        index = worker.pending.pop(0)
        ran[worker.gateway.id].append(nodeids[index])
        clock[worker.gateway.id] += 100 if conftest.module_of(nodeids[index]) in conftest.GUEST_MODULES else 1
        scheduler.mark_test_complete(worker, index)
    return ran


def test_each_machine_runs_on_its_own_worker_in_order_and_every_other_run_whole():
    nodeids = collected_ids()
    ran = run_on_two_workers(nodeids)
    assert sorted(nodeid for tests in ran.values() for nodeid in tests) == sorted(nodeids)
    units = conftest.work_units(nodeids)
    assert {
        conftest.module_of(nodeid) for nodeid in nodeids if units[nodeid] in conftest.MACHINE_UNITS.values()
    } == conftest.GUEST_MODULES
    worker_of_unit: dict[str, set[str]] = {}
    for name, tests in ran.items():
        for nodeid in tests:
            worker_of_unit.setdefault(units[nodeid], set()).add(name)
    assert {unit: names for unit, names in worker_of_unit.items() if len(names) > 1} == {}
    machine_workers = {unit: names for unit, names in worker_of_unit.items() if unit in conftest.MACHINE_UNITS.values()}
    assert len(machine_workers) == 2 and set.union(*machine_workers.values()) == set(ran)
    # The machines' tests before every other test, the interleaved machine's (after_the_build) last of them.
    origin = [nodeid for nodeid in nodeids if units[nodeid] == conftest.ORIGIN_MACHINE_UNIT]
    interleaved = [nodeid for nodeid in nodeids if units[nodeid] == conftest.INTERLEAVED_MACHINE_UNIT]
    assert nodeids[: len(origin) + len(interleaved)] == origin + interleaved
    # Each worker starts with its machine's tests, in order: nothing runs beside the build but them.
    for unit, [name] in machine_workers.items():
        mine = [n for n in nodeids if units[n] == unit]
        assert ran[name][: len(mine)] == mine
    # The host-side tests after them, the last families first: unit tests at the end.
    assert conftest.module_of(nodeids[-1]).startswith("tests/unit/")


def test_a_module_split_by_the_build_order_is_one_unit_per_run():
    nodeids = [
        "tests/e2e/test_a.py::test_1",
        "tests/e2e/test_b.py::test_1",
        "tests/e2e/test_a.py::test_2",
        "tests/e2e/test_a.py::test_3",
        "tests/integration/test_lifecycle.py::test_x",
        "tests/e2e/test_quick_start.py::test_y",
        "tests/integration/test_real_kubelet.py::test_z",
    ]
    assert conftest.work_units(nodeids) == {
        "tests/e2e/test_a.py::test_1": "tests/e2e/test_a.py",
        "tests/e2e/test_b.py::test_1": "tests/e2e/test_b.py",
        "tests/e2e/test_a.py::test_2": "tests/e2e/test_a.py (run 2)",
        "tests/e2e/test_a.py::test_3": "tests/e2e/test_a.py (run 2)",
        "tests/integration/test_lifecycle.py::test_x": conftest.ORIGIN_MACHINE_UNIT,
        "tests/e2e/test_quick_start.py::test_y": conftest.ORIGIN_MACHINE_UNIT,
        "tests/integration/test_real_kubelet.py::test_z": conftest.INTERLEAVED_MACHINE_UNIT,
    }


def test_a_module_booting_a_machine_outside_the_list_fails_the_collection():
    stray = SimpleNamespace(nodeid="tests/integration/test_new.py::test_x", fixturenames=["boot_testhost", "tmp_path"])
    listed = SimpleNamespace(nodeid="tests/integration/test_lifecycle.py::test_y", fixturenames=["numa_host"])
    conftest.check_guest_modules([listed])
    with pytest.raises(pytest.UsageError, match=r"tests/integration/test_new.py boot an emulated machine"):
        conftest.check_guest_modules([listed, stray])
