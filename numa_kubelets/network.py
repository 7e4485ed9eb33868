"""Networking of a host's kubelets (hosts[].network): the checks, the plan and the text of what lands on the host.

In `host` mode (the default) every kubelet shares the host's network namespace, as before.
In `namespace` mode each NUMA node becomes a network node of its own: a network namespace
`numa<N>` (made by the oneshot unit `numa-netns@numa<N>.service`) with its own link on the
host's LAN (a macvlan or ipvlan child of `parent`, or a whole `device` such as an SR-IOV VF),
its own address and default route. containerd and the kubelet join it with
`NetworkNamespacePath=`; containerd also gets private copies of the host paths CNI agents
write (`privatePaths`), bound over the real paths in its own mount namespace only (the
launcher in render.py).

Safety rule: nothing here touches the parent interface or any address or route of the host's
own namespace. The scripts only create links directly inside the namespace (`ip link add ...
netns`), move a device that carries no global address and no route, and delete what lives in
the namespace.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from .config import HostSpec, KubeletSpec, Problem, StackConfig

q = shlex.quote

DEFAULT_UPLINK = "macvlan"
DEFAULT_PRIVATE_PATHS = (
    "/etc/cni/net.d",
    "/var/lib/cni",
    "/run/flannel",
    "/var/lib/calico",
    "/var/run/calico",
    "/var/run/cilium",
)
# Inside a namespace the macvlan/ipvlan link has this name; a moved device keeps its own.
UPLINK_LINK_NAME = "uplink"
NETNS_DIR = "/run/netns"
PRIVATE_ROOT = "/var/lib/numa-kubelets"
# Host paths the netns scripts created as mount points for private copies: removed again when
# the last namespace is gone, so destroy leaves the host's tree as it was.
CREATED_MOUNT_POINTS_DIR = f"{PRIVATE_ROOT}/created-mount-points"
# resolv.conf holds at most three nameserver lines (glibc MAXNS).
MAX_DNS_SERVERS = 3
# How long the namespace unit waits for the parent or device to appear at boot.
LINK_WAIT_SECONDS = 60
# Directories a private copy must never replace: the system would stop working in containerd's view.
PROTECTED_PATHS = frozenset(
    {"/", "/etc", "/var", "/var/lib", "/run", "/var/run", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt"}
    | {"/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/boot", "/home", "/root", "/srv", "/mnt", "/media"}
)
# Trees the program manages itself; a private copy inside them would hide its own files.
MANAGED_TREES = ("/etc/numa-kubelets", PRIVATE_ROOT, "/etc/systemd", "/run/systemd", "/run/netns", "/run/containerd")


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class HostNetwork:
    """Namespace mode of one host: what every kubelet namespace on it shares."""

    uplink: str  # macvlan | ipvlan | device
    parent: str | None  # macvlan/ipvlan
    gateway: str
    mtu: int | None
    dns: tuple[str, ...]
    private_paths: tuple[str, ...]


@dataclass(frozen=True)
class KubeletNetwork:
    """The network namespace of one kubelet (and its containerd)."""

    instance: str  # numa<N>
    host: HostNetwork
    address: str  # CIDR, canonical
    device: str | None  # uplink device

    @property
    def netns(self) -> str:
        return self.instance

    @property
    def netns_path(self) -> str:
        return f"{NETNS_DIR}/{self.netns}"

    @property
    def node_ip(self) -> str:
        return self.address.split("/", 1)[0]

    @property
    def link(self) -> str:
        """The interface inside the namespace that carries the address."""
        return self.device if self.device is not None else UPLINK_LINK_NAME

    @property
    def unit(self) -> str:
        return f"numa-netns@{self.instance}.service"

    @property
    def unit_path(self) -> str:
        return f"/etc/systemd/system/{self.unit}"

    @property
    def config_dir(self) -> str:
        return f"/etc/numa-kubelets/{self.instance}"

    @property
    def up_script(self) -> str:
        return f"{self.config_dir}/netns-up.sh"

    @property
    def down_script(self) -> str:
        return f"{self.config_dir}/netns-down.sh"

    @property
    def resolv_conf(self) -> str | None:
        """The namespace's resolv.conf when `dns` is set; None: the host's is used."""
        return f"{self.config_dir}/resolv.conf" if self.host.dns else None

    @property
    def netns_etc_resolv_conf(self) -> str:
        """What `ip netns exec numa<N>` binds over /etc/resolv.conf, for an operator's shell."""
        return f"/etc/netns/{self.netns}/resolv.conf"

    @property
    def private_dir(self) -> str:
        return f"{PRIVATE_ROOT}/{self.instance}"

    def private_copy(self, path: str) -> str:
        return f"{self.private_dir}{path}"

    def describe(self) -> str:
        via = f"device {self.device}" if self.device else f"{self.host.uplink} on {self.host.parent}"
        return f"{self.address} via {self.host.gateway}, {via}"


