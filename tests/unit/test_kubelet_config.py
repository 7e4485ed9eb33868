"""kubeletConfig: the merge stack < host < kubelet, what reaches the KubeletConfiguration, derived settings."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from numa_kubelets import kubelet_config as kc
from numa_kubelets.render import kubelet_config
from numa_kubelets.scripts import kubelet_binaries, kubelet_scripts, kubelet_version_check, preflight_scripts
from tests.unit.builders import origin_config, origin_host, plan_of
from tests.unit.test_scripts import tool

MANAGERS = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static", "topologyManagerPolicy": "single-numa-node"}


def rendered(plan, index: int = 0) -> dict:
    return yaml.safe_load(kubelet_config(plan.kubelets[index], plan.cluster).content)


def test_layers_deep_merge_stack_then_host_then_kubelet():
    host = origin_host(
        kubeletConfig={"evictionHard": {"nodefs.available": "5%"}, "imageGCHighThresholdPercent": 90},
        kubelets=[{"numaNode": 0}, {"numaNode": 1, "kubeletConfig": {"evictionHard": {"memory.available": "300Mi"}}}],
    )
    plan = plan_of(
        origin_config(
            hosts=[host],
            kubeletConfig={"evictionHard": {"memory.available": "200Mi"}, "imageGCHighThresholdPercent": 80},
        )
    )
    node0, node1 = rendered(plan, 0), rendered(plan, 1)
    assert node0["evictionHard"] == {"memory.available": "200Mi", "nodefs.available": "5%"}
    assert node1["evictionHard"] == {"memory.available": "300Mi", "nodefs.available": "5%"}
    assert node0["imageGCHighThresholdPercent"] == node1["imageGCHighThresholdPercent"] == 90


def test_program_owned_fields_stay_the_programs():
    plan = plan_of(origin_config(kubeletConfig={"clusterDomain": "example.internal", "featureGates": {"A": True}}))
    document = rendered(plan, 1)
    assert document["cgroupRoot"] == "/numa1" and document["port"] == 10350
    assert document["clusterDomain"] == "example.internal" and document["featureGates"] == {"A": True}


def test_no_kubelet_config_renders_exactly_the_programs_fields():
    document = rendered(plan_of(origin_config()))
    for field in ("cpuManagerPolicy", "reservedSystemCPUs", "cpuManagerPolicyOptions", "topologyManagerPolicyOptions"):
        assert field not in document


def test_static_cpu_manager_reserves_every_online_cpu_outside_the_slice():
    plan = plan_of(origin_config(kubeletConfig=MANAGERS))
    assert rendered(plan, 0)["reservedSystemCPUs"] == "0,4-7"
    assert rendered(plan, 1)["reservedSystemCPUs"] == "0-4"
    assert plan.kubelets[0].settings.cpu_manager_identity == "static reservedSystemCPUs=0,4-7"


def test_strict_cpu_reservation_is_added_where_the_declared_kubelet_has_it():
    def options(version: str, gates: dict | None = None) -> dict | None:
        config = {**MANAGERS, **({"featureGates": gates} if gates else {})}
        return rendered(plan_of(origin_config(kubeletConfig=config, kubeletVersion=version))).get(
            "cpuManagerPolicyOptions"
        )

    assert options("1.30") is None and options("1.31") is None
    assert options("1.32") is None  # alpha: not switched on behind the user's back
    assert options("1.32", {"CPUManagerPolicyAlphaOptions": True}) == {"strict-cpu-reservation": "true"}
    assert options("1.33") == options("1.35") == {"strict-cpu-reservation": "true"}
    assert options("1.34", {"CPUManagerPolicyBetaOptions": False}) is None


def test_an_explicit_option_value_wins_over_the_added_one():
    config = {**MANAGERS, "cpuManagerPolicyOptions": {"strict-cpu-reservation": "false", "full-pcpus-only": "true"}}
    document = rendered(plan_of(origin_config(kubeletConfig=config, kubeletVersion="1.35")))
    assert document["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true", "strict-cpu-reservation": "false"}


def test_max_allowable_numa_nodes_is_added_above_eight_nodes():
    nodes = [{"id": node, "cpus": f"{2 * node}-{2 * node + 1}"} for node in range(10)]
    config = origin_config(
        hosts=[origin_host(numaNodes=nodes)],
        kubeletConfig={"topologyManagerPolicy": "restricted"},
        kubeletVersion="1.31",
    )
    assert rendered(plan_of(config))["topologyManagerPolicyOptions"] == {"max-allowable-numa-nodes": "10"}
    config["kubeletConfig"] = {"topologyManagerPolicy": "none"}
    assert "topologyManagerPolicyOptions" not in rendered(plan_of(config))


def test_memory_reserved_on_the_own_node_follows_the_kubelets_eviction_defaults():
    def extra(fields: dict) -> int:
        return plan_of(origin_config(kubeletConfig=fields)).kubelets[0].settings.memory_reserved_on_own_node_bytes

    assert extra({}) == 100 * 2**20  # evictionHard default memory.available: 100Mi
    assert extra({"kubeReserved": {"memory": "1Gi"}}) == 2**30 + 100 * 2**20
    assert extra({"evictionHard": {"nodefs.available": "5%"}}) == 0  # a set map replaces the defaults
    assert extra({"evictionHard": {"nodefs.available": "5%"}, "mergeDefaultEvictionSettings": True}) == 100 * 2**20
    assert extra({"evictionHard": {"memory.available": "500M"}}) == 500 * 10**6


def test_quantities_are_read_to_the_byte():
    assert kc.quantity_bytes("1Gi") == 2**30
    assert kc.quantity_bytes("1.5Gi") == 3 * 2**29
    assert kc.quantity_bytes("500M") == 500 * 10**6
    assert kc.quantity_bytes("123") == 123
    assert kc.quantity_bytes("5%") is None and kc.quantity_bytes("1.0000001Ki") is None


def test_the_static_memory_manager_gets_its_reservation_from_the_host_at_start():
    plan = plan_of(origin_config(kubeletConfig=MANAGERS))
    kubelet = plan.kubelets[0]
    script = kubelet_scripts(plan.hosts[0], kubelet, plan).apply
    assert "remainder=$((system_reserved_bytes + 104857600))" in script
    assert "reservedMemory" not in rendered(plan)  # computed on the host, in the drop-in


def test_the_preflight_checks_the_hosts_kubelet_is_at_least_the_declared_version():
    plan = plan_of(origin_config(kubeletVersion="1.33"))
    script = preflight_scripts(plan.hosts[0], plan).stdin
    assert "'/usr/bin/kubelet' --version" in script or "/usr/bin/kubelet --version" in script
    assert '[ "$kubelet_minor" -lt 33 ]' in script
    assert "older than its kubeletVersion 1.33" in script


@pytest.mark.parametrize(
    ("reported", "verdict"),
    [
        ("Kubernetes v1.33.0", ""),
        ("Kubernetes v1.35.2 (numa-kubelets test stand-in, not a kubelet)", ""),
        ("Kubernetes v1.32.9", "kubelet v1.32.9 at {path} is older than its kubeletVersion 1.33"),
        ("garbage", "cannot tell the version of"),
    ],
)
def test_the_preflight_version_check_runs(tmp_path, reported, verdict):
    kubelet = tmp_path / "kubelet"
    kubelet.write_text(f"#!/bin/sh\necho '{reported}'\n")
    kubelet.chmod(0o755)
    plan = plan_of(origin_config(kubeletVersion="1.33", kubeletPath=str(kubelet)))
    [(path, version)] = kubelet_binaries(plan.hosts[0])
    assert (path, version) == (str(kubelet), "1.33")
    script = 'fail() { echo "$*"; }\n' + kubelet_version_check(path, version)
    result = subprocess.run([tool("dash"), "-eu", "-c", script], capture_output=True, text=True, check=True)
    verdict = verdict.format(path=kubelet)
    assert verdict in result.stdout and bool(verdict) == bool(result.stdout)
