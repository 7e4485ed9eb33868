"""Every file a host receives, rendered from the plan. Pure and deterministic."""

from __future__ import annotations

import functools
import json
import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from . import hugepages, network, reservations
from .cluster import registration_labels
from .plan import (
    POD_NETNS_DIR,
    POD_NETNS_MOUNT_MARKER,
    SHARED_CONTAINERD_RUN,
    SHARED_DEVICE_PLUGINS_DIR,
    UNSHARE,
    ClusterPlan,
    HostPlan,
    KubeletPlan,
    Plan,
)

KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"
HEADER = "# Managed by numa-kubelets (Pulumi). Local edits are overwritten on the next update.\n"
DROPIN_NAME = "50-numa-kubelets.conf"
q = shlex.quote


@dataclass(frozen=True)
class HostFile:
    path: str
    content: str
    mode: str = "0644"


@dataclass(frozen=True)
class HostServiceUnit:
    """A unit the host's own processes live in, and the section its cpuset settings go in."""

    unit: str
    section: str

    @property
    def dropin_path(self) -> str:
        return f"/etc/systemd/system/{self.unit}.d/{DROPIN_NAME}"


HOST_SERVICE_UNITS = (
    HostServiceUnit("system.slice", "Slice"),
    HostServiceUnit("init.scope", "Scope"),
    HostServiceUnit("user.slice", "Slice"),
)


# libyaml's emitter when PyYAML has it (its wheels do): the same bytes as the pure-Python one
# (tests/unit/test_render.py compares them) in a third of the time, which a fleet's per-kubelet
# secret documents (not cached, unlike the shared ones below) add up to.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _yaml(document: Mapping[str, Any]) -> str:
    return yaml.dump(document, Dumper=_DUMPER, sort_keys=False, default_flow_style=False)


@functools.lru_cache(maxsize=4096)
def _yaml_of_json(document_json: str) -> str:
    return _yaml(json.loads(document_json))


def _shared_yaml(document: Mapping[str, Any]) -> str:
    """For non-secret documents: a fleet repeats the same few, and PyYAML's writer is slow."""
    return _yaml_of_json(json.dumps(document))


def host_service_dropins(host: HostPlan) -> list[HostFile]:
    return [
        HostFile(
            unit.dropin_path,
            HEADER
            + "# Keeps the host's own processes off the CPUs given to the NUMA kubelets.\n"
            + f"[{unit.section}]\n"
            + f"AllowedCPUs={host.system_cpus}\n"
            + f"AllowedMemoryNodes={host.system_mems}\n",
        )
        for unit in HOST_SERVICE_UNITS
    ]


def slice_unit(kubelet: KubeletPlan) -> HostFile:
    return HostFile(
        kubelet.layout.slice_path,
        HEADER
        + "[Unit]\n"
        + f"Description=numa-kubelets: NUMA node {kubelet.numa_node} of {kubelet.host} "
        + f"(CPUs {kubelet.cpus}, memory node {kubelet.mems})\n"
        + "Before=slices.target\n"
        + "\n"
        + "[Slice]\n"
        + f"AllowedCPUs={kubelet.cpus}\n"
        + f"AllowedMemoryNodes={kubelet.mems}\n",
    )


def containerd_config(kubelet: KubeletPlan, sandbox_image: str | None = None) -> HostFile:
    """A version-2 config: containerd 1.6 and 1.7 read it as it is, 2.x migrates it on load
    (`sandbox_image` becomes `[plugins.'io.containerd.cri.v1.images'.pinned_images] sandbox`)."""
    layout = kubelet.layout
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    # A validated image reference: no quote or backslash can end the TOML string early.
    sandbox = f'  sandbox_image = "{sandbox_image}"\n' if sandbox_image else ""
    return HostFile(
        layout.containerd_config,
        HEADER
        + "version = 2\n"
        + f'root = "{layout.containerd_root}"\n'
        + f'state = "{layout.containerd_state}"\n'
        + "\n[grpc]\n"
        + f'  address = "{layout.containerd_socket}"\n'
        + "\n[ttrpc]\n"
        + f'  address = "{layout.containerd_socket}.ttrpc"\n'
        + "\n[debug]\n"
        + f'  address = "{layout.containerd_state}/debug.sock"\n'
        + f"\n[{cri}]\n"
        + sandbox
        + '  stream_server_address = "127.0.0.1"\n'
        + '  stream_server_port = "0"\n'
        + f"\n[{cri}.containerd.runtimes.runc]\n"
        + '  runtime_type = "io.containerd.runc.v2"\n'
        + f"\n[{cri}.containerd.runtimes.runc.options]\n"
        + "  SystemdCgroup = true\n",
    )


