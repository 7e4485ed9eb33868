import subprocess

import pytest
import yaml

from numa_kubelets.cpulist import CpuSet
from numa_kubelets.topology import (
    READ_TOPOLOGY_SCRIPT,
    TopologyError,
    parse_topology,
    stack_snippet,
    suggested_system_cpus,
)

SMT_HOST = """\
node 0 0-3,8-11
node 1 4-7,12-15
node 2
online 0-15
siblings 0 0,8
siblings 8 0,8
siblings 4 4,12
siblings 12 4,12
"""


def test_parses_nodes_including_a_memory_only_node():
    topology = parse_topology(SMT_HOST)
    assert topology.nodes == {0: CpuSet.parse("0-3,8-11"), 1: CpuSet.parse("4-7,12-15"), 2: CpuSet()}
    assert topology.online == CpuSet.parse("0-15")


def test_suggests_whole_cores_for_the_system():
    assert suggested_system_cpus(parse_topology(SMT_HOST)).format() == "0,4,8,12"


def test_snippet_is_a_valid_stack_fragment():
    snippet = yaml.safe_load(stack_snippet(parse_topology(SMT_HOST)))
    assert snippet == {
        "numaNodes": [{"id": 0, "cpus": "0-3,8-11"}, {"id": 1, "cpus": "4-7,12-15"}, {"id": 2, "cpus": ""}],
        "systemCpus": "0,4,8,12",
    }


def test_offline_cpus_are_called_out():
    readings = "node 0 0-3\nonline 0-2\n"
    snippet = stack_snippet(parse_topology(readings))
    assert snippet.startswith("# CPUs 3 are offline")
    assert yaml.safe_load(snippet)["systemCpus"] == "0"


@pytest.mark.parametrize(
    "readings", ["", "node 0 0-3\n", "online 0-3\n", "node x 0-3\nonline 0\n", "node 0 3-1\nonline 0\n", "cpu 0\n"]
)
def test_rejects_unexpected_readings(readings):
    with pytest.raises(TopologyError):
        parse_topology(readings)


def test_read_script_runs_on_this_machine():
    output = subprocess.run(["sh", "-c", READ_TOPOLOGY_SCRIPT], capture_output=True, text=True, check=True).stdout
    topology = parse_topology(output)
    assert topology.online
    assert all(cpus.issubset(topology.online) or not cpus for cpus in topology.nodes.values())
