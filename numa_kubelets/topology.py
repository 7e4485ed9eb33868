"""A host's NUMA topology and PCI devices as read from sysfs, and the stack-file snippet suggested for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from .cpulist import CpuListError, CpuSet
from .validators import DRIVER_NAME, PCI_ADDRESS, PCI_CLASS, PCI_ID

# Read-only; prints "node <id> <cpulist>", "online <cpulist>", "siblings <cpu> <cpulist>" and
# "pci <address> <numa node> <class> <vendor> <device> [<driver>]" lines (numa_node -1: no
# affinity, also on kernels without NUMA, which have no numa_node file).
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
for dir in /sys/bus/pci/devices/*; do
  [ -r "$dir/class" ] || continue
  driver=
  if [ -L "$dir/driver" ]; then driver=$(basename "$(readlink "$dir/driver")"); fi
  echo "pci ${dir##*/} $(cat "$dir/numa_node" 2>/dev/null || echo -1) $(cat "$dir/class") $(cat "$dir/vendor") $(cat "$dir/device") $driver" | sed 's/ $//'
done
"""
# PCI base classes left out of the inventory discover prints: bridges (0x06: host bridges, the
# root ports every PCIe device hangs off, ISA/LPC bridges) and base system peripherals (0x08:
# interrupt controllers, IOMMUs, timers, root complex event collectors) are the platform's own
# plumbing; no pod is given one, and listing them would make every preflight check a dozen
# devices nobody offers.
PLATFORM_CLASS_PREFIXES = ("0x06", "0x08")


class TopologyError(ValueError):
    """The topology readings are not what READ_TOPOLOGY_SCRIPT prints."""


@dataclass(frozen=True)
class PciReading:
    address: str
    numa_node: int  # -1: no NUMA affinity
    pci_class: str
    vendor: str
    device: str
    driver: str | None

    def entry(self) -> dict[str, str]:
        """As `pciDevices` takes it."""
        entry = {"address": self.address, "class": self.pci_class, "vendor": self.vendor, "device": self.device}
        if self.driver is not None:
            entry["driver"] = self.driver
        return entry


@dataclass(frozen=True)
class Topology:
    nodes: dict[int, CpuSet]
    online: CpuSet
    siblings: dict[int, CpuSet]
    pci: tuple[PciReading, ...] = field(default=())  # every PCI device read, sorted by address


def _pci_reading(fields: list[str]) -> PciReading:
    address, node, pci_class, vendor, device = fields[1:6]
    driver = fields[6] if len(fields) == 7 else None
    if not (
        PCI_ADDRESS.fullmatch(address)
        and PCI_CLASS.fullmatch(pci_class)
        and PCI_ID.fullmatch(vendor)
        and PCI_ID.fullmatch(device)
        and (driver is None or DRIVER_NAME.fullmatch(driver))
    ):
        raise ValueError(f"PCI device {' '.join(fields[1:])!r} is not as sysfs writes one")
    return PciReading(address, int(node), pci_class, vendor, device, driver)


def parse_topology(output: str) -> Topology:
    nodes: dict[int, CpuSet] = {}
    siblings: dict[int, CpuSet] = {}
    online: CpuSet | None = None
    pci: list[PciReading] = []
    for number, line in enumerate(output.splitlines(), start=1):
        fields = line.split(" ")
        try:
            if fields[0] == "node" and len(fields) in (2, 3):
                nodes[int(fields[1])] = CpuSet.parse(fields[2] if len(fields) == 3 else "")
            elif fields[0] == "online" and len(fields) == 2:
                online = CpuSet.parse(fields[1])
            elif fields[0] == "siblings" and len(fields) == 3:
                siblings[int(fields[1])] = CpuSet.parse(fields[2])
            elif fields[0] == "pci" and len(fields) in (6, 7):
                pci.append(_pci_reading(fields))
            else:
                raise TopologyError(f"line {number}: unexpected {line!r}")
        except (ValueError, CpuListError) as error:
            raise TopologyError(f"line {number}: {error}") from None
    if not nodes or online is None:
        raise TopologyError("no NUMA nodes or no online CPUs in the readings")
    for reading in pci:
        if reading.numa_node != -1 and reading.numa_node not in nodes:
            raise TopologyError(f"PCI device {reading.address} is on NUMA node {reading.numa_node}, which sysfs lacks")
    return Topology(nodes, online, siblings, tuple(sorted(pci, key=lambda r: r.address)))


def declared_devices(topology: Topology) -> tuple[PciReading, ...]:
    """The PCI devices worth declaring: all but the platform's bridges and system peripherals."""
    return tuple(r for r in topology.pci if not r.pci_class.startswith(PLATFORM_CLASS_PREFIXES))


def numa_nodes_entries(topology: Topology) -> list[dict[str, Any]]:
    """`numaNodes` as the stack file takes it, each node with its PCI devices."""
    devices = declared_devices(topology)
    entries: list[dict[str, Any]] = []
    for node_id, cpus in sorted(topology.nodes.items()):
        entry: dict[str, Any] = {"id": node_id, "cpus": cpus.format()}
        own = [r.entry() for r in devices if r.numa_node == node_id]
        if own:
            entry["pciDevices"] = own
        entries.append(entry)
    return entries


def unaffine_entries(topology: Topology) -> list[dict[str, str]]:
    """The host's `pciDevices`: devices with no NUMA affinity."""
    return [r.entry() for r in declared_devices(topology) if r.numa_node == -1]


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
    """YAML for the host entry's numaNodes (with their PCI devices), systemCpus and pciDevices."""
    offline = CpuSet(cpu for cpus in topology.nodes.values() for cpu in cpus) - topology.online
    document: dict[str, Any] = {
        "numaNodes": numa_nodes_entries(topology),
        "systemCpus": suggested_system_cpus(topology).format(),
    }
    unaffine = unaffine_entries(topology)
    if unaffine:
        document["pciDevices"] = unaffine
    text = yaml.safe_dump(document, sort_keys=False)
    if offline:
        text = f"# CPUs {offline.format()} are offline: the preflight requires every declared CPU online.\n" + text
    return text
