"""numa-kubelets: one Kubernetes node per NUMA node. Wiring only: config -> plan -> components."""

import pulumi

from components.demo import demo_placements
from components.host import NumaHost, NumaHostArgs
from components.kubernetes import kubernetes_provider
from components.stack_config import read_stack, secret_or_none, ssh_private_key
from numa_kubelets.outputs import hosts_output
from numa_kubelets.placement import demo_pods

config, plan = read_stack()
private_key = ssh_private_key(config)
bootstrap_token = secret_or_none(config.bootstrap_token)

hosts = [NumaHost(host.name, NumaHostArgs(host, plan, private_key, bootstrap_token)) for host in plan.hosts]

pulumi.export("hosts", hosts_output(plan))

if plan.demo_enabled:
    kubelet_instances = {kubelet.node_name: kubelet for host in hosts for kubelet in host.kubelets}
    demos = demo_placements(
        config.demo.namespace,
        demo_pods(config, plan),
        plan,
        kubelet_instances,
        private_key,
        kubernetes_provider(secret_or_none(config.kubeconfig)),
    )
    pulumi.export("placement", pulumi.Output.all(*[demo.placement for demo in demos]))
    pulumi.export("placementOk", pulumi.Output.all(*[demo.ok for demo in demos]).apply(all))
