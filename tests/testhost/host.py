"""Booting the emulated NUMA machine and talking to it: `boot()` -> `TestHost`."""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import recipe
from .image import DEFAULT_CACHE_DIR, Image, ensure_image
from .pci import PciDevice, PciDeviceLike, pci_devices_of, qemu_pci_args
from .qemu import (
    API_PORT_FILE,
    QemuProcess,
    create_overlay,
    is_port_in_use_error,
    pick_free_port,
    qemu_command,
    start_qemu,
    with_accel,
)
from .ssh import RemoteCommandError, RunResult, SshSession, StdinData
from .tools import TestHostError, guest_panic, guest_stalls, require_tools, tail
from .topology import ORIGIN, Topology, TopologyLike

DEFAULT_MEMORY_MIB = 2048
# Measured boot to SSH is 22-25 s on 2 host cores; a loaded CI machine gets slack.
DEFAULT_BOOT_TIMEOUT = 300.0
# Boots of a fresh overlay after the first one's kernel panicked. Under multi-threaded TCG the guest
# kernel's code patching (text_poke_bp, e.g. marking sched_clock stable late in boot) now and then
# meets a stale translation on another vCPU: "Oops: int3" in sched_clock_idle_wakeup_event, then
# "Kernel panic - not syncing: Fatal exception in interrupt" (trixie's 6.12 kernel, 2026-12-06, a
# CI-like run). Such a boot is qemu's, not the product's: booted again, not waited out.
BOOTS_AFTER_A_PANIC = 2


# A boot whose serial console stays silent this long before SSH answers has stalled: seen once
# under multi-threaded TCG (2026-12-06, the origin machine: systemd's units stopped half-started
# 12 s into the boot, nothing more in 300 s). A normal boot prints every few seconds until sshd
# answers (22-60 s in all; the longest silence of a boot measured at 1.7 s, 2026-12-06); such a
# boot is booted again like a panicked one, not waited out. Two stalled boots in a row cost a
# module run 240 s at the 120 s this was before.
SILENT_CONSOLE_SECONDS = 60.0


class GuestPanicked(TestHostError):
    """The guest kernel panicked, or its boot stalled, before SSH answered: booted again."""


STATE_FILE = "testhost.json"
# Where a test host keeps the kubelet this machine built (the image ships none): the dev stack's
# kubeletPath (Pulumi.dev.yaml), and where the real-host tier copies it.
GUEST_KUBELET = "/usr/local/bin/kubelet"


