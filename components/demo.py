"""DemoPlacement: one labeled demo pod for one kubelet, and the proof of where it runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from numa_kubelets import placement
from numa_kubelets.placement import DemoPod, PlacementVerdict, StackKubelets
from numa_kubelets.plan import HostPlan, Plan

from .host import connection_for
from .remote import remote_command


def demo_namespace(namespace: str, provider: k8s.Provider) -> k8s.core.v1.Namespace:
    manifest = placement.namespace_manifest(namespace)
    return k8s.core.v1.Namespace(
        namespace, metadata=manifest["metadata"], opts=pulumi.ResourceOptions(provider=provider)
    )


def demo_service_account(
    namespace: str, namespace_resource: k8s.core.v1.Namespace, provider: k8s.Provider
) -> k8s.core.v1.ServiceAccount:
    """The pods' own ServiceAccount (DemoPod.manifest names it): the API server refuses a pod whose
    ServiceAccount is missing, and the controller manager makes a new namespace's `default` only
    some time after the namespace. Created after the namespace, deleted before it; Pulumi name
    `<namespace>/numa-demo`, so another demo.namespace is another one, as the namespace is."""
    manifest = placement.service_account_manifest(namespace)
    return k8s.core.v1.ServiceAccount(
        f"{namespace}/{manifest['metadata']['name']}",
        metadata=manifest["metadata"],
        automount_service_account_token=manifest["automountServiceAccountToken"],
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[namespace_resource]),
    )


@dataclass(frozen=True)
class DemoPlacementArgs:
    pod: DemoPod
    host: HostPlan
    plan: Plan
    kubelets: StackKubelets
    connection: command.remote.ConnectionArgs
    provider: k8s.Provider
    # The namespace, the ServiceAccount and the Node the pod needs: created before it, deleted after it.
    after: list[pulumi.Resource]
    # The restart revision of the kubelet the pod is meant for (numa_kubelets/revision.py).
    kubelet_revision: pulumi.Input[str]


class DemoPlacement(pulumi.ComponentResource):
    def __init__(self, name: str, args: DemoPlacementArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:DemoPlacement", name, None, opts)
        demo, plan = args.pod, args.plan
        manifest = demo.manifest()
        # Same name, other type: the preview reads "numa-demo-<node>" for both. The pod's own name
        # (metadata.name) carries a hash of its spec (DemoPod.name): a change is a replacement
        # under another name, which pulumi-kubernetes' preview can dry-run beside the old pod.
        self.pod = k8s.core.v1.Pod(
            name,
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=args.after,
                # Creation waits until the pod is scheduled and ready, as long as the config allows.
                custom_timeouts=pulumi.CustomTimeouts(create=demo.ready_timeout, update=demo.ready_timeout),
                # The old pod goes first all the same: with maxPods: 1 (the origin's kubelets) it
                # holds the kubelet's only slot, and a new pod created beside it would stay
                # Pending until the create timed out. The demo proves placement, not uptime.
                delete_before_replace=True,
                # A change that restarts its kubelet drains the Node first, which evicts this bare
                # pod for good (seen under the real engine: the pod gone, placementOk still true).
                # So it is replaced with that kubelet's restart: created again once the Node is back
                # Ready, and probed again. The preview shows it as a replacement.
                replacement_trigger=args.kubelet_revision,
            ),
        )
        self.probe = remote_command(
            demo.probe_name,
            args.connection,
            placement.probe_scripts(demo, args.host, plan),
            parent=self,
            depends_on=[self.pod],
            # The uid selects this incarnation of the pod; a new pod changes it and re-runs the probe.
            stdin=self.pod.metadata.uid,
            with_delete=False,
        )
        # The readings are CPU lists and pids, never secret. pulumi-command 1.2.1 leaves stdout plain
        # even with a secret key or stdin (tests/e2e/test_command_plugin.py); kept plain should a
        # provider mark it secret for its secret inputs (the mock tier plays that stricter case).
        probe_stdout = pulumi.Output.unsecret(self.probe.stdout)
        verdict = pulumi.Output.all(self.pod.spec.node_name, probe_stdout).apply(
            lambda facts: _enforced(placement.judge_placement(demo, args.kubelets, facts[0], facts[1] or ""))
        )
        self.placement: pulumi.Output[dict[str, Any]] = verdict.apply(PlacementVerdict.output)
        self.ok: pulumi.Output[bool] = verdict.apply(lambda v: v.ok)
        self.register_outputs({"placement": self.placement})


def _enforced(verdict: PlacementVerdict) -> PlacementVerdict:
    """A misplaced pod fails `pulumi up`; a preview only shows the verdict (its facts are often unknown)."""
    if not verdict.ok and not pulumi.runtime.is_dry_run():
        raise pulumi.RunError(verdict.failure_message())
    return verdict


def demo_placements(
    namespace: str,
    pods: tuple[DemoPod, ...],
    plan: Plan,
    node_ready: Mapping[str, pulumi.Resource],
    private_key: pulumi.Output[str] | None,
    provider: k8s.Provider,
    revisions: Mapping[str, pulumi.Input[str]],
) -> list[DemoPlacement]:
    """The namespace, the pods' ServiceAccount and one DemoPlacement per pod; `node_ready` maps node
    names to what a pod on that node waits for: its Node Ready and labelled as the stack says (the
    kubelet's NodePatch); `revisions` each kubelet's restart revision."""
    namespace_resource = demo_namespace(namespace, provider)
    service_account = demo_service_account(namespace, namespace_resource, provider)
    hosts = {host.name: host for host in plan.hosts}
    stack_kubelets = StackKubelets(plan)
    return [
        DemoPlacement(
            pod.resource_name,
            DemoPlacementArgs(
                pod,
                hosts[pod.kubelet.host],
                plan,
                stack_kubelets,
                connection_for(hosts[pod.kubelet.host], private_key),
                provider,
                after=[namespace_resource, service_account, node_ready[pod.kubelet.node_name]],
                kubelet_revision=revisions[pod.kubelet.node_name],
            ),
        )
        for pod in pods
    ]
