"""`python -m numa_kubelets.discover` against a real OpenSSH server on loopback.

One sshd (tests/e2e/sshd.py: Debian's, its own host key, an unprivileged user) listens on one
port of 127.0.0.1 to 127.0.0.4 (Linux routes all of 127/8 to lo), so four destinations reach
it as four hosts. Behind 127.0.0.4 it emulates a host of another topology: a `Match
LocalAddress` block forces the command to run discover's reading script on a fake sysfs tree.
No Pulumi CLI is needed: the printed stack file goes through the program's own validation and
plan (review.plan_from_stack, as `pulumi preview` reads the stack file).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from numa_kubelets.review import plan_from_stack
from tests.e2e.sshd import free_port, login_user, sshd_directory, start_sshd

REPO = Path(__file__).resolve().parents[2]
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
EMULATED = "127.0.0.4"
# The emulated host: two NUMA nodes of two SMT cores each, CPUs numbered as on many Intel machines.
EMULATED_NODES = {0: "0-1,4-5", 1: "2-3,6-7"}
EMULATED_SIBLINGS = {0: "0,4", 1: "1,5", 2: "2,6", 3: "3,7", 4: "0,4", 5: "1,5", 6: "2,6", 7: "3,7"}
# Its PCI devices (address: numa_node, class, driver): NVMe drives, one on node 0, two on node 1 (one
# unbound), one without affinity, and a host bridge and a root port, which discover leaves out.
EMULATED_PCI = {
    "0000:00:00.0": (-1, "0x060000", None),
    "0000:00:05.0": (-1, "0x010802", "nvme"),
    "0000:01:00.0": (0, "0x010802", "nvme"),
    "0000:40:00.0": (1, "0x060400", "pcieport"),
    "0000:41:00.0": (1, "0x010802", "nvme"),
    "0000:42:00.0": (1, "0x010802", None),
}


@dataclass(frozen=True)
class Server:
    user: str
    port: int
    identity: Path
    host_key: str  # `<type> <base64>`, as hostKey pins it

    def destination(self, address: str, port: int | None = None) -> str:
        return f"{self.user}@{address}:{port or self.port}"


def fake_pci(root: Path) -> None:
    """/sys/bus/pci/devices as discover reads it, for EMULATED_PCI."""
    for address, (numa_node, pci_class, driver) in EMULATED_PCI.items():
        device = root / address
        device.mkdir(parents=True)
        for name, value in (("numa_node", numa_node), ("class", pci_class), ("vendor", "0x1b36"), ("device", "0x0010")):
            (device / name).write_text(f"{value}\n")
        if driver is not None:
            (device / "driver").symlink_to(f"../../../bus/pci/drivers/{driver}")


def emulated_device(address: str) -> dict[str, str]:
    _node, pci_class, driver = EMULATED_PCI[address]
    entry = {"address": address, "class": pci_class, "vendor": "0x1b36", "device": "0x0010"}
    return {**entry, "driver": driver} if driver else entry


def fake_sysfs(root: Path) -> None:
    """/sys/devices/system's node and cpu files discover reads, for EMULATED_NODES."""
    for node, cpus in EMULATED_NODES.items():
        (root / "node" / f"node{node}").mkdir(parents=True)
        (root / "node" / f"node{node}" / "cpulist").write_text(cpus + "\n")
    (root / "cpu").mkdir()
    (root / "cpu" / "online").write_text("0-7\n")
    for cpu, siblings in EMULATED_SIBLINGS.items():
        (root / "cpu" / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (root / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(siblings + "\n")


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with sshd_directory("numa-kubelets-discover-sshd-") as directory:
        fake_sysfs(directory.path / "sysfs")
        fake_pci(directory.path / "pci")
        emulation = [
            f"Match LocalAddress {EMULATED}",
            f"    ForceCommand sed -e 's|/sys/devices/system|{directory.path / 'sysfs'}|g' "
            f"-e 's|/sys/bus/pci/devices|{directory.path / 'pci'}|g' | sh -s",
        ]
        process, port = start_sshd(directory.path, "discover", (), ADDRESSES, emulation)
        try:
            yield Server(login_user().pw_name, port, directory.client_key, directory.host_key)
        finally:
            process.terminate()
            process.wait(timeout=10)


def discover(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "numa_kubelets.discover", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def this_machine() -> dict[str, Any]:
    """What discover reads on this machine without SSH."""
    result = discover()
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = yaml.safe_load(result.stdout)
    return document


def test_three_addresses_of_one_server_make_one_class_with_its_host_key(server: Server) -> None:
    closed = free_port()  # nothing listens there
    result = discover(
        "-i",
        str(server.identity),
        *(server.destination(address) for address in ADDRESSES[:3]),
        server.destination("127.0.0.1", closed),
    )

    assert result.returncode == 1
    assert f"discover: host-127-0-0-1-2 ({server.user}@127.0.0.1:{closed}): ssh exited 255" in result.stderr
    assert "Connection refused" in result.stderr
    assert "discover: 4/4 hosts read, 1 failed" in result.stderr
    document = yaml.safe_load(result.stdout)
    config = document["config"]
    local = this_machine()
    classes = config["numa-kubelets:hostClasses"]
    assert list(classes.values()) == [local]  # numaNodes, systemCpus and the PCI devices, if any
    (class_name,) = classes
    assert config["numa-kubelets:hosts"] == [
        {
            "name": f"host-{address.replace('.', '-')}",
            "address": address,
            "sshPort": server.port,
            **({} if server.user == "root" else {"user": server.user}),
            "class": class_name,
            "hostKey": server.host_key,
        }
        for address in ADDRESSES[:3]
    ]
    _stack, plan = plan_from_stack(document)
    assert [host.host_key for host in plan.hosts] == [server.host_key] * 3
    assert [host.address for host in plan.hosts] == list(ADDRESSES[:3])


def test_two_topologies_make_two_classes(server: Server) -> None:
    result = discover(
        "-i", str(server.identity), "-j", "2", *(server.destination(a) for a in ("127.0.0.1", "127.0.0.2", EMULATED))
    )

    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(result.stdout)
    classes = document["config"]["numa-kubelets:hostClasses"]
    emulated = {
        "numaNodes": [
            {"id": 0, "cpus": EMULATED_NODES[0], "pciDevices": [emulated_device("0000:01:00.0")]},
            {
                "id": 1,
                "cpus": EMULATED_NODES[1],
                "pciDevices": [emulated_device("0000:41:00.0"), emulated_device("0000:42:00.0")],
            },
        ],
        "systemCpus": "0,2,4,6",
        "pciDevices": [emulated_device("0000:00:05.0")],
    }
    local = this_machine()
    assert emulated["numaNodes"] != local["numaNodes"], "this machine has the emulated topology: pick another"
    assert classes["2x4-cpus"] == emulated
    assert len(classes) == 2
    hosts = document["config"]["numa-kubelets:hosts"]
    assert [host["class"] for host in hosts[:2]] != ["2x4-cpus"] * 2
    assert hosts[2]["class"] == "2x4-cpus"
    assert {host["hostKey"] for host in hosts} == {server.host_key}
    _stack, plan = plan_from_stack(document)
    assert [len(host.kubelets) for host in plan.hosts][2] == 2
    assert [(d.address, d.numa_node) for d in plan.hosts[2].pci_devices] == [
        ("0000:00:05.0", None),
        ("0000:01:00.0", 0),
        ("0000:41:00.0", 1),
        ("0000:42:00.0", 1),
    ]


def test_one_destination_prints_the_host_entry_keys_and_its_host_key(server: Server) -> None:
    result = discover("-i", str(server.identity), "-p", str(server.port), f"{server.user}@127.0.0.1")

    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout) == {**this_machine(), "hostKey": server.host_key}


def test_one_unreachable_destination_fails_with_ssh_s_message(server: Server) -> None:
    result = discover("-i", str(server.identity), server.destination("127.0.0.1", free_port()))

    assert result.returncode == 1
    assert result.stdout == ""
    assert "Connection refused" in result.stderr
