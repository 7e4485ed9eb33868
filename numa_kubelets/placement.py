"""Demo pods and the proof of their placement (DESIGN.md sections 1, 5 and 6).

Every kubelet gets one demo pod whose nodeSelector picks exactly that kubelet. Once the pod
is ready, two independent facts prove where it runs:

- the API's `spec.nodeName`: a kubelet of this stack whose labels satisfy the selector, and
  the intended one;
- the intended kubelet's host, asked through that kubelet's own containerd: the pod's running
  containers and the CPUs and memory nodes each may use (`/proc/<pid>/status`), which must lie
  inside the kubelet's slice.

Everything here is pure: the manifests, the read-only host script, the validation that every
selector is unambiguous, and the verdict. The Pulumi shell only fetches the facts.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import ConfigError, Problem, StackConfig
from .cpulist import CpuListError, CpuSet
from .plan import HOST_LABEL, NUMA_NODE_LABEL, HostPlan, KubeletPlan, Plan, kubelet_config_path
from .scripts import HostScripts, q, run_as

APP_NAME = "numa-demo"
MANAGER = "numa-kubelets"
# The node the pod is meant for, on the pod itself: `kubectl get pods -L` shows intent next to fact.
EXPECTED_NODE_LABEL = "numa-kubelets.io/expected-node"
CONTAINER_NAME = "demo"
# The namespace is created and, on destroy, deleted with everything in it: never a shared one.
SHARED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
MAX_LABEL_VALUE = 63
# Small enough to fit next to real workloads on any kubelet; the limit keeps a custom command honest.
REQUESTS = {"cpu": "10m", "memory": "16Mi"}
LIMITS = {"memory": "64Mi"}
# Any image runs as nobody: the demo needs no privileges, and the namespace enforces "restricted".
NOBODY = 65534
# The pause image exits on SIGTERM at once; `sleep` as PID 1 ignores it, so do not wait 30 s.
TERMINATION_GRACE_SECONDS = 5
# Hex digits of the spec's hash in the pod's name: enough that a changed spec gets another name.
SPEC_HASH_LENGTH = 8
# The pods' own ServiceAccount, which the stack creates before them: the API server refuses a pod
# whose ServiceAccount does not exist, and a fresh namespace's `default` comes later, from the
# controller manager (pulumi-kubernetes 4.25.0 retries once: not long enough).
SERVICE_ACCOUNT = APP_NAME


def demo_selector(kubelet: KubeletPlan) -> dict[str, str]:
    """The kubelet's own labels; without any, the automatic host and NUMA-node labels."""
    return kubelet.user_labels or {HOST_LABEL: kubelet.host, NUMA_NODE_LABEL: str(kubelet.numa_node)}


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A nodeSelector matches a node whose labels include every selector entry."""
    return all(labels.get(key) == value for key, value in selector.items())


def format_selector(selector: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in sorted(selector.items())) + "}"


@dataclass(frozen=True)
class DemoPod:
    """One demo pod, meant for one kubelet."""

    kubelet: KubeletPlan
    namespace: str
    image: str
    command: tuple[str, ...]
    ready_timeout: str

    @property
    def resource_name(self) -> str:
        """`numa-demo-<node>`: the Pulumi name of the pod's DemoPlacement, its Pod and its probe.

        Stable, so a changed pod is a replacement of the same resource in `pulumi preview --diff`."""
        return f"{APP_NAME}-{self.kubelet.node_name}"

    @property
    def name(self) -> str:
        """The pod's `metadata.name`: `numa-demo-<node>-<hash of its spec>`.

        The spec of a pod is immutable (nodeSelector, tolerations, command, ...), so a change of it
        replaces the pod. pulumi-kubernetes previews a replacement by a server-side dry-run create
        of the new pod while the old one still exists: under a fixed name the API server refuses it
        as an update of immutable fields and the preview fails. A name that follows the spec
        cannot collide with the pod it replaces, and it is known before anything is created, so
        the probe script, the review render and the preview all name the pod that will run.
        Nothing changed, nothing renamed: the same spec gives the same name.
        """
        return f"{self.resource_name}-{spec_hash(self.spec())}"

    @property
    def probe_name(self) -> str:
        return f"{self.resource_name}-probe"

    @property
    def selector(self) -> dict[str, str]:
        return demo_selector(self.kubelet)

    @property
    def labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": APP_NAME,
            "app.kubernetes.io/managed-by": MANAGER,
            EXPECTED_NODE_LABEL: self.kubelet.node_name,
        }

    def spec(self) -> dict[str, Any]:
        container: dict[str, Any] = {"name": CONTAINER_NAME, "image": self.image}
        if self.command:
            container["command"] = list(self.command)
        container["resources"] = {"requests": dict(REQUESTS), "limits": dict(LIMITS)}
        container["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        }
        spec: dict[str, Any] = {"nodeSelector": self.selector}
        if self.kubelet.taints:
            # Exactly the taints the stack puts on its kubelet (a NUMA node reserved for a tenant
            # still gets its proof); none other: the pod must be schedulable on the kubelet as it is.
            spec["tolerations"] = [
                {**taint.manifest(), "operator": "Equal" if taint.value else "Exists"} for taint in self.kubelet.taints
            ]
        return {
            **spec,
            "containers": [container],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": NOBODY,
                "runAsGroup": NOBODY,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "serviceAccountName": SERVICE_ACCOUNT,
            # The pods never talk to the API: no token in them.
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        }

    def manifest(self) -> dict[str, Any]:
        spec = self.spec()
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{self.resource_name}-{spec_hash(spec)}",
                "namespace": self.namespace,
                "labels": self.labels,
            },
            "spec": spec,
        }


def spec_hash(spec: Mapping[str, Any]) -> str:
    """A short hash of a pod spec, the same for the same spec (canonical JSON: sorted keys)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:SPEC_HASH_LENGTH]


