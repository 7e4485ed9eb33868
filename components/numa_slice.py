"""NumaSlice: the numa<N>.slice confined to one NUMA node, and the kubelet that lives in it."""

from __future__ import annotations

import dataclasses

import pulumi

from numa_kubelets import scripts

from .kubelet_instance import KubeletInstance
from .remote import NumaNodeArgs, remote_command


class NumaSlice(pulumi.ComponentResource):
    def __init__(self, name: str, args: NumaNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:NumaSlice", name, None, opts)
        layout = args.kubelet.layout
        after: pulumi.Input[list[pulumi.Resource]] = args.after
        if args.turn is not None:
            before = args.after
            after = args.turn.apply(lambda turn: [*before, *turn])
        self.unit = remote_command(
            args.kubelet.slice_command,
            args.connection,
            scripts.slice_scripts(args.host, args.kubelet),
            parent=self,
            depends_on=after,
        )
        self.kubelet = KubeletInstance(
            args.kubelet.resource_name,
            dataclasses.replace(args, after=[self.unit], turn=None),
            pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {
                "slice": layout.slice,
                "cpus": args.kubelet.cpus.format(),
                "mems": args.kubelet.mems.format(),
            }
        )
