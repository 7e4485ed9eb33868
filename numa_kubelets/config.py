"""The stack configuration (DESIGN.md section 3): one validated pydantic model per concept.

`load_config` turns the raw `numa-kubelets:*` values into a `StackConfig` or raises
`ConfigError` listing every problem, each with the path of the offending value.
Checks that need the whole fleet (ports, names across hosts) live in `plan.py`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from . import kubelet_config as kubelet_configuration
from . import validators as v
from .cpulist import CpuListError, CpuSet
from .host_classes import Expansion, expand_host_classes
from .problems import MISSING_KEY, NAMESPACE, ConfigError, Problem

__all__ = ["NAMESPACE", "ConfigError", "Problem"]

MAX_PORT = 65535


def _parse_cpulist(value: Any) -> CpuSet:
    if isinstance(value, CpuSet):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    try:
        return CpuSet.parse(value)
    except CpuListError as error:
        raise ValueError(str(error)) from None


def _check_max_unavailable(value: Any) -> int | str:
    """A count of at least 1, or a whole percentage from 1% to 100% (as Kubernetes' intstr takes it)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str):
        digits = value.removesuffix("%")
        if value.endswith("%") and digits.isdigit() and digits.isascii() and 1 <= int(digits) <= 100:
            return f"{int(digits)}%"
    raise ValueError(f'{value!r} is neither a count of at least 1 nor a percentage from "1%" to "100%" (e.g. "10%")')


def _check_token(token: SecretStr) -> SecretStr:
    v.check_bootstrap_token(token.get_secret_value())
    return token


CpuList = Annotated[CpuSet, BeforeValidator(_parse_cpulist)]
Port = Annotated[StrictInt, Field(ge=1, le=MAX_PORT)]
DnsLabel = Annotated[StrictStr, AfterValidator(v.check_dns_label)]
DnsName = Annotated[StrictStr, AfterValidator(v.check_dns_name)]
AbsolutePath = Annotated[StrictStr, AfterValidator(v.check_absolute_path)]
LabelKey = Annotated[StrictStr, AfterValidator(v.check_label_key)]
LabelValue = Annotated[StrictStr, AfterValidator(v.check_label_value)]
InterfaceName = Annotated[StrictStr, AfterValidator(v.check_interface_name)]
IPv4Address = Annotated[StrictStr, AfterValidator(v.check_ipv4_address)]
IPv4Cidr = Annotated[StrictStr, AfterValidator(v.check_ipv4_interface)]
Duration = Annotated[StrictStr, AfterValidator(v.check_duration)]
MaxUnavailable = Annotated[int | str, BeforeValidator(_check_max_unavailable)]
PciAddress = Annotated[StrictStr, AfterValidator(v.check_pci_address)]
PciId = Annotated[StrictStr, AfterValidator(v.check_pci_id)]
DriverName = Annotated[StrictStr, AfterValidator(v.check_driver_name)]


class StrictModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        hide_input_in_errors=True,
    )


class PciDeviceSpec(StrictModel):
    """One PCI device of a host's inventory, as sysfs shows it (`python -m numa_kubelets.discover` prints them)."""

    address: PciAddress = Field(
        description="The device's PCI address as sysfs writes it (`0000:41:00.0`, lowercase hex); unique per host."
    )
    pci_class: Annotated[StrictStr, AfterValidator(v.check_pci_class)] = Field(
        alias="class", description="Its PCI class, sysfs' `class` (`0x010802`: an NVMe controller)."
    )
    vendor: PciId = Field(description="Its vendor id, sysfs' `vendor` (`0x10de`: NVIDIA).")
    device: PciId = Field(description="Its device id, sysfs' `device`.")
    driver: DriverName | None = Field(
        default=None,
        description="The kernel driver bound to it (the basename of sysfs' `driver` link: `nvme`, `vfio-pci`); "
        "checked when given. Unset: not checked (an unbound device has none).",
    )


class DeviceSelectSpec(StrictModel):
    """devices[].select: which of the host's PCI devices a resource takes; every key given must match."""

    pci_class: Annotated[StrictStr, AfterValidator(v.check_pci_class_prefix)] | None = Field(
        default=None,
        alias="class",
        description="The PCI class or its leading part (`0x01` mass storage, `0x0108` NVMe, `0x0302` 3D controller).",
    )
    vendor: PciId | None = Field(default=None, description="The vendor id (`0x10de`).")
    device: PciId | None = Field(default=None, description="The device id.")
    driver: DriverName | None = Field(default=None, description="The driver declared for the device.")
    addresses: list[PciAddress] | None = Field(
        default=None,
        min_length=1,
        description="PCI addresses of the host's inventory. At kubelet level, a device of another NUMA node needs "
        "the kubelet's `adoptDevices` too.",
    )


