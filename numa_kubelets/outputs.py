"""The plain stack outputs derived from the plan (DESIGN.md section 5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .plan import Plan


def hosts_output(plan: Plan, observed: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """`observed`: per node name, what was read on the host (e.g. `hugepages`), added to its entry."""
    observed = observed or {}
    return {
        host.name: {
            "systemCpus": host.system_cpus.format(),
            "kubelets": {
                kubelet.node_name: {
                    "numaNode": kubelet.numa_node,
                    "cpus": kubelet.cpus.format(),
                    "mems": kubelet.mems.format(),
                    "port": kubelet.port,
                    "healthzPort": kubelet.healthz_port,
                    "labels": kubelet.label_map,
                    "slice": kubelet.layout.slice,
                    "unit": kubelet.layout.kubelet_unit,
                    **observed.get(kubelet.node_name, {}),
                    **(
                        {"address": kubelet.network.address, "netns": kubelet.network.netns}
                        if kubelet.network is not None
                        else {}
                    ),
                }
                for kubelet in host.kubelets
            },
        }
        for host in plan.hosts
    }
