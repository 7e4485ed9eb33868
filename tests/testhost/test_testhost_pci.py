"""The test host's PCI devices on NUMA nodes: qemu's options for them, and the guest's sysfs read
back (no VM needed; the measured guest listings are in docs/devices-host-notes.md)."""

from pathlib import Path

import pytest

from tests.testhost.image import Image
from tests.testhost.pci import (
    DeviceNode,
    GuestPciDevice,
    PciDevice,
    parse_device_nodes,
    parse_pci_listing,
    pci_layout_problems,
    pxb_bus_nr,
    qemu_pci_args,
)
from tests.testhost.qemu import qemu_command
from tests.testhost.topology import ORIGIN, Topology

# Issue 43's layout: one controller on node 0, two on node 1, one without affinity.
ISSUE_43 = [PciDevice.parse(text) for text in ("nvme@0", "nvme@1", "nvme@1", "nvme@-1")]


def test_a_device_is_kind_at_numa_node():
    assert PciDevice.parse("nvme@1") == PciDevice("nvme", 1)
    assert PciDevice.parse(" nvme@-1 ") == PciDevice("nvme", -1)
    assert str(PciDevice("nvme", -1)) == "nvme@-1"
    assert PciDevice.of("nvme@0") == PciDevice.of(PciDevice("nvme", 0))


@pytest.mark.parametrize(
    "text, message",
    [
        ("nvme", "expected KIND@NODE"),
        ("nvme@", "expected KIND@NODE"),
        ("nvme@x", "expected KIND@NODE"),
        ("gpu@0", "unknown PCI device kind 'gpu'; known: nvme"),
        ("nvme@-2", "a node id or -1"),
    ],
)
def test_malformed_devices_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        PciDevice.parse(text)


def test_each_numa_node_gets_an_expander_bridge_and_each_device_a_root_port():
    assert qemu_pci_args(ISSUE_43, ORIGIN) == [
        "-device", "pxb-pcie,id=pxb0,bus_nr=32,numa_node=0,bus=pcie.0",
        "-device", "pxb-pcie,id=pxb1,bus_nr=64,numa_node=1,bus=pcie.0",
        "-drive", "if=none,id=pci0-drive,driver=null-co,read-zeroes=on,size=64M",
        "-device", "pcie-root-port,id=rp0,bus=pxb0,chassis=1,slot=0",
        "-device", "nvme,id=pci0,drive=pci0-drive,serial=nk0-node0,bus=rp0",
        "-drive", "if=none,id=pci1-drive,driver=null-co,read-zeroes=on,size=64M",
        "-device", "pcie-root-port,id=rp1,bus=pxb1,chassis=2,slot=0",
        "-device", "nvme,id=pci1,drive=pci1-drive,serial=nk1-node1,bus=rp1",
        "-drive", "if=none,id=pci2-drive,driver=null-co,read-zeroes=on,size=64M",
        "-device", "pcie-root-port,id=rp2,bus=pxb1,chassis=3,slot=0",
        "-device", "nvme,id=pci2,drive=pci2-drive,serial=nk2-node1,bus=rp2",
        "-drive", "if=none,id=pci3-drive,driver=null-co,read-zeroes=on,size=64M",
        "-device", "nvme,id=pci3,drive=pci3-drive,serial=nk3-nonuma,bus=pcie.0",
    ]  # fmt: skip


def test_bus_numbers_leave_the_root_complex_room_and_node_1_starts_at_0x40():
    """Issue 43 measured bus_nr=0x40 on node 1: its first device was 0000:41:00.0."""
    assert [pxb_bus_nr(node) for node in range(7)] == [0x20, 0x40, 0x60, 0x80, 0xA0, 0xC0, 0xE0]


def test_devices_only_on_nodes_the_topology_has():
    with pytest.raises(ValueError, match=r"NUMA node 2: the topology 0-3;4-7 has 2 nodes"):
        qemu_pci_args([PciDevice("nvme", 2)], ORIGIN)
    eight_nodes = Topology.parse(";".join(str(cpu) for cpu in range(8)))
    with pytest.raises(ValueError, match="reach NUMA node 6 at most"):
        qemu_pci_args([PciDevice("nvme", 7)], eight_nodes)
    with pytest.raises(ValueError, match="32 PCI devices on NUMA node 0: 31 at most"):
        qemu_pci_args([PciDevice("nvme", 0)] * 32, ORIGIN)


def _command(pci=(), one_host_thread=False):
    image = Image(Path("/i"), Path("/i/vmlinuz"), Path("/i/initrd.img"), Path("/i/root.img"), Path("/k"), "", "", 0, "")
    return qemu_command(
        image,
        Path("/w/overlay.qcow2"),
        ORIGIN,
        2048,
        2222,
        Path("/w/serial.log"),
        Path("/w/qemu.pid"),
        Path("/w/p"),
        pci,
        one_host_thread,
    )