class DeviceResourceSpec(StrictModel):
    """An extended resource that Nodes advertise for some of their host's PCI devices ([Devices](../devices.md))."""

    resource: Annotated[StrictStr, AfterValidator(v.check_extended_resource_name)] = Field(
        description="The extended resource, `<domain>/<name>` (`example.com/nvme`, `nvidia.com/gpu`): a "
        "Kubernetes qualified name outside `kubernetes.io/`, as the kubelet accepts a device plugin's resource."
    )
    plugin: Literal["generic", "sriov", "nvidia"] = Field(
        default="generic",
        description="Who advertises it: `generic`, the generic device plugin the stack runs for each kubelet; "
        "`sriov`, the SR-IOV network device plugin, whose per-Node configuration the stack renders; `nvidia`, "
        "NVIDIA's device plugin, whose per-Node `NVIDIA_VISIBLE_DEVICES` the stack renders.",
    )
    select: DeviceSelectSpec = Field(
        description="Which devices it takes, at least one key; a device goes to the kubelet of its own NUMA node "
        "(or the kubelet that adopts it)."
    )
    device_nodes: list[Annotated[StrictStr, AfterValidator(v.check_device_node_glob)]] | None = Field(
        default=None,
        alias="deviceNodes",
        min_length=1,
        description="`generic` only: globs of the device nodes a pod gets for each device (`/dev/nvme*`), matched "
        "on the host among the nodes that device owns (found through sysfs, never by name). Unset: every device "
        "node the device owns.",
    )


class NumaNodeSpec(StrictModel):
    id: Annotated[
        StrictInt,
        Field(ge=0, le=1023, description="The NUMA node's id on the host (`/sys/devices/system/node/node<id>`)."),
    ]
    cpus: CpuList = Field(
        description='The node\'s CPUs in kernel cpulist syntax (`"0-3,8-11"`), `""` for a memory-only node; '
        "checked against the host at apply."
    )
    pci_devices: list[PciDeviceSpec] = Field(
        default_factory=list,
        alias="pciDevices",
        description="The PCI devices attached to this NUMA node (sysfs `numa_node`); checked against the host at "
        "apply. By default they go to this node's kubelet ([Devices](../devices.md)).",
    )


class TaintSpec(StrictModel):
    key: Annotated[StrictStr, AfterValidator(v.check_taint_key)] = Field(
        description="Label syntax; not under `kubernetes.io`, `k8s.io` or `numa-kubelets.io`."
    )
    value: LabelValue = Field(default="", description="Label value syntax.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="At most one taint per key and effect."
    )


class KubeletSpec(StrictModel):
    numa_node: Annotated[
        StrictInt,
        Field(alias="numaNode", ge=0, le=1023, description="A declared NUMA id; at most one kubelet per NUMA node."),
    ]
    node_name: DnsName | None = Field(
        default=None,
        alias="nodeName",
        description="The Node's name, unique in the stack. Unset: `<host name>-numa<id>`.",
    )
    cpus: CpuList | None = Field(
        default=None,
        description="The slice's CPUs: a non-empty subset of the NUMA node's CPUs (may overlap `systemCpus` when "
        "given explicitly). Unset: the node's CPUs minus `systemCpus`.",
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="Node labels in Kubernetes label syntax; not under `kubernetes.io`/`k8s.io` (except "
        "`node.kubernetes.io`/`kubelet.kubernetes.io`), not under `numa-kubelets.io`. Every kubelet also gets "
        "`numa-kubelets.io/host` and `numa-kubelets.io/numa-node`.",
    )
    max_pods: Annotated[StrictInt, Field(alias="maxPods", ge=1, le=10000, description="The kubelet's `maxPods`.")] = 110
    port: Port | None = Field(
        default=None,
        description="The kubelet's port. Unset: 10250 + 100 * index, index being the kubelet's position among its "
        "host's kubelets by NUMA id; 10250 in namespace mode.",
    )
    healthz_port: Port | None = Field(
        default=None,
        alias="healthzPort",
        description="The healthz port, bound to 127.0.0.1. Unset: 10248 + 100 * index; 10248 in namespace mode.",
    )
    read_only_port: Annotated[
        StrictInt,
        Field(alias="readOnlyPort", ge=0, le=MAX_PORT, description="The kubelet's read-only port; 0 turns it off."),
    ] = 0
    taints: list[TaintSpec] = Field(
        default_factory=list,
        description="Registered with the kubelet and, with a cluster, kept on the Node through the API.",
    )
    # KubeletConfiguration fields: checked field by field by kubelet_config (semantic_problems).
    kubelet_config: dict[str, Any] = Field(
        default_factory=dict,
        alias="kubeletConfig",
        description="`KubeletConfiguration` v1beta1 fields for this kubelet only, merged over the host's and the "
        "stack's ([Tuning the kubelets](../configuration.md#tuning-the-kubelets)).",
    )
    address: IPv4Cidr | None = Field(
        default=None,
        description="Namespace mode, required there: the node IP with its prefix length (`192.0.2.21/24`), "
        "`--node-ip` and the address in the kubelet's namespace. IPv4; unique in the stack; not the host's SSH "
        "address; the gateway must be inside its subnet.",
    )
    device: InterfaceName | None = Field(
        default=None,
        description="With `uplink: device`, required there: the interface moved into the kubelet's namespace (an "
        "SR-IOV VF of the NUMA node's NIC); unique per host; must carry no address or route on the host.",
    )
    # A canary: this kubelet's own binary (and the version its KubeletConfiguration is for).
    kubelet_path: AbsolutePath | None = Field(
        default=None,
        alias="kubeletPath",
        description="This kubelet's own binary (a canary). Unset: the host's `kubeletPath`.",
    )
    kubelet_version: StrictStr | None = Field(
        default=None,
        alias="kubeletVersion",
        description="The version of this kubelet's binary: its `kubeletConfig` is checked against it and the "
        "preflight checks the binary is at least this. Unset: the host's `kubeletVersion`.",
    )
    devices: list[DeviceResourceSpec] | None = Field(
        default=None,
        description="The device resources this kubelet advertises; replaces the host's list whole. Unset: the "
        "host's `devices`.",
    )
    adopt_devices: list[PciAddress] = Field(
        default_factory=list,
        alias="adoptDevices",
        description="PCI addresses of devices of another NUMA node, or with no NUMA affinity, that this kubelet "
        "offers instead of their own node's kubelet (remote to its CPUs: said explicitly here).",
    )


