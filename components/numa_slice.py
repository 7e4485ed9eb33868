"""NumaSlice: the numa<N>.slice confined to one NUMA node, and the kubelet that lives in it."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from numa_kubelets import scripts
from numa_kubelets.plan import HostPlan, KubeletPlan, Plan

from .kubelet_instance import KubeletInstance, KubeletInstanceArgs
from .remote import remote_command


@dataclass(frozen=True)
class NumaSliceArgs:
    host: HostPlan
    kubelet: KubeletPlan
    plan: Plan
    connection: command.remote.ConnectionArgs
    bootstrap_token: pulumi.Output[str] | None
    # Children do not inherit a component's dependencies: the first command waits explicitly.
    after: list[pulumi.Resource]


class NumaSlice(pulumi.ComponentResource):
    def __init__(self, name: str, args: NumaSliceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:NumaSlice", name, None, opts)
        layout = args.kubelet.layout
        self.unit = remote_command(
            f"{name}-slice",
            args.connection,
            scripts.slice_scripts(args.host, args.kubelet),
            pulumi.ResourceOptions(parent=self, depends_on=args.after),
        )
        # Same name, other type: its URN differs, and the preview reads "numa-a-numa0".
        self.kubelet = KubeletInstance(
            name,
            KubeletInstanceArgs(
                args.host, args.kubelet, args.plan, args.connection, args.bootstrap_token, after=[self.unit]
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {
                "slice": layout.slice,
                "cpus": args.kubelet.cpus.format(),
                "mems": args.kubelet.mems.format(),
            }
        )
