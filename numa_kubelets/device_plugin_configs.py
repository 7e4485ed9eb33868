"""Each Node's own configuration for the device plugins users already run (issue 43, item 3).

Neither plugin can run here (the SR-IOV plugin is not served by the Go module proxy, NVIDIA's
needs NVML and real GPUs), so what is rendered here is checked against their documented formats
only (tests/unit/test_device_plugin_configs.py) and documented as untested (docs/devices.md).

SR-IOV network device plugin (k8snetworkplumbingwg/sriov-network-device-plugin, README "Config
parameters"): a JSON file `{"resourceList": [{"resourceName", "resourcePrefix", "selectors":
{"pciAddresses": [...]}}]}`, read from `--config-file`. The SR-IOV network operator gives each
Node its own through one ConfigMap keyed by Node name, mounted at /etc/pcidp, with
`--config-file=/etc/pcidp/$(NODE_NAME)`. One such ConfigMap for a whole stack grows with the
fleet and nears the API's 1 MiB object limit at a few thousand Nodes; rendered per host it holds
that host's few Nodes (one per NUMA node), so its size does not grow with the fleet.

NVIDIA's device plugin has no device filter: it advertises every GPU NVML shows it. Its
maintainers' way to split GPUs (NVIDIA/k8s-device-plugin issues 81, 197, 236) is a plugin
DaemonSet per device set whose container has `NVIDIA_VISIBLE_DEVICES` set, so the container
toolkit shows it only those GPUs. NVIDIA_VISIBLE_DEVICES takes GPU indexes or UUIDs
(NVIDIA Container Toolkit, "Specialized Configurations with Docker"); the program knows PCI
addresses, not UUIDs, so it gives indexes: a GPU's position among the host's NVIDIA GPUs in PCI
address order, the order nvidia-smi lists them. NVML's documentation does not promise that order
(nvmlDeviceGetIndex: "no guarantees of consistency between reboots"), so each entry carries the
PCI addresses too, to check once per host model with
`nvidia-smi --query-gpu=index,pci.bus_id --format=csv`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .devices import NVIDIA, SRIOV
from .plan import HostPlan, KubeletPlan

SRIOV_CONFIG_DIR = "/etc/pcidp"
SRIOV_NAMESPACE = "kube-system"  # where the plugin's upstream DaemonSet (sriovdp-daemonset.yaml) runs


def sriov_config(kubelet: KubeletPlan) -> dict[str, Any] | None:
    """The SR-IOV device plugin's config.json for one Node: a pool per `sriov` resource, selecting
    exactly its PCI devices by address; None when the kubelet has no such resource."""
    pools = [
        {
            "resourceName": resource.name,
            "resourcePrefix": resource.domain,
            "selectors": {"pciAddresses": list(resource.addresses)},
        }
        for resource in kubelet.devices
        if resource.plugin == SRIOV
    ]
    return {"resourceList": pools} if pools else None


def sriov_configs(host: HostPlan) -> dict[str, str]:
    """Per Node name of the host, its config.json as text (the ConfigMap's data, the output)."""
    configs = {}
    for kubelet in host.kubelets:
        config = sriov_config(kubelet)
        if config is not None:
            configs[kubelet.node_name] = json.dumps(config, indent=2, sort_keys=False) + "\n"
    return configs


def sriov_config_map_name(host: HostPlan) -> str:
    return f"sriovdp-config-{host.name}"


def sriov_config_map(host: HostPlan) -> dict[str, Any] | None:
    """The host's ConfigMap: one key per Node name, for a plugin DaemonSet of that host that mounts
    it at /etc/pcidp and runs with `--config-file=/etc/pcidp/$(NODE_NAME)`."""
    configs = sriov_configs(host)
    if not configs:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": sriov_config_map_name(host),
            "namespace": SRIOV_NAMESPACE,
            "labels": {"numa-kubelets.io/host": host.name},
        },
        "data": configs,
    }


def nvidia_visible_devices(host: HostPlan) -> dict[str, dict[str, Any]]:
    """Per Node name of the host with `nvidia` resources: the `NVIDIA_VISIBLE_DEVICES` of its plugin
    container (its GPUs' indexes, in PCI address order among the host's declared NVIDIA GPUs) and
    their PCI addresses, by resource."""
    gpus = [device.address for device in host.pci_devices if device.is_nvidia_gpu]  # sorted by address
    index = {address: position for position, address in enumerate(gpus)}
    result: dict[str, dict[str, Any]] = {}
    for kubelet in host.kubelets:
        addresses = sorted(a for r in kubelet.devices if r.plugin == NVIDIA for a in r.addresses)
        if addresses:
            result[kubelet.node_name] = {
                "NVIDIA_VISIBLE_DEVICES": ",".join(str(index[a]) for a in addresses),
                "pciAddresses": addresses,
            }
    return result


def device_plugin_configs(host: HostPlan) -> dict[str, Mapping[str, Any]]:
    """The `devicePluginConfigs` output of one host: what exists of `sriov` and `nvidia`."""
    configs: dict[str, Mapping[str, Any]] = {}
    sriov = sriov_configs(host)
    if sriov:
        configs["sriov"] = {"configMap": sriov_config_map_name(host), "namespace": SRIOV_NAMESPACE, "data": sriov}
    nvidia = nvidia_visible_devices(host)
    if nvidia:
        configs["nvidia"] = nvidia
    return configs
