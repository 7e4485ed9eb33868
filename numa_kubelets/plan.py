"""The partition plan: which CPUs, memory node, names, ports and directories each kubelet gets.

`build_plan` is the one place that answers "which CPUs does numa1.slice get?".
"""

from __future__ import annotations

from dataclasses import dataclass

from . import devices, kubelet_config, network
from .config import ConfigError, HostSpec, KubeletSpec, Problem, StackConfig, default_system_cpus
from .cpulist import CpuSet
from .devices import GenericPluginInstance, OfferedResource, PciDevice
from .kubelet_config import KubeletSettings
from .network import HostNetwork, KubeletNetwork
from .rollout import NOT_LIMITED, RolloutPolicy, rollout_policy
from .validators import duration_seconds

DEFAULT_GENERIC_DEVICE_PLUGIN_PATH = "/usr/local/bin/generic-device-plugin"
BASE_PORT = 10250
BASE_HEALTHZ_PORT = 10248
PORT_STRIDE = 100
HOST_LABEL = "numa-kubelets.io/host"
NUMA_NODE_LABEL = "numa-kubelets.io/numa-node"
# Ports of control-plane and node components that may share a host with our kubelets.
RESERVED_PORTS: dict[int, str] = {
    6443: "kube-apiserver",
    2379: "etcd client",
    2380: "etcd peer",
    10249: "kube-proxy metrics",
    10256: "kube-proxy health",
    10257: "kube-controller-manager",
    10259: "kube-scheduler",
}


@dataclass(frozen=True)
class InstanceLayout:
    """Everything on the host that belongs to one NUMA node's kubelet, by name."""

    instance: str  # "numa<N>": also the kubelet's cgroupRoot name, so no '-' or '_'

    @property
    def slice(self) -> str:
        return f"{self.instance}.slice"

    @property
    def slice_path(self) -> str:
        return f"/etc/systemd/system/{self.slice}"

    @property
    def cgroup_root(self) -> str:
        return f"/{self.instance}"

    @property
    def kubelet_unit(self) -> str:
        return f"kubelet@{self.instance}.service"

    @property
    def containerd_unit(self) -> str:
        return f"containerd@{self.instance}.service"

    @property
    def config_dir(self) -> str:
        return f"/etc/numa-kubelets/{self.instance}"

    @property
    def kubelet_config(self) -> str:
        return f"{self.config_dir}/kubelet-config.yaml"

    @property
    def register_taints_config(self) -> str:
        """registerWithTaints, apart: read only at registration, so a change restarts nothing."""
        return f"{self.config_dir}/register-with-taints.conf"

    @property
    def kubelet_config_dropin_dir(self) -> str:
        return f"/run/numa-kubelets/{self.instance}/kubelet.conf.d"

    @property
    def prepare_script(self) -> str:
        return f"{self.config_dir}/prepare-kubelet.sh"

    @property
    def namespace_script(self) -> str:
        return f"{self.config_dir}/exec-in-own-mount-namespace.sh"

    @property
    def containerd_prepare_script(self) -> str:
        return f"{self.config_dir}/prepare-containerd.sh"

    @property
    def containerd_namespace_script(self) -> str:
        return f"{self.config_dir}/exec-containerd-in-own-mount-namespace.sh"

    @property
    def bootstrap_kubeconfig(self) -> str:
        return f"{self.config_dir}/bootstrap-kubeconfig"

    @property
    def ca_cert(self) -> str:
        return f"{self.config_dir}/ca.crt"

    @property
    def containerd_config(self) -> str:
        return f"{self.config_dir}/containerd.toml"

    @property
    def root_dir(self) -> str:
        return f"/var/lib/kubelet-{self.instance}"

    @property
    def kubeconfig(self) -> str:
        return f"{self.root_dir}/kubeconfig"

    @property
    def cert_dir(self) -> str:
        return f"{self.root_dir}/pki"

    @property
    def device_plugins_dir(self) -> str:
        return f"{self.root_dir}/device-plugins"

    @property
    def pod_logs_dir(self) -> str:
        return f"/var/log/pods-{self.instance}"

    @property
    def containerd_root(self) -> str:
        return f"/var/lib/containerd-{self.instance}"

    @property
    def containerd_state(self) -> str:
        return f"/run/containerd-{self.instance}"

    @property
    def containerd_socket(self) -> str:
        return f"{self.containerd_state}/containerd.sock"

    @property
    def containerd_private_run(self) -> str:
        """Bound over /run/containerd inside this instance: shims and runc state stay apart."""
        return f"{self.containerd_state}/run"

    @property
    def kubelet_unit_path(self) -> str:
        return f"/etc/systemd/system/{self.kubelet_unit}"

    @property
    def containerd_unit_path(self) -> str:
        return f"/etc/systemd/system/{self.containerd_unit}"