def containerd_unit(kubelet: KubeletPlan, containerd_path: str) -> HostFile:
    layout = kubelet.layout
    run_dir = layout.containerd_state.removeprefix("/run/")
    return HostFile(
        layout.containerd_unit_path,
        HEADER
        + "[Unit]\n"
        # No CPUs here: a slice's cpuset changes live, without restarting the runtime.
        + f"Description=numa-kubelets: containerd for NUMA node {kubelet.numa_node}\n"
        + "Documentation=https://containerd.io\n"
        + "After=network.target local-fs.target\n"
        + (network.runtime_unit_dependencies(kubelet.network) if kubelet.network else "")
        + "\n"
        + "[Service]\n"
        + "Type=notify\n"
        + f"Slice={layout.slice}\n"
        + (network.join_namespace_settings(kubelet.network) if kubelet.network else "")
        # Shims and runc keep state under the hard-coded /run/containerd: one private copy each.
        + f"RuntimeDirectory={run_dir} {run_dir}/run\n"
        + "RuntimeDirectoryPreserve=yes\n"
        + f"ExecStartPre=/bin/sh {layout.containerd_prepare_script}\n"
        # Not BindPaths=: see containerd_namespace_script.
        + f"ExecStart={UNSHARE} --mount --propagation unchanged -- /bin/sh {layout.containerd_namespace_script} \\\n"
        + f"    {containerd_path} --config {layout.containerd_config}\n"
        + "Delegate=yes\n"
        # Containers outlive a restart of their runtime, as with the upstream unit.
        + "KillMode=process\n"
        + "Restart=always\n"
        + "RestartSec=5\n"
        + "LimitNPROC=infinity\n"
        + "LimitCORE=infinity\n"
        + "TasksMax=infinity\n"
        + "OOMScoreAdjust=-999\n"
        + "\n"
        + "[Install]\n"
        + "WantedBy=multi-user.target\n",
    )


def kubelet_config(kubelet: KubeletPlan, cluster: ClusterPlan | None) -> HostFile:
    layout = kubelet.layout
    if cluster is not None:
        authentication = {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": layout.ca_cert},
        }
        authorization = {"mode": "Webhook"}
    else:
        authentication = {"anonymous": {"enabled": False}, "webhook": {"enabled": False}}
        authorization = {"mode": "AlwaysAllow"}
    document = {
        "apiVersion": KUBELET_CONFIG_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "cgroupRoot": layout.cgroup_root,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "port": kubelet.port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": kubelet.healthz_port,
        "readOnlyPort": kubelet.read_only_port,
        "maxPods": kubelet.max_pods,
        "podLogsDir": layout.pod_logs_dir,
        "enforceNodeAllocatable": ["pods"],
        "rotateCertificates": cluster is not None,
        "authentication": authentication,
        "authorization": authorization,
    }
    if cluster is not None:
        if cluster.dns is None:
            raise ValueError("the plan's clusterDNS is not resolved yet (components/cluster.py resolves it)")
        document["clusterDNS"] = [cluster.dns]
        document["clusterDomain"] = cluster.domain
        document["serverTLSBootstrap"] = cluster.server_tls_bootstrap
    # The user's kubeletConfig (owned fields were refused) and the NUMA-derived manager settings.
    document.update(kubelet.settings.rendered_fields())
    if kubelet.network is not None and kubelet.network.resolv_conf is not None:
        document["resolvConf"] = kubelet.network.resolv_conf
    return HostFile(layout.kubelet_config, HEADER + _shared_yaml(document))


