"""The node lifecycle and the cluster preflight against the real kube-apiserver of the session's
control plane (tests/realcluster), with the least-privilege stack credential of docs/cluster.md.

The HTTP double (api_double.py) stays for what a real server cannot be made to do on demand: a
500, a 403 on one chosen call, a Node that registers after exactly N reads, a fake clock. Each
test here uses Nodes and namespaces of its own: the control plane is shared by the session.
"""

from __future__ import annotations

import base64
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from components.cluster_preflight import (
    ClusterPreflightProvider,
    check_bootstrap_token,
    check_cluster_dns_service,
    check_stack_credential,
)
from components.dynamic_resource import ProviderError
from components.node_lifecycle import NodeLifecycleError, NodeOperations
from numa_kubelets import cluster
from numa_kubelets.plan import ClusterPlan, Taint
from tests.program.harness import load_stack_file, run_program
from tests.realcluster.clients import api_for, closed_loopback_port, create_managed_token, eventually, token_api
from tests.realcluster.controlplane import ControlPlane, inline_kubeconfig
from tests.unit.builders import HOST_KEY
from tests.unit.test_api_server_preflight import another_ca

pytestmark = pytest.mark.realtools("etcd")  # the control plane: built by tools/build.sh

TENANT = Taint("tenant", "a", "NoSchedule")
JOURNAL = "journalctl -u kubelet@numa0.service"


@pytest.fixture
def admin(control_plane: ControlPlane) -> kube_client.CoreV1Api:
    return kube_client.CoreV1Api(api_for(control_plane.admin_kubeconfig))


@pytest.fixture
def stack_api(control_plane: ControlPlane) -> kube_client.ApiClient:
    return api_for(control_plane.stack_kubeconfig)


@pytest.fixture
def node_name(admin: kube_client.CoreV1Api) -> Iterator[str]:
    """A Node as a kubelet registers it (identity labels, Ready now), deleted afterwards."""
    name = f"numa-{uuid.uuid4().hex[:8]}-numa0"
    admin.create_node({"metadata": {"name": name, "labels": identity(name)}})
    set_ready(admin, name, "True")
    yield name
    try:
        admin.delete_node(name)
    except ApiException as error:
        if error.status != 404:
            raise


def identity(name: str) -> dict[str, str]:
    return {"numa-kubelets.io/host": name.rsplit("-", 1)[0], "numa-kubelets.io/numa-node": "0"}


def set_ready(admin: kube_client.CoreV1Api, name: str, status: str) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": "Ready", "status": status, "reason": "KubeletReady", "message": "test"}
    condition |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
    admin.patch_node_status(name, {"status": {"conditions": [condition]}})


def stack_operations(stack_api: kube_client.ApiClient) -> NodeOperations:
    return NodeOperations(kube_client.CoreV1Api(stack_api), poll_seconds=0.5)


def running_pod(admin: kube_client.CoreV1Api, namespace: str, name: str, node: str, labels: dict[str, str]) -> None:
    """A pod bound to `node` and reported Running and Ready, as its kubelet would."""
    admin.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
    )
    admin.patch_namespaced_pod_status(
        name,
        namespace,
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
    )


def namespace(admin: kube_client.CoreV1Api) -> str:
    name = f"drain-{uuid.uuid4().hex[:8]}"
    admin.create_namespace({"metadata": {"name": name}})
    # Pods are admitted only once the service-account controller has made the namespace's default.
    eventually(
        lambda: admin.list_namespaced_service_account(name, field_selector="metadata.name=default").items or None,
        30,
        f"the default service account of {name}",
    )
    return name


def taints_of(admin: kube_client.CoreV1Api, name: str) -> list[dict[str, Any]]:
    """The Node's taints but the node lifecycle controller's own (node.kubernetes.io/not-ready
    and the like come and go with the Ready condition of a Node no kubelet heartbeats for)."""
    return [
        {k: v for k, v in taint.to_dict().items() if v is not None and k != "time_added"}
        for taint in admin.read_node(name).spec.taints or []
        if not taint.key.startswith("node.kubernetes.io/")
    ]


# ---------------------------------------------------------------- preflight


def test_the_readme_rights_pass_the_stack_credential_check(stack_api):
    check_stack_credential(stack_api, cluster.stack_rights(ClusterPlan("https://x", "ca")))


