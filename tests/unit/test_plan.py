"""The partition plan: which CPUs, memory node, names, labels and ports each kubelet gets."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from numa_kubelets.cpulist import CpuSet
from numa_kubelets.outputs import hosts_output
from numa_kubelets.scripts import bootstrap_kubeconfig_stdin
from tests.unit.builders import (
    BOOTSTRAP_TOKEN,
    host_scripts,
    origin_config,
    origin_host,
    plan_of,
    rendered_files,
    with_cluster,
)

# Control-plane and node component ports a kubelet must never take (DESIGN.md section 3).
RESERVED_PORTS = {6443, 2379, 2380, 10249, 10256, 10257, 10259}


def cpus(text: str) -> CpuSet:
    return CpuSet.parse(text)


# ---------------------------------------------------------------- the origin machine


def test_origin_defaults_split_each_numa_node_minus_its_lowest_cpu():
    host = plan_of(origin_config()).hosts[0]
    numa0, numa1 = host.kubelets
    assert (numa0.numa_node, numa0.cpus, numa0.mems) == (0, cpus("1-3"), cpus("0"))
    assert (numa1.numa_node, numa1.cpus, numa1.mems) == (1, cpus("5-7"), cpus("1"))
    assert host.system_cpus == cpus("0,4")
    assert host.system_mems == cpus("0,1")


def test_origin_defaults_reproduce_the_origin_ports():
    numa0, numa1 = plan_of(origin_config()).kubelets
    assert (numa0.index, numa0.port, numa0.healthz_port, numa0.read_only_port) == (0, 10250, 10248, 0)
    assert (numa1.index, numa1.port, numa1.healthz_port, numa1.read_only_port) == (1, 10350, 10348, 0)


def test_origin_names_units_and_slices():
    numa0, numa1 = plan_of(origin_config()).kubelets
    assert (numa0.node_name, numa1.node_name) == ("numa-a-numa0", "numa-a-numa1")
    assert (numa0.layout.slice, numa1.layout.slice) == ("numa0.slice", "numa1.slice")
    assert numa0.layout.kubelet_unit == "kubelet@numa0.service"
    assert numa0.layout.containerd_unit == "containerd@numa0.service"
    assert numa1.layout.kubelet_unit == "kubelet@numa1.service"
    assert numa1.layout.containerd_unit == "containerd@numa1.service"


def test_origin_layout_follows_the_contract_names():
    layout = plan_of(origin_config()).kubelets[1].layout
    assert layout.cgroup_root == "/numa1"
    assert layout.config_dir == "/etc/numa-kubelets/numa1"
    assert layout.root_dir == "/var/lib/kubelet-numa1"
    assert layout.containerd_root == "/var/lib/containerd-numa1"
    assert layout.containerd_state == "/run/containerd-numa1"
    assert layout.containerd_socket == "/run/containerd-numa1/containerd.sock"


def test_every_kubelet_gets_host_and_numa_node_labels_next_to_user_labels():
    kubelets = [{"numaNode": 0, "labels": {"numa-type": "red"}}, {"numaNode": 1, "labels": {"numa-type": "blue"}}]
    numa0, numa1 = plan_of(origin_config(hosts=[origin_host(kubelets=kubelets)])).kubelets
    assert numa0.label_map == {
        "numa-type": "red",
        "numa-kubelets.io/host": "numa-a",
        "numa-kubelets.io/numa-node": "0",
    }
    assert numa1.label_map == {
        "numa-type": "blue",
        "numa-kubelets.io/host": "numa-a",
        "numa-kubelets.io/numa-node": "1",
    }
    assert numa1.user_labels == {"numa-type": "blue"}


def test_reserved_cpus_are_the_online_cpus_outside_the_kubelet():
    numa0, numa1 = plan_of(origin_config()).kubelets
    assert numa0.reserved_cpus == len(cpus("0-7") - cpus("1-3")) == 5
    assert numa1.reserved_cpus == 5
    single = plan_of(origin_config(hosts=[origin_host(kubelets=[{"numaNode": 1, "cpus": "6-7"}])])).kubelets[0]
    assert single.reserved_cpus == 6


def test_explicit_ports_node_name_cpus_and_max_pods_are_respected():
    kubelets = [
        {"numaNode": 0},
        {
            "numaNode": 1,
            "nodeName": "blue.numa-a",
            "cpus": "4-6",
            "port": 11250,
            "healthzPort": 11248,
            "readOnlyPort": 11255,
            "maxPods": 1,
        },
    ]
    numa0, numa1 = plan_of(origin_config(hosts=[origin_host(kubelets=kubelets)])).kubelets
    assert (numa1.node_name, numa1.cpus, numa1.max_pods) == ("blue.numa-a", cpus("4-6"), 1)
    assert (numa1.port, numa1.healthz_port, numa1.read_only_port) == (11250, 11248, 11255)
    assert (numa0.node_name, numa0.port, numa0.healthz_port, numa0.max_pods) == ("numa-a-numa0", 10250, 10248, 110)


def test_kubelets_listed_out_of_order_are_indexed_by_numa_id():
    kubelets = [{"numaNode": 3}, {"numaNode": 0}, {"numaNode": 2}]
    nodes = [{"id": i, "cpus": f"{4 * i}-{4 * i + 3}"} for i in (2, 0, 3, 1)]
    plan = plan_of(origin_config(hosts=[origin_host(numaNodes=nodes, kubelets=kubelets)]))
    assert [(k.numa_node, k.index, k.port, k.healthz_port) for k in plan.kubelets] == [
        (0, 0, 10250, 10248),
        (2, 1, 10350, 10348),
        (3, 2, 10450, 10448),
    ]
    assert plan.hosts[0].numa_nodes == ((0, cpus("0-3")), (1, cpus("4-7")), (2, cpus("8-11")), (3, cpus("12-15")))


def test_memory_only_numa_node_gets_no_default_kubelet():
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": ""}, {"id": 2, "cpus": "4-7"}]
    host = plan_of(origin_config(hosts=[origin_host(numaNodes=nodes)])).hosts[0]
    assert [(k.numa_node, k.index, k.cpus) for k in host.kubelets] == [(0, 0, cpus("1-3")), (2, 1, cpus("5-7"))]
    assert host.system_cpus == cpus("0,4")
    assert host.system_mems == cpus("0-2")


def test_explicit_system_cpus_shrink_the_kubelets():
    host = plan_of(origin_config(hosts=[origin_host(systemCpus="0-1,4")])).hosts[0]
    assert [k.cpus for k in host.kubelets] == [cpus("2-3"), cpus("5-7")]
    assert host.system_cpus == cpus("0-1,4")


def test_hosts_output_of_the_origin():
    assert hosts_output(plan_of(origin_config())) == {
        "numa-a": {
            "systemCpus": "0,4",
            "kubelets": {
                f"numa-a-numa{n}": {
                    "numaNode": n,
                    "cpus": cpulist,
                    "mems": str(n),
                    "port": 10250 + 100 * n,
                    "healthzPort": 10248 + 100 * n,
                    "labels": {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": str(n)},
                    "slice": f"numa{n}.slice",
                    "unit": f"kubelet@numa{n}.service",
                }
                for n, cpulist in ((0, "1-3"), (1, "5-7"))
            },
        }
    }


# ---------------------------------------------------------------- generated topologies


@st.composite
def host_topologies(draw, name: str, address: str) -> dict[str, Any]:
    """A valid host with defaulted kubelets: 1-8 NUMA nodes with disjoint, possibly scattered CPUs.

    Node ids may have gaps, a memory-only node may be added, and systemCpus is either defaulted
    or a subset that leaves every node at least one CPU.
    """
    node_count = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(0, 63), min_size=node_count + 1, max_size=node_count + 1, unique=True))
    size = node_count + 1 + draw(st.integers(0, 4 * node_count))
    cpu_pool = draw(st.lists(st.integers(0, 255), min_size=size, max_size=size, unique=True))
    # Every node gets a CPU, node 0 a second one, the rest go to any node.
    owners = [*range(node_count), 0] + [draw(st.integers(0, node_count - 1)) for _ in range(size - node_count - 1)]
    node_cpus = [
        CpuSet(cpu for cpu, owner in zip(cpu_pool, owners, strict=True) if owner == node) for node in range(node_count)
    ]
    nodes = [{"id": ids[node], "cpus": node_cpus[node].format()} for node in range(node_count)]
    if draw(st.booleans()):
        nodes.append({"id": ids[node_count], "cpus": ""})
    host: dict[str, Any] = origin_host(name=name, address=address, numaNodes=draw(st.permutations(nodes)))

    default_fits = all(len(node) >= 2 for node in node_cpus)
    if not default_fits or draw(st.booleans()):
        kept_back = [draw(st.sets(st.sampled_from(list(node)), max_size=len(node) - 1)) for node in node_cpus]
        system = set().union(*kept_back) or {node_cpus[0].lowest()}  # node 0 always has two CPUs or more
        host["systemCpus"] = CpuSet(system).format()
    return host


@st.composite
def fleets(draw) -> dict[str, Any]:
    count = draw(st.integers(1, 3))
    hosts = [draw(host_topologies(f"host-{i}", f"192.0.2.{10 + i}")) for i in range(count)]
    return origin_config(hosts=hosts)


def node_cpu_sets(raw_host: dict[str, Any]) -> dict[int, CpuSet]:
    return {node["id"]: CpuSet.parse(node["cpus"]) for node in raw_host["numaNodes"]}


@settings(deadline=None)
@given(fleets())
def test_default_kubelets_partition_each_node_apart_from_system_cpus(raw):
    plan = plan_of(raw)
    for raw_host, host in zip(raw["hosts"], plan.hosts, strict=True):
        nodes = node_cpu_sets(raw_host)
        assert sorted(k.numa_node for k in host.kubelets) == sorted(i for i, c in nodes.items() if c)
        claimed = CpuSet()
        for kubelet in host.kubelets:
            assert kubelet.cpus, "every kubelet gets at least one CPU"
            assert kubelet.cpus.issubset(nodes[kubelet.numa_node])
            assert kubelet.cpus.isdisjoint(host.system_cpus)
            assert kubelet.cpus.isdisjoint(claimed), "kubelet CPU sets are pairwise disjoint"
            assert kubelet.mems == CpuSet([kubelet.numa_node])
            claimed = claimed | kubelet.cpus
        assert claimed | host.system_cpus == host.online_cpus, "no CPU is left unused"
        assert host.system_mems == CpuSet(nodes)


@settings(deadline=None)
@given(fleets())
def test_default_ports_are_unique_per_host_and_avoid_reserved_ones(raw):
    plan = plan_of(raw)
    for host in plan.hosts:
        ports = [port for k in host.kubelets for port in (k.port, k.healthz_port, k.read_only_port) if port != 0]
        assert len(ports) == len(set(ports))
        assert not set(ports) & (RESERVED_PORTS | {host.ssh_port})
        assert [k.index for k in host.kubelets] == list(range(len(host.kubelets)))
        assert [k.numa_node for k in host.kubelets] == sorted(k.numa_node for k in host.kubelets)


@settings(deadline=None)
@given(fleets())
def test_node_names_and_instances_are_unique(raw):
    plan = plan_of(raw)
    names = [k.node_name for k in plan.kubelets]
    assert len(names) == len(set(names))
    for host in plan.hosts:
        instances = [k.layout.instance for k in host.kubelets]
        assert len(instances) == len(set(instances))


@settings(deadline=None, max_examples=50)
@given(fleets())
def test_plan_and_rendered_files_are_deterministic(raw):
    first, second = plan_of(copy.deepcopy(raw)), plan_of(copy.deepcopy(raw))
    assert first == second
    assert [(f.path, f.mode, f.content.encode()) for f in rendered_files(first)] == [
        (f.path, f.mode, f.content.encode()) for f in rendered_files(second)
    ]
    assert host_scripts(first) == host_scripts(second)


@settings(deadline=None, max_examples=50)
@given(fleets(), st.randoms(use_true_random=False))
def test_listing_kubelets_explicitly_in_any_order_gives_the_default_plan(raw, random):
    explicit = copy.deepcopy(raw)
    for host in explicit["hosts"]:
        kubelets = [{"numaNode": node["id"]} for node in host["numaNodes"] if node["cpus"]]
        random.shuffle(kubelets)
        host["kubelets"] = kubelets
    assert plan_of(explicit) == plan_of(raw)


def test_the_bootstrap_token_stays_out_of_the_plan_and_reaches_only_the_kubeconfig():
    plan = plan_of(with_cluster(origin_config()))
    assert BOOTSTRAP_TOKEN not in repr(plan)
    assert BOOTSTRAP_TOKEN in bootstrap_kubeconfig_stdin(plan.kubelets[0], plan, BOOTSTRAP_TOKEN)
