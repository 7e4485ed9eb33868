"""NumaHost: one server; its preflight, the restriction of its own services, and its slices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from numa_kubelets import scripts
from numa_kubelets.plan import HostPlan, Plan

from .numa_slice import NumaSlice
from .remote import NumaNodeArgs, remote_command


@dataclass(frozen=True)
class NumaHostArgs:
    host: HostPlan
    plan: Plan
    ssh_private_key: pulumi.Output[str] | None
    bootstrap_token: pulumi.Output[str] | None
    cluster_dns: pulumi.Output[str] | None = None
    # Per node name: the kubelet's turn in the rollout (components/rollout.py).
    turns: Mapping[str, pulumi.Output[list[pulumi.Resource]]] | None = None


def connection_for(host: HostPlan, private_key: pulumi.Output[str] | None) -> command.remote.ConnectionArgs:
    return command.remote.ConnectionArgs(
        host=host.address,
        port=host.ssh_port,
        user=host.user,
        private_key=private_key,
        host_key=host.host_key,
        # A host that is rebooting or slow to accept SSH gets about two minutes.
        dial_error_limit=12,
        per_dial_timeout=10,
    )


class NumaHost(pulumi.ComponentResource):
    def __init__(self, name: str, args: NumaHostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:NumaHost", name, None, opts)
        host = args.host
        self.host_plan = host
        connection = connection_for(host, args.ssh_private_key)
        child = pulumi.ResourceOptions(parent=self)

        self.preflight = remote_command(
            host.preflight_command,
            connection,
            scripts.preflight_scripts(host, args.plan),
            parent=self,
            with_delete=False,
        )
        self.host_services = remote_command(
            host.host_services_command,
            connection,
            scripts.host_services_scripts(host),
            parent=self,
            depends_on=[self.preflight],
        )
        self.slices = [
            NumaSlice(
                kubelet.resource_name,
                NumaNodeArgs(
                    host,
                    kubelet,
                    args.plan,
                    connection,
                    args.bootstrap_token,
                    after=[self.preflight],
                    cluster_dns=args.cluster_dns,
                    turn=args.turns[kubelet.node_name] if args.turns is not None else None,
                ),
                child,
            )
            for kubelet in host.kubelets
        ]
        self.kubelets = [numa_slice.kubelet for numa_slice in self.slices]
        self.register_outputs(
            {
                "address": host.address,
                "systemCpus": host.system_cpus.format(),
                "preflight": self.preflight.stdout,
            }
        )