def test_a_credential_without_pods_eviction_is_refused_naming_it(control_plane: ControlPlane):
    rbac = kube_client.RbacAuthorizationV1Api(api_for(control_plane.admin_kubeconfig))
    user = "no-eviction"
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    rbac.create_cluster_role({"metadata": {"name": user}, "rules": rules})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": user},
            "roleRef": {"kind": "ClusterRole", "name": user, "apiGroup": "rbac.authorization.k8s.io"},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )
    api = api_for(control_plane.client_kubeconfig(user, user))
    with pytest.raises(NodeLifecycleError) as failure:
        check_stack_credential(api, cluster.stack_rights(ClusterPlan("https://x", "ca")))
    assert str(failure.value) == (
        "the stack's kubeconfig may not: create pods/eviction (drain through the eviction API). "
        "Grant them (docs/cluster.md: rights of the stack's kubeconfig)."
    )


def test_the_managed_token_passes_the_token_check(control_plane: ControlPlane, stack_api):
    token = create_managed_token(stack_api, "b1c2d3", "00112233445566ff", "preflight-ok")
    check_bootstrap_token(token_api(control_plane, token))


def test_a_token_without_its_secret_does_not_authenticate(control_plane: ControlPlane):
    with pytest.raises(NodeLifecycleError) as failure:
        check_bootstrap_token(token_api(control_plane, "zzzzzz.0000000000000000"))
    assert "does not authenticate (the API server answered 401)" in str(failure.value)


def test_a_token_without_the_nodeclient_binding_is_refused_naming_the_role(control_plane: ControlPlane, stack_api):
    stack = "preflight-half"
    kube_client.CoreV1Api(stack_api).create_namespaced_secret(
        "kube-system", cluster.bootstrap_token_secret("e1f2a3", "aabbccddeeff0011", stack)
    )
    bootstrapper = cluster.bootstrap_bindings(stack)[0]
    kube_client.RbacAuthorizationV1Api(stack_api).create_cluster_role_binding(bootstrapper.manifest(stack))
    with pytest.raises(NodeLifecycleError) as failure:
        check_bootstrap_token(token_api(control_plane, "e1f2a3.aabbccddeeff0011"))
    message = str(failure.value)
    assert message.startswith(
        "the bootstrap token may not: create certificatesigningrequests/nodeclient.certificates.k8s.io "
        "(have it approved automatically)."
    )
    assert cluster.NODE_CLIENT_ROLE in message


def test_kube_dns_missing_headless_and_present(control_plane: ControlPlane, stack_api):
    admin = kube_client.CoreV1Api(api_for(control_plane.admin_kubeconfig))
    with pytest.raises(NodeLifecycleError, match=r"set numa-kubelets:cluster\.dns"):
        check_cluster_dns_service(stack_api)
    service = {
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": "None", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
    }
    admin.create_namespaced_service("kube-system", service)
    try:
        with pytest.raises(NodeLifecycleError, match=r"set numa-kubelets:cluster\.dns"):
            check_cluster_dns_service(stack_api)
    finally:
        admin.delete_namespaced_service("kube-dns", "kube-system")
    eventually(lambda: True if not admin.list_namespaced_service("kube-system").items else None, 30, "kube-dns deleted")
    service["spec"]["clusterIP"] = "10.96.0.10"
    admin.create_namespaced_service("kube-system", service)
    try:
        check_cluster_dns_service(stack_api)
    finally:
        admin.delete_namespaced_service("kube-dns", "kube-system")


# ---------------------------------------------------------------- the preflight from the Pulumi machine

PREFLIGHT = "pulumi-python:dynamic/numa-kubelets:ClusterPreflight"


