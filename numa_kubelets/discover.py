"""Reads hosts' NUMA topologies and SSH host keys, and prints them for the stack file.

python -m numa_kubelets.discover                          # this machine: numaNodes, systemCpus, pciDevices
python -m numa_kubelets.discover root@numa-a [-p 22]      # one host: the same, and its hostKey
python -m numa_kubelets.discover root@10.0.0.1 root@10.0.0.2:2222 ...   # a fleet: a stack file
python -m numa_kubelets.discover -f hosts.txt [-j 16]     # a fleet, one destination a line

A destination is `[name=][user@]host[:port]` (IPv6: `[2001:db8::1]:2222`, or bare without a
port); `-p` is the port of those without one, `-i` the identity file of all. Over SSH it uses
the system OpenSSH client with your ssh config and agent, in batch mode.

Two or more destinations, `-f` or `--fleet` print a stack file: `numa-kubelets:hostClasses`
with one class per distinct topology (named after it, `2x8-cpus`) and `numa-kubelets:hosts`
with each host's name, address, `sshPort` and `user` when not 22 and root (as ssh resolved
them), class and `hostKey`. The hosts are read in parallel (`-j`), with a progress line on
stderr; a host that fails is named there with ssh's message and left out, and the exit status
is then 1 (the others are still printed).

One destination prints, as before, the keys to paste into that host's entry (`numaNodes` with
each node's `pciDevices`, `systemCpus`, and `pciDevices` for devices without NUMA affinity; bridges
and system peripherals left out: topology.py) and now its `hostKey`: adding one host to a stack is adding one entry, written
out or given a class by hand, and a one-host stack file would have to be merged into the
existing one rather than pasted. No destination reads this machine without SSH, so there is
no connection whose key could be pinned, and no `hostKey` is printed.

The host key is the one the server presented on the very connection that read the topology:
ssh runs with an empty known_hosts file of its own and `StrictHostKeyChecking=accept-new`,
which records that key there, and discover reads it back (numa_kubelets/fleet.py says why
ed25519 is asked for first and RSA not at all).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from . import fleet
from .fleet import Destination, DestinationError, HostReading
from .topology import READ_TOPOLOGY_SCRIPT, TopologyError, parse_topology, stack_snippet

DEFAULT_JOBS = 16


@dataclass(frozen=True)
class Options:
    port: int | None
    identity: str | None
    connect_timeout: int


@dataclass(frozen=True)
class Failure:
    name: str
    destination: Destination
    message: str


def _run(command: list[str], options: Options, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # Past the connect timeout a host gets a minute for the login and the reading.
    timeout = options.connect_timeout + 60
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False, timeout=timeout)


def read_host(name: str, destination: Destination, options: Options) -> HostReading | Failure:
    """Resolve the destination as ssh does (`ssh -G`), read its topology over one connection and
    the host key that connection recorded."""
    with tempfile.TemporaryDirectory(prefix="numa-kubelets-discover-") as directory:
        known_hosts = Path(directory) / "known_hosts"
        known_hosts.touch()
        arguments = fleet.ssh_arguments(
            destination, options.port, options.identity, str(known_hosts), options.connect_timeout
        )
        try:
            resolved = _run(["ssh", "-G", *arguments, destination.ssh_target()], options)
            if resolved.returncode != 0:
                return Failure(name, destination, f"ssh -G: {resolved.stderr}")
            endpoint = fleet.parse_ssh_config_dump(resolved.stdout)
            result = _run(["ssh", *arguments, destination.ssh_target(), "sh -s"], options, READ_TOPOLOGY_SCRIPT)
        except subprocess.TimeoutExpired as error:
            return Failure(name, destination, f"no answer within {error.timeout:.0f} s")
        except ValueError as error:
            return Failure(name, destination, str(error))
        if result.returncode != 0:
            hint = ""
            if "no matching host key type" in result.stderr:
                hint = f" (discover asks for {', '.join(fleet.HOST_KEY_ALGORITHMS)}: give the host an ed25519 key)"
            return Failure(name, destination, f"ssh exited {result.returncode}: {result.stderr}{hint}")
        try:
            host_key = fleet.recorded_host_key(known_hosts.read_text())
            topology = parse_topology(result.stdout)
        except TopologyError as error:
            return Failure(name, destination, f"unexpected topology readings: {error}")
        except ValueError as error:
            return Failure(name, destination, str(error))
    return HostReading(name, endpoint, host_key, topology)


def read_hosts(
    destinations: list[Destination], names: list[str], options: Options, jobs: int
) -> list[HostReading | Failure]:
    """Every host, `jobs` at a time, in the order given; a progress line on stderr."""
    results: list[HostReading | Failure | None] = [None] * len(destinations)
    on_terminal = sys.stderr.isatty()
    done = failed = 0
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(destinations)))) as pool:
        futures = {
            pool.submit(read_host, name, destination, options): index
            for index, (name, destination) in enumerate(zip(names, destinations, strict=True))
        }
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            done += 1
            failed += isinstance(result, Failure)
            line = fleet.progress_line(done, len(destinations), failed)
            if on_terminal:
                sys.stderr.write(f"\r{line}" + ("\n" if done == len(destinations) else ""))
                sys.stderr.flush()
            elif fleet.progress_due(done, len(destinations)):
                print(line, file=sys.stderr, flush=True)
    return [result for result in results if result is not None]


def read_local() -> str:
    result = subprocess.run(["sh", "-s"], input=READ_TOPOLOGY_SCRIPT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"discover: reading the topology failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def _destinations(args: argparse.Namespace) -> list[Destination]:
    written: list[str] = list(args.destination)
    if args.hosts_file:
        text = sys.stdin.read() if args.hosts_file == "-" else Path(args.hosts_file).read_text()
        written += fleet.parse_hosts_file(text)
    destinations = [fleet.parse_destination(text) for text in written]
    repeated = fleet.duplicate_destinations(destinations)
    if repeated:
        raise DestinationError(f"given more than once: {', '.join(repeated)}")
    return destinations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numa_kubelets.discover",
        description=(__doc__ or "").splitlines()[0],
        epilog="A destination is [name=][user@]host[:port]; IPv6 with a port: [2001:db8::1]:2222.",
    )
    parser.add_argument("destination", nargs="*", help="hosts to read over SSH; none: this machine")
    parser.add_argument("-f", "--hosts-file", help="a file of destinations, one a line (# comments); - for stdin")
    parser.add_argument("-p", "--port", type=int, help="SSH port of destinations without one (default: ssh's)")
    parser.add_argument("-i", "--identity", help="SSH private key file")
    parser.add_argument("-j", "--jobs", type=int, default=DEFAULT_JOBS, help="hosts read at once (default: 16)")
    parser.add_argument("--connect-timeout", type=int, default=10, help="seconds for each SSH connect (default: 10)")
    parser.add_argument("--fleet", action="store_true", help="print a stack file even for one destination")
    args = parser.parse_args(argv)
    try:
        destinations = _destinations(args)
        names = fleet.assign_names(destinations)
    except (DestinationError, OSError) as error:
        parser.error(str(error))
    options = Options(args.port, args.identity, args.connect_timeout)

    if not destinations:
        if args.fleet or args.hosts_file:
            parser.error("no destinations to read")
        try:
            sys.stdout.write(stack_snippet(parse_topology(read_local())))
        except TopologyError as error:
            print(f"discover: unexpected topology readings: {error}", file=sys.stderr)
            return 1
        return 0

    if len(destinations) == 1 and not (args.fleet or args.hosts_file):
        result = read_host(names[0], destinations[0], options)
        if isinstance(result, Failure):
            print(f"discover: reading {destinations[0]} failed: {' '.join(result.message.split())}", file=sys.stderr)
            return 1
        sys.stdout.write(fleet.single_host_snippet(stack_snippet(result.topology), result.host_key))
        return 0

    results = read_hosts(destinations, names, options, args.jobs)
    readings = [result for result in results if isinstance(result, HostReading)]
    failures = [result for result in results if isinstance(result, Failure)]
    for failure in failures:
        print(fleet.failure_line(failure.name, failure.destination, failure.message), file=sys.stderr)
    for reading in readings:
        offline = fleet.offline_cpus(reading.topology)
        if offline:
            print(f"discover: {reading.name}: CPUs {offline} are offline", file=sys.stderr)
    if readings:
        sys.stdout.write(fleet.render_fleet(readings))
    if failures:
        print(
            f"discover: {len(failures)} of {len(destinations)} host(s) failed and are not in the output",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
