"""The cluster side of a kubelet's life: the objects the stack creates in the cluster and the
decisions of joining (bootstrap token, readiness, labels, taints) and leaving (cordon, drain, delete).

Pure: manifests and verdicts from plain data. Talking to the API server is the shell's job
(`components/node_lifecycle.py`), which asks these functions what to do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import re
import shlex
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .plan import ClusterPlan, HostPlan, KubeletPlan, Plan, Taint

BOOTSTRAP_TOKEN_SECRET_TYPE = "bootstrap.kubernetes.io/token"
BOOTSTRAP_GROUP_PREFIX = "system:bootstrappers:numa-kubelets:"
NODE_BOOTSTRAPPER_ROLE = "system:node-bootstrapper"
NODE_CLIENT_ROLE = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
KUBE_DNS_SERVICE = ("kube-system", "kube-dns")
# pulumi-kubernetes Patch resources read their field manager and conflict policy from these.
PATCH_FIELD_MANAGER_ANNOTATION = "pulumi.com/patchFieldManager"
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"

Json = dict[str, Any]


# ---------------------------------------------------------------- names that carry the stack


def stack_slug(stack: str) -> str:
    """The stack name as `[a-z0-9-]`: it ends up in a group name and in object names.

    A name that had to be changed gets a short hash of the original, so stacks `Prod` and
    `prod` do not share a group or bindings.
    """
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-") or "stack"
    if slug != stack:
        slug = f"{slug}-{hashlib.sha256(stack.encode()).hexdigest()[:6]}"
    return slug


def bootstrap_group(stack: str) -> str:
    """The extra group the stack's bootstrap token authenticates in (`system:bootstrappers:[a-z0-9:-]*[a-z0-9]`)."""
    return BOOTSTRAP_GROUP_PREFIX + stack_slug(stack)


def field_manager(stack: str) -> str:
    """The server-side apply field manager of everything this stack sets on Nodes."""
    return f"numa-kubelets-{stack_slug(stack)}"


# ---------------------------------------------------------------- managed bootstrap token


@dataclass(frozen=True)
class BootstrapBinding:
    name: str
    role: str

    def manifest(self, stack: str) -> Json:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": self.name, "labels": managed_labels(stack)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": bootstrap_group(stack)}],
        }


def managed_labels(stack: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "numa-kubelets", "numa-kubelets.io/stack": stack_slug(stack)}


def bootstrap_bindings(stack: str) -> tuple[BootstrapBinding, ...]:
    """What a token needs to join: create a CSR, and have the client-certificate CSR auto-approved."""
    prefix = f"numa-kubelets:{stack_slug(stack)}"
    return (
        BootstrapBinding(f"{prefix}:node-bootstrapper", NODE_BOOTSTRAPPER_ROLE),
        BootstrapBinding(f"{prefix}:nodeclient", NODE_CLIENT_ROLE),
    )


def bootstrap_token_secret(token_id: str, token_secret: str, stack: str) -> Json:
    """Secret content: the caller keeps it inside a Pulumi secret.

    Authentication only (no `usage-bootstrap-signing`: the kubelets get the CA from the stack,
    not from the cluster-info ConfigMap), and no expiration: a host added months later joins
    with the same token. Rotate it by replacing the token resource.
    """
    return {
        "metadata": {
            "name": f"bootstrap-token-{token_id}",
            "namespace": "kube-system",
            "labels": managed_labels(stack),
        },
        "type": BOOTSTRAP_TOKEN_SECRET_TYPE,
        "stringData": {
            "description": f"numa-kubelets stack {stack_slug(stack)}: kubelets join with it",
            "token-id": token_id,
            "token-secret": token_secret,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": bootstrap_group(stack),
        },
    }


def bootstrap_token(token_id: str, token_secret: str) -> str:
    return f"{token_id}.{token_secret}"


# ---------------------------------------------------------------- cluster DNS