def register_taints_config(kubelet: KubeletPlan) -> HostFile:
    """The taints the kubelet registers its Node with, as a drop-in the prepare script puts in
    place at each start. The kubelet reads them only at registration (afterwards the stack
    reconciles them through the API), so a change is installed without a restart."""
    document = {
        "apiVersion": KUBELET_CONFIG_API,
        "kind": "KubeletConfiguration",
        "registerWithTaints": [taint.manifest() for taint in kubelet.taints],
    }
    return HostFile(kubelet.layout.register_taints_config, HEADER + _yaml(document))


# What the kubelet checks its cgroupRoot's cgroup for (those of them the root cgroup has):
# k8s.io/kubernetes pkg/kubelet/cm getSupportedUnifiedControllers.
KUBELET_CGROUP_CONTROLLERS = ("cpu", "cpuset", "hugetlb", "memory", "pids")
# The cgroup v2 controllers systemd turns on and off itself: never touched behind its back.
SYSTEMD_CGROUP_CONTROLLERS = ("cpu", "cpuset", "io", "memory", "pids")
CGROUP_FS = "/sys/fs/cgroup"
# The root cgroup's cgroup.subtree_control before the first kubelet started (this boot).
ROOT_CONTROLLERS_RECORD = "/run/numa-kubelets/root-cgroup-controllers"


def cgroup_controllers_shell(slice_name: str, cgroup_fs: str = CGROUP_FS, record: str = ROOT_CONTROLLERS_RECORD) -> str:
    """Offers the slice every controller the kubelet checks its cgroupRoot for.

    The real kubelet refuses to start when its cgroupRoot's cgroup lacks one the root cgroup
    has (`cgroup ["numa0"] has some missing controllers: hugetlb`, measured with 1.37.2).
    systemd turns on only the controllers it manages (SYSTEMD_CGROUP_CONTROLLERS), never
    hugetlb; a kubelet with cgroupRoot / never notices, as the root cgroup itself has them all.
    A top-level slice's cgroup.controllers is the root's cgroup.subtree_control. Runs at every
    start (the root's controllers reset on reboot); what the root had before is recorded once.
    """
    root = f"{cgroup_fs}/cgroup.subtree_control"
    available = f"{cgroup_fs}/cgroup.controllers"
    offered = f"{cgroup_fs}/{slice_name}/cgroup.controllers"
    controllers = " ".join(KUBELET_CGROUP_CONTROLLERS)
    return (
        f"mkdir -p {posixpath.dirname(record)}\n"
        # On a host's first start the kubelets of all NUMA nodes run this at the same moment: under
        # a lock, so that none records the root's controllers after another turned one on (the
        # release would then leave it on); each with its own temporary file all the same.
        f"exec 8>{record}.lock\n"
        "flock 8\n"
        f"if [ ! -e {record} ]; then\n"
        f"  cat {root} > {record}.$$.tmp && mv -f {record}.$$.tmp {record}\n"
        "fi\n"
        "enable=\n"
        f"for controller in {controllers}; do\n"
        f'  if grep -qw "$controller" {available} && ! grep -qw "$controller" {root}; then\n'
        '    enable="$enable +$controller"\n'
        "  fi\n"
        "done\n"
        # One write: the kernel takes a space-separated list.
        f'if [ -n "$enable" ]; then echo "${{enable# }}" > {root}; fi\n'
        "exec 8>&-\n"
        f"for controller in {controllers}; do\n"
        f'  if grep -qw "$controller" {available} && ! grep -qw "$controller" {offered}; then\n'
        f'    echo "numa-kubelets: {slice_name} lacks the $controller cgroup controller, which the kubelet '
        'requires of its cgroupRoot" >&2\n'
        "    exit 1\n"
        "  fi\n"
        "done\n"
    )


