"""The cluster side of the stack: how its kubelets join (ClusterJoin, one per stack) and each
kubelet's Node (ClusterNode, one per kubelet). Manifests and decisions come from the core."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from numa_kubelets import cluster
from numa_kubelets.plan import ClusterPlan, HostPlan, KubeletPlan, Plan

from .cluster_preflight import ClusterPreflight
from .host import NumaHost
from .node_lifecycle import NodeLifecycle

BOOTSTRAP_TOKEN_ID_LENGTH = 6
BOOTSTRAP_TOKEN_SECRET_LENGTH = 16


class ClusterJoin(pulumi.ComponentResource):
    """The bootstrap token the kubelets join with, its RBAC, and the cluster's DNS address.

    `bootstrap_token`: the configured token, else one generated once and kept (secret) in the
    stack state, so that a host added months later joins with the same token. Kubelets that use
    it wait for the token Secret and both bindings.
    """

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        configured_token: pulumi.Output[str] | None,
        provider: k8s.Provider,
        kubeconfig: pulumi.Output[str] | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("numa-kubelets:index:ClusterJoin", name, None, opts)
        stack = pulumi.get_stack()
        in_cluster = pulumi.ResourceOptions(parent=self, provider=provider)
        token = configured_token if configured_token is not None else self._managed_token(name, stack, in_cluster)
        self.preflight = ClusterPreflight(
            f"{name}-preflight",
            {
                # No cluster.server nor caCert: the checks go to the credential's address (the
                # hosts' preflights check theirs), so a change of those is no reason to re-run.
                "bootstrapToken": pulumi.Output.secret(token),
                "kubeconfig": pulumi.Output.secret(kubeconfig) if kubeconfig is not None else None,
                "stackRights": [dataclasses.asdict(right) for right in cluster.stack_rights(plan)],
                "clusterDnsFromService": plan.dns is None,
            },
            pulumi.ResourceOptions(parent=self),
        )
        # Kubelets start joining only once the cluster side passed its preflight.
        self.bootstrap_token: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(token, self.preflight.id).apply(lambda parts: str(parts[0]))
        )
        self.cluster_dns: pulumi.Output[str] | None = None
        if plan.dns is None:
            namespace, service = cluster.KUBE_DNS_SERVICE
            # After the preflight, which fails with the key to set when there is no such Service.
            kube_dns = k8s.core.v1.Service.get(
                f"{name}-{service}",
                f"{namespace}/{service}",
                opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[self.preflight])),
            )
            self.cluster_dns = kube_dns.spec.apply(lambda spec: _dns_or_fail(plan, spec.cluster_ip if spec else None))
        self.register_outputs({})

    def _managed_token(self, name: str, stack: str, in_cluster: pulumi.ResourceOptions) -> pulumi.Output[str]:
        own = pulumi.ResourceOptions(parent=self)
        token_id = random.RandomString(
            f"{name}-bootstrap-token-id",
            length=BOOTSTRAP_TOKEN_ID_LENGTH,
            upper=False,
            special=False,
            opts=own,
        )
        token_secret = random.RandomPassword(
            f"{name}-bootstrap-token-secret",
            length=BOOTSTRAP_TOKEN_SECRET_LENGTH,
            upper=False,
            special=False,
            opts=own,
        )
        manifest = pulumi.Output.all(token_id.result, token_secret.result).apply(
            lambda parts: cluster.bootstrap_token_secret(parts[0], parts[1], stack)
        )
        self.token_secret = k8s.core.v1.Secret(
            f"{name}-bootstrap-token",
            metadata=manifest.apply(lambda m: m["metadata"]),
            type=cluster.BOOTSTRAP_TOKEN_SECRET_TYPE,
            string_data=pulumi.Output.secret(manifest.apply(lambda m: m["stringData"])),
            opts=in_cluster,
        )
        self.bindings = [
            k8s.rbac.v1.ClusterRoleBinding(
                binding.name,
                metadata=binding.manifest(stack)["metadata"],
                role_ref=binding.manifest(stack)["roleRef"],
                subjects=binding.manifest(stack)["subjects"],
                opts=in_cluster,
            )
            for binding in cluster.bootstrap_bindings(stack)
        ]
        ready = [self.token_secret.metadata.name, *(b.metadata.name for b in self.bindings)]
        # Carries the Secret and the bindings as dependencies into every kubelet that joins with it.
        return pulumi.Output.secret(
            pulumi.Output.all(token_id.result, token_secret.result, *ready).apply(
                lambda parts: cluster.bootstrap_token(parts[0], parts[1])
            )
        )


def _dns_or_fail(plan: ClusterPlan, cluster_ip: str | None) -> str:
    try:
        return cluster.cluster_dns(plan, cluster_ip)
    except cluster.ClusterDnsUnknown as error:
        raise pulumi.RunError(str(error)) from None


@dataclass(frozen=True)
class ClusterNodeArgs:
    host: HostPlan
    kubelet: KubeletPlan
    cluster: ClusterPlan
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str] | None
    # The kubelet (and the host's own services): the Node leaves before anything on the host goes.
    after: list[pulumi.Resource]
    # When the kubelet last started, as its apply script reported it: a restart updates the
    # lifecycle, which then waits for a Ready reported since and uncordons the Node.
    kubelet_started: pulumi.Input[str]


class ClusterNode(pulumi.ComponentResource):
    """A kubelet's Node: waited for when it joins, labelled and tainted as the stack says,
    cordoned, drained and deleted when the kubelet leaves."""

    def __init__(self, name: str, args: ClusterNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:ClusterNode", name, None, opts)
        kubelet, plan = args.kubelet, args.cluster
        self.lifecycle = NodeLifecycle(
            f"{kubelet.node_name}-lifecycle",
            {
                "nodeName": kubelet.node_name,
                "identityLabels": kubelet.identity_labels,
                "taints": [taint.manifest() for taint in kubelet.taints],
                "readyTimeoutSeconds": plan.node_ready_timeout_seconds,
                "removeNode": plan.remove_nodes,
                "drainTimeoutSeconds": plan.drain_timeout_seconds,
                "journalCommand": cluster.journal_command(args.host, kubelet),
                "kubeconfig": pulumi.Output.secret(args.kubeconfig) if args.kubeconfig is not None else None,
                "kubeletStarted": args.kubelet_started,
            },
            pulumi.ResourceOptions(parent=self, depends_on=args.after),
        )
        self.labels = k8s.core.v1.NodePatch(
            kubelet.node_name,
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(**cluster.node_label_patch(kubelet, pulumi.get_stack())),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.lifecycle]),
        )
        self.register_outputs({"nodeName": kubelet.node_name})


def cluster_nodes(
    hosts: Sequence[NumaHost], plan: Plan, provider: k8s.Provider, kubeconfig: pulumi.Output[str] | None
) -> dict[str, ClusterNode]:
    """One ClusterNode per kubelet, by node name, inside its KubeletInstance."""
    assert plan.cluster is not None
    nodes: dict[str, ClusterNode] = {}
    for host in hosts:
        host_plan = host.host_plan
        for instance, kubelet in zip(host.kubelets, host_plan.kubelets, strict=True):
            nodes[kubelet.node_name] = ClusterNode(
                kubelet.node_name,
                ClusterNodeArgs(
                    host_plan,
                    kubelet,
                    plan.cluster,
                    provider,
                    kubeconfig,
                    after=[instance.kubelet, host.host_services],
                    kubelet_started=instance.started,
                ),
                pulumi.ResourceOptions(parent=instance),
            )
    return nodes