@dataclass
class TestHost:
    """A running test host. Connect as `user`@`address`:`port` with `key_path`, pinning `host_key`."""

    __test__ = False  # not a pytest test class despite the name

    address: str
    port: int
    user: str
    key_path: Path
    host_key: str
    topology: Topology
    workdir: Path
    qemu: QemuProcess
    boot_seconds: float = 0.0
    suite: str = recipe.DEFAULT_SUITE
    # The emulated PCI devices it was booted with (pci.py), in the order given.
    pci: tuple[PciDevice, ...] = ()
    # The qemu command line it was booted with: a reboot starts it again (qemu runs with -no-reboot).
    qemu_argv: tuple[str, ...] = ()
    # Asked at each reboot (a power cycle starts qemu anew) whether the vCPUs run in one host thread
    # from then on; None: as they did.
    one_host_thread_at_reboot: Callable[[], bool] | None = None
    reboots: int = 0
    _ssh: SshSession = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ssh = SshSession(self.address, self.port, self.user, self.key_path, self.host_key)

    @property
    def serial_log(self) -> Path:
        return self.workdir / "serial.log"

    def run(
        self,
        script: str,
        stdin: StdinData = None,
        check: bool = True,
        timeout: float | None = 600.0,
    ) -> RunResult:
        """Run `script` with `bash -c` as root; `timeout` is the longest silence tolerated.

        When SSH itself fails and the guest's kernel reported stalls, the error says so and
        quotes them: the test did not fail for its own reason."""
        try:
            return self._ssh.run(script, stdin=stdin, check=check, timeout=timeout)
        except RemoteCommandError:
            raise
        except Exception as error:
            stalls = guest_stalls(self.serial_log)
            if not stalls:
                raise
            raise TestHostError(
                f"SSH to the test host failed ({error!r}) after its kernel reported stalls "
                f"(serial console {self.serial_log}):\n" + "\n".join(stalls)
            ) from error

    def install_executable(self, binary: Path, guest_path: str) -> None:
        """Copy a program of this machine into the guest at `guest_path`, atomically (a copy cut
        short leaves the old file, never half a binary). About 6 MB/s under TCG."""
        target = shlex.quote(guest_path)
        directory = shlex.quote(guest_path.rsplit("/", 1)[0] or "/")
        self.run(
            f"mkdir -p {directory} && cat > {target}.tmp && chmod 0755 {target}.tmp && mv -f {target}.tmp {target}",
            stdin=binary.read_bytes(),
        )

    def disconnect(self) -> None:
        """Drop the SSH connection; the next `run` opens a new one."""
        self._ssh.close()

    def reboot(self, timeout: float = 300.0) -> None:
        """`systemctl reboot`: the guest shuts down and, at its reset, qemu exits (-no-reboot);
        then the machine is started again on the same disk, a power cycle, and this waits until
        SSH answers again and systemd has finished booting. A boot that panics or stalls is
        power-cycled again, like a first boot (BOOTS_AFTER_A_PANIC)."""
        if not self.qemu_argv:
            raise TestHostError("this test host was not booted here (no qemu command line): it cannot be rebooted")
        # The connection may go down before the command returns.
        with contextlib.suppress(Exception):
            self.run("systemctl reboot", check=False, timeout=30)
        self.disconnect()
        deadline = time.monotonic() + timeout
        while self.qemu.is_running():
            if time.monotonic() > deadline:
                raise TestHostError(
                    f"the guest did not shut down within {timeout:.0f} s of `systemctl reboot`\n{tail(self.serial_log)}"
                )
            time.sleep(1)
        self.qemu_argv = tuple(self.next_boot_argv())
        for attempt in range(BOOTS_AFTER_A_PANIC + 1):
            self.reboots += 1
            # Each boot's console is kept: qemu starts the serial log afresh.
            self.serial_log.rename(self.workdir / f"serial-before-reboot-{self.reboots}.log")
            self.qemu = start_qemu(list(self.qemu_argv), self.qemu.pidfile, self.serial_log, self.workdir / "qemu.log")
            try:
                _wait_for_ssh(self, deadline=time.monotonic() + timeout)
                break
            except GuestPanicked as error:
                self.qemu.stop()
                if attempt == BOOTS_AFTER_A_PANIC:
                    raise
                print(f"testhost: power-cycled again after a failed reboot: {error}", file=sys.stderr, flush=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.run("systemctl is-system-running --wait || true", timeout=240).rc == 0:
                    return
            except Exception:  # the host is still down: keep waiting
                if time.monotonic() > deadline:
                    raise
                self.disconnect()
                time.sleep(3)

    def next_boot_argv(self) -> list[str]:
        """The qemu command line a reboot starts: the last boot's, its vCPUs' threads decided again
        when one_host_thread_at_reboot is given."""
        if self.one_host_thread_at_reboot is None:
            return list(self.qemu_argv)
        return with_accel(self.qemu_argv, self.one_host_thread_at_reboot())

    def vcpu_threads_fit(self) -> bool:
        """Whether a reboot now would start qemu with the vCPU threads it runs with."""
        return self.next_boot_argv() == list(self.qemu_argv)

    def is_running(self) -> bool:
        return self.qemu.is_running()

    def qemu_rss_mib(self) -> float:
        return self.qemu.rss_mib()

    def shutdown(self) -> None:
        """Stop the qemu this host was booted with, and only that one."""
        self.disconnect()
        self.qemu.stop()

    def __enter__(self) -> TestHost:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # --- state file, so a later process (the CLI's ssh/stop) can find the VM ---

    def save_state(self) -> Path:
        path = self.workdir / STATE_FILE
        state = {
            "address": self.address,
            "port": self.port,
            "user": self.user,
            "key_path": str(self.key_path),
            "host_key": self.host_key,
            "topology": str(self.topology),
            "pid": self.qemu.pid,
            "pidfile": str(self.qemu.pidfile),
            "boot_seconds": self.boot_seconds,
            "suite": self.suite,
            "pci": [str(device) for device in self.pci],
        }
        path.write_text(json.dumps(state, indent=2) + "\n")
        return path

    @classmethod
    def from_state(cls, workdir: Path) -> TestHost:
        state = json.loads((Path(workdir) / STATE_FILE).read_text())
        return cls(
            address=state["address"],
            port=state["port"],
            user=state["user"],
            key_path=Path(state["key_path"]),
            host_key=state["host_key"],
            topology=Topology.parse(state["topology"]),
            workdir=Path(workdir),
            # qemu removes its pidfile when it exits: the pid is kept here too.
            qemu=QemuProcess(state["pid"], Path(state["pidfile"])),
            boot_seconds=state["boot_seconds"],
            suite=state.get("suite", recipe.DEFAULT_SUITE),
            pci=pci_devices_of(state.get("pci", ())),
        )


def boot(
    topology: TopologyLike = ORIGIN,
    workdir: Path | str = DEFAULT_CACHE_DIR / "run",
    ssh_port: int | None = None,
    *,
    image: Image | None = None,
    cache_dir: Path | None = None,
    suite: str = recipe.DEFAULT_SUITE,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    timeout: float = DEFAULT_BOOT_TIMEOUT,
    api_port_file: Path | None = None,
    pci: Iterable[PciDeviceLike] = (),
    one_host_thread: bool = False,
    one_host_thread_at_reboot: Callable[[], bool] | None = None,
) -> TestHost:
    """Boot a fresh test host (pristine copy-on-write disk) and wait until SSH runs commands.

    `topology` is per-NUMA-node CPU lists, e.g. `[[0, 1, 2, 3], [4, 5, 6, 7]]` or
    `"0-3;4-7"`; memory is split evenly between the nodes. A free port is
    picked when `ssh_port` is None. `suite` picks the Debian release (recipe.SUITES) unless
    `image` is given. The guest reaches 127.0.0.1 at the port written in `api_port_file`
    (default: `<workdir>/guest-api-port`) through GUEST_API_ADDRESS:GUEST_API_PORT (qemu.py).
    `pci` attaches emulated PCI devices on chosen NUMA nodes, e.g. `["nvme@0", "nvme@1",
    "nvme@-1"]` (-1: no NUMA affinity; pci.py). `one_host_thread` emulates all its vCPUs in one
    host thread, for a machine that runs beside other heavy work on this 2-core machine (another
    machine, the build): multi-threaded, its eight vCPU threads contend for what the other work
    leaves and wait for each other. Measured, a fixed guest workload on the origin machine (daemon-
    reloads, forks, four parallel shell loops, kubelet starts): beside a second machine 53 s of
    wall and 54 s of CPU multi-threaded, 34 and 34 in one thread (and the second machine got on 8 %
    faster); beside two busy host threads 50/54 against 37/36; alone 25/38 against 36/36.
    `one_host_thread_at_reboot`, when given, decides again at each reboot.
    """
    require_tools("qemu-system-x86_64", "qemu-img")
    topology = Topology.of(topology)
    devices = pci_devices_of(pci)
    try:  # a device on a NUMA node the topology lacks fails here, before anything is built or booted
        qemu_pci_args(devices, topology)
    except ValueError as error:
        raise TestHostError(str(error)) from None
    image = image or ensure_image(cache_dir, suite)
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    boot_args = (image, topology, workdir, ssh_port, memory_mib, timeout, api_port_file, devices, one_host_thread)
    for panicked_boots in range(1, 1 + BOOTS_AFTER_A_PANIC):
        try:
            host = _boot_once(*boot_args)
            break
        except GuestPanicked as panic:
            first_line = str(panic).splitlines()[0]
            print(f"testhost: {first_line}; booting a fresh disk again", file=sys.stderr, flush=True)
            # Kept beside the next boot's, for whoever wonders why this boot took longer.
            (workdir / "serial.log").replace(workdir / f"serial-panicked-{panicked_boots}.log")
    else:
        host = _boot_once(*boot_args)
    host.one_host_thread_at_reboot = one_host_thread_at_reboot
    return host


def _boot_once(
    image: Image,
    topology: Topology,
    workdir: Path,
    ssh_port: int | None,
    memory_mib: int,
    timeout: float,
    api_port_file: Path | None,
    pci: tuple[PciDevice, ...] = (),
    one_host_thread: bool = False,
) -> TestHost:
    log_path = workdir / "qemu.log"
    overlay = workdir / "overlay.qcow2"
    serial_log = workdir / "serial.log"
    pidfile = workdir / "qemu.pid"
    overlay.unlink(missing_ok=True)  # pristine: a panicked boot's writes are not the next one's
    create_overlay(image.root_disk, overlay, log_path)
    started = time.monotonic()
    for attempt in range(3):
        port = ssh_port or pick_free_port()
        serial_log.unlink(missing_ok=True)
        argv = qemu_command(
            image,
            overlay,
            topology,
            memory_mib,
            port,
            serial_log,
            pidfile,
            api_port_file or workdir / API_PORT_FILE,
            pci,
            one_host_thread,
        )
        try:
            qemu = start_qemu(argv, pidfile, serial_log, log_path)
            break
        except TestHostError as error:
            # Another process took the picked port between probe and bind: pick again.
            if ssh_port is not None or attempt == 2 or not is_port_in_use_error(error):
                raise
    host = TestHost(
        address="127.0.0.1",
        port=port,
        user="root",
        key_path=image.key_path,
        host_key=image.host_key,
        topology=topology,
        workdir=workdir,
        qemu=qemu,
        suite=image.suite,
        pci=pci,
        qemu_argv=tuple(argv),
    )
    try:
        _wait_for_ssh(host, deadline=started + timeout)
    except BaseException:
        host.shutdown()
        raise
    host.boot_seconds = round(time.monotonic() - started, 1)
    host.save_state()
    print(
        f"testhost: {image.suite} {topology}{''.join(f' {device}' for device in pci)} booted to SSH in {host.boot_seconds} s "
        f"on 127.0.0.1:{port} (qemu pid {qemu.pid}, {host.qemu_rss_mib():.0f} MiB RSS)",
        file=sys.stderr,
        flush=True,
    )
    return host


def _wait_for_ssh(host: TestHost, deadline: float) -> None:
    """Until a real command runs: slirp accepts on the port long before sshd is up."""
    last_error: object = "sshd never answered on the forwarded port"
    console_size, console_grew = -1, time.monotonic()
    while time.monotonic() < deadline:
        if not host.is_running():
            raise TestHostError(
                f"qemu exited during boot; serial console ({host.serial_log}):\n{tail(host.serial_log)}"
            )
        panic = guest_panic(host.serial_log)
        if panic is not None:
            raise GuestPanicked(f"the guest kernel panicked during boot: {panic}\n{tail(host.serial_log)}")
        # A boot that reports stalls before SSH answers is not waited out either: seen in a cold CI
        # run (2026-12-06, the Go build beside it), soft lockups in stop_machine 280 s into the
        # boot, the console never silent and SSH never up.
        stalls = guest_stalls(host.serial_log, limit=1)
        if stalls:
            raise GuestPanicked(f"the guest kernel reported a stall during boot: {stalls[0]}\n{tail(host.serial_log)}")
        size = host.serial_log.stat().st_size if host.serial_log.exists() else 0
        if size != console_size:
            console_size, console_grew = size, time.monotonic()
        elif time.monotonic() - console_grew > SILENT_CONSOLE_SECONDS:
            raise GuestPanicked(
                f"the guest's boot stalled: its console was silent for {SILENT_CONSOLE_SECONDS:.0f} s and SSH "
                f"never answered\n{tail(host.serial_log)}"
            )
        # Probing the banner first keeps paramiko from logging a traceback
        # for every attempt made before sshd listens.
        if _sshd_banner_seen(host.port):
            try:
                host.run("true", timeout=10)
                return
            except Exception as error:  # sshd starting up: reset, auth not ready...
                last_error = error
                host.disconnect()
        time.sleep(1)
    raise TestHostError(
        f"no SSH on 127.0.0.1:{host.port} before the boot deadline ({last_error}); "
        f"serial console ({host.serial_log}):\n{tail(host.serial_log)}"
    )


def _sshd_banner_seen(port: int) -> bool:
    """True once sshd itself answers (slirp alone accepts, then closes)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.settimeout(5)
            return connection.recv(4).startswith(b"SSH-")
    except OSError:
        return False