class ClusterDnsUnknown(ValueError):
    pass


def cluster_dns(cluster: ClusterPlan, kube_dns_cluster_ip: str | None) -> str:
    """clusterDNS: `cluster.dns`, else the clusterIP of the kube-dns Service (None: no such Service)."""
    if cluster.dns is not None:
        return cluster.dns
    return kube_dns_address(kube_dns_cluster_ip)


def kube_dns_address(cluster_ip: str | None) -> str:
    """The kube-dns Service's clusterIP as the kubelets' clusterDNS (None: no such Service)."""
    if not cluster_ip or cluster_ip == "None":  # "None": a headless Service
        namespace, name = KUBE_DNS_SERVICE
        raise ClusterDnsUnknown(
            f"the cluster has no Service {namespace}/{name} with a clusterIP to use as the kubelets' clusterDNS; "
            "set numa-kubelets:cluster.dns to the address of the cluster's DNS service"
        )
    return str(cluster_ip)


# ---------------------------------------------------------------- labels and taints on the Node


def registration_labels(kubelet: KubeletPlan, cluster: ClusterPlan | None) -> dict[str, str]:
    """What the kubelet registers its Node with (`--node-labels`).

    With a cluster only the automatic labels: the stack's own labels are applied by server-side
    apply. A label the kubelet had registered would stay co-owned by the "kubelet" manager, so
    removing it from the stack would leave it on the Node.
    """
    return kubelet.identity_labels if cluster is not None else kubelet.label_map


def node_label_patch(kubelet: KubeletPlan, stack: str) -> Json:
    """The metadata of the kubelet's NodePatch: every label the stack says, under its field manager.

    Forced: a label registered by an earlier version of the stack is owned by the kubelet, and a
    changed value must win. Labels nobody in this stack declared are not in the patch, so their
    owners keep them.
    """
    return {
        "name": kubelet.node_name,
        "labels": kubelet.label_map,
        "annotations": {PATCH_FIELD_MANAGER_ANNOTATION: field_manager(stack), PATCH_FORCE_ANNOTATION: "true"},
    }


def reconciled_taints(
    current: Sequence[Mapping[str, Any]], previously_declared: Sequence[Taint], declared: Sequence[Taint]
) -> list[Json] | None:
    """The Node's new taint list, or None when it already is right.

    A Node's taints are one atomic list under server-side apply, shared with the node lifecycle
    controller (not-ready, unreachable, unschedulable): applying ours would take the whole list.
    So the stack edits the list in place: it drops the taints it declared before and no longer
    declares, sets the ones it declares, and leaves every other taint as it is.
    """
    declared_keys = {(t.key, t.effect) for t in declared}
    dropped_keys = {(t.key, t.effect) for t in previously_declared} - declared_keys
    kept = [
        dict(taint) for taint in current if (taint.get("key"), taint.get("effect")) not in declared_keys | dropped_keys
    ]
    result = kept + [t.manifest() for t in declared]

    def comparable(taints: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
        return sorted((str(t.get("key")), str(t.get("value") or ""), str(t.get("effect"))) for t in taints)

    return None if comparable(result) == comparable(current) else result


def taints_from(raw: Sequence[Mapping[str, Any]]) -> tuple[Taint, ...]:
    return tuple(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])) for t in raw)


# ---------------------------------------------------------------- joining: is the Node there?


@dataclass(frozen=True)
class Readiness:
    ready: bool
    state: str  # for a failure message: the last condition, or why the Node is not ours


