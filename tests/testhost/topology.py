"""The emulated NUMA layout: which CPUs belong to which NUMA node.

A topology is a list of per-node CPU lists, node id = position. Nodes may
have non-contiguous CPUs (interleaved numbering as on many Intel machines)
and may have no CPU at all (memory-only nodes), as real machines do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Kernel cpulist syntax ("0-3,8,10-11") to sorted CPU numbers; "" is no CPU."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"malformed cpulist {text!r}")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"malformed cpulist {text!r}: {part} is descending")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: Iterable[int]) -> str:
    """CPU numbers to the kernel's canonical cpulist ("0-3,8"), as sysfs prints it."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = None
    for index, cpu in enumerate(ordered):
        if start is None:
            start = cpu
        is_last_of_run = index + 1 == len(ordered) or ordered[index + 1] != cpu + 1
        if is_last_of_run:
            ranges.append(str(cpu) if cpu == start else f"{start}-{cpu}")
            start = None
    return ",".join(ranges)


@dataclass(frozen=True)
class Topology:
    nodes: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for _node_id, cpus in enumerate(self.nodes):
            overlap = seen.intersection(cpus)
            if overlap:
                raise ValueError(f"CPUs {format_cpulist(overlap)} are on more than one NUMA node")
            seen.update(cpus)
        if not seen:
            raise ValueError("the topology has no CPU")
        # qemu numbers vCPUs 0..n-1 and every one of them must sit on a node.
        if seen != set(range(len(seen))):
            missing = set(range(max(seen) + 1)) - seen
            raise ValueError(f"CPUs {format_cpulist(missing)} are on no NUMA node")

    @classmethod
    def parse(cls, text: str) -> Topology:
        """`"0-3;4-7"`: one kernel cpulist per NUMA node, separated by ';'."""
        return cls(tuple(parse_cpulist(part) for part in text.split(";")))

    @classmethod
    def of(cls, value: TopologyLike) -> Topology:
        if isinstance(value, Topology):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        return cls(tuple(tuple(sorted(int(cpu) for cpu in cpus)) for cpus in value))

    @property
    def cpu_count(self) -> int:
        return sum(len(cpus) for cpus in self.nodes)

    def cpulists(self) -> list[str]:
        """Each node's CPUs as /sys/devices/system/node/node<N>/cpulist shows them."""
        return [format_cpulist(cpus) for cpus in self.nodes]

    def __str__(self) -> str:
        return ";".join(self.cpulists())


TopologyLike = Topology | str | Sequence[Sequence[int]]

# The origin experiment's machine: 2 sockets, CPUs 0-3 on node 0 and 4-7 on node 1.
ORIGIN = Topology(((0, 1, 2, 3), (4, 5, 6, 7)))


def qemu_topology_args(topology: Topology, memory_mib: int) -> list[str]:
    """qemu options for the CPUs, memory and NUMA nodes; memory is split evenly."""
    per_node_mib = memory_mib // len(topology.nodes)
    if per_node_mib < 128:
        raise ValueError(f"{memory_mib} MiB is too little for {len(topology.nodes)} NUMA nodes")
    args = [
        "-smp",
        _smp_option(topology),
        "-m",
        f"{per_node_mib * len(topology.nodes)}M",
    ]
    for node_id, cpus in enumerate(topology.nodes):
        args += ["-object", f"memory-backend-ram,size={per_node_mib}M,id=mem{node_id}"]
        # One cpus= per contiguous run: qemu accepts the option repeatedly,
        # which is how non-contiguous CPU sets are expressed.
        cpu_options = "".join(f",cpus={run}" for run in format_cpulist(cpus).split(",") if run)
        args += ["-numa", f"node,nodeid={node_id}{cpu_options},memdev=mem{node_id}"]
    return args


def _smp_option(topology: Topology) -> str:
    """One socket per NUMA node when the layout is socket-shaped, else one CPU per socket.

    Socket-shaped means equal, contiguous, ascending blocks (the origin's
    0-3/4-7). For other layouts (interleaved numbering, uneven nodes) a
    socket would span NUMA nodes, and the guest kernel warns (WARN splat,
    tainted kernel) about cache siblings on different nodes; single-CPU
    sockets have no siblings to disagree about.
    """
    count = topology.cpu_count
    cpu_nodes = [cpus for cpus in topology.nodes if cpus]
    size = len(cpu_nodes[0])
    socket_shaped = all(cpus == tuple(range(index * size, (index + 1) * size)) for index, cpus in enumerate(cpu_nodes))
    sockets = len(cpu_nodes) if socket_shaped else count
    return f"{count},sockets={sockets},cores={count // sockets},threads=1"