class RolloutSpec(StrictModel):
    """rollout (stack) and hosts[].rollout: how kubelets whose change restarts them are rolled.

    Unset keys fall back to the stack's, then to the defaults of rollout.py.
    """

    max_unavailable: MaxUnavailable | None = Field(
        default=None,
        alias="maxUnavailable",
        description="How many kubelets a change may restart at once (a host's: within the stack's limit): a count, "
        "or a percentage (`\"10%\"`) of the kubelets it governs (the stack's, or the host's), rounded down, at "
        "least 1. Unset: for a host, the stack's; for the stack, 1 with `cluster`, no limit without.",
    )
    drain: StrictBool | None = Field(
        default=None,
        description="Drain a kubelet's Node (cordon, evict) before a change restarts it; only with `cluster`. "
        "Unset: for a host, the stack's; for the stack, true with `cluster`.",
    )


class NetworkSpec(StrictModel):
    """hosts[].network; the checks across its fields are in network.py."""

    mode: Literal["host", "namespace"] = Field(
        default="host",
        description="`host`: the kubelets share the host's network namespace; `namespace`: one network namespace "
        "per kubelet ([Networking](../networking.md)).",
    )
    uplink: Literal["macvlan", "ipvlan", "device"] | None = Field(
        default=None,
        description="Namespace mode: `macvlan` (bridge mode), `ipvlan` (L2 mode) or `device`. Unset: `macvlan`.",
    )
    parent: InterfaceName | None = Field(
        default=None,
        description="With macvlan/ipvlan, required there: the host interface the kubelets' links hang off; its own "
        "addresses and routes are never touched.",
    )
    gateway: IPv4Address | None = Field(
        default=None, description="Namespace mode, required there: the default route of every namespace."
    )
    mtu: Annotated[StrictInt, Field(ge=576, le=65535)] | None = Field(
        default=None, description="Set on each kubelet's link. Unset: the link's default."
    )
    dns: list[IPv4Address] | None = Field(
        default=None,
        description="Up to 3 nameservers: containerd's `/etc/resolv.conf`, the kubelet's `resolvConf` and "
        "`/etc/netns/numa<N>/resolv.conf`. Required when the host's resolv.conf points at a loopback stub "
        "(127.0.0.53). Unset: the host's `/etc/resolv.conf`.",
    )
    private_paths: list[AbsolutePath] | None = Field(
        default=None,
        alias="privatePaths",
        description="Host paths each kubelet's containerd sees as a private copy "
        "(`/var/lib/numa-kubelets/numa<N>/<path>`); not system directories, not nested. Unset: `/etc/cni/net.d`, "
        "`/var/lib/cni`, `/run/flannel`, `/var/lib/calico`, `/var/run/calico`, `/var/run/cilium`.",
    )


class HostClassSpec(StrictModel):
    """hostClasses.<name>: a named host template; a host with `class` takes every key it does not set itself.

    Every key of a host except `name`, `address` and `hostKey` (each host's own). The host's own
    key replaces the class's whole, except `kubeletConfig`, which the host's merges over the
    class's (host_classes.py writes the hosts out).
    """

    ssh_port: Port = Field(default=22, alias="sshPort", description="The host's SSH port.")
    user: Annotated[StrictStr, AfterValidator(v.check_unix_user)] = Field(
        default="root", description="The SSH user; other users than root need passwordless sudo."
    )
    numa_nodes: list[NumaNodeSpec] | None = Field(
        default=None,
        alias="numaNodes",
        min_length=1,
        description="The NUMA topology of the class's hosts, unless a host declares its own.",
    )
    system_cpus: CpuList | None = Field(
        default=None,
        alias="systemCpus",
        description="CPUs kept for the host's own services (`system.slice`, `init.scope`, `user.slice`). Unset: the "
        "lowest CPU of each NUMA node that has CPUs.",
    )
    kubelets: list[KubeletSpec] | None = Field(
        default=None, description="At most one per NUMA node. Unset: one per NUMA node that has CPUs."
    )
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="How this host's kubelets reach the network.")
    kubelet_config: dict[str, Any] = Field(
        default_factory=dict,
        alias="kubeletConfig",
        description="`KubeletConfiguration` v1beta1 fields for this host's kubelets, merged over the stack's (a class's "
        "below its hosts' own) ([Tuning the kubelets](../configuration.md#tuning-the-kubelets)).",
    )
    kubelet_path: AbsolutePath | None = Field(
        default=None,
        alias="kubeletPath",
        description="This host's kubelet binary; the preflight checks every binary of the host. Unset: the stack's.",
    )
    generic_device_plugin_path: AbsolutePath | None = Field(
        default=None,
        alias="genericDevicePluginPath",
        description="This host's generic device plugin binary (`generic` device resources). Unset: the stack's.",
    )
    kubelet_version: StrictStr | None = Field(
        default=None,
        alias="kubeletVersion",
        description="The version of this host's kubelet binary (checks its `kubeletConfig`). Unset: the stack's.",
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="This host's rollout limits, within the stack's."
    )
    pci_devices: list[PciDeviceSpec] = Field(
        default_factory=list,
        alias="pciDevices",
        description="PCI devices with no NUMA affinity (sysfs `numa_node` -1); no kubelet offers them unless one "
        "adopts them (`kubelets[].adoptDevices`).",
    )
    devices: list[DeviceResourceSpec] | None = Field(
        default=None,
        description="The device resources of this host's kubelets; replaces the stack's list whole. Unset: the "
        "stack's `devices`.",
    )