def node_readiness(
    node: Mapping[str, Any] | None, expected_labels: Mapping[str, str], kubelet_started: str = ""
) -> Readiness:
    """`kubelet_started`: when the kubelet last started (UTC RFC 3339, the host's clock, as its
    apply script reported it); a Ready condition last reported before that is the previous
    kubelet's, from before its restart, and does not count."""
    if node is None:
        return Readiness(False, "never registered")
    labels = (node.get("metadata") or {}).get("labels") or {}
    wrong = {key: labels.get(key) for key, value in expected_labels.items() if labels.get(key) != value}
    if wrong:
        found = ", ".join(f"{key}={value if value is not None else '<unset>'}" for key, value in sorted(wrong.items()))
        wanted = ", ".join(f"{key}={expected_labels[key]}" for key in sorted(wrong))
        return Readiness(False, f"registered without the expected labels ({wanted}; found {found})")
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return Readiness(False, "registered, no Ready condition yet")
    state = f"Ready={ready.get('status')}"
    if ready.get("reason"):
        state += f" ({ready['reason']}: {ready.get('message', '')})".replace(": )", ")")
    # Same clock, same format (seconds): a string comparison orders them.
    if kubelet_started and (ready.get("lastHeartbeatTime") or "") < kubelet_started:
        return Readiness(False, f"{state} as reported before the kubelet (re)started at {kubelet_started}")
    return Readiness(ready.get("status") == "True", state)


def never_reported_by_a_kubelet(node: Mapping[str, Any]) -> bool:
    """A Node no kubelet ever registered: it has no `status.nodeInfo`.

    Relinquishing the label patch of a Node deleted out of band is a server-side apply, which
    creates such an empty Node; the stack deletes it even when it keeps real Nodes."""
    return not ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")


def journal_command(host: HostPlan, kubelet: KubeletPlan) -> str:
    """What a user runs to see why a kubelet does not register."""
    ssh = ["ssh", *(["-p", str(host.ssh_port)] if host.ssh_port != 22 else []), f"{host.user}@{host.address}"]
    return shlex.join([*ssh, "journalctl", "-u", kubelet.layout.kubelet_unit, "-n", "100", "--no-pager"])


def with_cluster_dns(plan: Plan, dns: str) -> Plan:
    """The plan once the cluster said where its DNS service is."""
    if plan.cluster is None:
        raise ValueError("a plan without a cluster has no clusterDNS")
    return dataclasses.replace(plan, cluster=dataclasses.replace(plan.cluster, dns=dns))


def not_ready_message(node_name: str, readiness: Readiness, timeout_seconds: int, journal: str) -> str:
    message = f"Node {node_name} is not Ready after {timeout_seconds}s: {readiness.state}"
    if readiness.state == "never registered":
        message += f"; read the kubelet's journal with: {journal}"
    return message


# ---------------------------------------------------------------- leaving: what a drain evicts


def pod_key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _left_to_its_kubelet(pod: Mapping[str, Any]) -> bool:
    """As `kubectl drain --ignore-daemonsets`: DaemonSet pods would come back, mirror pods are the
    kubelet's static pods."""
    metadata = pod.get("metadata") or {}
    if any(
        owner.get("kind") == "DaemonSet" and owner.get("controller") for owner in metadata.get("ownerReferences") or []
    ):
        return True
    return MIRROR_POD_ANNOTATION in (metadata.get("annotations") or {})


def must_evict(pod: Mapping[str, Any]) -> bool:
    """A pod the drain evicts: neither left to its kubelet nor finished (finished pods hold nothing)."""
    return not _left_to_its_kubelet(pod) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pods_to_drain(pods: Sequence[Mapping[str, Any]], node_ready: bool) -> list[Mapping[str, Any]]:
    """The pods a drain still waits for: those to evict, and those terminating until they are gone.

    An evicted pod turns Failed (or Succeeded) when its kubelet has stopped its containers and is
    deleted a moment later by the same kubelet: the drain waits for that deletion, as `kubectl
    drain` does, or the Node is deleted (or its kubelet restarted) with the pod object still there
    and, e.g., a StatefulSet cannot recreate it until the pod garbage collector removes it.

    A pod already terminating on a Node whose kubelet is not Ready never finishes: nobody stops
    its containers. Such pods do not hold the drain up; deleting the Node lets the pod garbage
    collector remove them (as Cluster API does for unreachable Nodes).
    """

    def waited_for(pod: Mapping[str, Any]) -> bool:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return node_ready and not _left_to_its_kubelet(pod)
        return must_evict(pod)

    return sorted(filter(waited_for, pods), key=pod_key)


