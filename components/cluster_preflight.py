"""ClusterPreflight: before any kubelet tries to join, check what can be checked from here.

- The stack's credential may do what the node lifecycle needs (get/patch Nodes; with
  cluster.removeNodes also list pods, evict, delete Nodes).
- The bootstrap token authenticates (bootstrap token authentication is enabled and its Secret
  exists) and its groups may create CSRs and have client CSRs auto-approved.
- Without cluster.dns: the kube-system/kube-dns Service the kubelets' clusterDNS comes from
  exists and has a clusterIP (otherwise the error names the key to set).

All at the address of the stack's credential (its `kubeconfig`, else the ambient KUBECONFIG),
the one the machine running Pulumi reaches: `cluster.server` is the kubelets' address of the API
server, often not reachable from here (an internal load balancer, a node-side VIP); each host's
preflight checks that it reaches it with `caCert` (numa_kubelets/cluster.py). The token is
presented alone, with the credential's TLS settings and none of its authentication.

The rights through SelfSubjectAccessReviews, which every authenticated user may create. A
failure names every missing right at once; an unreachable address, a TLS failure or an unusable
credential is one line naming it (node_lifecycle.reported). A Pulumi dynamic resource like
NodeLifecycle: it runs on create and whenever the token or the credential changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pulumi
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException
from pulumi import dynamic

from components.dynamic_resource import SafeDynamicResource
from numa_kubelets import cluster
from numa_kubelets.cluster import Right

from .node_lifecycle import NodeLifecycleError, api_failure, credential_configuration, reported, stack_api_client

UNAUTHORIZED = 401
NOT_FOUND = 404
# Seconds to connect and to wait for each answer: a filtered address fails the preflight soon.
REQUEST_TIMEOUT = (10, 30)


def allowed(api: kube_client.AuthorizationV1Api, right: Right) -> bool:
    review = right.review()
    body = kube_client.V1SelfSubjectAccessReview(
        api_version=review["apiVersion"],
        kind=review["kind"],
        spec=kube_client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=kube_client.V1ResourceAttributes(**review["spec"]["resourceAttributes"])
        ),
    )
    answer = api.create_self_subject_access_review(body, _request_timeout=REQUEST_TIMEOUT)
    return bool(answer.status is not None and answer.status.allowed)


def missing_rights(api: kube_client.AuthorizationV1Api, rights: Sequence[Right]) -> list[Right]:
    return [right for right in rights if not allowed(api, right)]


def check_stack_credential(api_client: kube_client.ApiClient, rights: Sequence[Right]) -> None:
    try:
        missing = missing_rights(kube_client.AuthorizationV1Api(api_client), rights)
    except ApiException as error:
        raise api_failure("checking the rights of the stack's kubeconfig", error) from None
    if missing:
        raise NodeLifecycleError(
            cluster.missing_rights_message(
                "the stack's kubeconfig", missing, "Grant them (docs/cluster.md: rights of the stack's kubeconfig)."
            )
        )


def check_bootstrap_token(api_client: kube_client.ApiClient) -> None:
    try:
        missing = missing_rights(kube_client.AuthorizationV1Api(api_client), cluster.TOKEN_RIGHTS)
    except ApiException as error:
        if error.status == UNAUTHORIZED:
            raise NodeLifecycleError(cluster.token_does_not_authenticate_message(error.status)) from None
        raise api_failure("checking the bootstrap token", error) from None
    if missing:
        raise NodeLifecycleError(
            cluster.missing_rights_message(
                "the bootstrap token",
                missing,
                f"Bind its groups to ClusterRoles {cluster.NODE_BOOTSTRAPPER_ROLE} and {cluster.NODE_CLIENT_ROLE} "
                "(a stack without bootstrapToken creates both bindings).",
            )
        )


def check_cluster_dns_service(api_client: kube_client.ApiClient) -> None:
    """Without cluster.dns: fails, naming the key to set, when kube-dns cannot give the clusterDNS."""
    namespace, name = cluster.KUBE_DNS_SERVICE
    cluster_ip: str | None = None
    try:
        service = kube_client.CoreV1Api(api_client).read_namespaced_service(
            name, namespace, _request_timeout=REQUEST_TIMEOUT
        )
        cluster_ip = service.spec.cluster_ip if service.spec is not None else None
    except ApiException as error:
        if error.status != NOT_FOUND:
            raise api_failure(f"reading Service {namespace}/{name} for the kubelets' clusterDNS", error) from None
    try:
        cluster.kube_dns_address(cluster_ip)
    except cluster.ClusterDnsUnknown as unknown:
        raise NodeLifecycleError(str(unknown)) from None


# What of the stack's credential the token check keeps: where and how to connect, not who it is.
TRANSPORT_SETTINGS = ("ssl_ca_cert", "verify_ssl", "assert_hostname", "tls_server_name", "no_proxy", "proxy_headers")


def token_client_at_credential(kubeconfig: str | None, token: str) -> kube_client.ApiClient:
    """The bootstrap token alone, at the address and with the TLS settings of the stack's credential.

    None of the credential's own authentication (client certificate, token, exec plugin) comes
    along: the API server would authenticate the certificate first and answer for the stack's
    user instead of the token's groups.
    """
    credential = credential_configuration(kubeconfig)
    configuration = kube_client.Configuration(host=credential.host)
    for setting in TRANSPORT_SETTINGS:
        setattr(configuration, setting, getattr(credential, setting))
    configuration.proxy = credential.proxy
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return kube_client.ApiClient(configuration)


SUBJECT = "cluster preflight"


class ClusterPreflightProvider(dynamic.ResourceProvider):
    def __init__(
        self,
        stack_api: Callable[[str | None], kube_client.ApiClient] = stack_api_client,
        token_api: Callable[[str | None, str], kube_client.ApiClient] = token_client_at_credential,
    ) -> None:
        self.stack_api = stack_api
        self.token_api = token_api

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        self._check(props)
        return dynamic.CreateResult("preflight", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = any(olds.get(key) != news.get(key) for key in news if key != "__provider")
        return dynamic.DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        self._check(news)
        return dynamic.UpdateResult(outs=news)

    def _check(self, props: dict[str, Any]) -> None:
        kubeconfig = props.get("kubeconfig")
        with reported(SUBJECT, kubeconfig):
            rights = [Right(**right) for right in props["stackRights"]]
            stack_api = self.stack_api(kubeconfig)
            check_stack_credential(stack_api, rights)
            if props.get("clusterDnsFromService"):
                check_cluster_dns_service(stack_api)
            check_bootstrap_token(self.token_api(kubeconfig, props["bootstrapToken"]))


class ClusterPreflight(SafeDynamicResource, module="numa-kubelets", name="ClusterPreflight"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig", "bootstrapToken"])
        )
        super().__init__(ClusterPreflightProvider(), name, props, opts)
