"""The memory a NUMA kubelet reserves, on sysfs fixtures of real machine shapes; Python and host shell agree.

Each shape is written as the files the kernel exposes (`/proc/meminfo`, every node's `meminfo`
and `hugepages/hugepages-<size>kB/nr_hugepages`). The Python arithmetic is checked against the
formulas of reservations.py (DESIGN.md section 6's, less the other nodes' hugepages, which no
kubelet sees since hugepages.py), and the shell the host runs is executed with dash and bash on
the same files and must print exactly what the Python computes.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from numa_kubelets import reservations as r
from tests.unit.test_scripts import tool

TWO_MIB, ONE_GIB = 2048, 1048576  # page sizes in KiB, as in the sysfs directory names


@dataclass(frozen=True)
class Shape:
    name: str
    nodes: dict[int, int]  # node -> MemTotal (KiB)
    pages: dict[int, dict[int, int]]  # node -> {page size KiB: pages}
    sizes: tuple[int, ...] = (TWO_MIB, ONE_GIB)  # pools the kernel offers on every node
    memory_only: tuple[int, ...] = ()  # nodes without CPUs, hence without a kubelet

    @property
    def total_kib(self) -> int:
        return sum(self.nodes.values())

    def write(self, root: Path) -> Path:
        (root / "proc").mkdir(parents=True)
        (root / "proc/meminfo").write_text(
            f"MemTotal:       {self.total_kib:>10} kB\nMemFree:          812344 kB\nMemAvailable:    1236400 kB\n"
        )
        for node, kib in self.nodes.items():
            base = root / f"sys/devices/system/node/node{node}"
            base.mkdir(parents=True)
            (base / "meminfo").write_text(
                f"Node {node} MemTotal:       {kib:>10} kB\nNode {node} MemFree:         401232 kB\n"
                f"Node {node} HugePages_Total:     0\n"
            )
            for size in self.sizes:
                pool = base / f"hugepages/hugepages-{size}kB"
                pool.mkdir(parents=True)
                (pool / "nr_hugepages").write_text(f"{self.pages.get(node, {}).get(size, 0)}\n")
                (pool / "free_hugepages").write_text("0\n")
        return root

    def facts(self) -> list[r.NodeMemory]:
        return [
            r.NodeMemory(node, kib, tuple((size, self.pages.get(node, {}).get(size, 0)) for size in sorted(self.sizes)))
            for node, kib in self.nodes.items()
        ]


SHAPES = [
    # The emulated test host after `echo 64 > .../node1/hugepages/hugepages-2048kB/nr_hugepages`.
    Shape("2 nodes, 2 MiB pages on node 1", {0: 1000060, 1: 1032104}, {1: {TWO_MIB: 64}}),
    # A 2-socket server with 1 GiB pages on both sockets.
    Shape("2 nodes, 1 GiB pages on both", {0: 196438276, 1: 198156800}, {0: {ONE_GIB: 16}, 1: {ONE_GIB: 32}}),
    Shape(
        "4 nodes, mixed pools",
        {0: 65536000, 1: 66060288, 2: 66060288, 3: 66060288},
        {0: {TWO_MIB: 512}, 1: {ONE_GIB: 4}, 2: {TWO_MIB: 1024, ONE_GIB: 2}},
    ),
    # Node 2 is memory-only (CXL): no CPUs, so no kubelet, but memory and a pool of its own.
    Shape(
        "3 nodes, node 2 memory-only",
        {0: 32768000, 1: 32768000, 2: 134217728},
        {2: {TWO_MIB: 4096}},
        memory_only=(2,),
    ),
    Shape("2 nodes, no hugepage support", {0: 8192000, 1: 8192000}, {}, sizes=()),
]
EXTRAS = [0, 100 * 2**20, 100 * 2**20 + 500 * 10**6]  # kubeReserved.memory + evictionHard memory.available


def cases() -> list:
    return [
        pytest.param(shape, own, id=f"{shape.name}: kubelet of node {own}")
        for shape in SHAPES
        for own in shape.nodes
        if own not in shape.memory_only
    ]


def test_the_formula_on_the_test_host_shape_by_hand():
    shape = SHAPES[0]
    node1 = r.memory_reservation(shape.total_kib, shape.facts(), 1, None)
    node0 = r.memory_reservation(shape.total_kib, shape.facts(), 0, None)
    # The other node's memory, pools and all: no kubelet sees another node's pools (hugepages.py).
    assert node1.system_reserved_kib == 1000060
    assert node0.system_reserved_kib == 1032104
    static1 = r.memory_reservation(shape.total_kib, shape.facts(), 1, 100 * 2**20)
    assert static1.reserved_memory == ((0, 1000060 * 1024), (1, 100 * 2**20))


@pytest.mark.parametrize(("shape", "own"), cases())
def test_allocatable_memory_is_the_own_nodes_memory_without_its_hugepages(shape: Shape, own: int):
    """The kubelet subtracts the hugepages it sees, its own node's only; what remains is the node's."""
    facts = shape.facts()
    reservation = r.memory_reservation(shape.total_kib, facts, own, None)
    own_node = next(node for node in facts if node.node == own)
    allocatable = shape.total_kib * 1024 - own_node.hugepage_bytes - reservation.system_reserved_kib * 1024
    assert allocatable == own_node.total_kib * 1024 - own_node.hugepage_bytes
    assert reservation.reserved_memory is None


@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize(("shape", "own"), cases())
def test_reserved_memory_sums_to_the_byte(shape: Shape, own: int, extra: int):
    facts = {node.node: node for node in shape.facts()}
    reservation = r.memory_reservation(shape.total_kib, list(facts.values()), own, extra)
    assert reservation.reserved_memory is not None
    entries = dict(reservation.reserved_memory)
    assert sum(entries.values()) == reservation.system_reserved_kib * 1024 + extra
    assert all(size > 0 for size in entries.values())
    assert set(entries) <= set(facts)
    for node, size in entries.items():
        if node != own:  # every other node whole: its pools read as empty in this kubelet's view
            assert size == facts[node].total_kib * 1024
    assert entries.get(own, 0) == extra


def test_a_node_whose_memory_is_all_hugepages_is_reserved_whole():
    """In the kubelet of node 0 the memory manager sees node 1 without pools: all of it is reserved."""
    facts = [r.NodeMemory(0, 4 * 1048576, ()), r.NodeMemory(1, 2 * 1048576, ((ONE_GIB, 2),))]
    reservation = r.memory_reservation(6 * 1048576, facts, 0, 100 * 2**20)
    assert reservation.reserved_memory == ((0, 100 * 2**20), (1, 2 * 1048576 * 1024))


def test_the_memory_managers_state_belongs_to_the_own_pools_and_not_the_others():
    """The kubelet refuses a memory_manager_state whose pools differ from what it reads: a change
    of the own node's pools (a reboot with other pools) must change the identity the state file
    is kept for; another node's pools are not in this kubelet's view, so they must not."""
    extra = 100 * 2**20

    def identity(pages: dict[int, dict[int, int]], own: int) -> str:
        shape = Shape("2 nodes", {0: 1000060, 1: 1032104}, pages)
        return r.memory_manager_identity(r.memory_reservation(shape.total_kib, shape.facts(), own, extra))

    before = identity({1: {TWO_MIB: 64}}, 1)
    assert before.endswith(" hugepages=1048576kB:0,2048kB:64")
    assert identity({1: {TWO_MIB: 32}}, 1) != before
    assert identity({0: {TWO_MIB: 8}, 1: {TWO_MIB: 64}}, 1) == before
    assert r.memory_manager_identity(r.memory_reservation(2032164, SHAPES[0].facts(), 1, None)) == "None"


SHELLS = ["dash", "bash"]


def run_shell(shell: str, script: str) -> str:
    result = subprocess.run([tool(shell), "-eu", "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("extra", [None, 100 * 2**20 + 500 * 10**6])
@pytest.mark.parametrize(("shape", "own"), cases())
def test_the_host_shell_prints_what_the_python_computes(tmp_path, shell, shape: Shape, own: int, extra):
    root = shape.write(tmp_path)
    script = (
        r.sysfs_variables(str(root / "sys/devices/system/node"), str(root / "proc/meminfo"))
        + r.reservation_shell(own, list(shape.nodes), extra)
        + r.dropin_shell(5)
        + r.hugepage_report_shell(own)
        + 'echo "identity: $memory_identity"\n'
    )
    output = run_shell(shell, script)
    expected = r.memory_reservation(shape.total_kib, shape.facts(), own, extra)
    document_text, _, rest = output.partition(r.HUGEPAGE_REPORT_PREFIX)
    assert yaml.safe_load(document_text) == r.reservation_dropin(5, expected)
    report, identity = rest.splitlines()
    pools = r.parse_hugepage_report(r.HUGEPAGE_REPORT_PREFIX + report)
    assert pools == {r.hugepage_size_name(size): shape.pages.get(own, {}).get(size, 0) for size in shape.sizes}
    assert identity == f"identity: {r.memory_manager_identity(expected)}"


def test_the_python_reads_the_same_fixture_files(tmp_path):
    shape = SHAPES[2]
    root = shape.write(tmp_path)
    files = {str(path.relative_to(root)): path.read_text() for path in root.rglob("*") if path.is_file()}
    total, nodes = r.read_memory_facts(files, list(shape.nodes))
    assert total == shape.total_kib
    assert nodes == shape.facts()


def test_an_unreadable_node_stops_the_shell(tmp_path):
    root = SHAPES[0].write(tmp_path)
    (root / "sys/devices/system/node/node0/meminfo").write_text("garbage\n")
    script = r.sysfs_variables(str(root / "sys/devices/system/node"), str(root / "proc/meminfo"))
    script += r.reservation_shell(1, [0, 1], None) + r.dropin_shell(1)
    result = subprocess.run([tool("dash"), "-eu", "-c", script], capture_output=True, text=True, check=False)
    # node 0's MemTotal is only needed with Static (or by node 0's own kubelet)
    assert result.returncode == 0
    script = r.sysfs_variables(str(root / "sys/devices/system/node"), str(root / "proc/meminfo"))
    script += r.reservation_shell(0, [0, 1], None)
    result = subprocess.run([tool("dash"), "-eu", "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "cannot read MemTotal of NUMA node 0" in result.stderr


def test_hugepage_sizes_are_named_like_the_kubelets_resources():
    assert [r.hugepage_size_name(size) for size in (64, 2048, 32768, 1048576)] == ["64Ki", "2Mi", "32Mi", "1Gi"]
    assert r.parse_hugepage_report(None) == {}
    assert r.parse_hugepage_report("noise\n" + r.HUGEPAGE_REPORT_PREFIX + " 2048kB=64 1048576kB=0\n") == {
        "1Gi": 0,
        "2Mi": 64,
    }


# ------------------------------------------------------------------ state files


def reconcile(tmp_path: Path, cpu_identity: str, memory_identity: str) -> str:
    root = tmp_path / "kubelet"
    script = (
        f"memory_identity='{memory_identity}'\n"
        + r.state_functions_shell(str(root))
        + f"if {r.managers_changed_shell(cpu_identity)}; then echo changed; fi\n"
        + r.reconcile_managers_shell(str(root), cpu_identity)
    )
    return run_shell("dash", script)


def test_state_files_go_exactly_when_their_policy_or_reservation_changes(tmp_path):
    root = tmp_path / "kubelet"
    root.mkdir()
    cpu_state, memory_state = root / "cpu_manager_state", root / "memory_manager_state"
    cpu_state.write_text('{"policyName":"none"}')
    memory_state.write_text('{"policyName":"None"}')
    # No record yet: written for the defaults, which is what runs.
    assert reconcile(tmp_path, "none", "None") == ""
    assert cpu_state.exists() and memory_state.exists()
    # none -> static: the CPU manager's file goes, the memory manager's stays.
    output = reconcile(tmp_path, "static reservedSystemCPUs=0,4-7", "None")
    assert output.startswith("changed\n")
    assert f"removed {cpu_state}: written for none, the kubelet now runs static reservedSystemCPUs=0,4-7" in output
    assert not cpu_state.exists() and memory_state.exists()
    # Unchanged: nothing goes, even a file the kubelet wrote since.
    cpu_state.write_text('{"policyName":"static"}')
    assert reconcile(tmp_path, "static reservedSystemCPUs=0,4-7", "None") == ""
    assert cpu_state.exists()
    # Another reserved set, and the memory manager's reservation changes (hugepages moved).
    output = reconcile(tmp_path, "static reservedSystemCPUs=0,3-7", "Static reservedMemory=0:1,1:2")
    assert "removed" in output and not cpu_state.exists() and not memory_state.exists()
    # A change without a state file to remove says nothing but records it.
    assert reconcile(tmp_path, "none", "None") == "changed\n"
    assert (root / "numa-kubelets-resource-managers").read_text() == "cpu none\nmemory None\n"
