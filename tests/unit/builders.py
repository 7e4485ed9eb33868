"""Small builders of raw stack configurations and of everything the core renders from them."""

from __future__ import annotations

import base64
import copy
from typing import Any

from numa_kubelets import generic_plugin
from numa_kubelets.config import load_config
from numa_kubelets.plan import Plan, build_plan
from numa_kubelets.render import (
    HostFile,
    containerd_files,
    host_service_dropins,
    kubelet_files,
    netns_files,
    register_taints_config,
    slice_unit,
)
from numa_kubelets.scripts import (
    HostScripts,
    containerd_scripts,
    device_plugin_scripts,
    host_services_scripts,
    kubelet_scripts,
    netns_scripts,
    preflight_scripts,
    slice_scripts,
)

SERVER = "https://192.0.2.1:6443"
BOOTSTRAP_TOKEN = "abcdef.0123456789abcdef"
CLUSTER_DNS = "10.96.0.10"
CA_CERT = (
    "-----BEGIN CERTIFICATE-----\n"
    + base64.encodebytes(b"a stand-in for a DER certificate, base64 like a real one" * 2).decode()
    + "-----END CERTIFICATE-----\n"
)


# A well-formed ed25519 public key (no host answers with it): every host pins its key.
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample0"


def origin_host(**overrides: Any) -> dict[str, Any]:
    """The origin machine (DESIGN.md section 1): CPUs 0-3 on NUMA node 0, 4-7 on node 1."""
    host: dict[str, Any] = {
        "name": "numa-a",
        "address": "192.0.2.10",
        "hostKey": HOST_KEY,
        "numaNodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}],
    }
    host.update(overrides)
    return host


def origin_config(**overrides: Any) -> dict[str, Any]:
    """A raw `numa-kubelets:*` mapping with the origin host and every optional key defaulted."""
    config: dict[str, Any] = {"hosts": [origin_host()]}
    config.update(overrides)
    return copy.deepcopy(config)


def with_cluster(config: dict[str, Any]) -> dict[str, Any]:
    """The same configuration, joining a cluster with a bootstrap token."""
    cluster = {"server": SERVER, "caCert": CA_CERT, "dns": CLUSTER_DNS}
    return {**copy.deepcopy(config), "cluster": cluster, "bootstrapToken": BOOTSTRAP_TOKEN}


def plan_of(raw: dict[str, Any]) -> Plan:
    return build_plan(load_config(raw))


def rendered_files(plan: Plan) -> list[HostFile]:
    """Every non-secret file the plan puts on its hosts."""
    files: list[HostFile] = []
    for host in plan.hosts:
        files += host_service_dropins(host)
        for kubelet in host.kubelets:
            files.append(slice_unit(kubelet))
            if kubelet.network is not None:
                files += netns_files(kubelet.network)
            files += containerd_files(kubelet, plan)
            files += kubelet_files(kubelet, plan)
            files.append(register_taints_config(kubelet))
            for plugin in kubelet.generic_plugins:
                files += generic_plugin.plugin_files(kubelet, plugin)
    return files


def host_scripts(plan: Plan) -> dict[str, HostScripts]:
    """Every remote command's scripts, by a readable name."""
    scripts: dict[str, HostScripts] = {}
    for host in plan.hosts:
        scripts[f"{host.name} preflight"] = preflight_scripts(host, plan)
        scripts[f"{host.name} host services"] = host_services_scripts(host)
        for kubelet in host.kubelets:
            instance = kubelet.layout.instance
            scripts[f"{host.name} {instance} slice"] = slice_scripts(host, kubelet)
            if kubelet.network is not None:
                scripts[f"{host.name} {instance} netns"] = netns_scripts(host, kubelet)
            scripts[f"{host.name} {instance} containerd"] = containerd_scripts(host, kubelet, plan)
            scripts[f"{host.name} {instance} kubelet"] = kubelet_scripts(host, kubelet, plan)
            if kubelet.generic_plugins:
                scripts[f"{host.name} {instance} device-plugins"] = device_plugin_scripts(host, kubelet)
    return scripts


def namespace_host(uplink: str = "macvlan", **overrides: Any) -> dict[str, Any]:
    """The origin machine in namespace mode: numa0 at 192.0.2.21/24, numa1 at .22, gateway .1.

    A `network` override replaces the network settings wholesale; the kubelets keep their addresses."""
    network: dict[str, Any] = {"mode": "namespace", "gateway": "192.0.2.1"}
    kubelets: list[dict[str, Any]] = [
        {"numaNode": 0, "address": "192.0.2.21/24"},
        {"numaNode": 1, "address": "192.0.2.22/24"},
    ]
    if uplink == "device":
        network["uplink"] = "device"
        kubelets[0]["device"] = "ens1f0v0"
        kubelets[1]["device"] = "ens2f0v0"
    else:
        network.update(uplink=uplink, parent="eno1")
    return origin_host(**{"network": network, "kubelets": kubelets, **overrides})
