"""Each kubelet's generic device plugin units: names, unit, resolver (run against a fake sysfs),
their own remote command, and what stays as it was on hosts without devices."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from numa_kubelets import generic_plugin
from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.plan import KubeletPlan, Plan, build_plan
from numa_kubelets.render import containerd_namespace_script, containerd_prepare_script
from numa_kubelets.revision import restart_revision
from numa_kubelets.scripts import device_plugin_scripts, preflight_scripts
from tests.unit.builders import origin_config, origin_host


def nvme(address: str) -> dict[str, str]:
    return {"address": address, "class": "0x010802", "vendor": "0x1b36", "device": "0x0010", "driver": "nvme"}


NODES = [
    {"id": 0, "cpus": "0-3", "pciDevices": [nvme("0000:01:00.0")]},
    {"id": 1, "cpus": "4-7", "pciDevices": [nvme("0000:42:00.0"), nvme("0000:41:00.0")]},
]
NVME = {"resource": "example.com/nvme", "select": {"class": "0x0108"}}
NVME_CTRL = {"resource": "example.com/nvme", "select": {"class": "0x0108"}, "deviceNodes": ["/dev/nvme[0-9]"]}


def config(devices: list[dict[str, Any]] | None = None, **host: Any) -> dict[str, Any]:
    return origin_config(
        hosts=[origin_host(numaNodes=copy.deepcopy(NODES), **host)], devices=devices if devices is not None else [NVME]
    )


def plan_of(raw: dict[str, Any]) -> Plan:
    return build_plan(load_config(raw))


def kubelet(plan: Plan, numa_node: int) -> KubeletPlan:
    return next(k for k in plan.kubelets if k.numa_node == numa_node)


def test_one_unit_per_kubelet_and_domain_with_the_exact_exec_start():
    plan = plan_of(
        config(
            [
                {"resource": "example.com/nvme", "select": {"addresses": ["0000:01:00.0", "0000:42:00.0"]}},
                {"resource": "gpu.example.org/disk", "select": {"addresses": ["0000:41:00.0"]}},
            ]
        )
    )
    assert generic_plugin.unit_names(kubelet(plan, 0)) == ("numa-device-plugin@numa0-example.com.service",)
    assert generic_plugin.unit_names(kubelet(plan, 1)) == (
        "numa-device-plugin@numa1-example.com.service",
        "numa-device-plugin@numa1-gpu.example.org.service",
    )
    k0 = kubelet(plan, 0)
    unit = generic_plugin.unit(k0, k0.generic_plugins[0])
    assert unit.path == "/etc/systemd/system/numa-device-plugin@numa0-example.com.service"
    assert "Slice=numa0.slice\n" in unit.content
    assert "ExecStartPre=/bin/sh /etc/numa-kubelets/numa0/device-plugin-example.com.sh\n" in unit.content
    assert (
        "ExecStart=/usr/local/bin/generic-device-plugin --config /run/numa-kubelets/numa0/device-plugin-example.com.yaml"
        " --domain example.com --plugin-directory /var/lib/kubelet-numa0/device-plugins --listen 127.0.0.1:0\n"
    ) in unit.content
    assert "Restart=always\n" in unit.content
    assert "PartOf=" not in unit.content and "After=kubelet@numa0.service\n" in unit.content


def test_the_host_path_overrides_the_stacks():
    raw = config(genericDevicePluginPath="/opt/gdp/bin/plugin")
    raw["genericDevicePluginPath"] = "/opt/stack/plugin"
    plan = plan_of(raw)
    assert {k.generic_device_plugin_path for k in plan.kubelets} == {"/opt/gdp/bin/plugin"}
    del raw["hosts"][0]["genericDevicePluginPath"]
    assert {k.generic_device_plugin_path for k in plan_of(raw).kubelets} == {"/opt/stack/plugin"}


def test_a_generic_resource_name_the_plugin_refuses_is_refused():
    with pytest.raises(ConfigError) as error:
        plan_of(config([{"resource": "example.com/NVMe_disk", "select": {"class": "0x0108"}}]))
    assert any("devices[0].resource" in str(p) and "generic device plugin" in str(p) for p in error.value.problems)


def test_device_node_globs_outside_the_safe_charset_are_refused():
    for glob in ["/dev/nvme*;reboot", "/dev/$(id)", "/dev/a b", "/dev/nvme'"]:
        with pytest.raises(ConfigError):
            plan_of(config([{**NVME, "deviceNodes": [glob]}]))


def test_the_preflight_checks_the_plugin_binary_only_where_it_runs():
    with_plugin = plan_of(config())
    text = preflight_scripts(with_plugin.hosts[0], with_plugin).stdin or ""
    assert "/usr/local/bin/generic-device-plugin (the generic device plugin) is missing" in text
    sriov_only = plan_of(config([{"resource": "intel.com/vf", "plugin": "sriov", "select": {"class": "0x0108"}}]))
    assert "generic-device-plugin" not in (preflight_scripts(sriov_only.hosts[0], sriov_only).stdin or "")


# --------------------------------------------------------------------------- the resolver on a fake sysfs


def fake_sysfs(root: Path, controllers: dict[str, tuple[str, list[str]]]) -> None:
    """Per PCI address: (nvme controller name, its namespaces); the bus entry is a symlink, as on a host."""
    for address, (controller, namespaces) in controllers.items():
        device = root / "devices" / "pci0000:40" / "0000:40:00.0" / address
        (device / "nvme" / controller).mkdir(parents=True)
        (device / "uevent").write_text(f"DRIVER=nvme\nPCI_SLOT_NAME={address}\n")
        (device / "nvme" / controller / "uevent").write_text(f"MAJOR=241\nMINOR=0\nDEVNAME={controller}\n")
        for namespace in namespaces:
            (device / "nvme" / controller / namespace).mkdir()
            (device / "nvme" / controller / namespace / "uevent").write_text(
                f"MAJOR=259\nDEVNAME={namespace}\nDEVTYPE=disk\n"
            )
        (device / "driver").mkdir()  # a directory with no device node of its own
        bus = root / "bus" / "pci" / "devices"
        bus.mkdir(parents=True, exist_ok=True)
        (bus / address).symlink_to(device)


def run_resolver(k: KubeletPlan, sysfs: Path, output: Path) -> subprocess.CompletedProcess[str]:
    script = "set -eu\n" + generic_plugin.resolver_shell(k, k.generic_plugins[0], str(sysfs), str(output))
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})


# Names against the NUMA layout, as measured: node 1's drives are nvme0 and nvme1, node 0's nvme2.
SYSFS = {
    "0000:01:00.0": ("nvme2", ["nvme2n1"]),
    "0000:41:00.0": ("nvme0", ["nvme0n1", "nvme0n2"]),
    "0000:42:00.0": ("nvme1", ["nvme1n1"]),
}


def test_the_resolver_maps_pci_addresses_to_their_device_nodes_through_sysfs(tmp_path: Path):
    fake_sysfs(tmp_path / "sys", SYSFS)
    plan = plan_of(config())
    out = tmp_path / "run" / "plugin.yaml"
    result = run_resolver(kubelet(plan, 1), tmp_path / "sys", out)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(out.read_text()) == {
        "devices": [
            {
                "name": "nvme",
                "groups": [
                    {"paths": [{"path": "/dev/nvme0"}, {"path": "/dev/nvme0n1"}, {"path": "/dev/nvme0n2"}], "count": 1},
                    {"paths": [{"path": "/dev/nvme1"}, {"path": "/dev/nvme1n1"}], "count": 1},
                ],
            }
        ]
    }
    first = out.read_bytes()
    assert run_resolver(kubelet(plan, 1), tmp_path / "sys", out).returncode == 0
    assert out.read_bytes() == first  # a re-run converges on the same bytes
    assert not out.with_name("plugin.yaml.tmp").exists()
    result = run_resolver(kubelet(plan, 0), tmp_path / "sys", tmp_path / "node0.yaml")
    assert result.returncode == 0, result.stderr
    groups = yaml.safe_load((tmp_path / "node0.yaml").read_text())["devices"][0]["groups"]
    assert groups == [{"paths": [{"path": "/dev/nvme2"}, {"path": "/dev/nvme2n1"}], "count": 1}]


def test_the_device_node_globs_filter(tmp_path: Path):
    fake_sysfs(tmp_path / "sys", SYSFS)
    k = kubelet(plan_of(config([NVME_CTRL])), 1)
    assert run_resolver(k, tmp_path / "sys", tmp_path / "c.yaml").returncode == 0
    groups = yaml.safe_load((tmp_path / "c.yaml").read_text())["devices"][0]["groups"]
    assert [g["paths"] for g in groups] == [[{"path": "/dev/nvme0"}], [{"path": "/dev/nvme1"}]]


def test_a_device_without_a_device_node_fails_with_one_line_naming_it(tmp_path: Path):
    fake_sysfs(tmp_path / "sys", {"0000:41:00.0": SYSFS["0000:41:00.0"]})  # 0000:42:00.0 missing
    out = tmp_path / "p.yaml"
    result = run_resolver(kubelet(plan_of(config()), 1), tmp_path / "sys", out)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"numa-kubelets: PCI device 0000:42:00.0 ({tmp_path}/sys/bus/pci/devices/0000:42:00.0) has no device node "
        "for resource example.com/nvme"
    ]
    assert not out.exists()


def test_the_production_resolver_reads_sys():
    k = kubelet(plan_of(config()), 1)
    script = generic_plugin.resolver_script(k, k.generic_plugins[0])
    assert script.mode == "0755"
    assert "root=/sys\n" in script.content
    assert "config=/run/numa-kubelets/numa1/device-plugin-example.com.yaml\n" in script.content
    assert 'group "$root" 0000:41:00.0 example.com/nvme matches_0\n' in script.content


# --------------------------------------------------------------------------- lifecycle


def test_a_change_of_devices_changes_only_the_plugins_command_never_a_restart_revision():
    before = plan_of(config())
    after = plan_of(config([{"resource": "example.com/nvme", "select": {"addresses": ["0000:41:00.0"]}}]))
    assert [restart_revision(k, before) for k in before.kubelets] == [
        restart_revision(k, after) for k in after.kubelets
    ]
    old = device_plugin_scripts(before.hosts[0], kubelet(before, 1))
    new = device_plugin_scripts(after.hosts[0], kubelet(after, 1))
    assert old.apply != new.apply
    assert "0000:42:00.0" in old.apply and "0000:42:00.0" not in new.apply
    # The plugin's own marker restarts the plugin, the kubelet's is never touched.
    assert "kubelet@" not in new.apply.replace("After=kubelet@numa1.service", "")
    assert "systemctl restart numa-device-plugin@numa1-example.com.service\n" in new.apply


def test_stale_units_are_removed_and_the_remove_script_removes_all():
    plan = plan_of(config())
    scripts = device_plugin_scripts(plan.hosts[0], kubelet(plan, 1))
    assert "for path in /etc/systemd/system/numa-device-plugin@numa1-*.service; do\n" in scripts.apply
    assert 'case "$unit" in (numa-device-plugin@numa1-example.com.service) continue;; esac\n' in scripts.apply
    assert 'case "$unit"' not in scripts.delete
    assert 'systemctl disable --no-reload --now "$unit"' in scripts.delete


def test_containerd_sees_its_kubelets_directory_only_on_hosts_with_devices():
    plan = plan_of(config())
    k = kubelet(plan, 0)
    namespace = containerd_namespace_script(k).content
    assert "bind_private /var/lib/kubelet-numa0/device-plugins /var/lib/kubelet/device-plugins\n" in namespace
    prepare = containerd_prepare_script(k).content
    assert prepare.index("netns.lock") < prepare.index("device-plugins.lock")
    assert "mkdir -p /var/lib/kubelet-numa0/device-plugins /var/lib/kubelet/device-plugins\n" in prepare
    assert "mount --make-private /var/lib/kubelet/device-plugins\n" in prepare
    plain = plan_of(origin_config(hosts=[origin_host()]))
    assert "device-plugins" not in containerd_namespace_script(plain.kubelets[0]).content
    assert "device-plugins" not in containerd_prepare_script(plain.kubelets[0]).content
    assert all(not k.generic_plugins for k in plain.kubelets)