def is_namespace_mode(host: HostSpec) -> bool:
    return host.network.mode == "namespace"


def plan_host_network(host: HostSpec) -> HostNetwork | None:
    """None in host mode. Call only for a host without network problems."""
    network = host.network
    if network.mode != "namespace":
        return None
    if network.gateway is None:
        raise ValueError("namespace mode needs a gateway")  # network_problems reports it first
    return HostNetwork(
        uplink=network.uplink or DEFAULT_UPLINK,
        parent=network.parent,
        gateway=network.gateway,
        mtu=network.mtu,
        dns=tuple(network.dns or ()),
        private_paths=tuple(network.private_paths if network.private_paths is not None else DEFAULT_PRIVATE_PATHS),
    )


def plan_kubelet_network(host_network: HostNetwork | None, spec: KubeletSpec, instance: str) -> KubeletNetwork | None:
    if host_network is None:
        return None
    if spec.address is None:
        raise ValueError("namespace mode needs an address per kubelet")  # network_problems reports it first
    return KubeletNetwork(instance=instance, host=host_network, address=spec.address, device=spec.device)


# ---------------------------------------------------------------- checks across fields and hosts


def network_problems(config: StackConfig) -> list[Problem]:
    """Every problem of the hosts' network settings; node addresses are unique in the whole stack."""
    problems: list[Problem] = []
    owners: dict[ipaddress.IPv4Address, str] = {}
    for host_index, host in enumerate(config.hosts):
        path = f"hosts[{host_index}]"
        if is_namespace_mode(host):
            problems.extend(_namespace_mode_problems(host, path))
        else:
            problems.extend(_host_mode_problems(host, path))
        for kubelet_index, kubelet in enumerate(host.kubelets or ()):
            if kubelet.address is None:
                continue
            address = ipaddress.IPv4Interface(kubelet.address).ip
            kubelet_path = f"{path}.kubelets[{kubelet_index}].address"
            if address in owners:
                problems.append(Problem(kubelet_path, f"address {address} is also {owners[address]}"))
            owners.setdefault(address, kubelet_path)
    return problems


def _host_mode_problems(host: HostSpec, path: str) -> list[Problem]:
    network = host.network
    problems = [
        Problem(f"{path}.network.{key}", "only used in namespace mode (set network.mode: namespace)")
        for key, value in (
            ("uplink", network.uplink),
            ("parent", network.parent),
            ("gateway", network.gateway),
            ("mtu", network.mtu),
            ("dns", network.dns),
            ("privatePaths", network.private_paths),
        )
        if value is not None
    ]
    for index, kubelet in enumerate(host.kubelets or ()):
        for key, value in (("address", kubelet.address), ("device", kubelet.device)):
            if value is not None:
                problems.append(
                    Problem(
                        f"{path}.kubelets[{index}].{key}",
                        "only used in namespace mode (set hosts[].network.mode: namespace)",
                    )
                )
    return problems


