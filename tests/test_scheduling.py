"""How two workers share the tests (tests/conftest.py, NUMA_KUBELETS_TEST_WORKERS=2): xdist's own
scheduler, fed this repository's real collection, hands every module that boots an emulated
machine to one worker as one unit in collection order, and every other module whole to one worker."""

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
        clock[worker.gateway.id] += 100 if module_of(nodeids[index]) in conftest.GUEST_MODULES else 1
        scheduler.mark_test_complete(worker, index)
    return ran


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def test_the_machines_modules_run_on_one_worker_in_order_and_every_module_whole():
    nodeids = collected_ids()
    ran = run_on_two_workers(nodeids)
    assert sorted(nodeid for tests in ran.values() for nodeid in tests) == sorted(nodeids)
    guests = [nodeid for nodeid in nodeids if module_of(nodeid) in conftest.GUEST_MODULES]
    assert {module_of(nodeid) for nodeid in guests} == conftest.GUEST_MODULES
    [guest_worker] = [name for name, tests in ran.items() if guests[0] in tests]
    assert [nodeid for nodeid in ran[guest_worker] if nodeid in guests] == guests
    workers_of_module: dict[str, set[str]] = {}
    for name, tests in ran.items():
        for nodeid in tests:
            workers_of_module.setdefault(module_of(nodeid), set()).add(name)
    assert {module: names for module, names in workers_of_module.items() if len(names) > 1} == {}


def test_a_module_booting_a_machine_outside_the_list_fails_the_collection():
    stray = SimpleNamespace(nodeid="tests/integration/test_new.py::test_x", fixturenames=["boot_testhost", "tmp_path"])
    listed = SimpleNamespace(nodeid="tests/integration/test_lifecycle.py::test_y", fixturenames=["numa_host"])
    conftest.check_guest_modules([listed])
    with pytest.raises(pytest.UsageError, match=r"tests/integration/test_new.py boot an emulated machine"):
        conftest.check_guest_modules([listed, stray])