def namespace_manifest(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": MANAGER,
                "pod-security.kubernetes.io/enforce": "restricted",
            },
        },
    }


def service_account_manifest(namespace: str) -> dict[str, Any]:
    """The demo pods' ServiceAccount (SERVICE_ACCOUNT): in their namespace, no token for its pods."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": SERVICE_ACCOUNT,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/managed-by": MANAGER},
        },
        "automountServiceAccountToken": False,
    }


def demo_pods(config: StackConfig, plan: Plan) -> tuple[DemoPod, ...]:
    """One pod per kubelet when the demo is enabled, in plan order."""
    if not plan.demo_enabled:
        return ()
    demo = config.demo
    return tuple(
        DemoPod(kubelet, demo.namespace, demo.image, tuple(demo.command), demo.ready_timeout)
        for kubelet in plan.kubelets
    )


# ---------------------------------------------------------------- the stack's kubelets


class StackKubelets:
    """The stack's kubelets by node name and by label, built once: fleets have thousands."""

    def __init__(self, plan: Plan) -> None:
        self.by_name = {kubelet.node_name: kubelet for kubelet in plan.kubelets}
        self._by_label: dict[tuple[str, str], list[KubeletPlan]] = defaultdict(list)
        for kubelet in plan.kubelets:
            for label in kubelet.labels:
                self._by_label[label].append(kubelet)

    def matching(self, selector: Mapping[str, str]) -> list[KubeletPlan]:
        """The kubelets, in plan order, whose labels satisfy a (non-empty) nodeSelector."""
        candidates = min((self._by_label.get(item, []) for item in selector.items()), key=len, default=[])
        return [kubelet for kubelet in candidates if selects(selector, kubelet.label_map)]


# ---------------------------------------------------------------- validation


