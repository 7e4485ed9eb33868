"""numa-kubelets: one Kubernetes node per NUMA node. Wiring only: config -> plan -> components."""

import pulumi

from components.host import NumaHost, NumaHostArgs
from components.stack_config import read_stack, secret_or_none, ssh_private_key
from numa_kubelets.outputs import hosts_output

config, plan = read_stack()
private_key = ssh_private_key(config)
bootstrap_token = secret_or_none(config.bootstrap_token)

hosts = [NumaHost(host.name, NumaHostArgs(host, plan, private_key, bootstrap_token)) for host in plan.hosts]

pulumi.export("hosts", hosts_output(plan))
