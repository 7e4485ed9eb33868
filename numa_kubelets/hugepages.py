"""Each kubelet's view of the machine's hugepages: its own NUMA node's pools and nothing else.

Upstream a kubelet advertises every hugepage of the machine (kubernetes/kubernetes#140544). It
reads two places, both through cadvisor (github.com/google/cadvisor machine/info.go and
utils/sysinfo, read at the kubelet's release):
- its hugepage capacity (and what it subtracts from allocatable memory) from the machine's
  pools, `/sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages`;
- the per-NUMA topology of its memory manager from `/sys/devices/system/node/node<N>/hugepages/`.

Each kubelet already runs in a mount namespace of its own launcher (render.namespace_script), so
there its view is rewritten before it starts: node N's own pool directory is bound over the
machine's, and every other node's pools read as empty (a read-only tmpfs with the same page
sizes, each pool at 0 pages). The kubelet of node N then advertises exactly node N's pools,
subtracts only them from allocatable memory, and its memory manager can hand out no page of
another node. The bind is of the live sysfs directory, so a pool resized before a kubelet
(re)start, e.g. across a reboot, is what that kubelet reads; nothing is written on the host.

The launcher's namespace shares mount propagation with the host, which the kubelet's volume
mounts need (they must reach containerd). Its `/sys` is made a slave first: mounts below it made
here never propagate back to the host or to the other kubelets' namespaces.
"""

from __future__ import annotations

import shlex

SYS = "/sys"
NODE_ROOT = "/sys/devices/system/node"
MACHINE_POOLS = "/sys/kernel/mm/hugepages"
# The counters of a pool directory of a NUMA node (the machine's has more; cadvisor reads nr_hugepages).
POOL_COUNTERS = ("nr_hugepages", "free_hugepages", "surplus_hugepages")
q = shlex.quote


def view_shell(own: int, sys_mount: str = SYS, node_root: str = NODE_ROOT, machine_pools: str = MACHINE_POOLS) -> str:
    """POSIX shell, run as root inside the kubelet's mount namespace before it starts: the
    machine's hugepages as node `own` has them (the paths are parameters for the tests).

    A host without hugepage support (no pool directories) is left as it is.
    """
    own_pools = f"{node_root}/node{int(own)}/hugepages"
    counters = " ".join(POOL_COUNTERS)
    return (
        f"# This kubelet sees NUMA node {int(own)}'s hugepage pools as the machine's, no other node's.\n"
        f"mount --make-rslave {q(sys_mount)}\n"
        f"if [ -d {q(own_pools)} ] && [ -d {q(machine_pools)} ]; then\n"
        f"  for node_dir in {q(node_root)}/node[0-9]*; do\n"
        f'    if [ "$node_dir" = {q(f"{node_root}/node{int(own)}")} ] || [ ! -d "$node_dir/hugepages" ]; then continue; fi\n'
        '    mount -t tmpfs -o mode=0755,size=1m numa-kubelets-no-hugepages "$node_dir/hugepages"\n'
        f"    for pool in {q(machine_pools)}/hugepages-*kB; do\n"
        '      [ -d "$pool" ] || continue\n'
        '      mkdir "$node_dir/hugepages/${pool##*/}"\n'
        f"      for counter in {counters}; do\n"
        '        echo 0 > "$node_dir/hugepages/${pool##*/}/$counter"\n'
        "      done\n"
        "    done\n"
        '    mount -o remount,ro "$node_dir/hugepages"\n'
        "  done\n"
        f"  mount --bind {q(own_pools)} {q(machine_pools)}\n"
        "fi\n"
    )