def _namespace_mode_problems(host: HostSpec, path: str) -> list[Problem]:
    network = host.network
    net_path = f"{path}.network"
    uplink = network.uplink or DEFAULT_UPLINK
    problems: list[Problem] = []
    if network.gateway is None:
        problems.append(
            Problem(f"{net_path}.gateway", "required in namespace mode (the default route of each namespace)")
        )
    if uplink == "device":
        if network.parent is not None:
            problems.append(
                Problem(f"{net_path}.parent", "not used with uplink: device (each kubelet names its own device)")
            )
    elif network.parent is None:
        problems.append(
            Problem(f"{net_path}.parent", f"required with uplink: {uplink} (the host interface the links hang off)")
        )
    if network.dns is not None:
        if not network.dns:
            problems.append(Problem(f"{net_path}.dns", "must name at least one server (or leave dns out)"))
        if len(network.dns) > MAX_DNS_SERVERS:
            problems.append(
                Problem(
                    f"{net_path}.dns", f"resolv.conf uses at most {MAX_DNS_SERVERS} nameservers, got {len(network.dns)}"
                )
            )
    problems.extend(_private_path_problems(network.private_paths or [], f"{net_path}.privatePaths"))
    if host.kubelets is None:
        problems.append(Problem(f"{path}.kubelets", "namespace mode needs the kubelets listed, each with its address"))
        return problems

    ssh_address = _ipv4_or_none(host.address)
    gateway = ipaddress.IPv4Address(network.gateway) if network.gateway else None
    devices: dict[str, int] = {}
    for index, kubelet in enumerate(host.kubelets):
        kubelet_path = f"{path}.kubelets[{index}]"
        if uplink == "device":
            if kubelet.device is None:
                problems.append(
                    Problem(
                        f"{kubelet_path}.device",
                        "required with uplink: device (the interface moved into the namespace)",
                    )
                )
            elif kubelet.device in devices:
                problems.append(
                    Problem(
                        f"{kubelet_path}.device",
                        f"{kubelet.device} is already the device of kubelets[{devices[kubelet.device]}]",
                    )
                )
            else:
                devices[kubelet.device] = index
        elif kubelet.device is not None:
            problems.append(
                Problem(f"{kubelet_path}.device", f"only used with uplink: device (this host uses {uplink})")
            )
        if kubelet.address is None:
            problems.append(
                Problem(f"{kubelet_path}.address", "required in namespace mode (the node IP, e.g. 192.0.2.21/24)")
            )
            continue
        problems.extend(_address_problems(kubelet.address, gateway, ssh_address, f"{kubelet_path}.address"))
    return problems


def _address_problems(
    cidr: str, gateway: ipaddress.IPv4Address | None, ssh_address: ipaddress.IPv4Address | None, path: str
) -> list[Problem]:
    interface = ipaddress.IPv4Interface(cidr)
    subnet = interface.network
    problems: list[Problem] = []
    if subnet.prefixlen < 31 and interface.ip in (subnet.network_address, subnet.broadcast_address):
        problems.append(Problem(path, f"{interface.ip} is the network or broadcast address of {subnet}"))
    if ssh_address is not None and interface.ip == ssh_address:
        problems.append(
            Problem(path, f"{interface.ip} is the host's own (SSH) address; each kubelet needs one of its own")
        )
    if gateway is not None:
        if gateway == interface.ip:
            problems.append(Problem(path, f"{interface.ip} is also the gateway"))
        elif gateway not in subnet:
            problems.append(Problem(path, f"the gateway {gateway} is outside this address's subnet {subnet}"))
    return problems


def _private_path_problems(paths: list[str], path: str) -> list[Problem]:
    problems: list[Problem] = []
    for index, private in enumerate(paths):
        item = f"{path}[{index}]"
        if private.rstrip("/") in PROTECTED_PATHS:
            problems.append(Problem(item, f"{private} is a system directory; a private copy would hide the host's"))
        elif any(private == tree or private.startswith(tree + "/") for tree in MANAGED_TREES):
            problems.append(Problem(item, f"{private} is managed by numa-kubelets or systemd itself"))
        for earlier_index, earlier in enumerate(paths[:index]):
            if private == earlier:
                problems.append(Problem(item, f"{private} is listed twice (also [{earlier_index}])"))
            elif private.startswith(earlier + "/") or earlier.startswith(private + "/"):
                problems.append(Problem(item, f"{private} and [{earlier_index}] {earlier} are nested"))
    return problems


def _ipv4_or_none(address: str) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(address)
    except ValueError:
        return None


# ---------------------------------------------------------------- what the units of containerd and the kubelet add


def runtime_unit_dependencies(network: KubeletNetwork) -> str:
    """[Unit] lines of containerd@ and kubelet@: the namespace exists before they start, and goes with them."""
    return f"Requires={network.unit}\nAfter={network.unit}\n"