def release_cgroup_controllers_shell(cgroup_fs: str = CGROUP_FS, record: str = ROOT_CONTROLLERS_RECORD) -> str:
    """For the last slice's remove script: turns off in the root cgroup what was off before the
    kubelets (hugetlb; and rdma, misc, which runc turns on along every container's path), except
    the controllers systemd manages. A write the kernel refuses (EBUSY while a slice's cgroup is
    still going away) is tried again, a few times, before the record goes.

    The slices of a host are removed side by side, and each that finds itself the last runs this:
    under the lock the start scripts record with, so that one releases and removes the record
    while the others wait and then find it gone (without it, one read the record another had just
    removed, and its removal failed: found with the real engine's destroy of three slices).
    """
    systemd = "|".join(SYSTEMD_CGROUP_CONTROLLERS)
    root = f"{cgroup_fs}/cgroup.subtree_control"
    return (
        f"if [ -e {record} ]; then\n"
        f"  exec 8>{record}.lock\n"
        "  flock 8\n"
        f"  if [ -e {record} ]; then\n"
        f'    before=" $(cat {record}) "\n'
        "    for _ in 1 2 3 4 5; do\n"
        "      refused=\n"
        f"      for controller in $(cat {root}); do\n"
        '        case "$before" in (*" $controller "*) continue;; esac\n'
        f'        case "$controller" in ({systemd}) continue;; esac\n'
        f'        echo "-$controller" > {root} 2>/dev/null || refused=yes\n'
        "      done\n"
        '      [ -z "$refused" ] && break\n'
        "      sleep 1\n"
        "    done\n"
        f"    rm -f {record}\n"
        "  fi\n"
        # Still held: whoever waits on it finds no record and does nothing.
        f"  rm -f {record}.lock\n"
        "  exec 8>&-\n"
        "fi\n"
    )


def static_memory_extra(kubelet: KubeletPlan) -> int | None:
    """With the Static memory manager, the share of reservedMemory beyond systemReserved; else None."""
    settings = kubelet.settings
    return settings.memory_reserved_on_own_node_bytes if settings.memory_manager_policy == "Static" else None


def own_mount_point_shell(path: str, lock: str, propagation: str, marker: str | None = None) -> str:
    """Under `lock`: `path` becomes a mount point of its own (bound onto itself) with `propagation`;
    `marker` records that this script made it."""
    return (
        f"exec 9>{lock}\n"
        "flock 9\n"
        f"if ! mountpoint -q {path}; then\n"
        f"  mount --bind {path} {path}\n" + (f"  : > {marker}\n" if marker else "") + "fi\n"
        f"mount --make-{propagation} {path}\n"
    )


def containerd_private_binds(kubelet: KubeletPlan) -> tuple[network.PrivateBind, ...]:
    """What containerd@ sees replaced by the instance's own copy: /run/containerd, and in
    namespace mode the CNI agents' paths and the namespace's resolv.conf."""
    own_run = network.PrivateBind(kubelet.layout.containerd_private_run, SHARED_CONTAINERD_RUN)
    # On hosts that declare PCI devices: a device plugin shipped as a DaemonSet mounts the host
    # path /var/lib/kubelet/device-plugins, which containerd resolves in its own mount namespace;
    # there it is this kubelet's own directory, so the plugin registers with this kubelet only.
    # Only there: on every other host the containerd unit's scripts stay as they were.
    own_plugins = (
        (network.PrivateBind(kubelet.layout.device_plugins_dir, SHARED_DEVICE_PLUGINS_DIR),)
        if kubelet.device_plugins_bind
        else ()
    )
    return (own_run, *own_plugins) + (network.containerd_private_binds(kubelet.network) if kubelet.network else ())


