"""The one way this program runs something on a host."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from numa_kubelets.plan import HostPlan, KubeletPlan, Plan
from numa_kubelets.scripts import HostScripts


@dataclass(frozen=True)
class NumaNodeArgs:
    """What the components of one NUMA node (its slice, its kubelet) are built from."""

    host: HostPlan
    kubelet: KubeletPlan
    plan: Plan
    connection: command.remote.ConnectionArgs
    bootstrap_token: pulumi.Output[str] | None
    # Children do not inherit a component's dependencies: the first command waits explicitly.
    after: list[pulumi.Resource]
    # What its first command also waits for, known once the whole stack is built: its turn in
    # the rollout (components/rollout.py). None: nothing.
    turn: pulumi.Output[list[pulumi.Resource]] | None = None
    # With a cluster and no cluster.dns: the kube-dns Service's clusterIP, as the cluster says.
    cluster_dns: pulumi.Output[str] | None = None


def remote_command(
    name: str,
    connection: command.remote.ConnectionArgs,
    host_scripts: HostScripts | pulumi.Output[HostScripts],
    parent: pulumi.Resource,
    depends_on: pulumi.Input[list[pulumi.Resource]] | None = None,
    stdin: pulumi.Input[str] | None = None,
    with_delete: bool = True,
) -> command.remote.Command:
    """Create runs the idempotent apply script; with no `update`, a changed input runs it again.

    Replacement deletes first: the old delete would otherwise remove the files that its
    replacement, installed at the same paths, had just written.
    """
    if isinstance(host_scripts, pulumi.Output):
        create: pulumi.Input[str] = host_scripts.apply(lambda known: known.apply)
        delete: pulumi.Input[str] = host_scripts.apply(lambda known: known.delete)
    else:
        create, delete = host_scripts.apply, host_scripts.delete
        if host_scripts.stdin is not None:
            # The script on stdin, the command line a fixed `/bin/sh -s` (scripts.script_on_stdin).
            if stdin is not None or with_delete:
                raise ValueError(f"{name}: a script on stdin is for a command with no stdin and no delete")
            stdin = host_scripts.stdin
    return command.remote.Command(
        name,
        connection=connection,
        create=create,
        delete=delete if with_delete else None,
        stdin=stdin,
        add_previous_output_in_env=False,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on, delete_before_replace=True),
    )
