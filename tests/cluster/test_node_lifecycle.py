"""Joining and leaving against ApiServerDouble, over real HTTP with the official client.

Time is a fake clock (sleeping advances it), so "until the timeout" is exact and instant.
"""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client as kube_client

from components.node_lifecycle import NodeLifecycleError, NodeLifecycleProvider, NodeOperations, operations_for
from numa_kubelets.plan import Taint
from tests.cluster.api_double import ApiServerDouble, node, pod

NODE = "numa-a-numa0"
IDENTITY = {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "0"}
JOURNAL = "ssh root@192.0.2.10 journalctl -u kubelet@numa0.service -n 100 --no-pager"
TENANT = Taint("tenant", "a", "NoSchedule")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def double():
    with ApiServerDouble() as server:
        yield server


@pytest.fixture
def clock():
    return FakeClock()


def operations(double: ApiServerDouble, clock: FakeClock) -> NodeOperations:
    configuration = kube_client.Configuration(host=double.url)
    return NodeOperations(kube_client.CoreV1Api(kube_client.ApiClient(configuration)), clock, clock.sleep, 5.0)


# ---------------------------------------------------------------- joining


def test_a_node_that_registers_late_is_waited_for(double, clock):
    double.register_after_reads[NODE] = (3, node(NODE, IDENTITY))
    operations(double, clock).wait_ready(NODE, IDENTITY, 60, JOURNAL)
    assert len(double.calls("GET", f"/api/v1/nodes/{NODE}")) == 4
    assert clock.now == 15.0


def test_a_node_that_never_registers_fails_with_the_journal_command(double, clock):
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).wait_ready(NODE, IDENTITY, 60, JOURNAL)
    message = str(failure.value)
    assert f"Node {NODE} is not Ready after 60s: never registered" in message
    assert JOURNAL in message
    assert clock.now == 60.0


def test_a_node_that_stays_not_ready_fails_with_its_last_condition(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY, ready="False")
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).wait_ready(NODE, IDENTITY, 30, JOURNAL)
    assert "Ready=False (KubeletNotReady: container runtime network not ready)" in str(failure.value)
    assert JOURNAL not in str(failure.value)


def test_a_node_of_the_same_name_from_elsewhere_is_not_taken_for_ours(double, clock):
    double.nodes[NODE] = node(NODE, {"numa-kubelets.io/host": "numa-b", "numa-kubelets.io/numa-node": "0"})
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).wait_ready(NODE, IDENTITY, 10, JOURNAL)
    assert "numa-kubelets.io/host=numa-a" in str(failure.value)
    assert "found numa-kubelets.io/host=numa-b" in str(failure.value)


def test_taints_are_set_and_others_left_alone(double, clock):
    foreign = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    double.nodes[NODE] = node(NODE, IDENTITY, taints=[foreign])
    ops = operations(double, clock)
    ops.reconcile_taints(NODE, (), (TENANT,))
    assert double.nodes[NODE]["spec"]["taints"] == [foreign, {"key": "tenant", "value": "a", "effect": "NoSchedule"}]
    [patch] = double.calls("PATCH")
    assert patch.body["metadata"]["resourceVersion"] == "1"  # a precondition: never overwrite a newer list

    ops.reconcile_taints(NODE, (TENANT,), (TENANT,))
    assert len(double.calls("PATCH")) == 1  # already right: nothing written

    ops.reconcile_taints(NODE, (TENANT,), ())
    assert double.nodes[NODE]["spec"]["taints"] == [foreign]


def test_a_concurrent_taint_change_is_read_again(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY)
    ops = operations(double, clock)
    original = ops.node

    def stale_once(name: str):
        current = original(name)
        if len(double.calls("PATCH")) == 0 and current is not None:
            double.nodes[NODE]["metadata"]["resourceVersion"] = "7"  # the controller wrote in between
        return current

    ops.node = stale_once  # type: ignore[method-assign]
    ops.reconcile_taints(NODE, (), (TENANT,))
    assert [r.body["metadata"]["resourceVersion"] for r in double.calls("PATCH")] == ["1", "7"]
    assert double.nodes[NODE]["spec"]["taints"] == [TENANT.manifest()]


# ---------------------------------------------------------------- leaving


def test_removal_cordons_evicts_all_but_daemonset_pods_and_deletes(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY)
    double.pods = [
        pod("default", "web-1", NODE, "ReplicaSet"),
        pod("kube-system", "kube-proxy-x", NODE, "DaemonSet"),
        pod("default", "done", NODE, phase="Succeeded"),
        pod("default", "elsewhere", "numa-a-numa1", "ReplicaSet"),
    ]
    operations(double, clock).remove(NODE, 300)
    assert [r.body for r in double.calls("PATCH")] == [{"spec": {"unschedulable": True}}]
    assert [r.path for r in double.calls("POST")] == ["/api/v1/namespaces/default/pods/web-1/eviction"]
    assert double.calls("DELETE", f"/api/v1/nodes/{NODE}")
    assert NODE not in double.nodes
    order = [r.method for r in double.requests if r.method != "GET"]
    assert order == ["PATCH", "POST", "DELETE"]