# Shared, hard-coded kubelet paths that each instance gets a private copy of (DESIGN.md section 6).
SHARED_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"
UNSHARE = "/usr/bin/unshare"
SHARED_CONTAINERD_RUN = "/run/containerd"
# Where containerd 1.6-2.x mount each pod's network namespace (CRI `netnsMountDir`, /var/run/netns).
POD_NETNS_DIR = "/run/netns"
# Left by containerd@'s prepare script when it made POD_NETNS_DIR a mount point (not `ip netns add`).
POD_NETNS_MOUNT_MARKER = "/run/numa-kubelets/made-netns-mount-point"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def manifest(self) -> dict[str, str]:
        """As in a Node's spec.taints and the KubeletConfiguration's registerWithTaints."""
        return {"key": self.key, "value": self.value, "effect": self.effect} if self.value else self.identity()

    def identity(self) -> dict[str, str]:
        return {"key": self.key, "effect": self.effect}


@dataclass(frozen=True)
class KubeletPlan:
    host: str
    numa_node: int
    index: int
    node_name: str
    cpus: CpuSet
    mems: CpuSet
    labels: tuple[tuple[str, str], ...]
    max_pods: int
    port: int
    healthz_port: int
    read_only_port: int
    reserved_cpus: int  # CPUs of the machine outside this kubelet's slice, as systemReserved.cpu
    layout: InstanceLayout
    settings: KubeletSettings  # the merged kubeletConfig and what the program derives from it
    host_numa_nodes: tuple[int, ...]  # every NUMA node of the host, memory-only ones included
    taints: tuple[Taint, ...] = ()
    network: KubeletNetwork | None = None  # namespace mode only
    # Its binary and the minor its KubeletConfiguration is for: the stack's, its host's, or its own.
    kubelet_path: str = "/usr/bin/kubelet"
    kubelet_version: str = kubelet_config.DEFAULT_KUBELET_VERSION
    # The resources it advertises with their PCI devices (devices.py); () for most kubelets.
    devices: tuple[OfferedResource, ...] = ()
    # The generic device plugin binary on its host (the stack's or its host's).
    generic_device_plugin_path: str = DEFAULT_GENERIC_DEVICE_PLUGIN_PATH
    # Its containerd sees this kubelet's own device-plugins directory at the shared path, for
    # device plugins shipped as DaemonSets: only on hosts that declare PCI devices.
    device_plugins_bind: bool = False

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    # Pulumi resource names are part of the stack's state: renaming one needs an alias.
    @property
    def resource_name(self) -> str:
        """Of its NumaSlice and KubeletInstance (different types, so different URNs)."""
        return f"{self.host}-{self.layout.instance}"

    @property
    def slice_command(self) -> str:
        return f"{self.resource_name}-slice"

    @property
    def containerd_command(self) -> str:
        return f"{self.resource_name}-containerd"

    @property
    def kubelet_command(self) -> str:
        return f"{self.resource_name}-kubelet"

    @property
    def netns_command(self) -> str:
        return f"{self.resource_name}-netns"

    @property
    def device_plugins_command(self) -> str:
        """Of its generic device plugins' units (only a kubelet with `generic` resources has one)."""
        return f"{self.resource_name}-device-plugins"

    @property
    def generic_plugins(self) -> tuple[GenericPluginInstance, ...]:
        return devices.generic_plugin_instances(self.devices)

    @property
    def identity_labels(self) -> dict[str, str]:
        """The automatic labels: they tell this kubelet's Node from any other of the same name."""
        return {k: v for k, v in self.labels if k in (HOST_LABEL, NUMA_NODE_LABEL)}

    @property
    def user_labels(self) -> dict[str, str]:
        return {k: v for k, v in self.labels if k not in (HOST_LABEL, NUMA_NODE_LABEL)}