def containerd_prepare_script(kubelet: KubeletPlan) -> HostFile:
    """Runs on the host before containerd starts: the pods' network namespaces get a shared mount point.

    containerd mounts each pod's network namespace under /run/netns and finds it there again
    after its own restart. Those mounts must land in the host's mount namespace, not only in
    containerd's (which ends with it): /run/netns becomes a shared mount point of its own, as
    `ip netns add` makes it, so it stays a peer of the host's while containerd's namespace turns
    /run (holding /run/containerd) into a slave. Made here it is recorded, so the removal of
    the last containerd@ can undo it.
    """
    return HostFile(
        kubelet.layout.containerd_prepare_script,
        "#!/bin/sh\n"
        + HEADER
        + "set -eu\n"
        + f"mkdir -p {POD_NETNS_DIR} {SHARED_CONTAINERD_RUN} /run/numa-kubelets\n"
        # containerd@ of the other NUMA nodes may be starting at the same moment.
        + own_mount_point_shell(POD_NETNS_DIR, "/run/numa-kubelets/netns.lock", "shared", POD_NETNS_MOUNT_MARKER)
        + (_device_plugins_mount_point(kubelet) if kubelet.device_plugins_bind else ""),
        mode="0755",
    )


def _device_plugins_mount_point(kubelet: KubeletPlan) -> str:
    """The shared device-plugins directory, a private mount point of its own, before containerd starts.

    containerd starts before its kubelet, whose prepare script makes the same directory a private
    mount point (under the same lock). Were it not one yet when containerd's namespace is made, the
    namespace would copy a plain directory and bind this kubelet's own directory on it; the mount
    the kubelet's prepare script then makes on the host could propagate into containerd's namespace
    (the parent mount being a peer of the host's) and cover that bind: DaemonSet plugins would land
    in the host's directory, registered with no kubelet. Made here first, containerd's namespace
    copies an existing, private mount point and binds over it, and a later mount on the host (none
    is made: `mountpoint -q` holds) cannot reach it. The source, this kubelet's own directory, is
    made here too: the kubelet's apply script, which also makes it, runs after containerd's.
    """
    return f"mkdir -p {q(kubelet.layout.device_plugins_dir)} {SHARED_DEVICE_PLUGINS_DIR}\n" + own_mount_point_shell(
        SHARED_DEVICE_PLUGINS_DIR, "/run/numa-kubelets/device-plugins.lock", "private"
    )


def containerd_namespace_script(kubelet: KubeletPlan) -> HostFile:
    """Runs containerd in a mount namespace of its own where only its private copies differ.

    systemd's BindPaths= would make every mount of the unit a slave of the host's: the network
    namespaces containerd mounts for pods would stay in a namespace that ends with the process,
    so after a restart containerd finds them closed, reports the pods' sandboxes without an
    address, and the next kubelet start replaces every sandbox (found with the real kubelet).
    Here only the mounts that hold a private copy's target become slaves (the host's mounts
    still arrive, the copy stays here); every other mount, /run/netns among them, stays a peer
    of the host's.
    """
    binds = "".join(
        f"bind_private {q(bind.source)} {q(bind.target)}{' ro' if bind.read_only else ''}\n"
        for bind in containerd_private_binds(kubelet)
    )
    return HostFile(
        kubelet.layout.containerd_namespace_script,
        "#!/bin/sh\n"
        + HEADER
        + "set -eu\n"
        + "# bind_private SOURCE TARGET [ro]: SOURCE seen at TARGET in this mount namespace only.\n"
        + "bind_private() {\n"
        + '  mount --make-slave "$(findmnt --noheadings --output TARGET --target "$2")"\n'
        + '  mount --bind "$1" "$2"\n'
        + '  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi\n'
        + "}\n"
        + binds
        + 'exec "$@"\n',
        mode="0755",
    )


