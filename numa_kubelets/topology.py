"""A host's NUMA topology as read from sysfs, and the stack-file snippet suggested for it."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from .cpulist import CpuListError, CpuSet

# Read-only; prints "node <id> <cpulist>", "online <cpulist>" and "siblings <cpu> <cpulist>" lines.
READ_TOPOLOGY_SCRIPT = r"""set -eu
for dir in /sys/devices/system/node/node[0-9]*; do
  [ -d "$dir" ] || continue
  echo "node ${dir##*/node} $(cat "$dir/cpulist")"
done
echo "online $(cat /sys/devices/system/cpu/online)"
for dir in /sys/devices/system/cpu/cpu[0-9]*; do
  for name in core_cpus_list thread_siblings_list; do
    if [ -r "$dir/topology/$name" ]; then
      echo "siblings ${dir##*/cpu} $(cat "$dir/topology/$name")"
      break
    fi
  done
done
"""


class TopologyError(ValueError):
    """The topology readings are not what READ_TOPOLOGY_SCRIPT prints."""


@dataclass(frozen=True)
class Topology:
    nodes: dict[int, CpuSet]
    online: CpuSet
    siblings: dict[int, CpuSet]


def parse_topology(output: str) -> Topology:
    nodes: dict[int, CpuSet] = {}
    siblings: dict[int, CpuSet] = {}
    online: CpuSet | None = None
    for number, line in enumerate(output.splitlines(), start=1):
        fields = line.split(" ")
        try:
            if fields[0] == "node" and len(fields) in (2, 3):
                nodes[int(fields[1])] = CpuSet.parse(fields[2] if len(fields) == 3 else "")
            elif fields[0] == "online" and len(fields) == 2:
                online = CpuSet.parse(fields[1])
            elif fields[0] == "siblings" and len(fields) == 3:
                siblings[int(fields[1])] = CpuSet.parse(fields[2])
            else:
                raise TopologyError(f"line {number}: unexpected {line!r}")
        except (ValueError, CpuListError) as error:
            raise TopologyError(f"line {number}: {error}") from None
    if not nodes or online is None:
        raise TopologyError("no NUMA nodes or no online CPUs in the readings")
    return Topology(nodes, online, siblings)


def suggested_system_cpus(topology: Topology) -> CpuSet:
    """The lowest CPU of each NUMA node with its SMT siblings, so host services get whole cores."""
    chosen = CpuSet()
    for cpus in topology.nodes.values():
        online = cpus & topology.online
        if online:
            lowest = online.lowest()
            chosen = chosen | (topology.siblings.get(lowest, CpuSet([lowest])) & online)
    return chosen


def stack_snippet(topology: Topology) -> str:
    """YAML for the host entry's numaNodes and systemCpus."""
    offline = CpuSet(cpu for cpus in topology.nodes.values() for cpu in cpus) - topology.online
    document = {
        "numaNodes": [{"id": node_id, "cpus": cpus.format()} for node_id, cpus in sorted(topology.nodes.items())],
        "systemCpus": suggested_system_cpus(topology).format(),
    }
    text = yaml.safe_dump(document, sort_keys=False)
    if offline:
        text = f"# CPUs {offline.format()} are offline: the preflight requires every declared CPU online.\n" + text
    return text
