"""Which kubelet offers which of its host's PCI devices, under which extended resource (issue 43).

The inventory is declared in the stack configuration (`numaNodes[].pciDevices`, and
`pciDevices` for devices without NUMA affinity), as the CPUs are: `discover` prints it and the
preflight checks it against the host before anything changes, so the assignment here is a pure
function of the configuration.

Ownership: a device belongs to the kubelet of its own NUMA node, unless a kubelet names it in
`adoptDevices` (a device of another node, or one without affinity: remote to that kubelet's
CPUs, so it must be said explicitly). A device without affinity that nobody adopts is offered by
no kubelet. Each device is offered by at most one kubelet, under at most one of its resources.

Resources: the stack's `devices`, replaced whole by a host's (or its class's), replaced whole by
a kubelet's. Each resource takes, on each kubelet, the devices that kubelet owns and its
`select` matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .config import DeviceResourceSpec, HostClassSpec, HostSpec, KubeletSpec, StackConfig
from .problems import Problem
from .validators import SRIOV_RESOURCE_NAME

GENERIC = "generic"
# The generic plugin listens on `<kubelet root>/device-plugins/gdp-<base64(resource)>-<unix time>.sock`
# and a Unix socket's path takes at most 107 bytes (sun_path): a longer resource name never
# registers, the plugin retrying forever (measured: docs/devices-host-notes.md).
SOCKET_PATH_MAX = 107
SOCKET_NAME_OVERHEAD = len("/gdp--1796550883.sock")


def generic_socket_path_length(resource: str, numa_node: int) -> int:
    """The length of the generic plugin's socket path for `resource` in NUMA kubelet
    `numa_node`'s device-plugins directory (`/var/lib/kubelet-numa<N>/device-plugins`)."""
    directory = f"/var/lib/kubelet-numa{numa_node}/device-plugins"
    return len(directory) + SOCKET_NAME_OVERHEAD + 4 * -(-len(resource.encode()) // 3)


def longest_generic_resource(numa_node: int) -> int:
    """The longest resource name (bytes) whose socket path fits for NUMA kubelet `numa_node`."""
    room = SOCKET_PATH_MAX - generic_socket_path_length("", numa_node)
    return room // 4 * 3


SRIOV = "sriov"
NVIDIA = "nvidia"
# NVIDIA GPUs: vendor 0x10de, PCI base class 0x03 (display controllers: VGA 0x0300, 3D 0x0302).
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS_PREFIX = "0x03"
# The names the generic device plugin accepts for its devices (its main.go, deviceTypeFmt).
GENERIC_DEVICE_NAME = re.compile(r"[a-z0-9][-a-z0-9]*[a-z0-9]")


@dataclass(frozen=True)
class PciDevice:
    """One device of a host's declared inventory; `numa_node` None: no NUMA affinity (sysfs -1)."""

    address: str
    numa_node: int | None
    pci_class: str
    vendor: str
    device: str
    driver: str | None = None

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == NVIDIA_VENDOR and self.pci_class.startswith(DISPLAY_CLASS_PREFIX)

    @property
    def numa_text(self) -> str:
        return "no NUMA affinity" if self.numa_node is None else f"NUMA node {self.numa_node}"


@dataclass(frozen=True)
class Selector:
    """Every key given must match; `pci_class` is a prefix of the device's class (`0x0108`)."""

    pci_class: str | None = None
    vendor: str | None = None
    device: str | None = None
    driver: str | None = None
    addresses: tuple[str, ...] | None = None

    def matches(self, candidate: PciDevice) -> bool:
        return (
            (self.pci_class is None or candidate.pci_class.startswith(self.pci_class))
            and (self.vendor is None or candidate.vendor == self.vendor)
            and (self.device is None or candidate.device == self.device)
            and (self.driver is None or candidate.driver == self.driver)
            and (self.addresses is None or candidate.address in self.addresses)
        )


@dataclass(frozen=True)
class DeviceResource:
    """A resource as declared; `path`: where (`devices[0]`, `hosts[1].kubelets[0].devices[2]`)."""

    resource: str
    plugin: str
    select: Selector
    device_nodes: tuple[str, ...] = ()  # generic only; empty: every device node the device owns
    path: str = ""


@dataclass(frozen=True)
class OfferedResource:
    """What one kubelet advertises under one resource: its devices, by PCI address, sorted."""

    resource: str
    plugin: str
    addresses: tuple[str, ...]
    device_nodes: tuple[str, ...] = ()

    @property
    def domain(self) -> str:
        return self.resource.partition("/")[0]

    @property
    def name(self) -> str:
        return self.resource.partition("/")[2]


@dataclass(frozen=True)
class KubeletDevices:
    """One kubelet's input to the assignment."""

    node_name: str
    numa_node: int
    resources: tuple[DeviceResource, ...]
    adopt: tuple[str, ...] = ()
    path: str = ""  # the kubelet's config path (`hosts[0].kubelets[1]`, or `hosts[0]` when defaulted)
    own_resources: bool = False  # its resources are its own `devices`, not the host's or the stack's


@dataclass(frozen=True)
class GenericPluginInstance:
    """One generic device plugin process of a kubelet: the plugin takes one `--domain`, so a
    kubelet whose generic resources span several domains runs one per domain."""

    domain: str
    resources: tuple[OfferedResource, ...]  # their names are the plugin's `devices[].name`


# --------------------------------------------------------------------------- assignment


def owners(inventory: Sequence[PciDevice], kubelets: Sequence[KubeletDevices]) -> dict[str, int]:
    """Per PCI address, the index of the kubelet that offers it: the first that adopts it, else the
    kubelet of its NUMA node; devices of no kubelet are absent."""
    by_node = {kubelet.numa_node: index for index, kubelet in enumerate(kubelets)}
    adopted: dict[str, int] = {}
    for index, kubelet in enumerate(kubelets):
        for address in kubelet.adopt:
            adopted.setdefault(address, index)
    result: dict[str, int] = {}
    for device in inventory:
        if device.address in adopted:
            result[device.address] = adopted[device.address]
        elif device.numa_node is not None and device.numa_node in by_node:
            result[device.address] = by_node[device.numa_node]
    return result


def assign(
    inventory: Sequence[PciDevice], kubelets: Sequence[KubeletDevices]
) -> tuple[tuple[OfferedResource, ...], ...]:
    """Per kubelet (in the order given), the resources it offers with their devices; a resource
    that takes no device of that kubelet is left out. A device two resources of one kubelet
    select goes to the first (assignment_problems reports it)."""
    owner = owners(inventory, kubelets)
    result: list[tuple[OfferedResource, ...]] = []
    for index, kubelet in enumerate(kubelets):
        own = [device for device in inventory if owner.get(device.address) == index]
        taken: set[str] = set()
        offered = []
        for resource in kubelet.resources:
            addresses = sorted(
                device.address for device in own if device.address not in taken and resource.select.matches(device)
            )
            taken.update(addresses)
            if addresses:
                offered.append(
                    OfferedResource(resource.resource, resource.plugin, tuple(addresses), resource.device_nodes)
                )
        # One shared empty tuple for the kubelets without devices: a fleet's plan stays small.
        result.append(tuple(offered) if offered else ())
    return tuple(result)


def assignment_problems(
    host_name: str, inventory: Sequence[PciDevice], kubelets: Sequence[KubeletDevices]
) -> list[Problem]:
    """What makes the assignment of one host ambiguous or wrong, each at the path written."""
    problems: list[Problem] = []
    by_address = {device.address: device for device in inventory}
    by_node = {kubelet.numa_node: kubelet for kubelet in kubelets}
    adopted_by: dict[str, str] = {}
    for kubelet in kubelets:
        for position, address in enumerate(kubelet.adopt):
            path = f"{kubelet.path}.adoptDevices[{position}]"
            device = by_address.get(address)
            if device is None:
                problems.append(Problem(path, _not_in_inventory(address, host_name)))
                continue
            if device.numa_node == kubelet.numa_node:
                problems.append(
                    Problem(
                        path,
                        f"PCI device {address} is on NUMA node {kubelet.numa_node}, this kubelet's own: it is "
                        "offered here without adoptDevices",
                    )
                )
            if address in adopted_by:
                problems.append(
                    Problem(
                        path,
                        f"PCI device {address} is already adopted by {adopted_by[address]}; a device is "
                        "offered by one kubelet only",
                    )
                )
            adopted_by.setdefault(address, f"kubelet {kubelet.node_name} ({kubelet.path})")
    owner = owners(inventory, kubelets)
    resources_seen: set[str] = set()
    too_long: set[str] = set()
    for index, kubelet in enumerate(kubelets):
        selected_by: dict[str, DeviceResource] = {}
        for resource in kubelet.resources:
            # The stack's and a host's resources apply to every kubelet: report their problems once.
            first_use = resource.path not in resources_seen
            resources_seen.add(resource.path)
            socket_path = generic_socket_path_length(resource.resource, kubelet.numa_node)
            if resource.plugin == GENERIC and socket_path > SOCKET_PATH_MAX and resource.path not in too_long:
                too_long.add(resource.path)
                problems.append(
                    Problem(
                        f"{resource.path}.resource",
                        f"{resource.resource!r} is too long for the generic device plugin of kubelet "
                        f"{kubelet.node_name}: its socket path would take {socket_path} bytes, Linux allows "
                        f"{SOCKET_PATH_MAX}; use a resource name of at most "
                        f"{longest_generic_resource(kubelet.numa_node)} bytes",
                    )
                )
            for position, address in enumerate(resource.select.addresses or ()):
                path = f"{resource.path}.select.addresses[{position}]"
                device = by_address.get(address)
                if device is None:
                    if first_use:
                        problems.append(Problem(path, _not_in_inventory(address, host_name)))
                    continue
                if kubelet.own_resources and owner.get(address) != index:
                    problems.append(Problem(path, _not_this_kubelets(device, kubelet, by_node, adopted_by, host_name)))
            for device in inventory:
                if owner.get(device.address) != index or not resource.select.matches(device):
                    continue
                if resource.plugin == NVIDIA and not device.is_nvidia_gpu:
                    problems.append(
                        Problem(
                            f"{resource.path}.select",
                            f"selects PCI device {device.address} of host {host_name} (class {device.pci_class}, "
                            f"vendor {device.vendor}), which is not an NVIDIA GPU (vendor {NVIDIA_VENDOR}, class "
                            f"{DISPLAY_CLASS_PREFIX}xxxx): plugin nvidia advertises NVIDIA GPUs only",
                        )
                    )
                earlier = selected_by.setdefault(device.address, resource)
                if earlier is not resource:
                    problems.append(
                        Problem(
                            f"{resource.path}.select",
                            f"PCI device {device.address} of kubelet {kubelet.node_name} is also selected by "
                            f"{earlier.path} ({earlier.resource}); a device is offered under one resource only",
                        )
                    )
    return problems


def _not_in_inventory(address: str, host_name: str) -> str:
    return (
        f"PCI device {address} is not declared on host {host_name} (neither in numaNodes[].pciDevices nor in "
        "pciDevices; python -m numa_kubelets.discover lists them)"
    )


def _not_this_kubelets(
    device: PciDevice,
    kubelet: KubeletDevices,
    by_node: Mapping[int, KubeletDevices],
    adopted_by: Mapping[str, str],
    host_name: str,
) -> str:
    if device.address in adopted_by:
        holder = f"adopted by {adopted_by[device.address]}"
    elif device.numa_node is not None and device.numa_node in by_node:
        owner = by_node[device.numa_node]
        holder = f"offered by kubelet {owner.node_name} ({owner.path})"
    else:
        holder = "offered by no kubelet"
    return (
        f"PCI device {device.address} of host {host_name} is on {device.numa_text}, {holder}, not on kubelet "
        f"{kubelet.node_name}'s NUMA node {kubelet.numa_node}; to offer it here anyway (remote to this kubelet's "
        f"CPUs), add it to {kubelet.path}.adoptDevices"
    )


def generic_plugin_instances(offered: Iterable[OfferedResource]) -> tuple[GenericPluginInstance, ...]:
    """A kubelet's generic resources grouped by domain, one plugin process per domain, sorted."""
    by_domain: dict[str, list[OfferedResource]] = {}
    for resource in offered:
        if resource.plugin == GENERIC:
            by_domain.setdefault(resource.domain, []).append(resource)
    return tuple(
        GenericPluginInstance(domain, tuple(sorted(resources, key=lambda r: r.name)))
        for domain, resources in sorted(by_domain.items())
    )


# --------------------------------------------------------------------------- from the configuration


def inventory(host: HostClassSpec) -> tuple[PciDevice, ...]:
    """The host's declared PCI devices, sorted by address."""
    devices = [
        PciDevice(d.address, node.id, d.pci_class, d.vendor, d.device, d.driver)
        for node in host.numa_nodes or []
        for d in node.pci_devices
    ]
    devices += [PciDevice(d.address, None, d.pci_class, d.vendor, d.device, d.driver) for d in host.pci_devices]
    return tuple(sorted(devices, key=lambda d: d.address))


def _resources(specs: Sequence[DeviceResourceSpec], path: str) -> tuple[DeviceResource, ...]:
    return tuple(
        DeviceResource(
            resource=spec.resource,
            plugin=spec.plugin,
            select=Selector(
                spec.select.pci_class,
                spec.select.vendor,
                spec.select.device,
                spec.select.driver,
                tuple(spec.select.addresses) if spec.select.addresses is not None else None,
            ),
            device_nodes=tuple(spec.device_nodes or ()),
            path=f"{path}[{index}]",
        )
        for index, spec in enumerate(specs)
    )


def host_kubelet_devices(
    host: HostSpec, host_index: int, stack: StackConfig, kubelets: Sequence[tuple[int | None, KubeletSpec, str]]
) -> tuple[KubeletDevices, ...]:
    """Each kubelet's resources (kubelet < host < stack: the most specific list given, whole) and
    adoptions; `kubelets`: (position in the host's `kubelets` or None when defaulted, spec, node name)."""
    if host.devices is not None:
        inherited = _resources(host.devices, f"hosts[{host_index}].devices")
    else:
        inherited = _resources(stack.devices, "devices")
    result = []
    for position, spec, node_name in kubelets:
        path = f"hosts[{host_index}]" if position is None else f"hosts[{host_index}].kubelets[{position}]"
        own = spec.devices is not None
        result.append(
            KubeletDevices(
                node_name=node_name,
                numa_node=spec.numa_node,
                resources=_resources(spec.devices or [], f"{path}.devices") if own else inherited,
                adopt=tuple(spec.adopt_devices),
                path=path,
                own_resources=own,
            )
        )
    return tuple(result)


def declaration_problems(config: StackConfig) -> list[Problem]:
    """Each resource list on its own: keys that do not fit its plugin, names declared twice."""
    lists: list[tuple[str, Sequence[DeviceResourceSpec]]] = [("devices", config.devices)]
    for host_index, host in enumerate(config.hosts):
        if host.devices is not None:
            lists.append((f"hosts[{host_index}].devices", host.devices))
        for position, kubelet in enumerate(host.kubelets or []):
            if kubelet.devices is not None:
                lists.append((f"hosts[{host_index}].kubelets[{position}].devices", kubelet.devices))
    problems: list[Problem] = []
    for path, specs in lists:
        first: dict[str, int] = {}
        for index, spec in enumerate(specs):
            entry = f"{path}[{index}]"
            problems += resource_problems(spec, entry)
            if spec.resource in first:
                problems.append(
                    Problem(
                        f"{entry}.resource",
                        f"resource {spec.resource} is already declared ({path}[{first[spec.resource]}])",
                    )
                )
            first.setdefault(spec.resource, index)
    return problems


def resource_problems(spec: DeviceResourceSpec, path: str) -> list[Problem]:
    problems: list[Problem] = []
    select = spec.select
    if all(
        value is None for value in (select.pci_class, select.vendor, select.device, select.driver, select.addresses)
    ):
        problems.append(
            Problem(f"{path}.select", "selects nothing: give at least one of class, vendor, device, driver, addresses")
        )
    if spec.device_nodes is not None and spec.plugin != GENERIC:
        problems.append(
            Problem(
                f"{path}.deviceNodes",
                f"only the generic plugin takes deviceNodes; plugin {spec.plugin} finds its devices' nodes itself",
            )
        )
    name = spec.resource.partition("/")[2]
    if spec.plugin == GENERIC and not GENERIC_DEVICE_NAME.fullmatch(name):
        problems.append(
            Problem(
                f"{path}.resource",
                f"the generic device plugin takes a device name of lowercase letters, digits and '-' (starting and "
                f"ending with a letter or digit), not {name!r}",
            )
        )
    if spec.plugin == SRIOV and not SRIOV_RESOURCE_NAME.fullmatch(name):
        problems.append(
            Problem(
                f"{path}.resource",
                f"the SR-IOV network device plugin takes a resourceName of letters, digits and '_' only, not {name!r}",
            )
        )
    return problems
