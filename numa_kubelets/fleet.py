"""What `discover` decides about many hosts: destinations, host names, classes, the YAML it prints.

Pure: the SSH connections, threads and files are discover.py's. A destination is
`[name=][user@]host[:port]` (an IPv6 address bare, or bracketed with a port: `[2001:db8::1]:2222`).
Hosts whose topology reads the same (the same `numaNodes` with their PCI devices, suggested
`systemCpus` and devices without NUMA affinity) share one class, named after the topology (`2x8-cpus`: two NUMA nodes of 8 CPUs); the names depend only on
the set of topologies, never on the order in which the hosts answered.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from .cpulist import CpuSet
from .topology import Topology, numa_nodes_entries, suggested_system_cpus, unaffine_entries
from .validators import DNS_LABEL, HOST_KEY, UNIX_USER

NAMESPACE = "numa-kubelets"
DEFAULT_SSH_PORT = 22
DEFAULT_USER = "root"
MAX_LABEL = 63

# Host key algorithms discover asks for, ed25519 first. The program's SSH client offers only the
# pinned key's type (tools/plugin-doubles/command/remote/connection.go), so any of these works there; RSA is left out because a pinned `ssh-rsa` key
# makes a Go SSH client ask for SHA-1 signatures, which OpenSSH 8.8 and newer refuse by default.
HOST_KEY_ALGORITHMS = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521")

_PORTED_IPV6 = re.compile(r"\[([0-9A-Fa-f:.]+)\](?::(\d+))?")


class DestinationError(ValueError):
    """A destination that is not `[name=][user@]host[:port]`."""


@dataclass(frozen=True)
class Destination:
    """One host to read, as written on the command line or in the hosts file."""

    host: str
    user: str | None = None
    port: int | None = None
    name: str | None = None

    def ssh_target(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port is not None else self.host
        text = f"{self.user}@{host}" if self.user else host
        return f"{text}:{self.port}" if self.port is not None else text


def _port(text: str, written: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise DestinationError(f"{written!r}: port {text!r} is not a number from 1 to 65535")
    return int(text)


def parse_destination(written: str) -> Destination:
    """`[name=][user@]host[:port]`; a bare IPv6 address has no port, `[v6]:port` has one."""
    text = written.strip()
    name: str | None = None
    if "=" in text:
        name, _, text = text.partition("=")
        if not DNS_LABEL.fullmatch(name):
            raise DestinationError(f"{written!r}: name {name!r} is not a DNS-1123 label (lower case, digits, '-')")
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
        if not UNIX_USER.fullmatch(user):
            raise DestinationError(f"{written!r}: {user!r} is not a valid user name")
    port: int | None = None
    bracketed = _PORTED_IPV6.fullmatch(text)
    if bracketed:
        host = bracketed.group(1)
        if bracketed.group(2) is not None:
            port = _port(bracketed.group(2), written)
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = _port(port_text, written)
    else:
        host = text  # a name, an IPv4 address or a bare IPv6 address
    if not host or any(c.isspace() or c in "[]/@'\"$;`\\" for c in host):
        raise DestinationError(f"{written!r}: {host!r} is not a host name or address")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise DestinationError(f"{written!r}: {host!r} is not an IPv6 address") from None
    return Destination(host=host, user=user, port=port, name=name)


def parse_hosts_file(text: str) -> list[str]:
    """The destinations of a hosts file: one a line; blank lines and `#` comments are skipped."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def _sanitized_label(text: str) -> str:
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return label[:MAX_LABEL].rstrip("-")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def derived_name(host: str) -> str:
    """A host name (DNS-1123 label) for an address: a DNS name's first label, `host-<ip>` for an IP."""
    if _is_ip(host):
        return _sanitized_label(f"host-{host}")
    return _sanitized_label(host.split(".", 1)[0]) or "host"


def assign_names(destinations: Sequence[Destination]) -> list[str]:
    """Each destination's host name, unique: its own `name=`, else derived from its host.

    Derived names that collide take the whole DNS name (`a-rack2-example`), then a counter
    (`host-10-0-0-1-2`), in the order given; a name given twice is an error.
    """
    given = [d.name for d in destinations if d.name]
    repeated = sorted({n for n in given if given.count(n) > 1})
    if repeated:
        raise DestinationError(f"host name(s) given more than once: {', '.join(repeated)}")
    short = [d.name or derived_name(d.host) for d in destinations]
    names: list[str] = []
    taken = set(given)
    for destination, name in zip(destinations, short, strict=True):
        if destination.name:
            names.append(destination.name)
            continue
        if (name in taken or short.count(name) > 1) and not _is_ip(destination.host):
            longer = _sanitized_label(destination.host) or name
            if longer not in taken and longer not in short:
                name = longer
        candidate, counter = name, 2
        while candidate in taken:
            suffix = f"-{counter}"
            candidate = name[: MAX_LABEL - len(suffix)].rstrip("-") + suffix
            counter += 1
        taken.add(candidate)
        names.append(candidate)
    return names