class HostSpec(HostClassSpec):
    """hosts[]: one machine. With `class`, the keys it does not set are its class's (host_classes.py)."""

    name: DnsLabel = Field(description="The host's name, unique in the stack.")
    address: Annotated[StrictStr, AfterValidator(v.check_address)] = Field(
        description="Where to reach the host over SSH: an IP literal or a DNS name."
    )
    host_key: Annotated[StrictStr, AfterValidator(v.check_host_key)] | None = Field(
        default=None,
        alias="hostKey",
        description="The host's SSH public key (`ssh-ed25519 AAAA...`), pinned: a host answering with another key is "
        "refused. Required unless the stack sets `insecureSkipHostKeyCheck`; "
        "`python -m numa_kubelets.discover` prints it with the host's topology, as does "
        "`ssh-keyscan -t ed25519 -p <sshPort> <address>` (after the address). Each host's own, never a "
        "class's.",
    )
    host_class: DnsLabel | None = Field(
        default=None,
        alias="class",
        description="A class of `hostClasses`: the host takes every key it does not set itself from it.",
    )
    numa_nodes: list[NumaNodeSpec] = Field(  # required here, optional in a class
        alias="numaNodes",
        min_length=1,
        description="The host's NUMA topology as declared; the preflight checks it against the host before "
        "anything changes (`python -m numa_kubelets.discover` prints it).",
    )


class ClusterSpec(StrictModel):
    server: Annotated[StrictStr, AfterValidator(v.check_server_url)] = Field(
        description="The API server's URL as the kubelets reach it; each host's preflight checks it from the host."
    )
    ca_cert: Annotated[StrictStr, AfterValidator(v.check_pem_certificate)] = Field(
        alias="caCert", description="The cluster's CA certificate (PEM)."
    )
    serving_certificates: Literal["selfSigned", "bootstrap"] = Field(
        default="selfSigned",
        alias="servingCertificates",
        description="`bootstrap`: `serverTLSBootstrap: true`; the cluster then needs an approver that checks the SANs.",
    )
    remove_nodes: StrictBool = Field(
        default=True,
        alias="removeNodes",
        description="Cordon, drain and delete a kubelet's Node when it leaves the stack.",
    )
    drain_timeout: Duration = Field(
        default="5m", alias="drainTimeout", description="How long a drain may take before the update fails."
    )
    dns: Annotated[StrictStr, AfterValidator(v.check_ip_address)] | None = Field(
        default=None,
        description="The kubelets' `clusterDNS`. Unset: the clusterIP of `kube-system/kube-dns`.",
    )
    domain: DnsName = Field(default="cluster.local", description="The kubelets' `clusterDomain`.")


class DemoSpec(StrictModel):
    enabled: bool | None = Field(
        default=None,
        description="Demo pods that prove each kubelet's placement ([Demo pods](../demo-pods.md)); need `cluster`. "
        "Unset: true with `cluster`, else false.",
    )
    namespace: DnsLabel = Field(
        default="numa-demo",
        description="The demo's own namespace, created and deleted by the stack; not `default` or `kube-*`.",
    )
    image: Annotated[StrictStr, AfterValidator(v.check_image)] = Field(
        default="registry.k8s.io/pause:3.10", description="The demo pods' image."
    )
    command: list[Annotated[StrictStr, AfterValidator(v.check_command_argument)]] = Field(
        default_factory=list, description="The demo pods' command; empty: the image's default."
    )
    ready_timeout: Duration = Field(
        default="10m",
        alias="readyTimeout",
        description="How long each Node and each demo pod may take to become Ready (`90s`, `10m`, `1h`).",
    )


class ContainerdSpec(StrictModel):
    # Air-gapped clusters: the pod sandbox ("pause") image every containerd instance uses, from a
    # registry mirror or imported beforehand. None: containerd's own default.
    sandbox_image: Annotated[StrictStr, AfterValidator(v.check_image)] | None = Field(
        default=None,
        alias="sandboxImage",
        description='The pod sandbox ("pause") image of every containerd instance; for air-gapped clusters a '
        "registry mirror or an image imported into each instance's `k8s.io` namespace beforehand "
        "(`ctr --address /run/containerd-numa<N>/containerd.sock -n k8s.io images import pause.tar`). "
        "Unset: containerd's own default.",
    )


