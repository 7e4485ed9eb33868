"""What a NUMA kubelet reserves of the machine, from the host's memory facts (DESIGN.md section 6).

A kubelet reports the whole machine's memory as capacity. Its hugepages are already its own
node's (hugepages.py: in its mount namespace the machine's pools are node N's, the other nodes'
read as empty), and it subtracts those from allocatable memory by itself. So that allocatable
memory is its own node's memory minus its own pools:

    systemReserved.memory = MemTotal - Mem_n

With the Static memory manager, `reservedMemory` must sum, to the byte, to systemReserved +
kubeReserved + evictionHard memory: every other node k is reserved whole, Mem_k (its pools read
as empty in the kubelet's view, so that is all the memory manager sees there), the own node takes
the rest.

The memory facts are only known on the host, when the kubelet starts: the arithmetic is here
twice, as pure Python (tested on sysfs fixtures) and as the POSIX shell the host runs
(tested against the Python on the same fixtures).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"
NODE_ROOT = "/sys/devices/system/node"
MEMINFO = "/proc/meminfo"
q = shlex.quote


@dataclass(frozen=True)
class NodeMemory:
    node: int
    total_kib: int  # MemTotal of the node's meminfo: hugepages included
    hugepages: tuple[tuple[int, int], ...]  # (page size in KiB, pages in the pool)

    @property
    def hugepage_bytes(self) -> int:
        return sum(size_kib * 1024 * pages for size_kib, pages in self.hugepages)


@dataclass(frozen=True)
class MemoryReservation:
    system_reserved_kib: int
    reserved_memory: tuple[tuple[int, int], ...] | None  # (NUMA node, bytes) with the Static memory manager
    own_hugepages: tuple[tuple[int, int], ...] = ()  # the own node's pools (page size in KiB, pages)


class ReservationError(ValueError):
    pass


def parse_meminfo_total_kib(text: str) -> int:
    """MemTotal from /proc/meminfo ("MemTotal:  2014984 kB")."""
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["MemTotal:"]:
            return int(fields[1])
    raise ReservationError("no MemTotal in /proc/meminfo")


def parse_node_meminfo_total_kib(text: str) -> int:
    """MemTotal from a node's meminfo ("Node 1 MemTotal:  1031616 kB")."""
    for line in text.splitlines():
        fields = line.split()
        if fields[2:3] == ["MemTotal:"]:
            return int(fields[3])
    raise ReservationError("no MemTotal in the node's meminfo")


def hugepage_size_name(size_kib: int) -> str:
    """2048 -> "2Mi", 1048576 -> "1Gi": the suffix of the kubelet's hugepages-<size> resource."""
    for unit, scale in (("Gi", 1024 * 1024), ("Mi", 1024)):
        if size_kib % scale == 0:
            return f"{size_kib // scale}{unit}"
    return f"{size_kib}Ki"


