"""kubeletConfig and the kubelet's resource managers on the emulated machine, with hugepages on node 1.

The scenarios build on each other on the shared origin machine and leave it as they found it
(destroy, hugepages back to 0). The memory facts are read from the guest's sysfs by the test
itself, and the formulas of DESIGN.md section 6 are computed here independently of the program.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.engine import Engine
from tests.integration.hostcheck import HostView
from tests.integration.test_lifecycle import stack_for

NODE1_POOL = "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages"
KUBELETS = (
    (0, "kubelet@numa0.service", "/var/lib/kubelet-numa0"),
    (1, "kubelet@numa1.service", "/var/lib/kubelet-numa1"),
)
MANAGERS = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static", "topologyManagerPolicy": "single-numa-node"}
EVICTION_HARD_DEFAULT = 100 * 2**20


class RecordingRunner:
    """Runs scripts on the host and keeps what each printed."""

    def __init__(self, host) -> None:
        self.host, self.stdout = host, []

    def __call__(self, script: str, stdin: str | None):
        result = self.host.run(script, stdin=stdin, check=False)
        self.stdout.append(result.stdout)
        return result

    def printed_since(self, mark: int) -> str:
        return "".join(self.stdout[mark:])


def memory_facts(view: HostView) -> tuple[int, dict[int, int], dict[int, int]]:
    """MemTotal, and per node its MemTotal and its hugepages, all in bytes, as the guest's sysfs says."""
    total = int(view.sh("awk '$1 == \"MemTotal:\" { print $2 }' /proc/meminfo")) * 1024
    memory, hugepages = {}, {}
    for node in (0, 1):
        base = f"/sys/devices/system/node/node{node}"
        memory[node] = int(view.sh(f"awk '$3 == \"MemTotal:\" {{ print $4 }}' {base}/meminfo")) * 1024
        pools = view.sh(f'for p in {base}/hugepages/hugepages-*kB; do echo "${{p##*-}} $(cat $p/nr_hugepages)"; done')
        hugepages[node] = sum(
            int(size[:-2]) * 1024 * int(pages) for size, pages in (line.split() for line in pools.splitlines())
        )
    return total, memory, hugepages


@pytest.fixture(scope="module")
def tuned(numa_host):
    view = HostView(numa_host)
    view.sh(f"echo 64 > {NODE1_POOL}")
    runner = RecordingRunner(numa_host)
    engine = Engine(runner)
    config = stack_for(numa_host)
    config["kubeletVersion"] = "1.35"
    state = {"config": config, "engine": engine, "view": view, "runner": runner}
    yield state
    try:
        if engine.state:
            engine.destroy()
    finally:
        view.sh(f"echo 0 > {NODE1_POOL}")


def apply(tuned, stopwatch, label: str, kubelet_config: dict) -> str:
    tuned["config"]["kubeletConfig"] = kubelet_config
    mark = len(tuned["runner"].stdout)
    with stopwatch(label):
        tuned["engine"].up(tuned["config"])
    return tuned["runner"].printed_since(mark)


def test_system_reserved_memory_leaves_each_kubelet_its_own_node(tuned, stopwatch):
    view = tuned["view"]
    assert view.sh(f"cat {NODE1_POOL}") == "64"
    apply(tuned, stopwatch, "tuning: first apply, hugepages on node 1", {})
    total, memory, hugepages = memory_facts(view)
    assert hugepages == {0: 0, 1: 64 * 2 * 2**20}
    for node, unit, root in KUBELETS:
        other = 1 - node
        record = view.kubelet_record(node)
        expected = total - memory[node] - hugepages[other]
        assert record["config"]["systemReserved"]["memory"] == f"{expected // 1024}Ki", unit
        # What the kubelet then reports: all hugepages are subtracted by the kubelet itself.
        assert total - sum(hugepages.values()) - expected == memory[node] - hugepages[node]
        assert "reservedSystemCPUs" not in record["config"]
        assert json.loads(view.sh(f"cat {root}/cpu_manager_state")) == {"policyName": "none"}