def prepare_script(kubelet: KubeletPlan) -> HostFile:
    """Runs on the host before the kubelet starts.

    1. Reserves what lies outside the kubelet's NUMA node: a kubelet reports the whole machine
       as capacity. The CPU share is known from the plan; memory and hugepages only on the host
       (reservations.py: systemReserved.memory, and reservedMemory with the Static memory manager).
    2. Removes a resource manager's state file written for another policy or reservation (the
       kubelet would refuse to start), e.g. after hugepages changed across a reboot.
    3. Offers the slice every cgroup controller the kubelet requires of its cgroupRoot (hugetlb).
    4. Makes the shared device-plugins directory a private mount point on the host, so that
       the bind each kubelet puts over it in its own mount namespace stays in that namespace.
    """
    layout = kubelet.layout
    dropin_dir = layout.kubelet_config_dropin_dir
    return HostFile(
        layout.prepare_script,
        "#!/bin/sh\n"
        + HEADER
        + "set -eu\n"
        + reservations.sysfs_variables()
        + reservations.reservation_shell(kubelet.numa_node, kubelet.host_numa_nodes, static_memory_extra(kubelet))
        + f"mkdir -p {dropin_dir}\n"
        + "{\n"
        + reservations.dropin_shell(kubelet.reserved_cpus)
        + f"}} > {dropin_dir}/.50-system-reserved.conf.tmp\n"
        + f"mv -f {dropin_dir}/.50-system-reserved.conf.tmp {dropin_dir}/50-system-reserved.conf\n"
        + f"cp {layout.register_taints_config} {dropin_dir}/.10-register-with-taints.conf.tmp\n"
        + f"mv -f {dropin_dir}/.10-register-with-taints.conf.tmp {dropin_dir}/10-register-with-taints.conf\n"
        + reservations.state_functions_shell(layout.root_dir)
        + reservations.reconcile_managers_shell(layout.root_dir, kubelet.settings.cpu_manager_identity)
        + cgroup_controllers_shell(layout.slice)
        + f"mkdir -p {SHARED_DEVICE_PLUGINS_DIR}\n"
        # Kubelets of the other NUMA nodes may be starting at the same moment.
        + own_mount_point_shell(SHARED_DEVICE_PLUGINS_DIR, "/run/numa-kubelets/device-plugins.lock", "private"),
        mode="0755",
    )


def namespace_script(kubelet: KubeletPlan) -> HostFile:
    """Runs the kubelet in a mount namespace of its own that still shares volume mounts.

    systemd's BindPaths= would make the unit's mounts a slave of the host's: the volumes the
    kubelet mounts for pods (projected service-account tokens, secrets) would then never reach
    the host or containerd. `unshare --propagation unchanged` keeps the kubelet's root dir a
    peer of the host's; only the device-plugins bind, over a private mount point, and the
    hugepage view below a slave /sys (hugepages.py) stay here.
    """
    layout = kubelet.layout
    return HostFile(
        layout.namespace_script,
        "#!/bin/sh\n"
        + HEADER
        + "set -eu\n"
        + f"mount --bind {layout.device_plugins_dir} {SHARED_DEVICE_PLUGINS_DIR}\n"
        + f"mount --make-private {SHARED_DEVICE_PLUGINS_DIR}\n"
        + hugepages.view_shell(kubelet.numa_node)
        + 'exec "$@"\n',
        mode="0755",
    )


def kubelet_arguments(kubelet: KubeletPlan, cluster: ClusterPlan | None) -> list[str]:
    layout = kubelet.layout
    labels = sorted(registration_labels(kubelet, cluster).items())
    node_labels = ",".join(f"{key}={value}" for key, value in labels)
    arguments = [
        f"--config={layout.kubelet_config}",
        f"--config-dir={layout.kubelet_config_dropin_dir}",
        f"--root-dir={layout.root_dir}",
        f"--cert-dir={layout.cert_dir}",
        f"--hostname-override={kubelet.node_name}",
        f"--node-labels={node_labels}",
    ]
    if kubelet.network is not None:
        # Else the kubelet takes the first address of its default route's link, or a name lookup.
        arguments.append(f"--node-ip={kubelet.network.node_ip}")
    if cluster is not None:
        arguments += [
            f"--bootstrap-kubeconfig={layout.bootstrap_kubeconfig}",
            f"--kubeconfig={layout.kubeconfig}",
        ]
    return arguments


