import subprocess

import pytest
import yaml

from numa_kubelets.config import load_config
from numa_kubelets.cpulist import CpuSet
from numa_kubelets.plan import build_plan
from numa_kubelets.topology import (
    READ_TOPOLOGY_SCRIPT,
    TopologyError,
    parse_topology,
    stack_snippet,
    suggested_system_cpus,
)
from tests.unit.builders import HOST_KEY

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


# One NVMe drive on node 0, two on node 1, one without affinity, and the bridges they hang off.
WITH_DEVICES = (
    "node 0 0-3\nnode 1 4-7\nonline 0-7\n"
    "pci 0000:00:00.0 -1 0x060000 0x8086 0x29c0\n"
    "pci 0000:00:05.0 -1 0x010802 0x1b36 0x0010 nvme\n"
    "pci 0000:40:00.0 1 0x060400 0x1b36 0x000c pcieport\n"
    "pci 0000:42:00.0 1 0x010802 0x1b36 0x0010 nvme\n"
    "pci 0000:41:00.0 1 0x010802 0x1b36 0x0010\n"
    "pci 0000:01:00.0 0 0x010802 0x1b36 0x0010 nvme\n"
    "pci 0000:00:1f.0 -1 0x088000 0x8086 0x2918\n"
)


def test_pci_devices_go_under_their_numa_node_and_bridges_stay_out():
    snippet = yaml.safe_load(stack_snippet(parse_topology(WITH_DEVICES)))
    nvme = {"class": "0x010802", "vendor": "0x1b36", "device": "0x0010"}
    assert snippet == {
        "numaNodes": [
            {"id": 0, "cpus": "0-3", "pciDevices": [{"address": "0000:01:00.0", **nvme, "driver": "nvme"}]},
            {
                "id": 1,
                "cpus": "4-7",
                # An unbound device has no driver to declare.
                "pciDevices": [
                    {"address": "0000:41:00.0", **nvme},
                    {"address": "0000:42:00.0", **nvme, "driver": "nvme"},
                ],
            },
        ],
        "systemCpus": "0,4",
        "pciDevices": [{"address": "0000:00:05.0", **nvme, "driver": "nvme"}],
    }


def test_the_snippet_of_a_host_with_devices_loads_and_plans():
    snippet = yaml.safe_load(stack_snippet(parse_topology(WITH_DEVICES)))
    host = {"name": "a", "address": "192.0.2.1", "hostKey": HOST_KEY, **snippet}
    plan = build_plan(load_config({"hosts": [host]}))
    assert [d.address for d in plan.hosts[0].pci_devices] == [
        "0000:00:05.0",
        "0000:01:00.0",
        "0000:41:00.0",
        "0000:42:00.0",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "pci 0000:41:00.0 1 0x010802 0x1b36",
        "pci 41:00.0 1 0x010802 0x1b36 0x0010",
        "pci 0000:41:00.0 x 0x010802 0x1b36 0x0010",
        "pci 0000:41:00.0 1 0x0108 0x1b36 0x0010",
        "pci 0000:41:00.0 1 0x010802 0x1B36 0x0010",
        "pci 0000:41:00.0 7 0x010802 0x1b36 0x0010",  # no NUMA node 7
    ],
)
def test_rejects_unexpected_pci_readings(line):
    with pytest.raises(TopologyError):
        parse_topology(f"node 0 0-3\nnode 1 4-7\nonline 0-7\n{line}\n")
