"""Starting and stopping one qemu process for the test host.

qemu runs daemonized (the VM outlives the CLI that booted it), so it is not
our child: it is tracked by its pidfile, and before signalling that pid we
check that /proc/<pid>/cmdline is still our qemu (pids are reused).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import recipe
from .image import Image
from .pci import PciDevice, qemu_pci_args
from .tools import TestHostError, run_logged, tail
from .topology import Topology, qemu_topology_args

QEMU = "qemu-system-x86_64"
# qemu's -name for every test host: how a test host's qemu is told from any other.
VM_NAME = "numa-kubelets-testhost"


@dataclass(frozen=True)
class QemuProcess:
    pid: int
    pidfile: Path

    @classmethod
    def from_pidfile(cls, pidfile: Path) -> QemuProcess:
        return cls(int(pidfile.read_text().strip()), pidfile)

    def is_running(self) -> bool:
        """True while `pid` is alive and is the qemu that wrote `pidfile`."""
        try:
            argv = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        if state == "Z":  # exited, waiting for a reaper that may never come
            return False
        return bool(argv) and os.path.basename(argv[0]).decode() == QEMU and str(self.pidfile).encode() in argv

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL: the disk is a throwaway overlay, nothing to flush."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self.is_running():
                return
            os.kill(self.pid, sig)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.is_running():
                time.sleep(0.1)
        if self.is_running():
            raise TestHostError(f"qemu pid {self.pid} did not exit")


def running_test_hosts(proc: Path = Path("/proc")) -> list[int]:
    """The pids of the test hosts' qemu processes running on this machine, any session's."""
    pids = []
    for cmdline in proc.glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # gone since the glob
            continue
        if os.path.basename(argv[0]) == QEMU.encode() and VM_NAME.encode() in argv:
            pids.append(int(cmdline.parent.name))
    return sorted(pids)


def pick_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def create_overlay(root_disk: Path, overlay: Path, log_path: Path) -> None:
    """Copy-on-write layer over the cached image: each boot starts pristine."""
    overlay.unlink(missing_ok=True)
    run_logged(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(root_disk.resolve()), "-F", "raw", str(overlay)],
        log_path,
    )


# restrict=on keeps the guest off every host and network, this machine's loopback included;
# one rule opens exactly one way back: the guest's connections to GUEST_API_ADDRESS:GUEST_API_PORT
# reach 127.0.0.1 at the port written in the boot's `api_port_file` (the session's control
# plane writes it when it starts), read per connection, so the guest may boot first.
GUEST_API_ADDRESS = "10.0.2.100"  # slirp refuses forwarding rules on its own 10.0.2.2 and 10.0.2.3
GUEST_API_PORT = 6443
GUEST_FORWARD_SCRIPT = Path(__file__).with_name("guest_forward.sh")
API_PORT_FILE = "guest-api-port"


def guest_forward_rule(api_port_file: Path) -> str:
    """qemu spawns the command per connection, the connection on its stdin and stdout."""
    for path in (GUEST_FORWARD_SCRIPT, api_port_file):
        if "," in str(path) or " " in str(path):
            raise TestHostError(f"{path}: qemu's -netdev syntax cannot carry a comma or space in this path")
    return f"guestfwd=tcp:{GUEST_API_ADDRESS}:{GUEST_API_PORT}-cmd:/bin/sh {GUEST_FORWARD_SCRIPT} {api_port_file}"


def qemu_command(
    image: Image,
    overlay: Path,
    topology: Topology,
    memory_mib: int,
    ssh_port: int,
    serial_log: Path,
    pidfile: Path,
    api_port_file: Path,
    pci: Sequence[PciDevice] = (),
    one_host_thread: bool = False,
) -> list[str]:
    """The test host's qemu command line. `one_host_thread` emulates every vCPU in one host thread
    (`tcg,thread=single`), for a machine that runs beside another: see boot(). With `pci` devices (pci.py) the expander bridges they
    need would take the place of the root complex as qemu's default bus, which refuses anything
    but bridges ("Only PCI/PCIe bridges can be plugged into pxb-pcie"): the disk, NIC and RNG
    then name `bus=pcie.0`, in the order (so at the slots) they have without devices. Without
    devices the command line is the one every tier booted before they existed."""
    if pci:
        disk = [
            "-drive",
            f"file={overlay},if=none,id=root,format=qcow2,cache=unsafe",
        ]
        devices = [
            "-device",
            "virtio-net-pci,netdev=n0,bus=pcie.0",
            "-device",
            "virtio-rng-pci,bus=pcie.0",
            # `-drive if=virtio` creates its device after every -device: the same slot here.
            "-device",
            "virtio-blk-pci,drive=root,bus=pcie.0",
            *qemu_pci_args(pci, topology),
        ]
    else:
        disk = ["-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe"]
        devices = ["-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci"]
    return [
        QEMU,
        "-name",
        VM_NAME,
        # KVM exists on these machines but is unusable: plain TCG, multi-threaded unless asked.
        "-accel",
        accel_option(one_host_thread),
        "-machine",
        "q35",
        *qemu_topology_args(topology, memory_mib),
        "-nodefaults",
        "-display",
        "none",
        "-kernel",
        str(image.kernel),
        "-initrd",
        str(image.initrd),
        "-append",
        " ".join(recipe.KERNEL_CMDLINE),
        *disk,
        "-netdev",
        f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{ssh_port}-:22,{guest_forward_rule(api_port_file)}",
        *devices,
        "-serial",
        f"file:{serial_log}",
        "-pidfile",
        str(pidfile),
        # A guest reboot ends qemu; TestHost.reboot starts it again on the same disk, a power
        # cycle. A warm reset left qemu 7.2's emulated NVMe controllers so that the next boot
        # hung probing them (nvme_async_probe blocked for good, no SSH; once in six reboots).
        "-no-reboot",
        "-daemonize",
    ]


def accel_option(one_host_thread: bool) -> str:
    return "tcg,thread=single" if one_host_thread else "tcg,thread=multi"


def with_accel(argv: Sequence[str], one_host_thread: bool) -> list[str]:
    """`argv` (a qemu_command) with its vCPUs in one host thread or one thread each."""
    argv = list(argv)
    argv[argv.index("-accel") + 1] = accel_option(one_host_thread)
    return argv


def start_qemu(argv: list[str], pidfile: Path, serial_log: Path, log_path: Path) -> QemuProcess:
    """Run qemu; with -daemonize it returns once the VM is set up (or failed to be)."""
    pidfile.unlink(missing_ok=True)
    try:
        run_logged(argv, log_path)
    except TestHostError as error:
        raise TestHostError(f"{error}\nserial console:\n{tail(serial_log)}") from None
    return QemuProcess.from_pidfile(pidfile)


def is_port_in_use_error(error: Exception) -> bool:
    return "host forwarding rule" in str(error) or "Address already in use" in str(error)