def kubelet_unit(kubelet: KubeletPlan, plan: Plan) -> HostFile:
    layout = kubelet.layout
    arguments = " \\\n    ".join(kubelet_arguments(kubelet, plan.cluster))
    return HostFile(
        layout.kubelet_unit_path,
        HEADER
        + "[Unit]\n"
        + f"Description=numa-kubelets: kubelet {kubelet.node_name} on NUMA node {kubelet.numa_node} "
        + f"(CPUs {kubelet.cpus})\n"
        + "Documentation=https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/\n"
        # Wants, not Requires: restarting the runtime must not restart the kubelet.
        + f"Wants={layout.containerd_unit} network-online.target\n"
        + f"After={layout.containerd_unit} network-online.target\n"
        + (network.runtime_unit_dependencies(kubelet.network) if kubelet.network else "")
        + "\n"
        + "[Service]\n"
        + f"Slice={layout.slice}\n"
        + (network.join_namespace_settings(kubelet.network) if kubelet.network else "")
        + f"ExecStartPre=/bin/sh {layout.prepare_script}\n"
        # The device-plugin socket path is hard-coded and a starting kubelet deletes foreign
        # sockets: each kubelet sees its own directory there, in its own mount namespace.
        + f"ExecStart={UNSHARE} --mount --propagation unchanged -- /bin/sh {layout.namespace_script} \\\n"
        + f"    {kubelet.kubelet_path} \\\n    {arguments}\n"
        + "Restart=always\n"
        + "RestartSec=5\n"
        + "\n"
        + "[Install]\n"
        + "WantedBy=multi-user.target\n",
    )


def bootstrap_kubeconfig(kubelet: KubeletPlan, cluster: ClusterPlan, token: str) -> HostFile:
    """Secret content: the caller keeps it inside a Pulumi secret."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "numa-kubelets",
                "cluster": {"server": cluster.server, "certificate-authority": kubelet.layout.ca_cert},
            }
        ],
        "contexts": [
            {"name": "kubelet-bootstrap", "context": {"cluster": "numa-kubelets", "user": "kubelet-bootstrap"}}
        ],
        "current-context": "kubelet-bootstrap",
        "users": [{"name": "kubelet-bootstrap", "user": {"token": token}}],
    }
    return HostFile(kubelet.layout.bootstrap_kubeconfig, _yaml(document), mode="0600")


def ca_certificate(kubelet: KubeletPlan, cluster: ClusterPlan) -> HostFile:
    return HostFile(kubelet.layout.ca_cert, cluster.ca_cert)


def kubelet_files(kubelet: KubeletPlan, plan: Plan) -> list[HostFile]:
    """The kubelet's non-secret files, in the order they are installed."""
    files = [kubelet_config(kubelet, plan.cluster), prepare_script(kubelet), namespace_script(kubelet)]
    if plan.cluster is not None:
        files.append(ca_certificate(kubelet, plan.cluster))
    files.append(kubelet_unit(kubelet, plan))
    return files


def containerd_files(kubelet: KubeletPlan, plan: Plan) -> list[HostFile]:
    return [
        containerd_config(kubelet, plan.sandbox_image),
        containerd_prepare_script(kubelet),
        containerd_namespace_script(kubelet),
        containerd_unit(kubelet, plan.containerd_path),
    ]


def netns_files(kubelet_network: network.KubeletNetwork) -> list[HostFile]:
    """numa-netns@numa<N>.service, its scripts and the namespace's resolv.conf, in install order."""
    files = [
        HostFile(kubelet_network.up_script, network.netns_up_script_text(kubelet_network, HEADER), mode="0755"),
        HostFile(kubelet_network.down_script, network.netns_down_script_text(kubelet_network, HEADER), mode="0755"),
    ]
    if kubelet_network.resolv_conf is not None:
        text = network.resolv_conf_text(kubelet_network, HEADER)
        files.append(HostFile(kubelet_network.resolv_conf, text))
        files.append(HostFile(kubelet_network.netns_etc_resolv_conf, text))
    files.append(HostFile(kubelet_network.unit_path, network.netns_unit_text(kubelet_network, HEADER)))
    return files
