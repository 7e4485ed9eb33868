"""The per-Node configurations rendered for the SR-IOV and NVIDIA device plugins, checked against
their documented formats (neither plugin runs here: see numa_kubelets/device_plugin_configs.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from numa_kubelets.device_plugin_configs import (
    device_plugin_configs,
    nvidia_visible_devices,
    sriov_config_map,
    sriov_configs,
)
from numa_kubelets.outputs import device_plugin_configs_output
from numa_kubelets.validators import DNS_NAME
from tests.unit.builders import origin_config
from tests.unit.test_devices import GPUS, NVME, VFS, device_host, plan_of

# The SR-IOV network device plugin's config (README, "Config parameters"): a `resourceList` of
# objects with a required `resourceName` (no special characters), an optional `resourcePrefix`, and
# `selectors`, a map of selector name to list of strings; `pciAddresses` is one of its selectors.
SRIOV_POOL_KEYS = {"resourceName", "resourcePrefix", "selectors", "isRdma", "deviceType", "excludeTopology"}
SRIOV_SELECTORS = {
    "vendors",
    "devices",
    "drivers",
    "pfNames",
    "linkTypes",
    "pciAddresses",
    "rootDevices",
    "ddpProfiles",
}
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def check_sriov_config(text: str) -> dict[str, Any]:
    config = json.loads(text)
    assert set(config) == {"resourceList"}
    names: set[tuple[str, str]] = set()
    for pool in config["resourceList"]:
        assert set(pool) <= SRIOV_POOL_KEYS
        assert re.fullmatch(r"[A-Za-z0-9_]+", pool["resourceName"])
        assert DNS_NAME.fullmatch(pool["resourcePrefix"])
        identity = (pool["resourcePrefix"], pool["resourceName"])
        assert identity not in names, "resourceName must be unique in the scope of its prefix"
        names.add(identity)
        assert set(pool["selectors"]) <= SRIOV_SELECTORS
        for values in pool["selectors"].values():
            assert isinstance(values, list) and all(isinstance(v, str) for v in values)
        assert all(PCI_ADDRESS.fullmatch(a) for a in pool["selectors"]["pciAddresses"])
    return config


def fixture_plan():
    return plan_of(origin_config(hosts=[device_host()], devices=[NVME, GPUS, VFS]))


def test_each_node_gets_an_sriov_config_selecting_its_own_vfs():
    configs = sriov_configs(fixture_plan().hosts[0])
    assert {node: check_sriov_config(text) for node, text in configs.items()} == {
        "numa-a-numa0": {
            "resourceList": [
                {
                    "resourceName": "sriov_vf",
                    "resourcePrefix": "intel.com",
                    "selectors": {"pciAddresses": ["0000:03:00.2"]},
                }
            ]
        },
        "numa-a-numa1": {
            "resourceList": [
                {
                    "resourceName": "sriov_vf",
                    "resourcePrefix": "intel.com",
                    "selectors": {"pciAddresses": ["0000:44:00.2"]},
                }
            ]
        },
    }


def test_one_config_map_per_host_keyed_by_node_name():
    config_map = sriov_config_map(fixture_plan().hosts[0])
    assert config_map is not None
    assert config_map["apiVersion"] == "v1" and config_map["kind"] == "ConfigMap"
    assert config_map["metadata"]["name"] == "sriovdp-config-numa-a"
    assert DNS_NAME.fullmatch(config_map["metadata"]["name"])
    # ConfigMap keys: [-._a-zA-Z0-9]+ (the API server's IsConfigMapKey); a Node name always is one.
    assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", key) for key in config_map["data"])
    assert set(config_map["data"]) == {"numa-a-numa0", "numa-a-numa1"}


def test_nvidia_visible_devices_are_indexes_in_pci_order_of_the_hosts_gpus():
    # The host's NVIDIA GPUs by address: 0000:02:00.0 (node 0), 0000:43:00.0, 0000:45:00.0 (node 1).
    assert nvidia_visible_devices(fixture_plan().hosts[0]) == {
        "numa-a-numa0": {"NVIDIA_VISIBLE_DEVICES": "0", "pciAddresses": ["0000:02:00.0"]},
        "numa-a-numa1": {"NVIDIA_VISIBLE_DEVICES": "1,2", "pciAddresses": ["0000:43:00.0", "0000:45:00.0"]},
    }


def test_nvidia_visible_devices_is_in_the_documented_form():
    # NVIDIA Container Toolkit: "a comma-separated list of GPU UUID(s) or index(es)".
    for entry in nvidia_visible_devices(fixture_plan().hosts[0]).values():
        assert re.fullmatch(r"[0-9]+(,[0-9]+)*", entry["NVIDIA_VISIBLE_DEVICES"])


def test_an_adopted_gpu_keeps_its_host_wide_index():
    host = device_host(kubelets=[{"numaNode": 0, "adoptDevices": ["0000:45:00.0"]}, {"numaNode": 1}])
    plan = plan_of(origin_config(hosts=[host], devices=[GPUS]))
    assert {n: e["NVIDIA_VISIBLE_DEVICES"] for n, e in nvidia_visible_devices(plan.hosts[0]).items()} == {
        "numa-a-numa0": "0,2",
        "numa-a-numa1": "1",
    }


def test_hosts_without_such_resources_render_nothing():
    assert device_plugin_configs_output(plan_of(origin_config())) == {}
    only_generic = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    assert device_plugin_configs(only_generic.hosts[0]) == {}
    assert set(device_plugin_configs_output(fixture_plan())["numa-a"]) == {"sriov", "nvidia"}