@dataclass(frozen=True)
class HostPlan:
    name: str
    address: str
    ssh_port: int
    user: str
    host_key: str | None
    numa_nodes: tuple[tuple[int, CpuSet], ...]
    system_cpus: CpuSet
    system_mems: CpuSet
    kubelets: tuple[KubeletPlan, ...]
    network: HostNetwork | None = None  # namespace mode only
    rollout: RolloutPolicy = NOT_LIMITED
    pci_devices: tuple[PciDevice, ...] = ()  # the declared inventory, checked by the preflight

    @property
    def preflight_command(self) -> str:
        return f"{self.name}-preflight"

    @property
    def host_services_command(self) -> str:
        return f"{self.name}-host-services"

    @property
    def online_cpus(self) -> CpuSet:
        result = CpuSet()
        for _, cpus in self.numa_nodes:
            result = result | cpus
        return result


@dataclass(frozen=True)
class ClusterPlan:
    server: str
    ca_cert: str
    serving_certificates: str = "selfSigned"
    remove_nodes: bool = True
    drain_timeout_seconds: int = 300
    node_ready_timeout_seconds: int = 600  # demo.readyTimeout: how long a Node may take to be Ready
    dns: str | None = None  # None: the kube-dns Service's clusterIP, read from the cluster
    domain: str = "cluster.local"
    managed_bootstrap_token: bool = False  # no bootstrapToken given: the stack creates one

    @property
    def server_tls_bootstrap(self) -> bool:
        return self.serving_certificates == "bootstrap"


@dataclass(frozen=True)
class Plan:
    hosts: tuple[HostPlan, ...]
    cluster: ClusterPlan | None
    kubelet_path: str
    containerd_path: str
    demo_enabled: bool
    sandbox_image: str | None = None
    kubelet_version: str = kubelet_config.DEFAULT_KUBELET_VERSION
    rollout: RolloutPolicy = NOT_LIMITED

    @property
    def kubelets(self) -> tuple[KubeletPlan, ...]:
        return tuple(k for h in self.hosts for k in h.kubelets)


def kubelet_specs(host: HostSpec) -> list[tuple[int | None, KubeletSpec]]:
    """The host's kubelets ordered by NUMA id, with their position in the config (None: defaulted)."""
    specs: list[tuple[int | None, KubeletSpec]]
    if host.kubelets is None:
        specs = [(None, KubeletSpec.model_validate({"numaNode": node.id})) for node in host.numa_nodes if node.cpus]
    else:
        specs = list(enumerate(host.kubelets))
    return sorted(specs, key=lambda item: item[1].numa_node)