def join_namespace_settings(network: KubeletNetwork) -> str:
    """[Service] lines of containerd@ and kubelet@: the NUMA node's network namespace, no mount namespace.

    Both units set up their mount namespaces themselves (render.py's launchers): systemd's
    would make every mount a slave of the host's (DESIGN.md section 6).
    """
    return (
        f"NetworkNamespacePath={network.netns_path}\n"
        # systemd >= 254 implies PrivateMounts=yes with NetworkNamespacePath=: the kubelet's
        # volume mounts would then never reach containerd.
        "PrivateMounts=no\n"
    )


@dataclass(frozen=True)
class PrivateBind:
    """A host path that containerd@ sees replaced by its own copy, in its mount namespace only."""

    source: str
    target: str
    read_only: bool = False


def containerd_private_binds(network: KubeletNetwork) -> tuple[PrivateBind, ...]:
    """The private copies of the CNI agents' host paths, and the namespace's resolv.conf.

    hostPath volumes and CNI plugins resolve paths in containerd's mount namespace, so a CNI
    agent pod of this node writes its own copy, not the host's or another node's.
    """
    binds = [PrivateBind(network.private_copy(path), path) for path in network.host.private_paths]
    if network.resolv_conf is not None:
        binds.append(PrivateBind(network.resolv_conf, "/etc/resolv.conf", read_only=True))
    return tuple(binds)


# ---------------------------------------------------------------- numa-netns@numa<N>.service and its scripts


def netns_unit_text(network: KubeletNetwork, header: str) -> str:
    return (
        header
        + "[Unit]\n"
        + f"Description=numa-kubelets: network namespace {network.netns} ({network.describe()})\n"
        + "Documentation=man:ip-netns(8)\n"
        + "After=network.target\n"
        + f"Before=containerd@{network.instance}.service kubelet@{network.instance}.service\n"
        + "\n"
        + "[Service]\n"
        + "Type=oneshot\n"
        + "RemainAfterExit=yes\n"
        + f"ExecStart=/bin/sh {network.up_script}\n"
        # Changed settings are applied in place: containerd and the kubelet keep running.
        + f"ExecReload=/bin/sh {network.up_script}\n"
        + f"ExecStop=/bin/sh {network.down_script}\n"
        + "\n"
        + "[Install]\n"
        + "WantedBy=multi-user.target\n"
    )


def _wait_for_link(name: str) -> str:
    return (
        "waited=0\n"
        f"while ! ip link show dev {q(name)} >/dev/null 2>&1; do\n"
        f'  if [ "$waited" -ge {LINK_WAIT_SECONDS} ]; then\n'
        f'    echo "numa-kubelets: interface {name} did not appear within {LINK_WAIT_SECONDS} s" >&2; exit 1\n'
        "  fi\n"
        "  sleep 1; waited=$((waited + 1))\n"
        "done\n"
    )


def _child_link_steps(network: KubeletNetwork) -> str:
    """A macvlan/ipvlan child made directly inside the namespace: it never appears on the host."""
    parent = network.host.parent
    assert parent is not None
    ns, link = q(network.netns), q(network.link)
    if network.host.uplink == "macvlan":
        kind, fingerprint = "macvlan mode bridge", " macvlan mode bridge "
    else:
        kind, fingerprint = "ipvlan mode l2", " ipvlan  mode l2 "
    return (
        _wait_for_link(parent)
        + f"parent_index=$(cat /sys/class/net/{q(parent)}/ifindex)\n"
        + f"current=$(ip -n {ns} -d -o link show dev {link} 2>/dev/null || true)\n"
        # Recreated only when it is not the link asked for (kind, mode, parent).
        + 'case "$current" in\n'
        + f'  *"{network.link}@if$parent_index:"*"{fingerprint}"*) ;;\n'
        + "  *)\n"
        + f"    ip -n {ns} link delete dev {link} 2>/dev/null || true\n"
        + f"    ip link add link {q(parent)} name {link} netns {ns} type {kind}\n"
        + "    ;;\n"
        + "esac\n"
    )