def test_the_vcpus_run_in_one_host_thread_only_when_asked():
    def accel(argv):
        return argv[argv.index("-accel") + 1]

    assert accel(_command()) == "tcg,thread=multi"
    assert accel(_command(one_host_thread=True)) == "tcg,thread=single"


def test_without_devices_the_command_line_is_the_one_before_them():
    argv = _command()
    # What every tier booted before devices existed: the disk as if=virtio, no bus named.
    disk = argv.index("-drive")
    assert argv[disk : disk + 2] == ["-drive", "file=/w/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe"]
    devices = [argv[index + 1] for index, arg in enumerate(argv) if arg == "-device"]
    assert devices == ["virtio-net-pci,netdev=n0", "virtio-rng-pci"]
    assert argv.count("-drive") == 1


def test_with_devices_every_other_pci_device_names_the_root_complex():
    """Else qemu plugs them into an expander bridge and refuses ("Only PCI/PCIe bridges can be
    plugged into pxb-pcie")."""
    argv = _command(ISSUE_43)
    devices = [argv[index + 1] for index, arg in enumerate(argv) if arg == "-device"]
    assert devices[:3] == [
        "virtio-net-pci,netdev=n0,bus=pcie.0",
        "virtio-rng-pci,bus=pcie.0",
        "virtio-blk-pci,drive=root,bus=pcie.0",
    ]
    assert all(",bus=" in device for device in devices)
    assert "file=/w/overlay.qcow2,if=none,id=root,format=qcow2,cache=unsafe" in argv
    assert not any("if=virtio" in arg for arg in argv)
    # The devices after the disk, so that the disk, NIC and RNG keep the slots they have without.
    pci_args = qemu_pci_args(ISSUE_43, ORIGIN)
    after_disk = argv.index("virtio-blk-pci,drive=root,bus=pcie.0") + 1
    assert argv[after_disk : after_disk + len(pci_args)] == pci_args


# Measured on the origin machine booted with ISSUE_43's devices (bookworm, 2026-12-06): a part of
# the guest's listing, and the device nodes of one controller.
MEASURED_LISTING = """\
0000:00:01.0 -1 0x020000 0x1af4 0x1000 virtio-pci
0000:00:04.0 -1 0x060000 0x1b36 0x000b -
0000:00:06.0 -1 0x010802 0x1b36 0x0010 nvme
0000:20:00.0 0 0x060400 0x1b36 0x000c pcieport
0000:21:00.0 0 0x010802 0x1b36 0x0010 nvme
0000:41:00.0 1 0x010802 0x1b36 0x0010 nvme
"""


def test_the_guest_pci_listing_is_parsed():
    devices = parse_pci_listing(MEASURED_LISTING)
    assert devices[0] == GuestPciDevice("0000:00:01.0", -1, "0x020000", "0x1af4", "0x1000", "virtio-pci")
    assert devices[1].driver == ""  # the expander bridge's host bridge: no driver
    nvme = [(device.address, device.numa_node) for device in devices if device.driver == "nvme"]
    assert nvme == [("0000:00:06.0", -1), ("0000:21:00.0", 0), ("0000:41:00.0", 1)]


def test_device_nodes_are_parsed():
    measured = "char 247:3 /dev/nvme3\nchar 246:1 /dev/ng3n1\nblock 259:0 /dev/nvme3n1\nchar 1:2\n"
    assert parse_device_nodes(measured) == [
        DeviceNode("char", "247:3", "/dev/nvme3"),
        DeviceNode("char", "246:1", "/dev/ng3n1"),
        DeviceNode("block", "259:0", "/dev/nvme3n1"),
        DeviceNode("char", "1:2", ""),
    ]


def test_the_layout_check_compares_kind_and_numa_node_with_what_was_asked():
    guest = parse_pci_listing(MEASURED_LISTING)
    asked = [PciDevice.parse(text) for text in ("nvme@-1", "nvme@0", "nvme@1")]
    assert pci_layout_problems(asked, guest) == []
    assert pci_layout_problems(ISSUE_43, guest) == [
        "nvme: asked for NUMA nodes [-1, 0, 1, 1], the guest has [-1, 0, 1]"
        " (0000:00:06.0 on -1, 0000:21:00.0 on 0, 0000:41:00.0 on 1)"
    ]
    unbound = [device._replace(driver="") if device.address == "0000:21:00.0" else device for device in guest]
    assert pci_layout_problems(asked, unbound) == ["nvme 0000:21:00.0: driver none, not nvme"]
    assert pci_layout_problems([], guest) == []
