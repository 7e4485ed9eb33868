"""Devices in the program (issue 43): the outputs a stack with devices exports, and none without."""

from __future__ import annotations

import json

from tests.program.harness import run_program


def test_a_stack_with_devices_exports_each_nodes_devices_and_plugin_configs(dev_config):
    nvme = {"class": "0x010802", "vendor": "0x1b36", "device": "0x0010", "driver": "nvme"}
    vf = {"class": "0x020000", "vendor": "0x8086", "device": "0x154c", "driver": "vfio-pci"}
    host = dev_config["hosts"][0]
    host["numaNodes"][0]["pciDevices"] = [{"address": "0000:01:00.0", **nvme}]
    host["numaNodes"][1]["pciDevices"] = [{"address": "0000:41:00.0", **nvme}, {"address": "0000:44:00.2", **vf}]
    dev_config["devices"] = [
        {"resource": "example.com/nvme", "select": {"class": "0x0108"}},
        {"resource": "intel.com/sriov_vf", "plugin": "sriov", "select": {"driver": "vfio-pci"}},
    ]

    run = run_program(dev_config)

    kubelets = run.outputs["hosts"][host["name"]]["kubelets"]
    assert {name: kubelet.get("devices") for name, kubelet in kubelets.items()} == {
        f"{host['name']}-numa0": {"example.com/nvme": ["0000:01:00.0"]},
        f"{host['name']}-numa1": {"example.com/nvme": ["0000:41:00.0"], "intel.com/sriov_vf": ["0000:44:00.2"]},
    }
    # Each kubelet with generic resources: its plugins' own command, after its kubelet, in its
    # KubeletInstance; the units in its hosts entry.
    for instance in ("numa0", "numa1"):
        command = run.named(f"{host['name']}-{instance}-device-plugins")
        assert run.parent_of(command) == ("numa-kubelets:index:KubeletInstance", f"{host['name']}-{instance}")
        assert f"{host['name']}-{instance}-kubelet" in run.dependencies_of(command)
        assert f"numa-device-plugin@{instance}-example.com.service" in command.inputs["create"]
        units = kubelets[f"{host['name']}-{instance}"]["devicePluginUnits"]
        assert units == [f"numa-device-plugin@{instance}-example.com.service"]
    sriov = run.outputs["devicePluginConfigs"][host["name"]]["sriov"]
    assert set(sriov["data"]) == {f"{host['name']}-numa1"}
    pools = json.loads(sriov["data"][f"{host['name']}-numa1"])["resourceList"]
    assert pools[0]["selectors"] == {"pciAddresses": ["0000:44:00.2"]}


def test_a_stack_without_devices_exports_no_device_outputs(dev_config):
    run = run_program(dev_config)
    assert "devicePluginConfigs" not in run.outputs
    assert all("devices" not in k for h in run.outputs["hosts"].values() for k in h["kubelets"].values())
    assert not [r for r in run.commands() if r.name.endswith("-device-plugins")]
