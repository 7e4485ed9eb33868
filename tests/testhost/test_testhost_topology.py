"""Topology parsing and the qemu options derived from it (no VM needed)."""

import pytest

from tests.testhost.topology import ORIGIN, Topology, format_cpulist, parse_cpulist, qemu_topology_args


def test_cpulist_round_trip():
    assert parse_cpulist("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert parse_cpulist("") == ()
    with pytest.raises(ValueError):
        parse_cpulist("3-1")
    with pytest.raises(ValueError):
        parse_cpulist("a")


def test_parse_topology():
    assert Topology.parse("0-3;4-7") == ORIGIN
    assert Topology.of([[4, 5, 6, 7], [0, 1, 2, 3]]).cpulists() == ["4-7", "0-3"]
    assert str(Topology.parse("0,3,6;1,4,7;2,5")) == "0,3,6;1,4,7;2,5"
    assert Topology.parse("0-3;;4-7").cpulists() == ["0-3", "", "4-7"]  # memory-only node 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("0-3;3-7", "CPUs 3 are on more than one NUMA node"),
        ("0-3;5-7", "CPUs 4 are on no NUMA node"),
        (";", "the topology has no CPU"),
    ],
)
def test_invalid_topologies(text, message):
    with pytest.raises(ValueError, match=message):
        Topology.parse(text)


def test_origin_is_two_sockets_of_four_cores():
    args = qemu_topology_args(ORIGIN, 2048)
    assert args == [
        "-smp",
        "8,sockets=2,cores=4,threads=1",
        "-m",
        "2048M",
        "-object",
        "memory-backend-ram,size=1024M,id=mem0",
        "-numa",
        "node,nodeid=0,cpus=0-3,memdev=mem0",
        "-object",
        "memory-backend-ram,size=1024M,id=mem1",
        "-numa",
        "node,nodeid=1,cpus=4-7,memdev=mem1",
    ]


def test_non_contiguous_nodes_repeat_cpus_and_use_single_cpu_sockets():
    args = qemu_topology_args(Topology.parse("0,3,6;1,4,7;2,5"), 2048)
    assert args[:4] == ["-smp", "8,sockets=8,cores=1,threads=1", "-m", "2046M"]
    assert "node,nodeid=0,cpus=0,cpus=3,cpus=6,memdev=mem0" in args
    assert "node,nodeid=2,cpus=2,cpus=5,memdev=mem2" in args


def test_memory_only_node_gets_memory_but_no_cpus():
    args = qemu_topology_args(Topology.parse("0-1;;2-3"), 1536)
    assert "node,nodeid=1,memdev=mem1" in args
