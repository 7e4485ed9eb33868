"""numa-kubelets: one Kubernetes node per NUMA node. Wiring only: config -> plan -> components."""

import pulumi

from components import engine_stop, stack_trace
from components.cluster import ClusterJoin, cluster_nodes
from components.demo import demo_placements
from components.heap import freeze_constructed_objects, freeze_survivors_of_full_collections
from components.host import NumaHost, NumaHostArgs
from components.kubernetes import kubernetes_provider
from components.rollout import REVISIONS_OUTPUT, Rollout
from components.stack_config import read_stack, secret_or_none, ssh_private_key
from numa_kubelets.outputs import device_plugin_configs_output, hosts_output
from numa_kubelets.placement import demo_pods

engine_stop.end_quietly_when_the_engine_stops()  # the engine's SIGINT: no traceback (the engine says why)
stack_trace.install()
freeze_survivors_of_full_collections()
config, plan = read_stack()
freeze_constructed_objects()
private_key = ssh_private_key(config)
kubeconfig = secret_or_none(config.kubeconfig)
provider = kubernetes_provider(kubeconfig) if plan.cluster is not None else None
join = None
if plan.cluster is not None and provider is not None:
    join = ClusterJoin("cluster", plan.cluster, secret_or_none(config.bootstrap_token), provider, kubeconfig)

# Kubelets a change restarts go in batches (rollout); each one's turn is settled once all exist.
rollout = Rollout(plan)
hosts = []
for host in plan.hosts:
    hosts.append(
        NumaHost(
            host.name,
            NumaHostArgs(
                host,
                plan,
                private_key,
                join.bootstrap_token if join else None,
                cluster_dns=join.cluster_dns if join else None,
                turns={kubelet.node_name: rollout.turn_of(kubelet.node_name) for kubelet in host.kubelets},
            ),
        )
    )
    freeze_constructed_objects()  # per host: the GC stops rescanning hosts already built
# Per kubelet: the resources its demo pod waits for (its Node labelled as the stack says).
nodes = cluster_nodes(hosts, plan, provider, kubeconfig) if provider is not None else {}
instances = {kubelet.node_name: kubelet for host in hosts for kubelet in host.kubelets}
pulumi.export(
    REVISIONS_OUTPUT,
    rollout.settle(
        revisions={name: instance.revision for name, instance in instances.items()},
        # A restart is over once the Node is Ready again (with a cluster), else once the kubelet command ran.
        finished={name: nodes[name].lifecycle if nodes else instance.kubelet for name, instance in instances.items()},
        kubeconfig=kubeconfig,
        parents=instances,
    ),
)

hugepages = {kubelet.node_name: {"hugepages": kubelet.hugepages} for host in hosts for kubelet in host.kubelets}
pulumi.export("hosts", hosts_output(plan, hugepages))
# Only when some host has sriov or nvidia resources: other stacks' outputs stay as they were.
device_plugin_configs = device_plugin_configs_output(plan)
if device_plugin_configs:
    pulumi.export("devicePluginConfigs", device_plugin_configs)

if plan.demo_enabled and provider is not None:
    demos = demo_placements(
        config.demo.namespace,
        demo_pods(config, plan),
        plan,
        {name: node.labels for name, node in nodes.items()},
        private_key,
        provider,
        revisions={name: instance.revision for name, instance in instances.items()},
    )
    pulumi.export("placement", pulumi.Output.all(*[demo.placement for demo in demos]))
    pulumi.export("placementOk", pulumi.Output.all(*[demo.ok for demo in demos]).apply(all))

freeze_constructed_objects()