def test_the_static_managers_get_the_cpus_outside_the_slice_and_byte_exact_reserved_memory(tuned, stopwatch):
    view = tuned["view"]
    before = {unit: view.started_at(unit) for _, unit, _ in KUBELETS}
    printed = apply(tuned, stopwatch, "tuning: none -> static CPU and memory managers", MANAGERS)
    total, memory, hugepages = memory_facts(view)
    for node, unit, root in KUBELETS:
        other = 1 - node
        record = view.kubelet_record(node)
        assert view.active(unit) and view.started_at(unit) != before[unit], unit
        assert f"numa-kubelets: removed {root}/cpu_manager_state: written for none" in printed
        assert f"numa-kubelets: removed {root}/memory_manager_state: written for None" in printed
        config = record["config"]
        assert record["state_files_at_start"] == {"cpu_manager_state": None, "memory_manager_state": None}
        assert config["reservedSystemCPUs"] == ("0,4-7" if node == 0 else "0-4")
        assert config["cpuManagerPolicyOptions"] == {"strict-cpu-reservation": "true"}  # kubeletVersion 1.35
        assert config["topologyManagerPolicy"] == "single-numa-node"
        reserved = {entry["numaNode"]: int(entry["limits"]["memory"]) for entry in config["reservedMemory"]}
        system_reserved = int(config["systemReserved"]["memory"].removesuffix("Ki")) * 1024
        assert system_reserved == total - memory[node] - hugepages[other]
        assert sum(reserved.values()) == system_reserved + EVICTION_HARD_DEFAULT  # the sum rule, to the byte
        assert reserved[other] == memory[other] - hugepages[other]
        assert reserved[node] == EVICTION_HARD_DEFAULT + total - sum(memory.values())


def test_a_reapply_without_change_removes_nothing_and_restarts_nothing(tuned):
    engine, view, runner = tuned["engine"], tuned["view"], tuned["runner"]
    before = {unit: view.started_at(unit) for _, unit, _ in KUBELETS}
    assert engine.up(tuned["config"]) == []
    for node, _, root in KUBELETS:
        result = runner(engine.state[f"numa-a-numa{node}-kubelet"].inputs["create"], None)
        assert result.rc == 0, result.stderr
        assert "removed" not in result.stdout
        pools = [line for line in result.stdout.splitlines() if "hugepage pools" in line]
        assert pools == [f"numa-kubelets: hugepage pools of this NUMA node: 2048kB={64 if node else 0}"]
        assert view.exists(f"{root}/cpu_manager_state") and view.exists(f"{root}/memory_manager_state")
    assert {unit: view.started_at(unit) for _, unit, _ in KUBELETS} == before


def test_back_to_none_removes_the_state_files_again(tuned, stopwatch):
    view = tuned["view"]
    before = {unit: view.started_at(unit) for _, unit, _ in KUBELETS}
    printed = apply(tuned, stopwatch, "tuning: static -> none", {})
    for node, unit, root in KUBELETS:
        record = view.kubelet_record(node)
        assert view.active(unit) and view.started_at(unit) != before[unit], unit
        assert f"removed {root}/cpu_manager_state: written for static reservedSystemCPUs=" in printed
        assert record["state_files_at_start"] == {"cpu_manager_state": None, "memory_manager_state": None}
        assert "reservedMemory" not in record["config"]


def test_the_kubelet_refuses_a_state_file_of_another_policy(tuned):
    view = tuned["view"]
    view.sh(
        'echo \'{"policyName": "static", "reservedSystemCPUs": "0,4-7"}\' > /var/lib/kubelet-numa0/cpu_manager_state'
    )
    view.host.run("systemctl restart kubelet@numa0.service", check=False)
    refusal = "configured policy 'none' differs from state checkpoint policy 'static'"
    view.sh(
        "for attempt in $(seq 60); do "
        f'journalctl -u kubelet@numa0.service -n 30 --no-pager | grep -qF "{refusal}" && break; sleep 1; done'
    )
    assert refusal in view.sh("journalctl -u kubelet@numa0.service -n 30 --no-pager")
    assert not view.active("kubelet@numa0.service")
    view.sh("rm /var/lib/kubelet-numa0/cpu_manager_state && systemctl restart kubelet@numa0.service")
    view.kubelet_record(0)