def kubelet_config_paths(config: StackConfig, plan: Plan) -> dict[str, str]:
    """Node name -> where the kubelet is configured: its `kubelets` entry, or its host when defaulted."""
    return {
        kubelet.node_name: kubelet_config_path(config, host_index, kubelet.numa_node)
        for host_index, host in enumerate(plan.hosts)
        for kubelet in host.kubelets
    }


def selector_problems(
    kubelet: KubeletPlan, selector: Mapping[str, str], kubelets: StackKubelets, paths: Mapping[str, str]
) -> list[Problem]:
    """A selector must pick its kubelet and no other: the scheduler may choose any node that matches."""
    path = paths[kubelet.node_name]
    field = f"{path}.labels" if kubelet.user_labels else path
    described = f"demo selector {format_selector(selector)}"
    matches = kubelets.matching(selector)
    if kubelet not in matches:
        return [Problem(field, f"{described} does not match its kubelet {kubelet.node_name}")]
    return [
        Problem(field, f"{described} also matches {other.node_name} ({paths[other.node_name]})")
        for other in matches
        if other is not kubelet
    ]


def demo_problems(config: StackConfig, plan: Plan) -> list[Problem]:
    if not plan.demo_enabled:
        return []
    problems: list[Problem] = []
    if config.demo.namespace in SHARED_NAMESPACES:
        problems.append(
            Problem(
                "demo.namespace",
                f"{config.demo.namespace!r} is shared; the demo creates its namespace and deletes it on destroy",
            )
        )
    paths = kubelet_config_paths(config, plan)
    kubelets = StackKubelets(plan)
    for pod in demo_pods(config, plan):
        kubelet = pod.kubelet
        problems.extend(selector_problems(kubelet, pod.selector, kubelets, paths))
        if len(kubelet.node_name) > MAX_LABEL_VALUE:
            path = paths[kubelet.node_name]
            problems.append(
                Problem(
                    f"{path}.nodeName" if ".kubelets[" in path else path,
                    f"node name {kubelet.node_name!r} is longer than {MAX_LABEL_VALUE} characters: the demo pod "
                    f"carries it as the label value {EXPECTED_NODE_LABEL}; shorten it or disable the demo",
                )
            )
    return problems


def check_demo(config: StackConfig, plan: Plan) -> None:
    """Raise ConfigError when the demo pods could not prove anything; called before any resource."""
    problems = demo_problems(config, plan)
    if problems:
        raise ConfigError(problems)


# ---------------------------------------------------------------- host probe

READING = re.compile(
    r"container=(?P<container>[A-Za-z0-9][A-Za-z0-9_.-]*) pid=(?P<pid>[1-9][0-9]*)"
    r" cpus=(?P<cpus>\S+) mems=(?P<mems>\S+)"
)


def _filter_value(value: str) -> str:
    """A quoted value in containerd's filter syntax (Go string literal; our values are plain)."""
    return json.dumps(value)


