"""Command line for developers: a test host that stays up between commands.

    python -m tests.testhost build                      # build (or reuse) the image
    python -m tests.testhost boot --port 2222           # boot, print connection details
    python -m tests.testhost boot --nodes "0,3,6;1,4,7;2,5"
    python -m tests.testhost boot --pci nvme@0 --pci nvme@1 --pci nvme@-1   # NVMe on NUMA nodes
    python -m tests.testhost boot --port 2222 --kubelet .tools/bin/kubelet   # what `make testhost` runs
    python -m tests.testhost ssh [-- command ...]       # interactive or one command
    python -m tests.testhost status
    python -m tests.testhost stop

The running VM's state lives in `<cache dir>/run/` (default `.testhost/run/`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from . import recipe
from .host import DEFAULT_MEMORY_MIB, GUEST_KUBELET, TestHost, boot
from .image import DEFAULT_CACHE_DIR, ensure_image
from .pci import PciDevice
from .tools import TestHostError, require_tools
from .topology import ORIGIN, Topology


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.testhost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="image cache and client key (default: %(default)s)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="state of the running VM (default: <cache dir>/run)")
    commands = parser.add_subparsers(dest="command", required=True)
    parser.add_argument(
        "--suite", choices=recipe.SUITES, default=recipe.DEFAULT_SUITE, help="Debian release (default: %(default)s)"
    )
    commands.add_parser("build", help="build the image unless the cached one is current")
    boot_parser = commands.add_parser("boot", help="boot a test host and leave it running")
    boot_parser.add_argument(
        "--nodes",
        type=Topology.parse,
        default=ORIGIN,
        help='CPUs per NUMA node, ";"-separated cpulists (default: "%(default)s")',
    )
    boot_parser.add_argument(
        "--port", type=int, default=None, help="host port forwarded to the guest's sshd (default: a free one)"
    )
    boot_parser.add_argument(
        "--memory",
        type=int,
        default=DEFAULT_MEMORY_MIB,
        help="MiB of guest memory, split evenly over the nodes (default: %(default)s)",
    )
    boot_parser.add_argument(
        "--kubelet",
        type=Path,
        default=None,
        help=f"a kubelet binary of this machine to install in the guest at {GUEST_KUBELET}, where the"
        " dev stack's kubeletPath points (the image ships none)",
    )
    boot_parser.add_argument(
        "--pci",
        type=_pci_device,
        action="append",
        default=[],
        metavar="KIND@NODE",
        help="an emulated PCI device on a NUMA node, -1 for none (e.g. nvme@1, nvme@-1); repeatable",
    )
    ssh_parser = commands.add_parser("ssh", help="ssh into the running test host")
    ssh_parser.add_argument(
        "remote_command", nargs=argparse.REMAINDER, help="command to run instead of a shell (after --)"
    )
    commands.add_parser("status", help="print the running test host's details")
    commands.add_parser("stop", help="stop the running test host")
    args = parser.parse_args(argv)
    workdir = (args.workdir or args.cache_dir / "run").resolve()

    try:
        if args.command == "build":
            image = ensure_image(args.cache_dir, args.suite)
            print(f"image: {image.directory}\nhostKey: {image.host_key}\nkey: {image.key_path}")
        elif args.command == "boot":
            _refuse_if_running(workdir)
            if args.kubelet is not None and not args.kubelet.is_file():
                raise TestHostError(f"--kubelet {args.kubelet}: no such file (`make tools` builds .tools/bin/kubelet)")
            host = boot(
                args.nodes,
                workdir,
                args.port,
                cache_dir=args.cache_dir,
                suite=args.suite,
                memory_mib=args.memory,
                pci=args.pci,
            )
            if args.kubelet is not None:
                host.install_executable(args.kubelet, GUEST_KUBELET)
                print(f"kubelet:  {args.kubelet} installed at {GUEST_KUBELET}")
            _print_details(host)
        elif args.command == "ssh":
            _exec_ssh(_running_host(workdir), args.remote_command)
        elif args.command == "status":
            _print_details(_running_host(workdir))
        elif args.command == "stop":
            host = _running_host(workdir)
            host.shutdown()
            print(f"stopped qemu pid {host.qemu.pid}")
    except TestHostError as error:
        print(f"testhost: {error}", file=sys.stderr)
        return 1
    return 0


def _pci_device(text: str) -> PciDevice:
    try:
        return PciDevice.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _running_host(workdir: Path) -> TestHost:
    try:
        host = TestHost.from_state(workdir)
    except FileNotFoundError:
        raise TestHostError(f"no test host was booted with workdir {workdir}") from None
    if not host.is_running():
        raise TestHostError(f"the test host recorded in {workdir} is not running (qemu pid {host.qemu.pid})")
    return host


def _refuse_if_running(workdir: Path) -> None:
    try:
        host = _running_host(workdir)
    except TestHostError:
        return
    raise TestHostError(f"a test host is already running on port {host.port} (qemu pid {host.qemu.pid}): stop it first")


def _print_details(host: TestHost) -> None:
    print(
        f"address:  {host.address}\n"
        f"port:     {host.port}\n"
        f"user:     {host.user}\n"
        f"key:      {host.key_path}\n"
        f"hostKey:  {host.host_key}\n"
        f"topology: {host.topology}  (NUMA node cpulists, ';'-separated)\n"
        + (f"pci:      {' '.join(str(device) for device in host.pci)}  (KIND@NUMA node)\n" if host.pci else "")
        + f"qemu pid: {host.qemu.pid}, booted in {host.boot_seconds} s, serial log {host.serial_log}\n"
        "\n"
        "Stack configuration for this host (Pulumi.<stack>.yaml):\n"
        "  numa-kubelets:hosts:\n"
        "    - name: testhost\n"
        f"      address: {host.address}\n"
        f"      sshPort: {host.port}\n"
        f'      hostKey: "{host.host_key}"\n'
        "      numaNodes:\n"
        + "".join(
            f'        - id: {node_id}\n          cpus: "{cpulist}"\n'
            for node_id, cpulist in enumerate(host.topology.cpulists())
        )
        + f"  numa-kubelets:sshPrivateKeyPath: {_relative(host.key_path)}"
    )


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _exec_ssh(host: TestHost, remote_command: list[str]) -> None:
    require_tools("ssh")
    known_hosts = host.workdir / "known_hosts"
    known_hosts.write_text(f"[{host.address}]:{host.port} {host.host_key}\n")
    if remote_command[:1] == ["--"]:
        remote_command = remote_command[1:]
    argv = [
        "ssh",
        "-i",
        str(host.key_path),
        "-p",
        str(host.port),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        f"{host.user}@{host.address}",
    ]
    if remote_command:
        # ssh joins its arguments into one remote shell line: quote each one.
        argv.append(shlex.join(remote_command))
    os.execvp("ssh", argv)


if __name__ == "__main__":
    sys.exit(main())