class StackConfig(StrictModel):
    hosts: list[HostSpec] = Field(min_length=1, description="The hosts to split, at least one.")
    host_classes: dict[DnsLabel, HostClassSpec] = Field(
        default_factory=dict,
        alias="hostClasses",
        description="Named host templates ([Fleets](../fleets.md#host-classes)): a host with `class` is exactly the "
        "host written out with the class's keys, so a fleet's stack file stays small (its whole config must fit "
        "in one environment variable of 128 KiB).",
    )
    insecure_skip_host_key_check: StrictBool = Field(
        default=False,
        alias="insecureSkipHostKeyCheck",
        description="Accept whatever SSH host key a host without `hostKey` answers with, and send it root scripts "
        "and the bootstrap token anyway. Unset: every host must pin its `hostKey`.",
    )
    ssh_private_key: SecretStr | None = Field(
        default=None,
        alias="sshPrivateKey",
        description="The SSH private key (PEM/OpenSSH); a secret. Neither this nor `sshPrivateKeyPath`: the SSH agent.",
    )
    ssh_private_key_path: Annotated[StrictStr, AfterValidator(v.check_command_argument)] | None = Field(
        default=None,
        alias="sshPrivateKeyPath",
        description="A local file holding the SSH private key (`~` expands; relative to the project); not both "
        "with `sshPrivateKey`.",
    )
    cluster: ClusterSpec | None = Field(
        default=None,
        description="Where the kubelets register ([Joining a cluster](../cluster.md)). Unset: standalone kubelets, "
        "no demo.",
    )
    bootstrap_token: Annotated[SecretStr, AfterValidator(_check_token)] | None = Field(
        default=None,
        alias="bootstrapToken",
        description="A secret, `[a-z0-9]{6}.[a-z0-9]{16}`; only with `cluster`. Unset: the stack creates its own "
        "token Secret and its bindings.",
    )
    kubeconfig: SecretStr | None = Field(
        default=None,
        description="A secret: the stack's cluster credential (token, bindings, Nodes, demo pods). Unset: the "
        "ambient `KUBECONFIG`.",
    )
    demo: DemoSpec = Field(default_factory=DemoSpec, description="The demo pods.")
    kubelet_path: AbsolutePath = Field(
        default="/usr/bin/kubelet", alias="kubeletPath", description="The kubelet binary on the hosts."
    )
    containerd_path: AbsolutePath = Field(
        default="/usr/bin/containerd", alias="containerdPath", description="The containerd binary on the hosts."
    )
    generic_device_plugin_path: AbsolutePath = Field(
        default="/usr/local/bin/generic-device-plugin",
        alias="genericDevicePluginPath",
        description="The generic device plugin binary (`github.com/squat/generic-device-plugin`) on the hosts: run "
        "for each kubelet that offers `generic` device resources; the preflight checks it only on hosts that have "
        "such a kubelet ([Devices](../devices.md#plugins-the-stack-renders-for)).",
    )
    kubelet_config: dict[str, Any] = Field(
        default_factory=dict,
        alias="kubeletConfig",
        description="`KubeletConfiguration` v1beta1 fields for every kubelet, merged stack < host < kubelet "
        "([Tuning the kubelets](../configuration.md#tuning-the-kubelets)).",
    )
    kubelet_version: StrictStr = Field(
        default=kubelet_configuration.DEFAULT_KUBELET_VERSION,
        alias="kubeletVersion",
        description='The oldest kubelet on the hosts, quoted (`"1.30"` to `"1.37"`): decides which kubelet '
        "options may be used; the preflight checks `kubelet --version` is at least this.",
    )
    containerd: ContainerdSpec = Field(
        default_factory=ContainerdSpec,
        description="Settings of every containerd instance ([containerd versions](../configuration.md#containerd-versions)).",
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec,
        description="How kubelets whose change restarts them are rolled ([Rolling changes](../rolling-changes.md)).",
    )
    devices: list[DeviceResourceSpec] = Field(
        default_factory=list,
        description="Device resources every kubelet advertises for its own NUMA node's PCI devices, unless its host "
        "or itself sets `devices` ([Devices](../devices.md)).",
    )

    # Where each written-out host's keys came from (load_config), so that problems found later
    # (build_plan) name the path the user wrote.
    _expansion: Expansion = PrivateAttr(default_factory=lambda: Expansion([], {}))

    @property
    def demo_enabled(self) -> bool:
        return self.demo.enabled if self.demo.enabled is not None else self.cluster is not None

    def user_problems(self, problems: Iterable[Problem]) -> list[Problem]:
        """Problems of the written-out hosts, at the paths the user wrote (a class's keys in the class)."""
        return self._expansion.user_problems(problems, class_problems(self))


# Keys whose Pulumi config value is a JSON document rather than a plain string.
_STRUCTURED_KEYS = {
    "hosts",
    "hostClasses",
    "cluster",
    "demo",
    "kubeletConfig",
    "containerd",
    "rollout",
    "insecureSkipHostKeyCheck",  # a YAML boolean arrives as the string "true"
    "devices",
}


