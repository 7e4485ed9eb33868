"""KubeletInstance: one containerd instance and the kubelet that uses it, inside a NUMA slice."""

from __future__ import annotations

import pulumi

from numa_kubelets import cluster, scripts
from numa_kubelets.reservations import parse_hugepage_report
from numa_kubelets.revision import restart_revision

from .remote import NumaNodeArgs, remote_command


class KubeletInstance(pulumi.ComponentResource):
    def __init__(self, name: str, args: NumaNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("numa-kubelets:index:KubeletInstance", name, None, opts)
        kubelet, plan = args.kubelet, args.plan
        runtime_after = args.after
        # Namespace mode: the namespace exists before containerd and the kubelet join it, and
        # is removed after them.
        self.netns = None
        if kubelet.network is not None:
            self.netns = remote_command(
                kubelet.netns_command,
                args.connection,
                scripts.netns_scripts(args.host, kubelet),
                parent=self,
                depends_on=args.after,
            )
            runtime_after = [self.netns]
        self.containerd = remote_command(
            kubelet.containerd_command,
            args.connection,
            scripts.containerd_scripts(args.host, kubelet, plan),
            parent=self,
            depends_on=runtime_after,
        )
        stdin: pulumi.Output[str] | None = None
        if plan.cluster is not None:
            if args.bootstrap_token is None:
                raise ValueError("a cluster needs the bootstrap token")  # the config model rules this out
            stdin = pulumi.Output.secret(
                args.bootstrap_token.apply(lambda token: scripts.bootstrap_kubeconfig_stdin(kubelet, plan, token))
            )
        kubelet_scripts: scripts.HostScripts | pulumi.Output[scripts.HostScripts]
        # Its restart revision, from the same plan as its scripts (the cluster DNS is in its config).
        self.revision: pulumi.Output[str]
        if args.cluster_dns is None:
            kubelet_scripts = scripts.kubelet_scripts(args.host, kubelet, plan)
            self.revision = pulumi.Output.from_input(restart_revision(kubelet, plan))
        else:
            resolved = args.cluster_dns.apply(lambda dns: cluster.with_cluster_dns(plan, dns))
            kubelet_scripts = resolved.apply(lambda known: scripts.kubelet_scripts(args.host, kubelet, known))
            self.revision = resolved.apply(lambda known: restart_revision(kubelet, known))
        self.kubelet = remote_command(
            kubelet.kubelet_command,
            args.connection,
            kubelet_scripts,
            parent=self,
            depends_on=[self.containerd],
            stdin=stdin,
        )
        # Its generic device plugins, when it has generic resources: a resource of their own, so a
        # change of its devices restarts its plugins only, and a kubelet without them has none.
        self.device_plugins = None
        if kubelet.generic_plugins:
            self.device_plugins = remote_command(
                kubelet.device_plugins_command,
                args.connection,
                scripts.device_plugin_scripts(args.host, kubelet),
                parent=self,
                depends_on=[self.kubelet],
            )
        self.node_name = kubelet.node_name
        # The node's hugepage pools as the apply script read them on the host. Only numbers are
        # taken from stdout, so the value stays plain even when the command's output is secret.
        self.hugepages = pulumi.Output.unsecret(self.kubelet.stdout.apply(parse_hugepage_report))
        # When the kubelet last started (a timestamp; plain for the same reason).
        self.started = pulumi.Output.unsecret(self.kubelet.stdout.apply(scripts.parse_kubelet_started))
        self.register_outputs(
            {
                "nodeName": kubelet.node_name,
                "unit": kubelet.layout.kubelet_unit,
                "runtimeUnit": kubelet.layout.containerd_unit,
                "port": kubelet.port,
                "healthzPort": kubelet.healthz_port,
                **({"address": kubelet.network.address, "netns": kubelet.network.netns} if kubelet.network else {}),
            }
        )
