"""NodeDrain: a kubelet's Node drained before a change restarts that kubelet.

A Pulumi dynamic resource, one per kubelet of a stack with a cluster and `rollout.drain`. Its
`revision` input is the kubelet's restart revision (numa_kubelets/revision.py), so a preview
shows `~ revision` on exactly the kubelets the change restarts. The kubelet's host commands
wait for it; its NodeLifecycle, which waits for the restarted kubelet, uncordons the Node.
- create: nothing (a new kubelet has no pods yet);
- update with a new revision: cordon (marked as the rollout's) and drain through the eviction
  API (PodDisruptionBudgets respected, bounded by cluster.drainTimeout); a drain that times out
  uncordons again and fails, so neither this kubelet nor any after it restarts;
- delete: nothing (the NodeLifecycle drains and removes a Node that leaves).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi import dynamic

from .dynamic_resource import SafeDynamicResource
from .node_lifecycle import NodeOperations, operations_for, reported


class NodeDrainProvider(dynamic.ResourceProvider):
    def __init__(self, operations: Callable[[str | None], NodeOperations] = operations_for) -> None:
        self.operations = operations

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(props["nodeName"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = [key for key in news if key != "__provider" and olds.get(key) != news.get(key)]
        return dynamic.DiffResult(
            changes=bool(changed), replaces=[key for key in changed if key == "nodeName"], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        if olds.get("revision") != news["revision"]:
            with reported(f"draining Node {news['nodeName']}", news.get("kubeconfig")):
                operations = self.operations(news.get("kubeconfig"))
                operations.drain_for_restart(news["nodeName"], news["revision"], int(news["drainTimeoutSeconds"]))
        return dynamic.UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class NodeDrain(SafeDynamicResource, module="numa-kubelets", name="NodeDrain"):
    def __init__(self, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(NodeDrainProvider(), name, dict(props), opts)
