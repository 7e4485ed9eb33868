"""PCI devices on chosen NUMA nodes of the test host, and reading them back in the guest.

`boot(..., pci=["nvme@1", "nvme@-1"])` (CLI: `boot --pci nvme@1 --pci nvme@-1`) attaches emulated
NVMe controllers: one with affinity to NUMA node N sits behind a PCIe expander bridge of that
node (`pxb-pcie,numa_node=N`: its ACPI host bridge carries the node's proximity domain, so the
guest's `/sys/bus/pci/devices/<address>/numa_node` reads N), one per root port; one at `@-1` sits
on the root complex `pcie.0`, whose devices read -1 (no affinity). Measured facts: issue 43 and
docs/devices-host-notes.md.

Each controller is backed by qemu's `null-co` block driver (reads zeroes, writes vanish): no file,
no disk space. The guest kernels of both suites have the nvme driver built in (`CONFIG_BLK_DEV_NVME=y`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .topology import Topology

if TYPE_CHECKING:
    from .host import TestHost

# What `--pci KIND@NODE` can attach: the qemu device of each kind.
KINDS = {"nvme": "nvme"}
NO_AFFINITY = -1
# Bus numbers: the root complex pcie.0 is bus 0 and keeps 0x00-0x1f for whatever sits below it; NUMA
# node N's expander bridge starts at 0x20 * (N + 1) (node 1: 0x40, as measured in issue 43: its
# first device is 0000:41:00.0) and its root ports take the buses after it, one each.
PXB_BUS_STRIDE = 0x20
MAX_PXB_NODE = 0xFF // PXB_BUS_STRIDE - 1  # node 6: buses 0xe0-0xff
MAX_DEVICES_PER_NODE = PXB_BUS_STRIDE - 1
# Emulated size of each NVMe namespace (null-co allocates nothing).
NULL_DRIVE_SIZE = "64M"


@dataclass(frozen=True)
class PciDevice:
    """One emulated PCI device: `kind` (KINDS) on NUMA node `numa_node`, or -1 for none."""

    kind: str
    numa_node: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown PCI device kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.numa_node < NO_AFFINITY:
            raise ValueError(f"{self}: the NUMA node is a node id or -1 (no affinity)")

    @classmethod
    def parse(cls, text: str) -> PciDevice:
        """`"nvme@1"`: kind `@` NUMA node id; `"nvme@-1"`: no NUMA affinity (on pcie.0)."""
        kind, at, node = text.strip().partition("@")
        if not at or not node.lstrip("-").isdigit():
            raise ValueError(f"malformed PCI device {text!r}: expected KIND@NODE, e.g. nvme@1 or nvme@-1")
        return cls(kind, int(node))

    @classmethod
    def of(cls, value: PciDeviceLike) -> PciDevice:
        return value if isinstance(value, PciDevice) else cls.parse(value)

    def __str__(self) -> str:
        return f"{self.kind}@{self.numa_node}"


PciDeviceLike = PciDevice | str


def pci_devices_of(values: Iterable[PciDeviceLike]) -> tuple[PciDevice, ...]:
    return tuple(PciDevice.of(value) for value in values)


def pxb_bus_nr(numa_node: int) -> int:
    """The first bus number of NUMA node `numa_node`'s PCIe expander bridge."""
    return PXB_BUS_STRIDE * (numa_node + 1)


def serial_of(index: int, device: PciDevice) -> str:
    """The device's serial number (NVMe: 20 characters at most), naming where the host put it:
    the guest reads it from /sys/class/nvme/<name>/serial."""
    where = "nonuma" if device.numa_node == NO_AFFINITY else f"node{device.numa_node}"
    return f"nk{index}-{where}"


def qemu_pci_args(devices: Sequence[PciDevice], topology: Topology) -> list[str]:
    """qemu options for `devices`, in order: per NUMA node with devices an expander bridge on
    pcie.0, per device a tiny null backing drive, and behind the bridge a root port of its own
    (unique chassis, slot 0) with the device on it; a device without affinity goes on pcie.0."""
    nodes = sorted({device.numa_node for device in devices if device.numa_node != NO_AFFINITY})
    for node in nodes:
        if node >= len(topology.nodes):
            raise ValueError(f"PCI device on NUMA node {node}: the topology {topology} has {len(topology.nodes)} nodes")
        if node > MAX_PXB_NODE:
            raise ValueError(f"PCI device on NUMA node {node}: bus numbers reach NUMA node {MAX_PXB_NODE} at most")
        count = sum(device.numa_node == node for device in devices)
        if count > MAX_DEVICES_PER_NODE:
            raise ValueError(f"{count} PCI devices on NUMA node {node}: {MAX_DEVICES_PER_NODE} at most")
    args: list[str] = []
    for node in nodes:
        args += ["-device", f"pxb-pcie,id=pxb{node},bus_nr={pxb_bus_nr(node)},numa_node={node},bus=pcie.0"]
    for index, device in enumerate(devices):
        drive = f"pci{index}-drive"
        args += ["-drive", f"if=none,id={drive},driver=null-co,read-zeroes=on,size={NULL_DRIVE_SIZE}"]
        bus = "pcie.0"
        if device.numa_node != NO_AFFINITY:
            bus = f"rp{index}"
            args += ["-device", f"pcie-root-port,id={bus},bus=pxb{device.numa_node},chassis={index + 1},slot=0"]
        args += [
            "-device",
            f"{KINDS[device.kind]},id=pci{index},drive={drive},serial={serial_of(index, device)},bus={bus}",
        ]
    return args