def plan_host(
    host: HostSpec, host_index: int, stack: StackConfig, stack_kubelets: int, with_network: bool = True
) -> HostPlan:
    """`stack_kubelets`: how many kubelets the stack has (a percentage of the stack's rollout is of
    them). `with_network=False` plans ports and CPUs only, for a host whose network settings have problems."""
    namespaced = network.is_namespace_mode(host)
    host_network = network.plan_host_network(host) if with_network else None
    node_cpus = {node.id: node.cpus for node in host.numa_nodes}
    system_cpus = host.system_cpus if host.system_cpus is not None else default_system_cpus(host)
    online = CpuSet()
    for cpus in node_cpus.values():
        online = online | cpus
    host_kubelet_path = host.kubelet_path or stack.kubelet_path
    host_kubelet_version = host.kubelet_version or stack.kubelet_version
    kubelets = []
    specs = kubelet_specs(host)
    inventory = devices.inventory(host)
    offered = devices.assign(
        inventory, devices.host_kubelet_devices(host, host_index, stack, named_kubelet_specs(host, specs))
    )
    for index, (position, spec) in enumerate(specs):
        cpus = spec.cpus if spec.cpus is not None else node_cpus[spec.numa_node] - system_cpus
        layers = [
            ("kubeletConfig", stack.kubelet_config),
            (f"hosts[{host_index}].kubeletConfig", host.kubelet_config),
        ]
        if position is not None:
            layers.append((f"hosts[{host_index}].kubelets[{position}].kubeletConfig", spec.kubelet_config))
        labels = {
            **spec.labels,
            HOST_LABEL: host.name,
            NUMA_NODE_LABEL: str(spec.numa_node),
        }
        # In namespace mode each kubelet has the port space of its own namespace.
        port_offset = 0 if namespaced else PORT_STRIDE * index
        instance = f"numa{spec.numa_node}"
        kubelet_version = spec.kubelet_version or host_kubelet_version
        kubelets.append(
            KubeletPlan(
                host=host.name,
                numa_node=spec.numa_node,
                index=index,
                node_name=node_name(host, spec),
                cpus=cpus,
                mems=CpuSet([spec.numa_node]),
                labels=tuple(sorted(labels.items())),
                max_pods=spec.max_pods,
                port=spec.port if spec.port is not None else BASE_PORT + port_offset,
                healthz_port=spec.healthz_port if spec.healthz_port is not None else BASE_HEALTHZ_PORT + port_offset,
                read_only_port=spec.read_only_port,
                reserved_cpus=len(online) - len(cpus),
                layout=InstanceLayout(instance),
                settings=kubelet_config.resolve(layers, kubelet_version, online, cpus, len(node_cpus)),
                host_numa_nodes=tuple(sorted(node_cpus)),
                taints=tuple(Taint(t.key, t.value, t.effect) for t in spec.taints),
                network=network.plan_kubelet_network(host_network, spec, instance),
                kubelet_path=spec.kubelet_path or host_kubelet_path,
                kubelet_version=kubelet_version,
                devices=offered[index],
                generic_device_plugin_path=host.generic_device_plugin_path or stack.generic_device_plugin_path,
                device_plugins_bind=bool(inventory),
            )
        )
    return HostPlan(
        name=host.name,
        address=host.address,
        ssh_port=host.ssh_port,
        user=host.user,
        host_key=host.host_key,
        numa_nodes=tuple(sorted(node_cpus.items())),
        system_cpus=system_cpus,
        system_mems=CpuSet(node_cpus),
        kubelets=tuple(kubelets),
        network=host_network,
        rollout=rollout_policy(stack, stack_kubelets, host, len(kubelets)),
        pci_devices=inventory,
    )


def node_name(host: HostSpec, spec: KubeletSpec) -> str:
    return spec.node_name or f"{host.name}-numa{spec.numa_node}"


def named_kubelet_specs(
    host: HostSpec, specs: list[tuple[int | None, KubeletSpec]]
) -> list[tuple[int | None, KubeletSpec, str]]:
    return [(position, spec, node_name(host, spec)) for position, spec in specs]


def device_problems(config: StackConfig) -> list[Problem]:
    """The device resources as declared, and each host's assignment of its devices to its kubelets."""
    problems = devices.declaration_problems(config)
    for index, host in enumerate(config.hosts):
        kubelets = devices.host_kubelet_devices(host, index, config, named_kubelet_specs(host, kubelet_specs(host)))
        problems += devices.assignment_problems(host.name, devices.inventory(host), kubelets)
    return problems