def probe_scripts(pod: DemoPod, host: HostPlan, plan: Plan) -> HostScripts:
    """Read-only: prints `container=<id> pid=<pid> cpus=<list> mems=<list>` per running container.

    The pod's uid arrives on stdin, so only containers of this incarnation of the pod count and
    a new pod (new uid) re-runs the probe.
    """
    layout = pod.kubelet.layout
    where = f"pod {pod.namespace}/{pod.name} on host {host.name}"
    no_uid = f"numa-kubelets: expected the uid of {where} on stdin"
    no_ctr = f"numa-kubelets: ctr (shipped with containerd) is missing on host {host.name}"
    unreachable = (
        f"numa-kubelets: cannot query {layout.containerd_unit} through {layout.containerd_socket} on host {host.name}"
    )
    # Selectors joined by ',' must all match; the uid from stdin completes the last one.
    pod_filter = (
        "".join(
            f'labels."{key}"=={_filter_value(value)},'
            for key, value in (
                ("io.kubernetes.pod.namespace", pod.namespace),
                ("io.kubernetes.pod.name", pod.name),
                ("io.cri-containerd.kind", "container"),  # not the sandbox: the workload itself
            )
        )
        + 'labels."io.kubernetes.pod.uid"=='
    )
    script = (
        f"# numa-kubelets: CPUs and memory nodes of the containers of {where} ({layout.containerd_unit})\n"
        "set -eu\n"
        "uid=$(cat)\n"
        'case "$uid" in\n'
        f'  (""|*[!0-9a-f-]*) echo {q(no_uid)} >&2; exit 1;;\n'
        "esac\n"
        f"ctr={q(posixpath.join(posixpath.dirname(plan.containerd_path), 'ctr'))}\n"
        'if [ ! -x "$ctr" ]; then\n'
        f"  ctr=$(command -v ctr) || {{ echo {q(no_ctr)} >&2; exit 1; }}\n"
        "fi\n"
        f'cri() {{ "$ctr" --address {q(layout.containerd_socket)} -n k8s.io "$@"; }}\n'
        f"unreachable={q(unreachable)}\n"
        f'containers=$(cri containers ls -q {q(pod_filter)}"\\"$uid\\"") || {{ echo "$unreachable" >&2; exit 1; }}\n'
        'tasks=$(cri tasks ls) || { echo "$unreachable" >&2; exit 1; }\n'
        "for id in $containers; do\n"
        """  pid=$(printf '%s\\n' "$tasks" | awk -v id="$id" '$1 == id && $3 == "RUNNING" { print $2 }')\n"""
        "  status=/proc/$pid/status\n"
        '  if [ -z "$pid" ] || [ ! -r "$status" ]; then continue; fi  # not running (any more)\n'
        """  cpus=$(awk '$1 == "Cpus_allowed_list:" { print $2 }' "$status")\n"""
        """  mems=$(awk '$1 == "Mems_allowed_list:" { print $2 }' "$status")\n"""
        '  echo "container=$id pid=$pid cpus=$cpus mems=$mems"\n'
        "done\n"
    )
    return HostScripts(apply=run_as(host.user, script), delete="true")


@dataclass(frozen=True)
class HostReading:
    container: str
    pid: int
    cpus: CpuSet
    mems: CpuSet

    def __str__(self) -> str:
        return f"container {self.container[:12]} (pid {self.pid}) on CPUs {self.cpus}, memory nodes {self.mems}"


def parse_probe_output(stdout: str) -> tuple[list[HostReading], list[str]]:
    """The readings, and the lines that are not readings."""
    readings: list[HostReading] = []
    unparsable: list[str] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        match = READING.fullmatch(line.strip())
        if match is None:
            unparsable.append(line)
            continue
        try:
            cpus, mems = CpuSet.parse(match["cpus"]), CpuSet.parse(match["mems"])
        except CpuListError:
            unparsable.append(line)
            continue
        readings.append(HostReading(match["container"], int(match["pid"]), cpus, mems))
    return readings, unparsable


# ---------------------------------------------------------------- verdict

# Each key of a `placement` output entry (PlacementVerdict.output), for docs/reference/outputs.md.
PLACEMENT_KEYS = {
    "pod": "The demo pod's name (`numa-demo-<nodeName>-<hash>`).",
    "namespace": "Its namespace (`demo.namespace`).",
    "nodeSelector": "Its nodeSelector: the kubelet's labels, or its automatic `numa-kubelets.io/*` labels.",
    "nodeName": "Where the API says the pod runs.",
    "host": "The intended kubelet's host.",
    "numaNode": "The intended kubelet's NUMA node.",
    "expectedCpus": "The intended kubelet's slice CPUs.",
    "observedCpus": "The union of the CPUs its containers may use, as the host reported them (a subset of "
    "`expectedCpus` is fine, e.g. under the static CPU manager); `null` when no container was found.",
    "ok": "Whether the pod is on its intended kubelet and every container within its CPUs and memory node.",
}