def decode_pulumi_values(values: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi hands every config value over as a string; structured ones are JSON."""
    decoded: dict[str, Any] = {}
    for key, text in values.items():
        if key in _STRUCTURED_KEYS and isinstance(text, str):
            try:
                decoded[key] = json.loads(text)
            except json.JSONDecodeError:
                decoded[key] = text  # reported by the model as the wrong type
        else:
            decoded[key] = text
    return decoded


def format_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in {"str", "int", "bool", "[key]"}:
            continue  # pydantic's name for a validator, not a config key
        else:
            path += f".{part}" if path else part
    return path


def _problem_from_pydantic(error: Mapping[str, Any]) -> Problem:
    path = format_path(tuple(error["loc"]))
    kind = error["type"]
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        message = "unknown key (check the spelling against the configuration reference in README.md)"
    elif kind == "missing":
        message = MISSING_KEY
    return Problem(path, message)


def load_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the decoded `numa-kubelets:*` values, hosts with a class written out; raise
    ConfigError with every problem, each at the path the user wrote."""
    expansion = expand_host_classes(raw.get("hosts"), raw.get("hostClasses"))
    written_out = dict(raw)
    if "hosts" in raw:
        written_out["hosts"] = expansion.hosts
    if "hostClasses" in raw:
        written_out["hostClasses"] = expansion.classes
    try:
        config = StackConfig.model_validate(written_out)
    except ValidationError as error:
        problems = [_problem_from_pydantic(e) for e in error.errors()]
        problems += _problems_of_well_formed_hosts(expansion.hosts)
        in_classes = [p for p in problems if p.path.startswith("hostClasses.")]
        raise ConfigError([*expansion.problems, *expansion.user_problems(problems, in_classes)]) from None
    config._expansion = expansion
    problems = config.user_problems(semantic_problems(config))
    if problems or expansion.problems:
        raise ConfigError([*expansion.problems, *problems])
    return config


# Keys whose values are secrets: Pulumi must hold them encrypted (`pulumi config set --secret`).
SECRET_KEYS = ("sshPrivateKey", "bootstrapToken", "kubeconfig")
# How to set each one: from its file, or at the prompt (a token on the command line would be in
# the shell's history).
_SET_SECRET_INPUT = {"sshPrivateKey": " < ~/.ssh/id_ed25519", "kubeconfig": " < ~/.kube/config", "bootstrapToken": ""}


def set_secret_command(key: str) -> str:
    return f"pulumi config set --secret {NAMESPACE}:{key}{_SET_SECRET_INPUT.get(key, '')}"


def plaintext_secret_problems(present: Iterable[str], encrypted: Collection[str]) -> list[Problem]:
    """Each secret key set, but not as a secret.

    A plain value is readable in the stack file and Pulumi keeps it unencrypted in the state (in
    the inputs of every resource it reaches, e.g. the dynamic providers'), so it is refused before
    anything is created. `present`: the keys the stack sets; `encrypted`: those Pulumi holds as
    secrets (the SDK's secret config keys).
    """
    return [
        Problem(
            key,
            "is a secret but is set in plain text (readable in the stack file, and kept unencrypted in the "
            f"stack's state); set it encrypted with: {set_secret_command(key)}",
        )
        for key in sorted(set(present) & set(SECRET_KEYS))
        if key not in encrypted
    ]


def load_stack_values(values: Mapping[str, str], encrypted: Collection[str]) -> StackConfig:
    """The `numa-kubelets:*` values as Pulumi hands them over (strings by key, without the
    namespace) and the keys among them that Pulumi holds as secrets: validated, every problem of
    the configuration and every secret in plain text reported at once (ConfigError)."""
    secrets_in_plain_text = plaintext_secret_problems(values, encrypted)
    try:
        config = load_config(decode_pulumi_values(values))
    except ConfigError as error:
        raise ConfigError(error.problems + secrets_in_plain_text) from None
    if secrets_in_plain_text:
        raise ConfigError(secrets_in_plain_text)
    return config


def _problems_of_well_formed_hosts(hosts: Any) -> list[Problem]:
    """While other keys are malformed, still report what is wrong inside the hosts that are not."""
    if not isinstance(hosts, list):
        return []
    problems: list[Problem] = []
    adapter = TypeAdapter(HostSpec)
    for index, raw_host in enumerate(hosts):
        try:
            host = adapter.validate_python(raw_host)
        except ValidationError:
            continue
        problems.extend(host_problems(host, f"hosts[{index}]"))
    return problems


def semantic_problems(config: StackConfig) -> list[Problem]:
    """Checks across fields of one stack that pydantic's per-field validation cannot make."""
    problems: list[Problem] = []
    if config.ssh_private_key is not None and config.ssh_private_key_path is not None:
        problems.append(Problem("sshPrivateKeyPath", "set either sshPrivateKey or sshPrivateKeyPath, not both"))
    if config.cluster is None and config.bootstrap_token is not None:
        problems.append(Problem("bootstrapToken", "set, but there is no cluster to join"))
    if config.cluster is None and config.demo.enabled:
        problems.append(Problem("demo.enabled", "demo pods need a cluster; set cluster or disable the demo"))
    for index, host in enumerate(config.hosts):
        problems.extend(host_problems(host, f"hosts[{index}]"))
    problems.extend(class_problems(config))
    problems.extend(kubelet_config_problems(config))
    problems.extend(rollout_problems(config))
    problems.extend(host_key_problems(config))
    return problems


def class_problems(config: StackConfig) -> list[Problem]:
    """What a class shows on its own, used by a host or not: its topology and kubelets, and its
    `kubeletConfig` layers against its own kubeletVersion (else the stack's)."""
    joined = config.cluster is not None
    problems: list[Problem] = []
    for name, host_class in config.host_classes.items():
        path = f"hostClasses.{name}"
        problems += host_problems(host_class, path)
        version_problems, version = _checked_version(
            host_class.kubelet_version, f"{path}.kubeletVersion", config.kubelet_version
        )
        problems += version_problems
        problems += kubelet_configuration.layer_problems(
            host_class.kubelet_config, f"{path}.kubeletConfig", version, joined
        )
        for index, kubelet in enumerate(host_class.kubelets or []):
            kubelet_path = f"{path}.kubelets[{index}]"
            own_problems, kubelet_version = _checked_version(
                kubelet.kubelet_version, f"{kubelet_path}.kubeletVersion", version
            )
            problems += own_problems
            problems += kubelet_configuration.layer_problems(
                kubelet.kubelet_config, f"{kubelet_path}.kubeletConfig", kubelet_version, joined
            )
    return problems


def host_key_problems(config: StackConfig) -> list[Problem]:
    """Every host pins its SSH host key unless the stack opts out: the program sends each host
    root scripts and the bootstrap token, so a host that answers with an unknown key must be refused."""
    if config.insecure_skip_host_key_check:
        return []
    unpinned = [(index, host) for index, host in enumerate(config.hosts) if host.host_key is None]
    if not unpinned:
        return []
    named = ", ".join(f"{host.name} (hosts[{index}])" for index, host in unpinned)
    example = unpinned[0][1]
    port = f"-p {example.ssh_port} " if example.ssh_port != 22 else ""
    return [
        Problem(
            "hosts",
            f"no hostKey pinned for {len(unpinned)} host(s): {named}. The program sends each host root scripts and "
            "the bootstrap token, so it must know the host's SSH key. Read each key over a network you trust: "
            f"`ssh-keyscan -t ed25519 {port}{example.address}` prints it after the address; set it on the host as "
            '`hostKey: "ssh-ed25519 AAAA..."` (`python -m numa_kubelets.discover -f <file of addresses>` prints '
            "every host's entry with its key). To accept any key instead (the behaviour before pinning was "
            f"required), set {NAMESPACE}:insecureSkipHostKeyCheck: true",
        )
    ]


def kubelet_config_problems(config: StackConfig) -> list[Problem]:
    """Each `kubeletConfig` layer on its own, against the kubelet version of its level (a host or
    a kubelet may run its own); the merged ones are checked with the plan."""
    joined = config.cluster is not None
    problems, stack_version = _checked_version(config.kubelet_version, "kubeletVersion")
    problems += kubelet_configuration.layer_problems(config.kubelet_config, "kubeletConfig", stack_version, joined)
    for host_index, host in enumerate(config.hosts):
        path = f"hosts[{host_index}]"
        host_problems_, host_version = _checked_version(host.kubelet_version, f"{path}.kubeletVersion", stack_version)
        problems += host_problems_
        problems += kubelet_configuration.layer_problems(
            host.kubelet_config, f"{path}.kubeletConfig", host_version, joined
        )
        for index, kubelet in enumerate(host.kubelets or []):
            kubelet_path = f"{path}.kubelets[{index}]"
            own_problems, version = _checked_version(
                kubelet.kubelet_version, f"{kubelet_path}.kubeletVersion", host_version
            )
            problems += own_problems
            problems += kubelet_configuration.layer_problems(
                kubelet.kubelet_config, f"{kubelet_path}.kubeletConfig", version, joined
            )
    return problems


def _checked_version(version: str | None, path: str, inherited: str | None = None) -> tuple[list[Problem], str]:
    """The problems of a kubeletVersion and the version to check its layers against (the schema's
    own when it is wrong, so that the layers' problems are still reported)."""
    if version is None:
        return [], inherited or kubelet_configuration.SCHEMA_KUBELET_VERSION
    problems = kubelet_configuration.kubelet_version_problems(version, path)
    return problems, kubelet_configuration.SCHEMA_KUBELET_VERSION if problems else version


def rollout_problems(config: StackConfig) -> list[Problem]:
    """Draining needs a cluster to drain from."""
    if config.cluster is not None:
        return []
    problems = []
    if config.rollout.drain:
        problems.append(Problem("rollout.drain", "there is no cluster to drain from; set cluster or drop drain"))
    for index, host in enumerate(config.hosts):
        if host.rollout.drain:
            problems.append(
                Problem(f"hosts[{index}].rollout.drain", "there is no cluster to drain from; set cluster or drop drain")
            )
    return problems


def host_problems(host: HostClassSpec, path: str) -> list[Problem]:
    """A host's (or a class's) topology, systemCpus and kubelets; a class without numaNodes has none to check."""
    problems: list[Problem] = inventory_problems(host, path)
    if host.numa_nodes is None:
        return problems
    node_cpus: dict[int, CpuSet] = {}
    owner_of_cpu: dict[int, int] = {}
    for index, node in enumerate(host.numa_nodes):
        node_path = f"{path}.numaNodes[{index}]"
        if node.id in node_cpus:
            problems.append(Problem(f"{node_path}.id", f"NUMA node {node.id} is declared twice"))
            continue
        node_cpus[node.id] = node.cpus
        for cpu in node.cpus:
            if cpu in owner_of_cpu:
                problems.append(Problem(f"{node_path}.cpus", f"CPU {cpu} is also on NUMA node {owner_of_cpu[cpu]}"))
            else:
                owner_of_cpu[cpu] = node.id
    all_cpus = CpuSet(owner_of_cpu)
    if not all_cpus:
        problems.append(Problem(f"{path}.numaNodes", "no NUMA node has CPUs"))
        return problems

    system_cpus = host.system_cpus if host.system_cpus is not None else default_system_cpus(host)
    if host.system_cpus is not None:
        stray = host.system_cpus - all_cpus
        if stray:
            problems.append(Problem(f"{path}.systemCpus", f"CPUs {stray} are on no declared NUMA node"))
        if not host.system_cpus:
            problems.append(Problem(f"{path}.systemCpus", "must name at least one CPU for the host's own services"))

    if host.kubelets is None:
        for node in host.numa_nodes:
            if node.cpus and not node.cpus - system_cpus:
                problems.append(
                    Problem(
                        f"{path}.systemCpus",
                        f"takes every CPU of NUMA node {node.id} (cpus {node.cpus}), leaving its kubelet none; "
                        "shrink systemCpus or list kubelets explicitly",
                    )
                )
        return problems

    seen_nodes: dict[int, int] = {}
    for index, kubelet in enumerate(host.kubelets):
        kubelet_path = f"{path}.kubelets[{index}]"
        problems.extend(taint_problems(kubelet, kubelet_path))
        if kubelet.numa_node not in node_cpus:
            declared = ",".join(str(i) for i in sorted(node_cpus))
            problems.append(
                Problem(
                    f"{kubelet_path}.numaNode", f"NUMA node {kubelet.numa_node} is not declared (declared: {declared})"
                )
            )
            continue
        if kubelet.numa_node in seen_nodes:
            problems.append(
                Problem(
                    f"{kubelet_path}.numaNode",
                    f"NUMA node {kubelet.numa_node} already has a kubelet (kubelets[{seen_nodes[kubelet.numa_node]}])",
                )
            )
        seen_nodes.setdefault(kubelet.numa_node, index)
        own = node_cpus[kubelet.numa_node]
        if kubelet.cpus is not None:
            for cpu in kubelet.cpus - own:
                problems.append(
                    Problem(
                        f"{kubelet_path}.cpus",
                        f"CPU {cpu} is not on NUMA node {kubelet.numa_node} (cpus {own or 'none'})",
                    )
                )
            if not kubelet.cpus:
                problems.append(Problem(f"{kubelet_path}.cpus", "must name at least one CPU"))
        elif not own:
            problems.append(Problem(f"{kubelet_path}.numaNode", f"NUMA node {kubelet.numa_node} has no CPUs"))
        elif not own - system_cpus:
            problems.append(
                Problem(
                    f"{kubelet_path}.cpus",
                    f"NUMA node {kubelet.numa_node} (cpus {own}) has no CPU left after systemCpus {system_cpus}; "
                    "set cpus explicitly or shrink systemCpus",
                )
            )
    return problems


def inventory_problems(host: HostClassSpec, path: str) -> list[Problem]:
    """A PCI address is one device: declared once per host."""
    problems: list[Problem] = []
    first: dict[str, str] = {}
    places = [
        (f"{path}.numaNodes[{n}].pciDevices[{i}]", d.address)
        for n, node in enumerate(host.numa_nodes or [])
        for i, d in enumerate(node.pci_devices)
    ]
    places += [(f"{path}.pciDevices[{i}]", d.address) for i, d in enumerate(host.pci_devices)]
    for place, address in places:
        if address in first:
            problems.append(
                Problem(f"{place}.address", f"PCI device {address} is already declared at {first[address]}")
            )
        first.setdefault(address, place)
    return problems


def taint_problems(kubelet: KubeletSpec, path: str) -> list[Problem]:
    """A Node holds at most one taint per key and effect; the API server refuses a second."""
    problems: list[Problem] = []
    first: dict[tuple[str, str], int] = {}
    for index, taint in enumerate(kubelet.taints):
        identity = (taint.key, taint.effect)
        if identity in first:
            problems.append(
                Problem(
                    f"{path}.taints[{index}]",
                    f"taint {taint.key}:{taint.effect} is already declared (taints[{first[identity]}])",
                )
            )
        first.setdefault(identity, index)
    return problems


def default_system_cpus(host: HostClassSpec) -> CpuSet:
    """The lowest CPU of each NUMA node that has CPUs."""
    return CpuSet(node.cpus.lowest() for node in host.numa_nodes or [] if node.cpus)