def memory_reservation(
    total_kib: int, nodes: Sequence[NodeMemory], own: int, static_extra_bytes: int | None
) -> MemoryReservation:
    """systemReserved.memory for the kubelet of node `own`; with `static_extra_bytes`, its reservedMemory too.

    `static_extra_bytes` is kubeReserved.memory + the hard eviction threshold for memory: the
    part of the sum rule that is not systemReserved (None: no Static memory manager).
    """
    by_id = {node.node: node for node in nodes}
    others = [node for node in nodes if node.node != own]
    system_reserved = total_kib * 1024 - by_id[own].total_kib * 1024
    if static_extra_bytes is None:
        return MemoryReservation(system_reserved // 1024, None)
    entries = []
    remainder = system_reserved + static_extra_bytes
    for node in sorted(others, key=lambda n: n.node):
        whole = node.total_kib * 1024
        if whole > 0:
            entries.append((node.node, whole))
            remainder -= whole
    if remainder < 0:
        raise ReservationError(f"the other NUMA nodes hold more memory than MemTotal accounts for ({remainder} bytes)")
    if remainder > 0:
        entries.append((own, remainder))
    return MemoryReservation(system_reserved // 1024, tuple(sorted(entries)), by_id[own].hugepages)


def reservation_dropin(reserved_cpus: int, reservation: MemoryReservation) -> dict[str, Any]:
    """The KubeletConfiguration drop-in the kubelet gets at start (what the shell below prints)."""
    document: dict[str, Any] = {
        "apiVersion": KUBELET_CONFIG_API,
        "kind": "KubeletConfiguration",
        "systemReserved": {"cpu": str(reserved_cpus), "memory": f"{reservation.system_reserved_kib}Ki"},
    }
    if reservation.reserved_memory is not None:
        document["reservedMemory"] = [
            {"numaNode": node, "limits": {"memory": str(size)}} for node, size in reservation.reserved_memory
        ]
    return document


def memory_manager_identity(reservation: MemoryReservation) -> str:
    """What a memory_manager_state file belongs to: the policy, the reserved memory per node and
    the own node's pools (the state records them; the kubelet refuses a state whose pools differ
    from what it reads, e.g. after they changed across a reboot). Pools in the order of their
    sysfs directory names, as the host's shell globs them."""
    if reservation.reserved_memory is None:
        return "None"
    pools = sorted(reservation.own_hugepages, key=lambda pool: f"hugepages-{pool[0]}kB")
    return (
        "Static reservedMemory="
        + ",".join(f"{node}:{size}" for node, size in reservation.reserved_memory)
        + " hugepages="
        + ",".join(f"{size}kB:{pages}" for size, pages in pools)
    )


def parse_hugepage_report(stdout: str | None) -> dict[str, int]:
    """The pools the kubelet's apply script reported for its node: {"2Mi": 64, "1Gi": 0}."""
    for line in (stdout or "").splitlines():
        if line.startswith(HUGEPAGE_REPORT_PREFIX):
            pools = {}
            for item in line.removeprefix(HUGEPAGE_REPORT_PREFIX).split():
                size, _, pages = item.partition("kB=")
                pools[hugepage_size_name(int(size))] = int(pages)
            return dict(sorted(pools.items(), key=lambda pool: pool[0]))
    return {}


HUGEPAGE_REPORT_PREFIX = "numa-kubelets: hugepage pools of this NUMA node:"

# ------------------------------------------------------------------ the same arithmetic in POSIX shell

# Expects $node_root (/sys/devices/system/node) and $meminfo (/proc/meminfo).
SHELL_FUNCTIONS = """\
require_number() {
  case "$1" in
    ''|*[!0-9]*) echo "numa-kubelets: cannot read $2 (got '$1')" >&2; exit 1 ;;
  esac
}
node_kib() {
  kib=$(awk '$3 == "MemTotal:" { print $4 }' "$node_root/node$1/meminfo")
  require_number "$kib" "MemTotal of NUMA node $1"
  echo "$kib"
}
"""


def reservation_shell(own: int, node_ids: Sequence[int], static_extra_bytes: int | None) -> str:
    """Sets $system_reserved_kib, $reserved_memory_yaml (empty without Static) and $memory_identity."""
    others = [node for node in sorted(node_ids) if node != own]
    lines = [
        SHELL_FUNCTIONS,
        'total_kib=$(awk \'$1 == "MemTotal:" { print $2 }\' "$meminfo")\n',
        'require_number "$total_kib" "MemTotal of $meminfo"\n',
        f"own_kib=$(node_kib {own})\n",
        "system_reserved_bytes=$((total_kib * 1024 - own_kib * 1024))\n",
    ]
    lines.append("system_reserved_kib=$((system_reserved_bytes / 1024))\n")
    if static_extra_bytes is None:
        lines.append("reserved_memory_yaml=\nmemory_identity=None\n")
        return "".join(lines)
    lines += [
        f"remainder=$((system_reserved_bytes + {int(static_extra_bytes)}))\n",
        "reserved_memory_yaml='reservedMemory:'\n",
        "entries=\n",
        # Node ids ascend, the own node's entry goes in its place.
        "add_entry() {\n"
        '  reserved_memory_yaml="$reserved_memory_yaml\n- numaNode: $1\n  limits:\n    memory: \\"$2\\""\n'
        '  entries="${entries:+$entries,}$1:$2"\n'
        "}\n",
    ]
    for node in others:
        lines.append(
            f"whole=$(( $(node_kib {node}) * 1024 ))\n"
            f'if [ "$whole" -gt 0 ]; then remainder=$((remainder - whole)); fi\n'
        )
    lines.append(
        'if [ "$remainder" -lt 0 ]; then\n'
        '  echo "numa-kubelets: the other NUMA nodes hold more memory than MemTotal accounts for" >&2; exit 1\n'
        "fi\n"
    )
    for node in sorted(node_ids):
        if node == own:
            lines.append(f'if [ "$remainder" -gt 0 ]; then add_entry {own} "$remainder"; fi\n')
        else:
            lines.append(
                f'whole=$(( $(node_kib {node}) * 1024 ))\nif [ "$whole" -gt 0 ]; then add_entry {node} "$whole"; fi\n'
            )
    lines += [
        "pools=\n",
        f'for pool in "$node_root/node{own}"/hugepages/hugepages-*kB; do\n',
        '  [ -e "$pool/nr_hugepages" ] || continue\n',
        "  size_kib=${pool##*/hugepages-}\n",
        '  pages=$(cat "$pool/nr_hugepages")\n',
        '  require_number "$pages" "$pool/nr_hugepages"\n',
        '  pools="${pools:+$pools,}$size_kib:$pages"\n',
        "done\n",
        'memory_identity="Static reservedMemory=$entries hugepages=$pools"\n',
    ]
    return "".join(lines)


def dropin_shell(reserved_cpus: int) -> str:
    """Prints the drop-in (reservation_dropin) from the variables reservation_shell set."""
    return (
        "cat <<EOF\n"
        f"apiVersion: {KUBELET_CONFIG_API}\n"
        "kind: KubeletConfiguration\n"
        "systemReserved:\n"
        f'  cpu: "{int(reserved_cpus)}"\n'
        '  memory: "${system_reserved_kib}Ki"\n'
        "EOF\n"
        'if [ -n "$reserved_memory_yaml" ]; then printf \'%s\\n\' "$reserved_memory_yaml"; fi\n'
    )


def hugepage_report_shell(own: int) -> str:
    """Prints the node's hugepage pools for the stack outputs (parse_hugepage_report)."""
    return (
        "pools=\n"
        f'for pool in "$node_root/node{own}"/hugepages/hugepages-*kB; do\n'
        '  [ -e "$pool/nr_hugepages" ] || continue\n'
        "  size_kib=${pool##*/hugepages-}\n"
        '  pools="$pools ${size_kib}=$(cat "$pool/nr_hugepages")"\n'
        "done\n"
        f'echo "{HUGEPAGE_REPORT_PREFIX}$pools"\n'
    )


def sysfs_variables(node_root: str = NODE_ROOT, meminfo: str = MEMINFO) -> str:
    return f"node_root={q(node_root)}\nmeminfo={q(meminfo)}\n"


def state_functions_shell(root_dir: str) -> str:
    """Shell functions that keep the resource managers' state files in step with what they belong to.

    A kubelet refuses to start on a cpu_manager_state / memory_manager_state written for another
    policy or reserved set. What the files were written for is recorded next to them; a missing
    record means the defaults (none/None), the only policies before kubeletConfig existed.
    """
    record = f"{root_dir}/numa-kubelets-resource-managers"
    return (
        f"managers_record={q(record)}\n"
        "# recorded KIND DEFAULT: what KIND's state file was written for\n"
        "recorded() {\n"
        '  value=$(sed -n "s/^$1 //p" "$managers_record" 2>/dev/null || true)\n'
        '  echo "${value:-$2}"\n'
        "}\n"
        "# reconcile_state KIND DEFAULT DESIRED: only while the kubelet is stopped\n"
        "reconcile_state() {\n"
        '  previous=$(recorded "$1" "$2")\n'
        f"  state_file={q(root_dir)}/$1_manager_state\n"
        '  if [ "$previous" != "$3" ] && [ -e "$state_file" ]; then\n'
        '    rm -f "$state_file"\n'
        '    echo "numa-kubelets: removed $state_file: written for $previous, the kubelet now runs $3 (its pods restart)"\n'
        "  fi\n"
        "}\n"
    )


def managers_changed_shell(cpu_identity: str) -> str:
    """A shell condition: the recorded identities differ from the desired ones (needs $memory_identity)."""
    return f'[ "$(recorded cpu none)" != {q(cpu_identity)} ] || [ "$(recorded memory None)" != "$memory_identity" ]'


def reconcile_managers_shell(root_dir: str, cpu_identity: str) -> str:
    """Removes what no longer fits and records the new identities; needs state_functions_shell."""
    return (
        f"reconcile_state cpu none {q(cpu_identity)}\n"
        'reconcile_state memory None "$memory_identity"\n'
        f"mkdir -p {q(root_dir)}\n"
        f'printf \'cpu %s\\nmemory %s\\n\' {q(cpu_identity)} "$memory_identity" > "$managers_record.tmp"\n'
        'mv -f "$managers_record.tmp" "$managers_record"\n'
    )


def read_memory_facts(files: Mapping[str, str], node_ids: Sequence[int]) -> tuple[int, list[NodeMemory]]:
    """Memory facts from file contents keyed by their path relative to a root (for fixtures and probes)."""
    total = parse_meminfo_total_kib(files["proc/meminfo"])
    nodes = []
    for node in node_ids:
        base = f"sys/devices/system/node/node{node}"
        pools = []
        prefix = f"{base}/hugepages/hugepages-"
        for path, text in files.items():
            if path.startswith(prefix) and path.endswith("kB/nr_hugepages"):
                size = int(path[len(prefix) :].split("kB/", 1)[0])
                pools.append((size, int(text.strip())))
        nodes.append(NodeMemory(node, parse_node_meminfo_total_kib(files[f"{base}/meminfo"]), tuple(sorted(pools))))
    return total, nodes