@dataclass(frozen=True)
class PlacementVerdict:
    pod: DemoPod
    node_name: str | None
    readings: tuple[HostReading, ...]
    reasons: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def observed_cpus(self) -> CpuSet | None:
        if not self.readings:
            return None
        observed = CpuSet()
        for reading in self.readings:
            observed = observed | reading.cpus
        return observed

    def output(self) -> dict[str, Any]:
        """One entry of the `placement` stack output (DESIGN.md section 5)."""
        kubelet = self.pod.kubelet
        observed = self.observed_cpus
        return {
            "pod": self.pod.name,
            "namespace": self.pod.namespace,
            "nodeSelector": self.pod.selector,
            "nodeName": self.node_name,
            "host": kubelet.host,
            "numaNode": kubelet.numa_node,
            "expectedCpus": kubelet.cpus.format(),
            "observedCpus": observed.format() if observed is not None else None,
            "ok": self.ok,
        }

    def failure_message(self) -> str:
        pod, kubelet = self.pod, self.pod.kubelet
        seen = "; ".join(str(reading) for reading in self.readings) or "no running container"
        lines = [
            f"demo pod {pod.namespace}/{pod.name} (nodeSelector {format_selector(pod.selector)}) "
            "is not where it should be:",
            f"  landed on {self.node_name or 'no node'}; intended {kubelet.node_name} "
            f"(host {kubelet.host}, NUMA node {kubelet.numa_node}, CPUs {kubelet.cpus}, memory node {kubelet.mems})",
            f"  host {kubelet.host} ({kubelet.layout.containerd_unit}) saw: {seen}",
        ]
        lines += [f"  - {reason}" for reason in self.reasons]
        return "\n".join(lines)


def judge_placement(
    pod: DemoPod, kubelets: StackKubelets, node_name: str | None, probe_stdout: str
) -> PlacementVerdict:
    """Compare what the API (node_name) and the host (the probe's stdout) report with the plan.

    Every mismatch becomes a reason; no reason means the pod is where it should be.
    """
    kubelet = pod.kubelet
    reasons: list[str] = []
    landed = kubelets.by_name.get(node_name) if node_name else None
    if not node_name:
        reasons.append("the API reports no node for the pod (spec.nodeName is empty)")
    elif landed is None:
        reasons.append(f"it runs on node {node_name}, which is not a kubelet of this stack")
    else:
        if not selects(pod.selector, landed.label_map):
            reasons.append(
                f"node {node_name} has labels {format_selector(landed.label_map)}, "
                f"which do not satisfy the nodeSelector {format_selector(pod.selector)}"
            )
        if landed.node_name != kubelet.node_name:
            reasons.append(
                f"it runs on {node_name} (host {landed.host}, NUMA node {landed.numa_node}), not on {kubelet.node_name}"
            )

    readings, unparsable = parse_probe_output(probe_stdout)
    reasons += [f"unparsable line from host {kubelet.host}: {line[:200]!r}" for line in unparsable]
    if not readings and not unparsable:
        reasons.append(
            "no running container of the pod was found through "
            f"{kubelet.layout.containerd_socket} on host {kubelet.host}"
        )
    for reading in readings:
        if not reading.cpus.issubset(kubelet.cpus):
            reasons.append(
                f"container {reading.container[:12]} (pid {reading.pid}) may run on CPUs {reading.cpus}; "
                f"{kubelet.layout.slice} has CPUs {kubelet.cpus}"
            )
        if not reading.mems.issubset(kubelet.mems):
            reasons.append(
                f"container {reading.container[:12]} (pid {reading.pid}) may allocate on memory nodes "
                f"{reading.mems}; {kubelet.layout.slice} has memory node {kubelet.mems}"
            )
    return PlacementVerdict(pod, node_name, tuple(readings), tuple(reasons))
