"""The cluster-side preflight against ApiServerDouble: rights of the stack's credential and of the bootstrap token."""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes import client as kube_client

from components.cluster_preflight import (
    check_bootstrap_token,
    check_cluster_dns_service,
    check_stack_credential,
)
from components.node_lifecycle import NodeLifecycleError
from numa_kubelets import cluster
from numa_kubelets.plan import ClusterPlan
from tests.cluster.api_double import ApiServerDouble
from tests.cluster.test_node_lifecycle import kubeconfig_for
from tests.realcluster.clients import token_client
from tests.unit.builders import CA_CERT

STACK = "stack-credential"
TOKEN = "k1d2e3.s3cr3tt0k3nvalue"


def rights_of(rights) -> set[tuple[str, str, str, str]]:
    return {(r.verb, r.group, r.resource, r.subresource) for r in rights}


def client_for(double: ApiServerDouble, token: str) -> kube_client.ApiClient:
    return token_client(double.url, "/nonexistent/ca.crt", token)  # plain HTTP: the CA is not read


@pytest.fixture
def double():
    with ApiServerDouble() as server:
        yield server


def test_a_credential_and_token_with_every_right_pass(double):
    rights = cluster.stack_rights(ClusterPlan("https://x", CA_CERT))
    double.rights = {STACK: rights_of(rights), TOKEN: rights_of(cluster.TOKEN_RIGHTS)}
    check_stack_credential(client_for(double, STACK), rights)
    check_bootstrap_token(client_for(double, TOKEN))
    asked = [r.body["spec"]["resourceAttributes"] for r in double.calls("POST")]
    assert {
        "verb": "create",
        "group": "certificates.k8s.io",
        "resource": "certificatesigningrequests",
        "subresource": "nodeclient",
    } in asked
    assert {r.authorization for r in double.requests} == {f"Bearer {STACK}", f"Bearer {TOKEN}"}


def test_every_missing_right_of_the_stack_credential_is_named(double):
    rights = cluster.stack_rights(ClusterPlan("https://x", CA_CERT))
    double.rights = {STACK: {("get", "", "nodes", ""), ("patch", "", "nodes", ""), ("list", "", "pods", "")}}
    with pytest.raises(NodeLifecycleError) as failure:
        check_stack_credential(client_for(double, STACK), rights)
    assert str(failure.value) == (
        "the stack's kubeconfig may not: create pods/eviction (drain through the eviction API); "
        "delete nodes (remove a kubelet's Node when it leaves). "
        "Grant them (docs/cluster.md: rights of the stack's kubeconfig)."
    )


def test_without_node_removal_draining_rights_are_not_needed():
    rights = rights_of(cluster.stack_rights(ClusterPlan("https://x", CA_CERT, remove_nodes=False)))
    assert rights == {("get", "", "nodes", ""), ("patch", "", "nodes", "")}


def test_a_token_that_does_not_authenticate_says_what_to_enable(double):
    with pytest.raises(NodeLifecycleError) as failure:
        check_bootstrap_token(client_for(double, TOKEN))
    assert "does not authenticate (the API server answered 401)" in str(failure.value)
    assert "--enable-bootstrap-token-auth" in str(failure.value)


def test_a_token_without_the_nodeclient_binding_says_which_binding_is_missing(double):
    double.rights = {TOKEN: rights_of(cluster.TOKEN_RIGHTS[:1])}
    with pytest.raises(NodeLifecycleError) as failure:
        check_bootstrap_token(client_for(double, TOKEN))
    message = str(failure.value)
    assert message.startswith(
        "the bootstrap token may not: create certificatesigningrequests/nodeclient.certificates.k8s.io "
        "(have it approved automatically)."
    )
    assert cluster.NODE_CLIENT_ROLE in message


def test_the_provider_checks_with_the_stack_kubeconfig_and_the_token(double):
    from components.cluster_preflight import ClusterPreflightProvider

    rights = cluster.stack_rights(ClusterPlan("https://x", CA_CERT))
    double.rights = {"stack-credential": rights_of(rights)}
    props = {
        "bootstrapToken": TOKEN,
        "kubeconfig": kubeconfig_for(double),
        "stackRights": [dataclasses.asdict(right) for right in rights],
    }
    with pytest.raises(NodeLifecycleError, match="does not authenticate"):
        ClusterPreflightProvider().create(props)
    double.rights[TOKEN] = rights_of(cluster.TOKEN_RIGHTS)
    assert ClusterPreflightProvider().create(props).outs == props
    # Both at the address of the stack's kubeconfig: the double; the token alone in its requests.
    token_requests = [r for r in double.requests if r.authorization == f"Bearer {TOKEN}"]
    assert len(token_requests) == 1 + len(cluster.TOKEN_RIGHTS)  # refused once (401), then both rights


def kube_dns(cluster_ip: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": "kube-system", "name": "kube-dns"},
        "spec": {"clusterIP": cluster_ip, "ports": [{"port": 53, "protocol": "UDP"}]},
    }


def test_a_kube_dns_service_with_a_cluster_ip_passes(double):
    double.services = {"kube-system/kube-dns": kube_dns("10.96.0.10")}
    check_cluster_dns_service(client_for(double, STACK))
    assert [r.path for r in double.calls("GET")] == ["/api/v1/namespaces/kube-system/services/kube-dns"]


@pytest.mark.parametrize("services", [{}, {"kube-system/kube-dns": kube_dns("None")}], ids=["missing", "headless"])
def test_no_kube_dns_service_names_the_key_to_set(double, services):
    double.services = services
    with pytest.raises(NodeLifecycleError) as failure:
        check_cluster_dns_service(client_for(double, STACK))
    assert "set numa-kubelets:cluster.dns" in str(failure.value)
    assert "kube-system/kube-dns" in str(failure.value)


def test_a_forbidden_kube_dns_read_is_a_readable_api_error(double):
    double.failures = {("GET", "/api/v1/namespaces/kube-system/services/kube-dns"): (403, "services is forbidden")}
    with pytest.raises(NodeLifecycleError) as failure:
        check_cluster_dns_service(client_for(double, STACK))
    assert "reading Service kube-system/kube-dns" in str(failure.value)
    assert "services is forbidden" in str(failure.value)
