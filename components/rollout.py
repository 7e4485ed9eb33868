"""Wires the rollout's batches (numa_kubelets/rollout.py) into the order the engine runs things.

Each kubelet's first host command (its slice) waits for its `turn`: its NodeDrain, when it is
drained, and whatever ends the previous batch's restarts (their NodeLifecycles, which wait for
Ready, or without a cluster their kubelet commands). The batches need the revisions the last
successful update applied: the stack exports them (`kubeletRevisions`, only once each kubelet's
last resource succeeded) and reads them back from its own state through a StackReference.
Kubelets that do not restart get no dependency, so a first apply creates them all at once and
a re-apply without changes runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from numa_kubelets import rollout
from numa_kubelets.plan import Plan

from .node_drain import NodeDrain

REVISIONS_OUTPUT = "kubeletRevisions"
# The StackReference to the stack itself.
PREVIOUS_UPDATE = "previous-update"

Resources = list[pulumi.Resource]


def own_stack_reference() -> pulumi.StackReference:
    """This stack's outputs as its last update left them (none before the first)."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    return pulumi.StackReference(PREVIOUS_UPDATE, stack_name=name)


class Rollout:
    """One per stack: each kubelet's turn, handed out before its resources exist, settled after."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._turns: dict[str, tuple[pulumi.Output[Resources], Callable[[pulumi.Output[Resources]], None]]] = {
            kubelet.node_name: pulumi.deferred_output() for kubelet in plan.kubelets
        }

    def turn_of(self, node_name: str) -> pulumi.Output[Resources]:
        output: pulumi.Output[Resources] = self._turns[node_name][0]
        return output

    def settle(
        self,
        revisions: Mapping[str, pulumi.Output[str]],
        finished: Mapping[str, pulumi.CustomResource],
        kubeconfig: pulumi.Output[str] | None,
        parents: Mapping[str, pulumi.Resource],
    ) -> pulumi.Output[dict[str, str]]:
        """Creates the NodeDrains and resolves every turn; returns the revisions to export.

        `finished`: per node name, the resource whose success ends its restart; `parents`: per
        node name, the component its NodeDrain belongs to.
        """
        plan = self.plan
        previous = own_stack_reference().get_output(REVISIONS_OUTPUT)
        names = [kubelet.node_name for kubelet in plan.kubelets]
        # Also carries the resources the decision was read from (the stack reference and, with a
        # cluster, its DNS Service read) into what every turn waits for: both are reads, done first.
        waits: pulumi.Output[dict[str, list[str]]] = pulumi.Output.all(previous, *(revisions[n] for n in names)).apply(
            lambda values: rollout.waits_for(self._batches(values[0], dict(zip(names, values[1:], strict=True))))
        )
        drains = self._drains(revisions, kubeconfig, parents, waits, finished)
        for name in names:
            resolve = self._turns[name][1]
            # A drained kubelet's NodeDrain itself waits for the previous batch.
            resolve(
                pulumi.Output.from_input([drains[name]]) if name in drains else _previous_batch(waits, name, finished)
            )
        applied = {
            name: pulumi.Output.all(finished[name].id, revisions[name]).apply(lambda parts: str(parts[1]))
            for name in names
        }
        return pulumi.Output.from_input(applied)  # type: ignore[arg-type]

    def _batches(self, previous: Any, revisions: dict[str, str]) -> list[list[str]]:
        plan = self.plan
        kubelets = [rollout.RolloutKubelet(k.node_name, k.host, revisions[k.node_name]) for k in plan.kubelets]
        known = previous if isinstance(previous, Mapping) else None
        return rollout.restart_batches(kubelets, known, plan.rollout, {h.name: h.rollout for h in plan.hosts})

    def _drains(
        self,
        revisions: Mapping[str, pulumi.Output[str]],
        kubeconfig: pulumi.Output[str] | None,
        parents: Mapping[str, pulumi.Resource],
        waits: pulumi.Output[dict[str, list[str]]],
        finished: Mapping[str, pulumi.CustomResource],
    ) -> dict[str, NodeDrain]:
        plan = self.plan
        if plan.cluster is None:
            return {}
        drains = {}
        for host in plan.hosts:
            if not host.rollout.drain:
                continue
            for kubelet in host.kubelets:
                name = kubelet.node_name
                drains[name] = NodeDrain(
                    f"{name}-drain",
                    {
                        "nodeName": name,
                        "revision": revisions[name],
                        "drainTimeoutSeconds": plan.cluster.drain_timeout_seconds,
                        "kubeconfig": pulumi.Output.secret(kubeconfig) if kubeconfig is not None else None,
                    },
                    pulumi.ResourceOptions(parent=parents[name], depends_on=_previous_batch(waits, name, finished)),
                )
        return drains


def _previous_batch(
    waits: pulumi.Output[dict[str, list[str]]], name: str, finished: Mapping[str, pulumi.CustomResource]
) -> pulumi.Output[Resources]:
    return waits.apply(lambda waits_of: [finished[other] for other in waits_of.get(name, [])])