def _device_steps(network: KubeletNetwork) -> str:
    """Moves the device in unless it is already there; refuses one the host still uses."""
    ns, device = q(network.netns), q(network.link)
    return (
        f"if ! ip -n {ns} link show dev {device} >/dev/null 2>&1; then\n"
        + "".join(f"  {line}\n" for line in _wait_for_link(network.link).splitlines())
        + f'  if [ -n "$(ip -o addr show dev {device} scope global)" ] || [ -n "$(ip route show dev {device})" ]; then\n'
        + f'    echo "numa-kubelets: {network.link} has addresses or routes in the host namespace; refusing to move it" >&2\n'
        + "    exit 1\n"
        + "  fi\n"
        + f"  ip link set dev {device} netns {ns}\n"
        + "fi\n"
    )


def netns_up_script_text(network: KubeletNetwork, header: str) -> str:
    ns, link = q(network.netns), q(network.link)
    steps = (
        "#!/bin/sh\n"
        + header
        + f"# Builds network namespace {network.netns}: {network.describe()}.\n"
        + "# Idempotent: the unit runs it on start and on reload. Nothing in the host's namespace changes\n"
        + "# but the link that is created in, or moved to, the namespace.\n"
        + "set -eu\n"
        + f"if [ ! -e {q(network.netns_path)} ]; then ip netns add {ns}; fi\n"
        # The kubelet's healthz and containerd's stream server listen on 127.0.0.1.
        + f"ip -n {ns} link set dev lo up\n"
        + (_device_steps(network) if network.device else _child_link_steps(network))
    )
    if network.host.mtu is not None:
        steps += f"ip -n {ns} link set dev {link} mtu {network.host.mtu}\n"
    steps += (
        f"ip -n {ns} link set dev {link} up\n"
        # Exactly one global address on the link: ours.
        + f"for present in $(ip -n {ns} -o -4 addr show dev {link} scope global | awk '{{ print $4 }}'); do\n"
        + f'  if [ "$present" != {q(network.address)} ]; then ip -n {ns} addr del "$present" dev {link}; fi\n'
        + "done\n"
        + f"ip -n {ns} addr replace {q(network.address)} dev {link}\n"
        + f"ip -n {ns} route replace default via {q(network.host.gateway)} dev {link}\n"
    )
    if network.host.private_paths:
        # containerd@ binds the private copies over these; paths under /run are gone after a reboot.
        steps += CREATE_MOUNT_POINT_FUNCTION + private_path_steps(network)
    return steps


def netns_down_script_text(network: KubeletNetwork, header: str) -> str:
    ns, link = q(network.netns), q(network.link)
    if network.device:
        # Back to the host at once, even if a stray process still holds the namespace.
        release = f"  ip -n {ns} link set dev {link} netns 1 2>/dev/null || true\n"
    else:
        # Deleted explicitly: a stray process holding the namespace must not keep our address on the LAN.
        release = f"  ip -n {ns} link delete dev {link} 2>/dev/null || true\n"
    return (
        "#!/bin/sh\n"
        + header
        + f"# Removes network namespace {network.netns} and its uplink; the host's own links are not touched.\n"
        + "set -eu\n"
        + f"if [ -e {q(network.netns_path)} ]; then\n"
        + release
        + f"  ip netns delete {ns}\n"
        + "fi\n"
    )


def resolv_conf_text(network: KubeletNetwork, header: str) -> str:
    return header + "".join(f"nameserver {server}\n" for server in network.host.dns)


# ---------------------------------------------------------------- host-side steps of the netns command


def private_path_steps(network: KubeletNetwork) -> str:
    """Creates the private copies and the mount points they are bound over.

    A mount point that did not exist is recorded (its topmost created directory), so the removal
    of the last namespace takes exactly those directories away again.
    """
    steps = []
    for path in network.host.private_paths:
        steps.append(f"mkdir -p {q(network.private_copy(path))}\n")
        steps.append(f"create_mount_point {q(path)}\n")
    return "".join(steps)


CREATE_MOUNT_POINT_FUNCTION = f"""\
# create_mount_point PATH: mkdir -p PATH, recording the topmost directory it had to create.
create_mount_point() {{
  if [ -d "$1" ]; then return 0; fi
  top=$1
  while [ ! -e "$(dirname "$top")" ]; do top=$(dirname "$top"); done
  mkdir -p {q(CREATED_MOUNT_POINTS_DIR)}
  printf '%s\\n' "$top" > {q(CREATED_MOUNT_POINTS_DIR)}/"$(printf '%s' "$top" | tr / _)"
  mkdir -p "$1"
}}
"""


