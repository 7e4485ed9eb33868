"""The host partition picture (numa_kubelets.picture): the CPUs it draws per kubelet are build_plan's."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from numa_kubelets.config import load_config
from numa_kubelets.picture import host_picture
from numa_kubelets.plan import HostPlan, build_plan
from numa_kubelets.review import plan_from_stack, render_stack
from tests.unit.builders import HOST_KEY, origin_config, plan_of

ROOT = Path(__file__).resolve().parents[2]
KUBELET_BOX = re.compile(
    r'\["(?P<node>[a-z0-9.-]+)<br/>(?P<slice>numa\d+\.slice): CPUs (?P<cpus>[0-9,-]+), memory node (?P<mems>[0-9,-]+)<br/>'
)
SERVICES_BOX = re.compile(r'\["host services: CPUs (?P<cpus>[0-9,-]+)"\]')
UNUSED_BOX = re.compile(r'\["no slice: CPUs (?P<cpus>[0-9,-]+)"\]')


def drawn_kubelets(picture: str) -> dict[str, tuple[str, str, str]]:
    """Per node name: the slice, CPUs and memory node the picture shows."""
    return {m["node"]: (m["slice"], m["cpus"], m["mems"]) for m in KUBELET_BOX.finditer(picture)}


def planned_kubelets(host: HostPlan) -> dict[str, tuple[str, str, str]]:
    return {k.node_name: (k.layout.slice, k.cpus.format(), k.mems.format()) for k in host.kubelets}


def interleaved_host(**overrides):
    """The second test topology: 3 NUMA nodes whose CPUs are interleaved, defaults everywhere."""
    host = {
        "name": "numa-c",
        "address": "192.0.2.30",
        "hostKey": HOST_KEY,
        "numaNodes": [{"id": 0, "cpus": "0,3,6"}, {"id": 1, "cpus": "1,4,7"}, {"id": 2, "cpus": "2,5"}],
    }
    return {**host, **overrides}


def test_the_dev_stack_is_drawn_as_planned():
    _, plan = plan_from_stack(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text()))
    (host,) = plan.hosts
    picture = host_picture(host)
    assert drawn_kubelets(picture) == planned_kubelets(host)
    assert drawn_kubelets(picture) == {
        "numa-a-numa0": ("numa0.slice", "1-3", "0"),
        "numa-a-numa1": ("numa1.slice", "5-7", "1"),
    }
    assert [m["cpus"] for m in SERVICES_BOX.finditer(picture)] == ["0", "4"]


def test_an_interleaved_three_node_host_is_drawn_as_planned():
    plan = build_plan(load_config(origin_config(hosts=[interleaved_host()])))
    (host,) = plan.hosts
    picture = host_picture(host)
    assert drawn_kubelets(picture) == planned_kubelets(host)
    assert drawn_kubelets(picture) == {
        "numa-c-numa0": ("numa0.slice", "3,6", "0"),
        "numa-c-numa1": ("numa1.slice", "4,7", "1"),
        "numa-c-numa2": ("numa2.slice", "5", "2"),
    }
    # The host's services keep the lowest CPU of each NUMA node, drawn inside that node.
    assert [m["cpus"] for m in SERVICES_BOX.finditer(picture)] == ["0", "1", "2"]
    assert not UNUSED_BOX.search(picture)


def test_cpus_in_no_slice_and_a_memory_only_node_are_drawn():
    host = interleaved_host(
        numaNodes=[{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": ""}],
        systemCpus="0",
        kubelets=[{"numaNode": 0, "cpus": "2-3"}],
    )
    (host_plan,) = plan_of(origin_config(hosts=[host])).hosts
    picture = host_picture(host_plan)
    assert drawn_kubelets(picture) == {"numa-c-numa0": ("numa0.slice", "2-3", "0")}
    assert [m["cpus"] for m in UNUSED_BOX.finditer(picture)] == ["1"]
    assert '["NUMA node 1: memory only"]' in picture
    assert '["memory only, no kubelet"]' in picture


def test_the_review_summary_carries_each_hosts_picture():
    document = yaml.safe_load((ROOT / "Pulumi.example-cluster.yaml").read_text())
    summary = render_stack(document)["summary.md"]
    _, plan = plan_from_stack(document)
    for host in plan.hosts:
        section = summary.split(f"## Partition of host {host.name}\n\n```mermaid\n", 1)[1].split("```", 1)[0]
        assert drawn_kubelets(section) == planned_kubelets(host)
