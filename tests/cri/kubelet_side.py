"""What a kubelet puts into its CRI requests for one pod: cgroup parent, labels, log paths.

Part of the numa-kubelets CRI TEST CLIENT (not a kubelet). Standard library only: this module runs
on the CI machine (the tests build pod specs with it) and inside the test host (the client turns
the specs into CRI requests with it).

Sources (kubernetes/kubernetes, pkg/kubelet):
- cm/cgroup_manager_linux.go: a cgroup name is a list of components; the systemd driver escapes
  '-' to '_' in each component, joins them with '-', appends ".slice" and expands the slice into
  its full path (`/a.slice/a-b.slice/a-b-c.slice`).
- cm/qos_container_manager_linux.go, cm/pod_container_manager_linux.go: pods live in
  `<cgroupRoot> + kubepods`; burstable and besteffort pods below a QoS level named "burstable" /
  "besteffort", guaranteed pods directly below kubepods; the pod's own level is "pod<uid>".
- kuberuntime/labels.go: the labels `io.kubernetes.pod.{name,namespace,uid}` on sandboxes and
  containers, `io.kubernetes.container.name` on containers.
- kuberuntime/helpers.go, kuberuntime_sandbox.go: log directory
  `<podLogsDir>/<namespace>_<name>_<uid>`, container log `<container>/<attempt>.log`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
QOS_CLASSES = ("guaranteed", "burstable", "besteffort")
DEFAULT_POD_LOGS_DIR = "/var/log/pods"


def cgroup_name(cgroup_root: str) -> list[str]:
    """The kubelet's `cgroupRoot` ("/numa0", "/", "") as cgroup name components."""
    if not cgroup_root.startswith("/") and cgroup_root != "":
        raise ValueError(f"cgroupRoot must be a cgroupfs-style absolute path, got {cgroup_root!r}")
    return [part for part in cgroup_root.split("/") if part]


def systemd_slice_path(components: list[str]) -> str:
    """cgroup_manager_linux.go ToSystemd(): ["numa0", "kubepods"] -> /numa0.slice/numa0-kubepods.slice."""
    if not components:
        return "/"
    escaped = [component.replace("-", "_") for component in components]
    path = ""
    for depth in range(1, len(escaped) + 1):
        path += "/" + "-".join(escaped[:depth]) + ".slice"
    return path


def pod_cgroup_components(cgroup_root: str, qos: str, uid: str) -> list[str]:
    if qos not in QOS_CLASSES:
        raise ValueError(f"qos must be one of {', '.join(QOS_CLASSES)}, got {qos!r}")
    components = [*cgroup_name(cgroup_root), "kubepods"]
    if qos != "guaranteed":
        components.append(qos)
    return [*components, f"pod{uid}"]


def pod_cgroup_parent(cgroup_root: str, qos: str, uid: str) -> str:
    """The `LinuxPodSandboxConfig.cgroup_parent` a kubelet with the systemd driver sends.

    `cgroupRoot: /numa0`, besteffort, uid 1a-2b ->
    /numa0.slice/numa0-kubepods.slice/numa0-kubepods-besteffort.slice/numa0-kubepods-besteffort-pod1a_2b.slice
    """
    return systemd_slice_path(pod_cgroup_components(cgroup_root, qos, uid))


def pod_log_directory(pod_logs_dir: str, namespace: str, name: str, uid: str) -> str:
    return f"{pod_logs_dir.rstrip('/')}/{namespace}_{name}_{uid}"


@dataclass
class ContainerSpec:
    name: str
    image: str
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class PodSpec:
    """One pod as the test client runs it; what a kubelet derives from a Pod object.

    `cgroup_root` is the kubelet's `cgroupRoot`; `cgroup_parent`, when set, replaces the parent
    the kubelet would compute (to start a pod where no correct kubelet would put it).
    `host_network` pods share the network namespace containerd runs in; others get one from CNI.
    """

    name: str
    namespace: str
    uid: str
    containers: list[ContainerSpec]
    cgroup_root: str = "/"
    qos: str = "besteffort"
    cgroup_parent: str | None = None
    host_network: bool = False
    pod_logs_dir: str = DEFAULT_POD_LOGS_DIR
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    dns_servers: list[str] = field(default_factory=list)
    runtime_handler: str = ""

    @property
    def effective_cgroup_parent(self) -> str:
        if self.cgroup_parent is not None:
            return self.cgroup_parent
        return pod_cgroup_parent(self.cgroup_root, self.qos, self.uid)

    @property
    def log_directory(self) -> str:
        return pod_log_directory(self.pod_logs_dir, self.namespace, self.name, self.uid)

    def sandbox_labels(self) -> dict[str, str]:
        return {
            **self.labels,
            POD_NAME_LABEL: self.name,
            POD_NAMESPACE_LABEL: self.namespace,
            POD_UID_LABEL: self.uid,
        }

    def container_labels(self, container: ContainerSpec) -> dict[str, str]:
        return {
            **container.labels,
            POD_NAME_LABEL: self.name,
            POD_NAMESPACE_LABEL: self.namespace,
            POD_UID_LABEL: self.uid,
            CONTAINER_NAME_LABEL: container.name,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PodSpec:
        raw: dict[str, Any] = json.loads(text)
        raw["containers"] = [ContainerSpec(**container) for container in raw.get("containers", [])]
        return cls(**raw)