def _blocked_pods(blocked: Mapping[str, str]) -> str:
    """`blocked`: pod key -> why it is still there (e.g. the PodDisruptionBudget's refusal)."""
    return "; ".join(f"{pod}: {why}" for pod, why in sorted(blocked.items()))


def drain_timeout_message(node_name: str, timeout_seconds: int, blocked: Mapping[str, str]) -> str:
    pods = _blocked_pods(blocked)
    return (
        f"draining Node {node_name} did not finish within {timeout_seconds}s (cluster.drainTimeout); "
        f"pods still there: {pods}. Nothing was removed from the host; resolve the blocker (e.g. the "
        "PodDisruptionBudget) or raise cluster.drainTimeout, then run the update again"
    )


# Set on a Node the rollout cordoned, so that only the rollout uncordons it: a Node someone
# else cordoned stays so. The value is the restart revision the drain was for.
ROLLOUT_ANNOTATION = "numa-kubelets.io/drained-for-revision"


def rollout_cordon_patch(node: Mapping[str, Any], revision: str) -> Json | None:
    """The merge patch that cordons a Node for its kubelet's restart; None when someone else
    cordoned it (it is drained all the same, and left cordoned afterwards)."""
    spec = node.get("spec") or {}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if spec.get("unschedulable") and ROLLOUT_ANNOTATION not in annotations:
        return None
    return {"metadata": {"annotations": {ROLLOUT_ANNOTATION: revision}}, "spec": {"unschedulable": True}}