class GuestPciDevice(NamedTuple):
    """A PCI function as the guest's sysfs shows it (/sys/bus/pci/devices/<address>/...)."""

    address: str  # "0000:41:00.0"
    numa_node: int  # -1: no affinity
    pci_class: str  # "0x010802": NVMe
    vendor: str  # "0x1b36": Red Hat (qemu)
    device: str  # "0x0010": qemu's NVMe controller
    driver: str  # "nvme"; "" when no driver is bound


# One line per PCI function: address, numa_node, class, vendor, device, driver (or "-").
_PCI_SCRIPT = r"""
for d in /sys/bus/pci/devices/*; do
  driver=-
  [ -e "$d/driver" ] && driver=$(basename "$(readlink "$d/driver")")
  echo "${d##*/} $(cat "$d/numa_node") $(cat "$d/class") $(cat "$d/vendor") $(cat "$d/device") $driver"
done
"""


def parse_pci_listing(text: str) -> list[GuestPciDevice]:
    devices = []
    for line in text.splitlines():
        if not line.strip():
            continue
        address, node, pci_class, vendor, device, driver = line.split()
        devices.append(GuestPciDevice(address, int(node), pci_class, vendor, device, "" if driver == "-" else driver))
    return devices


def pci_devices(host: TestHost) -> list[GuestPciDevice]:
    """Every PCI function of the guest with its NUMA node, read from sysfs over SSH."""
    return parse_pci_listing(host.run(_PCI_SCRIPT).stdout)


# How the guest shows each kind: PCI class and the driver bound to it.
GUEST_CLASS = {"nvme": ("0x010802", "nvme")}


def pci_layout_problems(requested: Sequence[PciDevice], guest: Sequence[GuestPciDevice]) -> list[str]:
    """What differs between the devices a host was booted with and the guest's view: per kind and
    NUMA node, as many functions of that class with that driver as were asked for."""
    problems = []
    for kind in sorted({device.kind for device in requested}):
        pci_class, driver = GUEST_CLASS[kind]
        wanted = sorted(device.numa_node for device in requested if device.kind == kind)
        found = [device for device in guest if device.pci_class == pci_class]
        seen = sorted(device.numa_node for device in found)
        if seen != wanted:
            listing = ", ".join(f"{device.address} on {device.numa_node}" for device in found) or "none"
            problems.append(f"{kind}: asked for NUMA nodes {wanted}, the guest has {seen} ({listing})")
        problems += [
            f"{kind} {device.address}: driver {device.driver or 'none'}, not {driver}"
            for device in found
            if device.driver != driver
        ]
    return problems


def check_pci_layout(host: TestHost) -> list[GuestPciDevice]:
    """The guest's PCI functions, after checking that the devices `host` was booted with are
    there on their NUMA nodes, each bound to its driver (a tier calls this on its machine)."""
    guest = pci_devices(host)
    problems = pci_layout_problems(host.pci, guest)
    if problems:
        raise AssertionError("the test host's PCI devices are not where they were put:\n" + "\n".join(problems))
    return guest


class DeviceNode(NamedTuple):
    """A device node a PCI function owns: found through sysfs (`<device dir>/**/dev`), never by name."""

    kind: str  # "char" or "block"
    number: str  # "major:minor"
    path: str  # what /dev/{char,block}/<major:minor> resolves to, e.g. "/dev/nvme0"; "" if none


_DEVICE_NODES_SCRIPT = r"""
find "/sys/bus/pci/devices/$1/" -name dev | sort | while read -r f; do
  kind=char
  case "$(readlink -f "${f%/dev}/subsystem")" in */block) kind=block ;; esac
  number=$(cat "$f")
  echo "$kind $number $(readlink -f "/dev/$kind/$number" 2>/dev/null)"
done
"""


def parse_device_nodes(text: str) -> list[DeviceNode]:
    nodes = []
    for line in text.splitlines():
        words = line.split()
        if words:
            nodes.append(DeviceNode(words[0], words[1], words[2] if len(words) > 2 else ""))
    return nodes


def device_nodes(host: TestHost, address: str) -> list[DeviceNode]:
    """The device nodes under the guest's /dev that belong to the PCI function at `address`.

    Measured for qemu's NVMe controller (bookworm, 2026-12-06): the controller's character device
    (/dev/nvme3, 247:3), its namespace's generic character device (/dev/ng3n1, 246:1) and block
    device (/dev/nvme3n1, 259:0); the kernel's native multipath (on) leaves a single-controller
    subsystem's namespace under its controller. Names and minors follow probe order, not NUMA
    nodes or PCI addresses."""
    return parse_device_nodes(host.run(f"set -- {shlex.quote(address)}\n{_DEVICE_NODES_SCRIPT}").stdout)