def duplicate_destinations(destinations: Iterable[Destination]) -> list[str]:
    """Destinations that name the same user, host and port more than once."""
    seen: set[tuple[str | None, str, int | None]] = set()
    repeated: list[str] = []
    for d in destinations:
        key = (d.user, d.host.lower(), d.port)
        if key in seen and str(d) not in repeated:
            repeated.append(str(d))
        seen.add(key)
    return repeated


@dataclass(frozen=True)
class Endpoint:
    """Where ssh really connected, as `ssh -G` resolves the destination with the ssh config."""

    address: str
    port: int
    user: str


def parse_ssh_config_dump(text: str) -> Endpoint:
    """`ssh -G`'s output (`hostname`, `port` and `user` lines, among others)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("hostname", "port", "user") and key not in values:
            values[key] = value.strip()
    missing = [key for key in ("hostname", "port", "user") if not values.get(key)]
    if missing or not values["port"].isdigit():
        raise ValueError(f"ssh -G printed no usable {', '.join(missing) or 'port'}")
    return Endpoint(values["hostname"], int(values["port"]), values["user"])


def recorded_host_key(known_hosts: str) -> str:
    """The one key ssh recorded in a fresh known_hosts file: `<type> <base64>`, as hostKey takes it.

    A line is `<host patterns> <type> <base64> [comment]`, hashed (`|1|...`) or not; a
    `@cert-authority` or `@revoked` marker, or more than one key, is not what one connection
    to a host writes into an empty file.
    """
    keys = []
    for line in known_hosts.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0].startswith("@") or len(fields) < 3:
            raise ValueError(f"unexpected known_hosts line {line!r}")
        keys.append(f"{fields[1]} {fields[2]}")
    if len(set(keys)) != 1:
        raise ValueError(f"ssh recorded {len(set(keys))} host keys for the connection, expected exactly one")
    if not HOST_KEY.fullmatch(keys[0]):
        raise ValueError(f"ssh recorded a host key the stack cannot pin: {keys[0][:40]}...")
    return keys[0]


def ssh_arguments(
    destination: Destination, default_port: int | None, identity: str | None, known_hosts: str, connect_timeout: int
) -> list[str]:
    """The options of both ssh runs (`ssh -G` and the reading): the same resolution, and a fresh
    known_hosts file into which the connection records the key its server presented."""
    arguments = [
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={connect_timeout}",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",  # a key known there would be accepted and not recorded
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "UpdateHostKeys=no",  # else the server's other keys are added after login
        "-o",
        "HashKnownHosts=no",
        "-o",
        "CheckHostIP=no",
        "-o",
        f"HostKeyAlgorithms={','.join(HOST_KEY_ALGORITHMS)}",
        "-o",
        "LogLevel=ERROR",  # no "Permanently added ..." warning; errors still show
    ]
    port = destination.port if destination.port is not None else default_port
    if port is not None:
        arguments += ["-p", str(port)]
    if identity:
        arguments += ["-i", identity]
    return arguments


@dataclass(frozen=True)
class HostReading:
    """One host that answered: its name, where ssh reached it, its key and its topology."""

    name: str
    endpoint: Endpoint
    host_key: str
    topology: Topology


def class_layout(topology: Topology) -> dict[str, Any]:
    """The keys a class of this topology sets: `numaNodes` (with their PCI devices), the suggested
    `systemCpus` and, when there are any, the devices without NUMA affinity (`pciDevices`)."""
    layout: dict[str, Any] = {
        "numaNodes": numa_nodes_entries(topology),
        "systemCpus": suggested_system_cpus(topology).format(),
    }
    unaffine = unaffine_entries(topology)
    if unaffine:
        layout["pciDevices"] = unaffine
    return layout


def _layout_key(layout: Mapping[str, Any]) -> str:
    """Hosts share a class when CPUs and devices read the same (the devices' inventory is a class key);
    without devices the key is the cpulists alone, as before devices were read."""
    nodes = ";".join(f"{node['id']}:{node['cpus']}" for node in layout["numaNodes"])
    key = f"{nodes}|{layout['systemCpus']}"
    devices = [layout.get("pciDevices", []), *(node.get("pciDevices", []) for node in layout["numaNodes"])]
    return f"{key}|{json.dumps(devices, sort_keys=True)}" if any(devices) else key


def class_base_name(topology: Topology) -> str:
    """`<nodes>x<cpus>-cpus` when every NUMA node has as many CPUs, else the counts in node order
    (`8-8-0-cpus` with a memory-only node); a too long one is `<nodes>-nodes-<digest>`."""
    counts = [len(cpus) for _, cpus in sorted(topology.nodes.items())]
    if len(set(counts)) == 1:
        name = f"{len(counts)}x{counts[0]}-cpus"
    else:
        name = "-".join(str(count) for count in counts) + "-cpus"
    if len(name) > MAX_LABEL - 4:
        digest = hashlib.sha256(_layout_key(class_layout(topology)).encode()).hexdigest()[:8]
        name = f"{len(counts)}-nodes-{digest}"
    return name


def group_into_classes(readings: Sequence[HostReading]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """One class per distinct layout, and each reading's class name.

    Layouts of one base name are numbered (`2x8-cpus`, `2x8-cpus-2`) in the order of their
    cpulists, so the names follow from the set of topologies alone.
    """
    layouts: dict[str, tuple[str, dict[str, Any]]] = {}
    for reading in readings:
        layout = class_layout(reading.topology)
        layouts.setdefault(_layout_key(layout), (class_base_name(reading.topology), layout))
    names_by_key: dict[str, str] = {}
    used: set[str] = set()
    for key, (base, _layout) in sorted(layouts.items(), key=lambda item: (item[1][0], item[0])):
        name, counter = base, 2
        while name in used:
            name = f"{base}-{counter}"
            counter += 1
        used.add(name)
        names_by_key[key] = name
    classes = {names_by_key[key]: layout for key, (_base, layout) in layouts.items()}
    ordered = dict(sorted(classes.items()))
    return ordered, [names_by_key[_layout_key(class_layout(r.topology))] for r in readings]


def host_entry(reading: HostReading, class_name: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": reading.name, "address": reading.endpoint.address}
    if reading.endpoint.port != DEFAULT_SSH_PORT:
        entry["sshPort"] = reading.endpoint.port
    if reading.endpoint.user != DEFAULT_USER:
        entry["user"] = reading.endpoint.user
    entry["class"] = class_name
    entry["hostKey"] = reading.host_key
    return entry


def offline_cpus(topology: Topology) -> str:
    """The CPUs of the NUMA nodes that are not online (the preflight requires them online), or ''."""
    declared = [cpu for cpus in topology.nodes.values() for cpu in cpus]
    return (CpuSet(declared) - topology.online).format()


def _indented(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def _dump(value: Any, flow: bool) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None if flow else False, width=4096)


def render_fleet(readings: Sequence[HostReading]) -> str:
    """A stack file (`config:` with `hostClasses` and `hosts`) for the hosts that were read.

    A host is one line (`- {name: ..., class: ..., hostKey: ...}`), as a fleet's stack file
    is easiest to read and diff; a host with offline CPUs gets a comment above its line.
    """
    classes, class_names = group_into_classes(readings)
    lines = [
        f"# python -m numa_kubelets.discover: {len(readings)} host(s), {len(classes)} class(es); "
        "each hostKey as the host presented it",
        "config:",
        f"  {NAMESPACE}:hostClasses:",
        _indented(_dump(classes, flow=True), 4).rstrip("\n"),
        f"  {NAMESPACE}:hosts:",
    ]
    for reading, class_name in zip(readings, class_names, strict=True):
        offline = offline_cpus(reading.topology)
        if offline:
            lines.append(
                f"    # CPUs {offline} are offline on {reading.name}: the preflight requires every declared CPU online."
            )
        lines.append(_indented(_dump([host_entry(reading, class_name)], flow=True), 4).rstrip("\n"))
    return "\n".join(lines) + "\n"


def single_host_snippet(snippet: str, host_key: str) -> str:
    """Today's single-host snippet (topology.stack_snippet) with the host's key added."""
    return snippet + _dump({"hostKey": host_key}, flow=False)


def progress_line(done: int, total: int, failed: int) -> str:
    return f"discover: {done}/{total} hosts read, {failed} failed"


def progress_due(done: int, total: int) -> bool:
    """Whether a progress line is due when not on a terminal: about every tenth, and at the end."""
    step = max(1, total // 10)
    return done == total or done % step == 0


def failure_line(name: str, destination: Destination, message: str) -> str:
    detail = " ".join(message.split()) or "failed without a message"
    return f"discover: {name} ({destination}): {detail}"