def rollout_uncordon_patch(node: Mapping[str, Any]) -> Json | None:
    """Back in service after the restart (or a failed drain); None when the rollout did not cordon it."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if ROLLOUT_ANNOTATION not in annotations:
        return None
    return {"metadata": {"annotations": {ROLLOUT_ANNOTATION: None}}, "spec": {"unschedulable": None}}


def rollout_drain_failed_message(node_name: str, timeout_seconds: int, blocked: Mapping[str, str]) -> str:
    pods = _blocked_pods(blocked)
    return (
        f"draining Node {node_name} before its kubelet restarts did not finish within {timeout_seconds}s "
        f"(cluster.drainTimeout); pods still there: {pods}. The kubelet was not restarted and the Node is "
        "schedulable again; no kubelet after it was touched. Resolve the blocker (e.g. the "
        "PodDisruptionBudget) or raise cluster.drainTimeout, then run the update again"
    )


def api_error_message(action: str, status: int | None, reason: str | None, body: str | None) -> str:
    """A readable account of a failed API call: the Status message, not the raw response."""
    detail = ""
    if body:
        try:
            document = json.loads(body)
        except ValueError:
            detail = body.strip()[:300]
        else:
            detail = str(document.get("message") or "") if isinstance(document, dict) else ""
    text = f"{action}: the API server answered {status} {reason or ''}".rstrip()
    return f"{text}: {detail}" if detail else text


# ---------------------------------------------------------------- preflight of the cluster side


@dataclass(frozen=True)
class Right:
    """One access check (a SelfSubjectAccessReview's resourceAttributes) and why it is needed."""

    verb: str
    resource: str
    why: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""

    def review(self) -> Json:
        attributes = {"verb": self.verb, "group": self.group, "resource": self.resource}
        if self.subresource:
            attributes["subresource"] = self.subresource
        if self.namespace:
            attributes["namespace"] = self.namespace
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        if self.group:
            resource += f".{self.group}"
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {resource}{where} ({self.why})"


def stack_rights(cluster: ClusterPlan) -> tuple[Right, ...]:
    """What the stack's own credential needs beyond creating its objects (which the provider checks)."""
    rights = [
        Right("get", "nodes", "wait for each Node to be Ready"),
        Right("patch", "nodes", "labels, taints, cordon"),
    ]
    if cluster.remove_nodes:
        rights += [
            Right("list", "pods", "find the pods to drain"),
            Right("create", "pods", "drain through the eviction API", subresource="eviction"),
            Right("delete", "nodes", "remove a kubelet's Node when it leaves"),
        ]
    return tuple(rights)


TOKEN_RIGHTS = (
    Right("create", "certificatesigningrequests", "request a client certificate", group="certificates.k8s.io"),
    Right(
        "create",
        "certificatesigningrequests",
        "have it approved automatically",
        group="certificates.k8s.io",
        subresource="nodeclient",
    ),
)


def missing_rights_message(whose: str, missing: Sequence[Right], remedy: str) -> str:
    rights = "; ".join(str(right) for right in missing)
    return f"{whose} may not: {rights}. {remedy}"


def token_does_not_authenticate_message(status: int | None) -> str:
    return (
        f"the bootstrap token does not authenticate (the API server answered {status}): the API server needs "
        "--enable-bootstrap-token-auth, and the token's Secret kube-system/bootstrap-token-<id> must exist "
        "and not be expired"
    )


# ---------------------------------------------------------------- where the API server is reached from
#
# Two addresses, two places. `cluster.server` is the kubelets' address of the API server, often
# one the machine that runs Pulumi cannot reach (an internal load balancer, a node-side VIP):
# whether each host reaches it and trusts its certificate with `caCert` is checked on the host,
# by its preflight. The stack's credential (`kubeconfig`, else the ambient KUBECONFIG) names an
# address the Pulumi machine reaches: the cluster preflight checks the bootstrap token there.

KUBECONFIG_SETTING = "numa-kubelets:kubeconfig"


def credential_setting(kubeconfig_set: bool) -> str:
    """Where the stack's credential comes from, as a user would fix it."""
    if kubeconfig_set:
        return KUBECONFIG_SETTING
    return f"the ambient KUBECONFIG ({KUBECONFIG_SETTING} is not set)"


def unreachable_api_message(subject: str, server: str | None, cause: str, kubeconfig_set: bool) -> str:
    """One line: who could not reach the API server through the stack's credential, where, why,
    and which setting to check."""
    where = f" at {server}" if server else ""
    return f"{subject}: cannot reach the Kubernetes API{where}: {cause}; check {credential_setting(kubeconfig_set)}"


def unusable_credential_message(subject: str, cause: str, kubeconfig_set: bool) -> str:
    return f"{subject}: the stack's credential cannot be used: {cause}; check {credential_setting(kubeconfig_set)}"


@dataclass(frozen=True)
class ApiEndpoint:
    """`cluster.server` as a TLS client connects to it."""

    host: str  # an IP address without brackets, or a DNS name
    port: int

    @property
    def is_ip(self) -> bool:
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return True

    @property
    def host_port(self) -> str:
        """`host:port`, an IPv6 address in brackets (openssl s_client -connect)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def api_endpoint(server: str) -> ApiEndpoint:
    """Of a checked `cluster.server` (https://host[:port][/path]); port 443 when none is given."""
    parts = urllib.parse.urlsplit(server)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{server!r} is not an https:// URL of an API server")
    return ApiEndpoint(parts.hostname, parts.port or 443)


CA_DELIMITER = "NUMA_KUBELETS_CLUSTER_CA"
# A TLS handshake with the server, trusting only caCert and checking the name (IP SANs too):
# what the kubelet's client does. Exits 1 with one line on stderr.
API_PROBE_PYTHON = """\
import socket, ssl, sys
host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection((host, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host):
            pass
except ssl.SSLCertVerificationError as error:
    sys.exit("certificate verify failed (" + str(error.verify_message) + ")")
except ssl.SSLError as error:
    sys.exit("TLS handshake failed (" + str(error.reason or error) + ")")
except OSError as error:
    sys.exit(str(error.strerror or error or type(error).__name__))
"""
# Seconds for the whole check with each tool: a filtered port must not hold the preflight long.
API_PROBE_TIMEOUT = 20


def api_server_preflight(cluster: ClusterPlan) -> Iterator[str]:
    """Shell for the host preflight (reports through `fail`): this host reaches `cluster.server`
    and its certificate is valid for that name under `caCert`, as the kubelets will need.

    With curl when installed, else python3 (its ssl module: python3-minimal has it), else
    openssl; none of them: a problem naming what to install. Checked from the host's network
    namespace: in namespace mode the kubelets' namespaces do not exist yet at the preflight.
    No proxy: the kubelets run under systemd without one.
    """
    endpoint = api_endpoint(cluster.server)
    q = shlex.quote
    where = f"cluster.server {cluster.server}"
    if endpoint.is_ip:
        openssl_name = f"-verify_ip {q(endpoint.host)}"
    else:
        openssl_name = f"-servername {q(endpoint.host)} -verify_hostname {q(endpoint.host)}"
    ca = cluster.ca_cert if cluster.ca_cert.endswith("\n") else cluster.ca_cert + "\n"
    if CA_DELIMITER in ca.splitlines():
        raise ValueError("heredoc delimiter occurs in caCert")  # a checked PEM certificate cannot hold it
    timeout = str(API_PROBE_TIMEOUT)
    yield (
        f"# {where}: reached from here, its certificate valid under caCert (what the kubelets need)\n"
        "api_ca=$(mktemp)\n"
        "trap 'rm -f \"$api_ca\"' EXIT\n"
        f"cat > \"$api_ca\" <<'{CA_DELIMITER}'\n{ca}{CA_DELIMITER}\n"
        "api_tool=\n"
        "if command -v curl >/dev/null 2>&1; then\n"
        "  api_tool=curl\n"
        f"  if ! api_output=$(curl --silent --show-error --noproxy '*' --connect-timeout 10 --max-time {timeout} "
        f'--cacert "$api_ca" --output /dev/null {q(cluster.server)} 2>&1); then api_tool="$api_tool failed"; fi\n'
        "elif command -v python3 >/dev/null 2>&1; then\n"
        "  api_tool=python3\n"
        f'  if ! api_output=$(timeout {timeout} python3 -c {q(API_PROBE_PYTHON)} {q(endpoint.host)} {endpoint.port} "$api_ca" 2>&1); then\n'
        '    api_tool="$api_tool failed"\n'
        "  fi\n"
        "elif command -v openssl >/dev/null 2>&1; then\n"
        "  api_tool=openssl\n"
        f"  if ! api_output=$(timeout {timeout} openssl s_client -brief -connect {q(endpoint.host_port)} {openssl_name} "
        '-CAfile "$api_ca" -verify_return_error </dev/null 2>&1); then\n'
        '    api_tool="$api_tool failed"\n'
        "    api_output=$(printf '%s\\n' \"$api_output\" | grep -i -m 1 'verify error' || printf '%s\\n' \"$api_output\" | grep -i -m 1 'error' || printf '%s\\n' \"$api_output\" | tail -n 1)\n"
        "  fi\n"
        "fi\n"
        'case "$api_tool" in\n'
        f'  ("") fail "cannot check that this host reaches {where}: none of curl, python3, openssl is installed (install curl)";;\n'
        '  (*" failed")\n'
        "    api_output=$(printf '%s\\n' \"$api_output\" | head -n 1)\n"
        '    if [ -z "$api_output" ]; then api_output="no answer within ' + timeout + ' s"; fi\n'
        f'    fail "cannot reach {where} from this host, trusting only caCert: $api_output (checked with ${{api_tool% failed}})";;\n'
        "esac\n"
        'rm -f "$api_ca"\n'
        "trap - EXIT\n"
    )
