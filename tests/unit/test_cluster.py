"""The core of the cluster side: manifests, names, taint reconciliation, readiness and drain verdicts."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from numa_kubelets import cluster
from numa_kubelets.plan import ClusterPlan, Taint
from numa_kubelets.render import kubelet_arguments, kubelet_config, register_taints_config
from tests.unit.builders import CA_CERT, SERVER, origin_config, origin_host, plan_of, with_cluster

K8S_VERSION = "1.30"
GROUP_SYNTAX = re.compile(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]")


def full(secret_manifest: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", **secret_manifest}


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("stack", "slug"),
    [("prod", "prod"), ("dev-eu1", "dev-eu1"), ("Prod", "prod-"), ("team_a.prod", "team-a-prod-"), ("__", "stack-")],
)
def test_stack_slug_is_a_safe_name_and_marks_every_change(stack, slug):
    result = cluster.stack_slug(stack)
    assert result.startswith(slug)
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", result)
    assert (result == stack) == (slug == stack)


def test_stacks_differing_only_in_case_get_different_groups():
    assert cluster.bootstrap_group("Prod") != cluster.bootstrap_group("prod")


@given(st.text(min_size=1, max_size=60))
def test_the_group_always_has_the_syntax_the_token_authenticator_accepts(stack):
    assert GROUP_SYNTAX.fullmatch(cluster.bootstrap_group(stack))


# ---------------------------------------------------------------- token Secret and bindings


def test_token_secret_is_authentication_only_and_never_expires():
    manifest = cluster.bootstrap_token_secret("k1d2e3", "s3cr3tt0k3nvalue", "prod")
    assert manifest["metadata"]["name"] == "bootstrap-token-k1d2e3"
    data = manifest["stringData"]
    assert data["usage-bootstrap-authentication"] == "true"
    assert "usage-bootstrap-signing" not in data and "expiration" not in data
    assert data["auth-extra-groups"] == "system:bootstrappers:numa-kubelets:prod"
    kubernetes_validate.validate(full(manifest), K8S_VERSION, strict=True)


def test_bindings_are_valid_and_bind_only_the_stacks_group():
    bindings = cluster.bootstrap_bindings("prod")
    assert [b.role for b in bindings] == [cluster.NODE_BOOTSTRAPPER_ROLE, cluster.NODE_CLIENT_ROLE]
    for binding in bindings:
        manifest = binding.manifest("prod")
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        assert manifest["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:bootstrappers:numa-kubelets:prod",
            }
        ]


# ---------------------------------------------------------------- labels, taints and the kubelet's registration


def cluster_plan():
    config = origin_config(hosts=[origin_host(kubelets=[{"numaNode": 0, "labels": {"numa-type": "red"}}])])
    return plan_of(with_cluster(config))


def test_with_a_cluster_the_kubelet_registers_only_the_automatic_labels():
    plan = cluster_plan()
    [kubelet] = plan.kubelets
    arguments = kubelet_arguments(kubelet, plan.cluster)
    assert "--node-labels=numa-kubelets.io/host=numa-a,numa-kubelets.io/numa-node=0" in arguments
    patch = cluster.node_label_patch(kubelet, "prod")
    assert patch["labels"] == {"numa-type": "red", "numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "0"}
    assert patch["annotations"][cluster.PATCH_FIELD_MANAGER_ANNOTATION] == "numa-kubelets-prod"


def test_standalone_kubelets_register_every_label():
    plan = plan_of(origin_config(hosts=[origin_host(kubelets=[{"numaNode": 0, "labels": {"numa-type": "red"}}])]))
    [kubelet] = plan.kubelets
    assert "--node-labels=numa-kubelets.io/host=numa-a,numa-kubelets.io/numa-node=0,numa-type=red" in kubelet_arguments(
        kubelet, None
    )


def test_kubelet_configuration_with_taints_dns_and_serving_certificates():
    config = with_cluster(
        origin_config(
            hosts=[
                origin_host(
                    kubelets=[{"numaNode": 0, "taints": [{"key": "tenant", "value": "a", "effect": "NoSchedule"}]}]
                )
            ]
        )
    )
    config["cluster"]["servingCertificates"] = "bootstrap"
    plan = plan_of(config)
    [kubelet] = plan.kubelets
    document = yaml.safe_load(kubelet_config(kubelet, plan.cluster).content)
    # The taints live in their own drop-in, so that changing them restarts nothing.
    assert "registerWithTaints" not in document
    taints = yaml.safe_load(register_taints_config(kubelet).content)
    assert taints["kind"] == "KubeletConfiguration"
    assert taints["registerWithTaints"] == [{"key": "tenant", "value": "a", "effect": "NoSchedule"}]
    assert document["serverTLSBootstrap"] is True
    assert document["clusterDNS"] == ["10.96.0.10"]
    assert document["clusterDomain"] == "cluster.local"


def test_kubelet_configuration_is_not_rendered_before_the_cluster_dns_is_known():
    plan = cluster_plan()
    unresolved = ClusterPlan(SERVER, CA_CERT)
    with pytest.raises(ValueError, match="clusterDNS is not resolved"):
        kubelet_config(plan.kubelets[0], unresolved)
    resolved = cluster.with_cluster_dns(plan, "10.32.0.10")
    assert yaml.safe_load(kubelet_config(resolved.kubelets[0], resolved.cluster).content)["clusterDNS"] == [
        "10.32.0.10"
    ]


def test_cluster_dns_from_the_config_wins_over_the_service():
    assert cluster.cluster_dns(ClusterPlan(SERVER, CA_CERT, dns="10.0.0.10"), "10.96.0.10") == "10.0.0.10"
    assert cluster.cluster_dns(ClusterPlan(SERVER, CA_CERT), "10.96.0.10") == "10.96.0.10"
    with pytest.raises(cluster.ClusterDnsUnknown, match=r"cluster\.dns"):
        cluster.cluster_dns(ClusterPlan(SERVER, CA_CERT), None)


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
TENANT_A = Taint("tenant", "a", "NoSchedule")
TENANT_B = Taint("tenant", "b", "NoSchedule")


def test_taints_of_others_stay_ours_follow_the_stack():
    assert cluster.reconciled_taints([NOT_READY], (), (TENANT_A,)) == [NOT_READY, TENANT_A.manifest()]
    assert cluster.reconciled_taints([NOT_READY, TENANT_A.manifest()], (TENANT_A,), (TENANT_A,)) is None
    assert cluster.reconciled_taints([TENANT_A.manifest(), NOT_READY], (TENANT_A,), (TENANT_B,)) == [
        NOT_READY,
        TENANT_B.manifest(),
    ]
    assert cluster.reconciled_taints([TENANT_A.manifest(), NOT_READY], (TENANT_A,), ()) == [NOT_READY]
    # A taint the kubelet registered (same key and effect) is taken over, not doubled.
    assert cluster.reconciled_taints([TENANT_A.manifest()], (), (TENANT_A,)) is None


taints = st.builds(
    Taint,
    st.sampled_from(["tenant", "gpu", "example.com/dedicated"]),
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)


def unique(items: list[Taint]) -> tuple[Taint, ...]:
    return tuple({(t.key, t.effect): t for t in items}.values())


@given(st.lists(taints), st.lists(taints), st.lists(taints), st.lists(st.sampled_from(["not-ready", "unreachable"])))
def test_reconciling_twice_changes_nothing_and_foreign_taints_survive(current, previous, declared, foreign_keys):
    foreign = [{"key": f"node.kubernetes.io/{key}", "effect": "NoExecute"} for key in dict.fromkeys(foreign_keys)]
    start = [t.manifest() for t in unique(current)] + foreign
    once = cluster.reconciled_taints(start, unique(previous), unique(declared))
    result = start if once is None else once
    assert cluster.reconciled_taints(result, unique(declared), unique(declared)) is None
    for taint in foreign:
        assert taint in result
    for taint in unique(declared):
        assert taint.manifest() in result
    assert len({(t["key"], t["effect"]) for t in result}) == len(result)


# ---------------------------------------------------------------- readiness and drain verdicts

IDENTITY = {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "0"}


def node(labels=IDENTITY, conditions=()):
    return {"metadata": {"labels": dict(labels)}, "status": {"conditions": list(conditions)}}


def test_readiness_verdicts():
    assert cluster.node_readiness(None, IDENTITY) == cluster.Readiness(False, "never registered")
    assert cluster.node_readiness(node(conditions=[{"type": "Ready", "status": "True"}]), IDENTITY).ready
    not_ready = cluster.node_readiness(
        node(
            conditions=[
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                }
            ]
        ),
        IDENTITY,
    )
    assert not_ready == cluster.Readiness(
        False, "Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
    )
    assert cluster.node_readiness(node(), IDENTITY).state == "registered, no Ready condition yet"
    foreign = cluster.node_readiness(node(labels={}, conditions=[{"type": "Ready", "status": "True"}]), IDENTITY)
    assert not foreign.ready and "numa-kubelets.io/host=<unset>" in foreign.state


def test_only_pods_that_would_not_come_back_or_are_finished_are_evicted():
    def pod(name, **metadata):
        return {
            "metadata": {"namespace": "ns", "name": name, **metadata},
            "status": {"phase": metadata.pop("phase", "Running")},
        }

    pods = [
        pod("web"),
        pod("agent", ownerReferences=[{"kind": "DaemonSet", "name": "agent", "controller": True}]),
        pod("static", annotations={cluster.MIRROR_POD_ANNOTATION: "abc"}),
        {"metadata": {"namespace": "ns", "name": "job"}, "status": {"phase": "Succeeded"}},
        pod("adopted", ownerReferences=[{"kind": "DaemonSet", "name": "x", "controller": False}]),
    ]
    assert [cluster.pod_key(p) for p in cluster.pods_to_drain(pods, node_ready=True)] == ["ns/adopted", "ns/web"]
    terminating = pod("stuck", deletionTimestamp="2026-11-30T16:00:00Z")
    assert [cluster.pod_key(p) for p in cluster.pods_to_drain([terminating], node_ready=True)] == ["ns/stuck"]
    assert cluster.pods_to_drain([terminating], node_ready=False) == []


def test_an_evicted_pod_holds_the_drain_until_it_is_gone_even_once_it_has_turned_failed():
    """Its kubelet sets the final phase when the containers have stopped and deletes the pod a
    moment later: ending the drain in between left the pod behind (seen with the real kubelet)."""
    evicted = {
        "metadata": {"namespace": "ns", "name": "web", "deletionTimestamp": "2026-12-02T07:00:00Z"},
        "status": {"phase": "Failed"},
    }
    finished = {"metadata": {"namespace": "ns", "name": "job"}, "status": {"phase": "Failed"}}
    agent = {
        "metadata": {
            "namespace": "ns",
            "name": "agent",
            "deletionTimestamp": "2026-12-02T07:00:00Z",
            "ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}],
        },
        "status": {"phase": "Running"},
    }
    assert [cluster.pod_key(p) for p in cluster.pods_to_drain([evicted, finished, agent], node_ready=True)] == [
        "ns/web"
    ]
    assert cluster.pods_to_drain([evicted], node_ready=False) == []


def test_api_errors_read_as_the_status_message():
    assert (
        cluster.api_error_message(
            "deleting Node n", 403, "Forbidden", '{"kind":"Status","message":"nodes \\"n\\" is forbidden"}'
        )
        == 'deleting Node n: the API server answered 403 Forbidden: nodes "n" is forbidden'
    )
    assert cluster.api_error_message("x", 502, "Bad Gateway", "<html>proxy</html>") == (
        "x: the API server answered 502 Bad Gateway: <html>proxy</html>"
    )
    assert cluster.api_error_message("x", None, None, None) == "x: the API server answered None"


def test_journal_command_names_the_host_and_unit():
    plan = plan_of(origin_config(hosts=[origin_host(sshPort=2222, user="deploy")]))
    host = plan.hosts[0]
    assert cluster.journal_command(host, host.kubelets[1]) == (
        "ssh -p 2222 deploy@192.0.2.10 journalctl -u kubelet@numa1.service -n 100 --no-pager"
    )


# ---------------------------------------------------------------- errors of reaching the API server


def test_an_unreachable_api_names_the_address_the_cause_and_the_setting():
    from numa_kubelets.cluster import unreachable_api_message, unusable_credential_message

    assert unreachable_api_message("cluster preflight", "https://127.0.0.1:6443", "connection refused", True) == (
        "cluster preflight: cannot reach the Kubernetes API at https://127.0.0.1:6443: connection refused; "
        "check numa-kubelets:kubeconfig"
    )
    assert unreachable_api_message("Node n", None, "timed out", False) == (
        "Node n: cannot reach the Kubernetes API: timed out; "
        "check the ambient KUBECONFIG (numa-kubelets:kubeconfig is not set)"
    )
    assert unusable_credential_message("cluster preflight", "it is not valid YAML", True) == (
        "cluster preflight: the stack's credential cannot be used: it is not valid YAML; check numa-kubelets:kubeconfig"
    )


def test_kube_dns_gives_the_address_unless_it_is_missing_or_headless():
    from numa_kubelets.cluster import ClusterDnsUnknown, kube_dns_address

    assert kube_dns_address("10.96.0.10") == "10.96.0.10"
    for missing in (None, "", "None"):
        with pytest.raises(ClusterDnsUnknown, match=r"set numa-kubelets:cluster\.dns"):
            kube_dns_address(missing)