def remove_created_mount_points_shell(private_root: str = PRIVATE_ROOT, lock_dir: str = "/run/numa-kubelets") -> str:
    """The last namespace gone: the mount points created for private copies go too (empty ones only).

    Every kubelet's namespace may be removed at the same moment (the engine deletes them side by
    side; seen failing under the real engine: both scripts found no namespace left and one's `find`
    lost the directories the other's had just deleted), so the check and the removal run under a lock."""
    records = f"{private_root}/created-mount-points"
    lock = f"{lock_dir}/mount-points.lock"
    return f"""\
mkdir -p {q(lock_dir)}
exec 9>{q(lock)}
flock 9
if ! ls -d {q(private_root)}/numa[0-9]* >/dev/null 2>&1 && [ -d {q(records)} ]; then
  for record in {q(records)}/*; do
    [ -f "$record" ] || continue
    top=$(cat "$record")
    if [ -d "$top" ]; then find "$top" -depth -type d -empty -delete; fi
    rm -f "$record"
  done
  rmdir {q(records)} {q(private_root)} 2>/dev/null || true
fi
rm -f {q(lock)}
exec 9>&-
"""


def preflight_checks(networks: tuple[KubeletNetwork, ...]) -> Iterator[str]:
    """Shell snippets for the host's preflight; each reports through `fail`."""
    if not networks:
        return
    host = networks[0].host
    yield (
        "for tool in ip arping; do\n"
        '  if ! command -v "$tool" >/dev/null 2>&1; then fail "$tool is not installed (namespace mode needs iproute2 and iputils-arping)"; fi\n'
        "done\n"
        "if command -v arping >/dev/null 2>&1 && ! arping -V 2>&1 | grep -q iputils; then\n"
        '  fail "arping is not the iputils one (duplicate address detection needs arping -D from iputils-arping)"\n'
        "fi\n"
    )
    if not host.dns:
        yield (
            'if awk \'$1 == "nameserver" && ($2 ~ /^127\\./ || $2 == "::1") { found = 1 } END { exit !found }\' /etc/resolv.conf 2>/dev/null; then\n'
            '  fail "/etc/resolv.conf points at a loopback resolver, unreachable from the kubelet namespaces: set network.dns"\n'
            "fi\n"
        )
    if host.parent is not None:
        yield (
            f"if ! ip link show dev {q(host.parent)} >/dev/null 2>&1; then\n"
            f'  fail "parent interface {host.parent} does not exist"\n'
            "fi\n"
        )
    for network in networks:
        ns, link = q(network.netns), q(network.link)
        ip = q(network.node_ip)
        # Already ours: the namespace carries it (a re-apply); nothing to probe.
        yield f"if ! ip -n {ns} -o -4 addr show dev {link} 2>/dev/null | grep -q {q(' ' + network.address + ' ')}; then\n"
        if network.device is not None:
            probe_on = q(network.device)
            yield (
                f"  if ip -n {ns} link show dev {link} >/dev/null 2>&1; then :\n"
                f"  elif ! ip link show dev {probe_on} >/dev/null 2>&1; then\n"
                f'    fail "device {network.device} (for {network.netns}) does not exist"\n'
                f'  elif [ -n "$(ip -o addr show dev {probe_on} scope global)" ]; then\n'
                f'    fail "device {network.device} (for {network.netns}) has addresses in the host namespace; it must be unused"\n'
                f"  elif ip link show dev {probe_on} up | grep -q UP && command -v arping >/dev/null 2>&1 && "
                f"! arping -D -q -c 2 -w 3 -I {probe_on} {ip}; then\n"
                f'    fail "{network.node_ip} (for {network.netns}) already answers on the LAN (arping -D on {network.device})"\n'
                "  fi\n"
            )
        else:
            parent = q(host.parent or "")
            yield (
                f"  if ip link show dev {parent} >/dev/null 2>&1 && command -v arping >/dev/null 2>&1 && "
                f"! arping -D -q -c 2 -w 3 -I {parent} {ip}; then\n"
                f'    fail "{network.node_ip} (for {network.netns}) already answers on the LAN (arping -D on {host.parent})"\n'
                "  fi\n"
            )
        yield "fi\n"