def build_plan(config: StackConfig) -> Plan:
    """Turn a validated config into the plan; raise ConfigError on fleet-wide conflicts."""
    network_problems = network.network_problems(config)
    stack_kubelets = sum(len(kubelet_specs(host)) for host in config.hosts)
    hosts = tuple(
        plan_host(host, index, config, stack_kubelets, with_network=not network_problems)
        for index, host in enumerate(config.hosts)
    )
    problems = network_problems + fleet_problems(config, hosts) + device_problems(config)
    problems += [p for host in hosts for k in host.kubelets for p in kubelet_config.settings_problems(k.settings)]
    if problems:
        raise ConfigError(config.user_problems(problems))
    return Plan(
        hosts=hosts,
        cluster=plan_cluster(config),
        kubelet_path=config.kubelet_path,
        containerd_path=config.containerd_path,
        demo_enabled=config.demo_enabled,
        sandbox_image=config.containerd.sandbox_image,
        kubelet_version=config.kubelet_version,
        rollout=rollout_policy(config, stack_kubelets),
    )


def plan_cluster(config: StackConfig) -> ClusterPlan | None:
    cluster = config.cluster
    if cluster is None:
        return None
    return ClusterPlan(
        server=cluster.server,
        ca_cert=cluster.ca_cert,
        serving_certificates=cluster.serving_certificates,
        remove_nodes=cluster.remove_nodes,
        drain_timeout_seconds=duration_seconds(cluster.drain_timeout),
        node_ready_timeout_seconds=duration_seconds(config.demo.ready_timeout),
        dns=cluster.dns,
        domain=cluster.domain,
        managed_bootstrap_token=config.bootstrap_token is None,
    )


def kubelet_config_path(config: StackConfig, host_index: int, numa_node: int) -> str:
    """Config path of a kubelet: its entry in `kubelets`, or the host when it was defaulted."""
    host = config.hosts[host_index]
    for position, spec in kubelet_specs(host):
        if spec.numa_node == numa_node and position is not None:
            return f"hosts[{host_index}].kubelets[{position}]"
    return f"hosts[{host_index}]"


def fleet_problems(config: StackConfig, hosts: tuple[HostPlan, ...]) -> list[Problem]:
    problems: list[Problem] = []
    host_names: dict[str, int] = {}
    endpoints: dict[tuple[str, int], int] = {}
    node_names: dict[str, str] = {}
    for host_index, host in enumerate(hosts):
        if host.name in host_names:
            problems.append(
                Problem(
                    f"hosts[{host_index}].name", f"{host.name!r} is already the name of hosts[{host_names[host.name]}]"
                )
            )
        host_names.setdefault(host.name, host_index)
        endpoint = (host.address.lower(), host.ssh_port)
        if endpoint in endpoints:
            problems.append(
                Problem(
                    f"hosts[{host_index}].address",
                    f"{host.address}:{host.ssh_port} is also hosts[{endpoints[endpoint]}]",
                )
            )
        endpoints.setdefault(endpoint, host_index)

        namespaced = network.is_namespace_mode(config.hosts[host_index])
        taken: dict[int, str] = dict(RESERVED_PORTS.items())
        taken[host.ssh_port] = "sshd"
        for kubelet in host.kubelets:
            if namespaced:
                # Its own namespace: only the node components that would run there too.
                taken = dict(RESERVED_PORTS.items())
            path = kubelet_config_path(config, host_index, kubelet.numa_node)
            explicit = ".kubelets[" in path
            if kubelet.node_name in node_names:
                field_path = f"{path}.nodeName" if explicit else path
                problems.append(
                    Problem(
                        field_path,
                        f"node name {kubelet.node_name!r} is already used by {node_names[kubelet.node_name]}",
                    )
                )
            node_names.setdefault(kubelet.node_name, path)
            for key, port in (
                ("port", kubelet.port),
                ("healthzPort", kubelet.healthz_port),
                ("readOnlyPort", kubelet.read_only_port),
            ):
                if port == 0:
                    continue
                owner = f"{kubelet.layout.instance} {key}"
                if port in taken:
                    field_path = f"{path}.{key}" if explicit else path
                    problems.append(Problem(field_path, f"port {port} collides with {taken[port]} on host {host.name}"))
                else:
                    taken[port] = owner
            if kubelet.port > 65535 or kubelet.healthz_port > 65535:
                problems.append(Problem(path, "default ports run past 65535; set port and healthzPort explicitly"))
    return problems