def test_a_pdb_that_blocks_eviction_fails_at_the_timeout_and_keeps_the_node(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY)
    double.pods = [pod("shop", "db-0", NODE, "StatefulSet"), pod("default", "web-1", NODE, "ReplicaSet")]
    double.blocked_by_pdb.add("shop/db-0")
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).remove(NODE, 60)
    message = str(failure.value)
    assert "did not finish within 60s (cluster.drainTimeout)" in message
    assert "shop/db-0: eviction refused: the API server answered 429 Too Many Requests: Cannot evict pod" in message
    assert "web-1" not in message  # evicted and gone
    assert "Nothing was removed from the host" in message
    assert clock.now == 60.0
    assert len(double.calls("POST", "/api/v1/namespaces/shop/pods/db-0/eviction")) == 13  # retried every 5 s
    assert NODE in double.nodes and not double.calls("DELETE")


def test_pods_that_cannot_terminate_on_a_node_whose_kubelet_is_gone_do_not_hold_the_drain(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY, ready="Unknown")
    double.pods = [pod("default", "web-1", NODE, "ReplicaSet")]
    double.terminate_on_eviction = False
    operations(double, clock).remove(NODE, 60)
    assert len(double.calls("POST")) == 1
    assert NODE not in double.nodes
    assert clock.now == 5.0  # one poll after the eviction, then the terminating pod is let go


def test_a_ready_node_waits_for_its_evicted_pods_to_terminate(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY)
    double.pods = [pod("default", "web-1", NODE, "ReplicaSet")]
    double.terminate_on_eviction = False
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).remove(NODE, 20)
    assert "default/web-1: evicted, still terminating" in str(failure.value)
    assert len(double.calls("POST")) == 1  # a terminating pod is not evicted again


def test_removing_a_node_that_is_already_gone_succeeds(double, clock):
    operations(double, clock).remove(NODE, 60)
    assert [r.method for r in double.requests] == ["PATCH"]


def test_an_api_error_fails_with_a_readable_message(double, clock):
    double.nodes[NODE] = node(NODE, IDENTITY)
    double.failures[("DELETE", f"/api/v1/nodes/{NODE}")] = (
        403,
        'nodes "numa-a-numa0" is forbidden: User "ci" cannot delete resource "nodes"',
    )
    with pytest.raises(NodeLifecycleError) as failure:
        operations(double, clock).remove(NODE, 60)
    assert str(failure.value) == (
        f"deleting Node {NODE}: the API server answered 403 Forbidden: "
        'nodes "numa-a-numa0" is forbidden: User "ci" cannot delete resource "nodes"'
    )


# ---------------------------------------------------------------- the dynamic provider, with a kubeconfig


def kubeconfig_for(double: ApiServerDouble) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": double.url}}],
            "users": [{"name": "stack", "user": {"token": "stack-credential"}}],
            "contexts": [{"name": "stack", "context": {"cluster": "double", "user": "stack"}}],
            "current-context": "stack",
        }
    )


def props(double: ApiServerDouble, **overrides) -> dict:
    base = {
        "nodeName": NODE,
        "identityLabels": IDENTITY,
        "taints": [TENANT.manifest()],
        "readyTimeoutSeconds": 5,
        "removeNode": True,
        "drainTimeoutSeconds": 5,
        "journalCommand": JOURNAL,
        "kubeconfig": kubeconfig_for(double),
    }
    return {**base, **overrides}


def test_the_provider_joins_and_removes_with_the_stack_credential(double):
    double.nodes[NODE] = node(NODE, IDENTITY)
    provider = NodeLifecycleProvider(operations_for)
    created = provider.create(props(double))
    assert created.id == NODE
    assert double.nodes[NODE]["spec"]["taints"] == [TENANT.manifest()]
    provider.delete(NODE, props(double))
    assert NODE not in double.nodes
    assert {r.authorization for r in double.requests} == {"Bearer stack-credential"}


def test_the_provider_keeps_the_node_when_removal_is_off_and_takes_its_taints_back(double):
    double.nodes[NODE] = node(NODE, IDENTITY, taints=[TENANT.manifest(), {"key": "other", "effect": "NoSchedule"}])
    NodeLifecycleProvider(operations_for).delete(NODE, props(double, removeNode=False))
    assert double.nodes[NODE]["spec"]["taints"] == [{"key": "other", "effect": "NoSchedule"}]
    assert not double.calls("POST") and not double.calls("DELETE")


def test_an_empty_node_left_by_relinquishing_labels_is_removed_even_when_nodes_are_kept(double):
    double.nodes[NODE] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "resourceVersion": "1"},
        "spec": {},
    }
    NodeLifecycleProvider(operations_for).delete(NODE, props(double, removeNode=False))
    assert NODE not in double.nodes


def test_a_changed_taint_replaces_the_old_one_on_update(double):
    double.nodes[NODE] = node(NODE, IDENTITY, taints=[TENANT.manifest()])
    provider = NodeLifecycleProvider(operations_for)
    new = props(double, taints=[{"key": "tenant", "value": "b", "effect": "NoExecute"}])
    diff = provider.diff(NODE, props(double), new)
    assert diff.changes and not diff.replaces
    provider.update(NODE, props(double), new)
    assert double.nodes[NODE]["spec"]["taints"] == [{"key": "tenant", "value": "b", "effect": "NoExecute"}]


def test_another_node_name_replaces_the_resource(double):
    diff = NodeLifecycleProvider(operations_for).diff(NODE, props(double), props(double, nodeName="other"))
    assert diff.replaces == ["nodeName"]
