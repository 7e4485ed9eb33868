"""The plain stack outputs derived from the plan (DESIGN.md section 5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import generic_plugin
from .device_plugin_configs import device_plugin_configs
from .plan import Plan

# What each stack output holds: the source of docs/reference/outputs.md (output_reference.py).
# tests/unit/test_reference.py checks these names against what __main__.py exports and what the
# functions below build, so a new output or key needs its description here.
STACK_OUTPUTS = {
    "hosts": "Per host: its `systemCpus` and its kubelets, as planned (below).",
    "placement": "Per demo pod, where it should run and where it runs (below); only with the demo enabled "
    "([Demo pods](../demo-pods.md)).",
    "placementOk": "`true` only when every entry of `placement` is `ok`; only with the demo enabled.",
    "kubeletRevisions": "`{<nodeName>: <restart revision>}` as the last successful update applied them; the stack "
    "reads it back to know which kubelets a change restarts ([Rolling changes](../rolling-changes.md)). A failed "
    "update leaves it as it was.",
    "devicePluginConfigs": "Per host with `sriov` or `nvidia` device resources, each Node's own configuration for "
    "those plugins (below); only when some host has them ([Devices](../devices.md)).",
}
HOST_KEYS = {
    "systemCpus": "The CPUs kept for the host's own services, as a canonical cpulist.",
    "kubelets": "Per node name, the kubelet's entry (below).",
}
KUBELET_KEYS = {
    "numaNode": "The kubelet's NUMA node.",
    "cpus": "Its slice's CPUs, as a canonical cpulist.",
    "mems": "Its slice's memory node(s).",
    "port": "The kubelet's port.",
    "healthzPort": "Its healthz port (on 127.0.0.1).",
    "labels": "Every label the stack keeps on its Node: its own and the automatic `numa-kubelets.io/*` ones.",
    "slice": "Its systemd slice (`numa<N>.slice`).",
    "unit": "Its systemd unit (`kubelet@numa<N>.service`).",
    "address": "Namespace mode only: the node address with its prefix length (CIDR).",
    "netns": "Namespace mode only: its network namespace (`numa<N>`).",
    "devices": "Only for a kubelet that offers devices: per extended resource, the PCI addresses of the devices "
    'its Node advertises (`{"example.com/nvme": ["0000:41:00.0"]}`) ([Devices](../devices.md)).',
    "devicePluginUnits": "Only for a kubelet that offers `generic` device resources: the systemd units of its generic "
    "device plugins, one per resource domain (`numa-device-plugin@numa<N>-<domain>.service`) "
    "([Devices](../devices.md#plugins-the-stack-renders-for)).",
}
# Keys of a kubelet's entry read on its host rather than planned (`observed` below).
OBSERVED_KUBELET_KEYS = {
    "hugepages": 'The kubelet\'s own NUMA node\'s hugepage pools by page size (`{"2Mi": 64, "1Gi": 0}`), as its '
    "apply script read them on the host: what its Node advertises as `hugepages-<size>` capacity. As of the last "
    "apply of that kubelet: pools resized later show after its next update, while the kubelet's capacity and "
    "reservation follow them at every start.",
}


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
                    **(
                        {"devices": {r.resource: list(r.addresses) for r in kubelet.devices}} if kubelet.devices else {}
                    ),
                    **(
                        {"devicePluginUnits": list(generic_plugin.unit_names(kubelet))}
                        if kubelet.generic_plugins
                        else {}
                    ),
                }
                for kubelet in host.kubelets
            },
        }
        for host in plan.hosts
    }


# What `devicePluginConfigs` holds per host (device_plugin_configs.py renders it).
DEVICE_PLUGIN_CONFIG_KEYS = {
    "sriov": "`{configMap, namespace, data}`: the SR-IOV network device plugin's ConfigMap for this host, `data` "
    "holding one `config.json` per Node name (`resourceList` pools selecting that Node's devices by "
    "`pciAddresses`), for `--config-file=/etc/pcidp/$(NODE_NAME)`. Untested here.",
    "nvidia": "Per Node name, `{NVIDIA_VISIBLE_DEVICES, pciAddresses}`: the GPU indexes (PCI address order among "
    "the host's declared NVIDIA GPUs) for that Node's NVIDIA device plugin container, and their addresses to check "
    "them against `nvidia-smi`. Untested here.",
}


def device_plugin_configs_output(plan: Plan) -> dict[str, Any]:
    """Per host that has some, the device plugin configurations of its Nodes; {} for most stacks."""
    return {host.name: configs for host in plan.hosts if (configs := device_plugin_configs(host))}