def stack_config(control_plane: ControlPlane, server: str, token: str, credential: str) -> dict[str, Any]:
    """The example stack joining the session's control plane: `server` is cluster.server (the
    kubelets' address), `credential` the stack's kubeconfig secret."""
    config = load_stack_file("example-cluster")
    config["hosts"] = [
        {"name": "numa-a", "address": "192.0.2.10", "hostKey": HOST_KEY, "numaNodes": [{"id": 0, "cpus": "0-3"}]}
    ]
    config["cluster"] = {"server": server, "caCert": control_plane.ca_pem, "dns": "10.96.0.10"}
    config["demo"] = {"enabled": False}
    config["bootstrapToken"] = token
    config["kubeconfig"] = credential
    config["sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n"
    return config


def program_preflight_props(config: dict[str, Any]) -> dict[str, Any]:
    """The ClusterPreflight's inputs as the program makes them (under the mock engine)."""
    [preflight] = run_program(config).of_type(PREFLIGHT)
    return {key: value for key, value in preflight.inputs.items() if key != "__provider"}


def with_server(credential: str, server: str) -> str:
    document = yaml.safe_load(credential)
    document["clusters"][0]["cluster"]["server"] = server
    return yaml.safe_dump(document)


def test_a_cluster_server_this_machine_cannot_reach_does_not_fail_the_preflight(control_plane, stack_api):
    """The issue's case: the kubelets' address leads nowhere from here; the credential's works."""
    server = f"https://127.0.0.1:{closed_loopback_port()}"
    token = create_managed_token(stack_api, "c1d2e3", "0123456789abcdef", "unreachable-server")
    config = stack_config(control_plane, server, token, inline_kubeconfig(control_plane.stack_kubeconfig))
    ClusterPreflightProvider().create(program_preflight_props(config))


def test_the_token_is_checked_alone_not_with_the_credentials_certificate(control_plane):
    """The stack's kubeconfig authenticates with a client certificate, which the API server would
    take before any token: a token without its Secret must still be refused."""
    config = stack_config(
        control_plane,
        control_plane.server,
        "zzzzzz.0000000000000000",
        inline_kubeconfig(control_plane.stack_kubeconfig),
    )
    with pytest.raises(NodeLifecycleError, match=r"does not authenticate \(the API server answered 401\)"):
        ClusterPreflightProvider().create(program_preflight_props(config))


def test_an_unreachable_credential_address_is_one_clear_line(control_plane, stack_api):
    token = create_managed_token(stack_api, "d1e2f3", "0123456789abcdef", "unreachable-credential")
    unreachable = f"https://127.0.0.1:{closed_loopback_port()}"
    credential = with_server(inline_kubeconfig(control_plane.stack_kubeconfig), unreachable)
    config = stack_config(control_plane, control_plane.server, token, credential)
    with pytest.raises(ProviderError) as failure:
        ClusterPreflightProvider().create(program_preflight_props(config))
    assert str(failure.value) == (
        f"cluster preflight: cannot reach the Kubernetes API at {unreachable}: connection refused; "
        "check numa-kubelets:kubeconfig"
    )


def test_a_credential_that_does_not_trust_the_servers_certificate_is_one_clear_line(control_plane, stack_api):
    token = create_managed_token(stack_api, "e1f2a4", "0123456789abcdef", "untrusted")
    document = yaml.safe_load(inline_kubeconfig(control_plane.stack_kubeconfig))
    document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(another_ca()).decode()
    config = stack_config(control_plane, control_plane.server, token, yaml.safe_dump(document))
    with pytest.raises(ProviderError) as failure:
        ClusterPreflightProvider().create(program_preflight_props(config))
    assert str(failure.value) == (
        f"cluster preflight: cannot reach the Kubernetes API at {control_plane.server}: certificate verify failed "
        "(unable to get local issuer certificate); check numa-kubelets:kubeconfig"
    )


# ---------------------------------------------------------------- joining


def test_a_ready_node_with_its_labels_is_waited_for_and_tainted(admin, stack_api, node_name):
    operations = stack_operations(stack_api)
    operations.wait_ready(node_name, identity(node_name), 10, JOURNAL)
    admin.patch_node(node_name, {"spec": {"taints": [{"key": "foreign", "effect": "NoSchedule"}]}})
    operations.reconcile_taints(node_name, (), (TENANT,))
    assert taints_of(admin, node_name) == [{"key": "foreign", "effect": "NoSchedule"}, TENANT.manifest()]
    operations.reconcile_taints(node_name, (TENANT,), ())
    assert taints_of(admin, node_name) == [{"key": "foreign", "effect": "NoSchedule"}]


def test_a_node_that_never_registers_fails_with_the_journal_command(stack_api):
    with pytest.raises(NodeLifecycleError) as failure:
        stack_operations(stack_api).wait_ready("numa-never-numa0", identity("numa-never-numa0"), 2, JOURNAL)
    assert "Node numa-never-numa0 is not Ready after 2s: never registered" in str(failure.value)
    assert JOURNAL in str(failure.value)


def test_a_concurrent_writer_makes_the_taint_edit_read_again(admin, stack_api, node_name):
    """A real 409: another writer changes the Node between our read and our patch."""
    operations = stack_operations(stack_api)
    read = operations.node
    reads = []

    def read_then_someone_writes(name: str):
        current = read(name)
        reads.append(current["metadata"]["resourceVersion"])
        if len(reads) == 1:
            admin.patch_node(name, {"metadata": {"labels": {"written-in-between": "yes"}}})
        return current

    operations.node = read_then_someone_writes  # type: ignore[method-assign]
    operations.reconcile_taints(node_name, (), (TENANT,))
    assert len(reads) == 2 and reads[0] != reads[1]
    node = admin.read_node(node_name)
    assert node.metadata.labels["written-in-between"] == "yes"
    assert taints_of(admin, node_name) == [TENANT.manifest()]


# ---------------------------------------------------------------- leaving


def test_a_real_pdb_blocks_the_drain_until_the_timeout_and_the_node_stays(admin, stack_api, node_name):
    where = namespace(admin)
    running_pod(admin, where, "db-0", node_name, {"app": "db"})
    kube_client.PolicyV1Api(api_for_admin(admin)).create_namespaced_pod_disruption_budget(
        where, {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    policy = kube_client.PolicyV1Api(api_for_admin(admin))
    eventually(
        lambda: (
            True
            if (policy.read_namespaced_pod_disruption_budget("db", where).status.current_healthy or 0) == 1
            else None
        ),
        30,
        "the disruption controller counting the pod",
    )
    started = time.monotonic()
    with pytest.raises(NodeLifecycleError) as failure:
        stack_operations(stack_api).remove(node_name, 3)
    message = str(failure.value)
    assert time.monotonic() - started >= 3
    assert "did not finish within 3s (cluster.drainTimeout)" in message
    assert f"{where}/db-0: eviction refused: the API server answered 429 Too Many Requests" in message
    assert "Cannot evict pod as it would violate the pod's disruption budget" in message
    node = admin.read_node(node_name)
    assert node.spec.unschedulable is True
    assert admin.read_namespaced_pod("db-0", where).metadata.deletion_timestamp is None


def test_removal_evicts_and_deletes_a_node_whose_kubelet_is_gone(admin, stack_api, node_name):
    where = namespace(admin)
    running_pod(admin, where, "web-1", node_name, {"app": "web"})
    set_ready(admin, node_name, "Unknown")
    stack_operations(stack_api).remove(node_name, 30)
    with pytest.raises(ApiException) as gone:
        admin.read_node(node_name)
    assert gone.value.status == 404
    # Evicted, not deleted outright: the pod went through the eviction API and is terminating
    # (until the pod garbage collector removes it with its Node gone).
    pod = _pod_or_none(admin, where, "web-1")
    assert pod is None or pod.metadata.deletion_timestamp is not None


def api_for_admin(admin: kube_client.CoreV1Api) -> kube_client.ApiClient:
    return admin.api_client


def _pod_or_none(admin: kube_client.CoreV1Api, where: str, name: str):
    try:
        return admin.read_namespaced_pod(name, where)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_binding_the_bootstrap_roles_needs_bind_on_them(control_plane: ControlPlane):
    """Why docs/cluster.md lists `bind` on the two ClusterRoles: RBAC's escalation check refuses a
    binding to a role whose rights the creator lacks, unless it may `bind` that role."""
    from tests.realcluster.controlplane import STACK_CLUSTER_RULES

    rbac = kube_client.RbacAuthorizationV1Api(api_for(control_plane.admin_kubeconfig))
    user = "no-bind"
    rules = [rule for rule in STACK_CLUSTER_RULES if rule["verbs"] != ["bind"]]
    rbac.create_cluster_role({"metadata": {"name": user}, "rules": rules})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": user},
            "roleRef": {"kind": "ClusterRole", "name": user, "apiGroup": "rbac.authorization.k8s.io"},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )
    api = kube_client.RbacAuthorizationV1Api(api_for(control_plane.client_kubeconfig(user, user)))
    binding = cluster.bootstrap_bindings("no-bind")[0]
    with pytest.raises(ApiException) as refused:
        api.create_cluster_role_binding(binding.manifest("no-bind"))
    assert refused.value.status == 403
    assert "attempting to grant RBAC permissions not currently held" in refused.value.body


# ---------------------------------------------------------------- rolling restarts (NodeDrain)


def annotations_of(admin: kube_client.CoreV1Api, name: str) -> dict[str, str]:
    return admin.read_node(name).metadata.annotations or {}


def test_a_drain_for_a_restart_cordons_evicts_and_the_restarted_kubelets_report_ends_it(admin, stack_api, node_name):
    where = namespace(admin)
    running_pod(admin, where, "web-0", node_name, {"app": "web"})
    operations = stack_operations(stack_api)
    # The evicted pod stays terminating until its kubelet would stop it: played here by deleting
    # it outright once the eviction set its deletionTimestamp.
    evicted = []

    def kubelet_stops_the_pod(seconds: float) -> None:
        pod = _pod_or_none(admin, where, "web-0")
        if pod is not None and pod.metadata.deletion_timestamp is not None:
            evicted.append(pod.metadata.name)
            admin.delete_namespaced_pod("web-0", where, grace_period_seconds=0)
        time.sleep(seconds)

    operations.sleep = kubelet_stops_the_pod
    operations.drain_for_restart(node_name, "rev-2", 30)
    assert evicted == ["web-0"], "the pod was not evicted"
    node = admin.read_node(node_name)
    assert node.spec.unschedulable is True
    assert node.metadata.annotations[cluster.ROLLOUT_ANNOTATION] == "rev-2"
    # The kubelet restarts after its last report: that Ready is the old kubelet's.
    time.sleep(1.1)  # heartbeats have a resolution of one second
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with pytest.raises(NodeLifecycleError, match=f"as reported before the kubelet \\(re\\)started at {started}"):
        NodeOperations(operations.api, poll_seconds=0.2).wait_ready(node_name, identity(node_name), 1, JOURNAL, started)
    set_ready(admin, node_name, "True")  # the restarted kubelet's first report
    operations.wait_ready(node_name, identity(node_name), 10, JOURNAL, started)
    operations.end_rollout(node_name)
    node = admin.read_node(node_name)
    assert not node.spec.unschedulable
    assert cluster.ROLLOUT_ANNOTATION not in (node.metadata.annotations or {})


def test_a_drain_a_pdb_holds_fails_naming_it_and_puts_the_node_back_in_service(admin, stack_api, node_name):
    where = namespace(admin)
    running_pod(admin, where, "db-0", node_name, {"app": "db"})
    policy = kube_client.PolicyV1Api(api_for_admin(admin))
    policy.create_namespaced_pod_disruption_budget(
        where, {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    eventually(
        lambda: (
            True if (policy.read_namespaced_pod_disruption_budget("db", where).status.current_healthy or 0) else None
        ),
        30,
        "the disruption controller counting the pod",
    )
    with pytest.raises(NodeLifecycleError) as failure:
        stack_operations(stack_api).drain_for_restart(node_name, "rev-2", 3)
    message = str(failure.value)
    assert "before its kubelet restarts did not finish within 3s" in message
    assert f"{where}/db-0: eviction refused" in message and "disruption budget" in message
    assert "The kubelet was not restarted and the Node is schedulable again" in message
    node = admin.read_node(node_name)
    assert not node.spec.unschedulable
    assert cluster.ROLLOUT_ANNOTATION not in (node.metadata.annotations or {})


def test_a_node_someone_else_cordoned_is_drained_and_stays_cordoned(admin, stack_api, node_name):
    admin.patch_node(node_name, {"spec": {"unschedulable": True}})
    operations = stack_operations(stack_api)
    operations.drain_for_restart(node_name, "rev-2", 10)
    assert cluster.ROLLOUT_ANNOTATION not in annotations_of(admin, node_name)
    operations.wait_ready(node_name, identity(node_name), 10, JOURNAL)
    operations.end_rollout(node_name)
    assert admin.read_node(node_name).spec.unschedulable is True
