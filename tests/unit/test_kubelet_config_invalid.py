"""Invalid `kubeletConfig` / `kubeletVersion`: each refused with the path of the offending value.

Layer problems (unknown, mistyped, owned fields, options the declared version lacks) come from
`load_config`; problems only the merged configuration of a kubelet shows come from `build_plan`.
"""

from __future__ import annotations

import pytest

from numa_kubelets.config import load_config
from numa_kubelets.plan import build_plan
from tests.unit.test_config_invalid import (
    Invalid,
    adding_host,
    assert_reported,
    base_config,
    both,
    joining_cluster,
    problems_of,
    setting,
)

STACK = "kubeletConfig"
HOST = "hosts[0].kubeletConfig"
KUBELET = "hosts[0].kubelets[1].kubeletConfig"
NINE_NODES = [{"id": node, "cpus": f"{2 * node}-{2 * node + 1}"} for node in range(9)]

CASES = [
    # the kubelet's strict decoder: unknown fields, wrong types
    Invalid("unknown field", setting(STACK, {"evictionHardd": {}}), f"{STACK}.evictionHardd", "unknown"),
    Invalid(
        "unknown nested field",
        setting(HOST, {"memorySwap": {"swapBehaviour": "NoSwap"}}),
        f"{HOST}.memorySwap.swapBehaviour",
        "unknown field (known: swapBehavior)",
    ),
    Invalid(
        "number where the kubelet wants a string",
        setting(KUBELET, {"evictionHard": {"memory.available": 100}}),
        f"{KUBELET}.evictionHard.memory.available",
        "must be a string",
    ),
    Invalid(
        "string where the kubelet wants an integer",
        setting(STACK, {"imageGCHighThresholdPercent": "85"}),
        f"{STACK}.imageGCHighThresholdPercent",
        "must be an integer",
    ),
    Invalid(
        "boolean as a string",
        setting(HOST, {"serializeImagePulls": "false"}),
        f"{HOST}.serializeImagePulls",
        "must be a boolean",
    ),
    Invalid("malformed duration", setting(STACK, {"syncFrequency": "1 minute"}), f"{STACK}.syncFrequency", "duration"),
    Invalid(
        "feature gate not a boolean",
        setting(STACK, {"featureGates": {"CPUManagerPolicyAlphaOptions": "true"}}),
        f"{STACK}.featureGates.CPUManagerPolicyAlphaOptions",
        "must be a boolean",
    ),
    Invalid("not a mapping", setting(KUBELET, ["cpuManagerPolicy"]), KUBELET, "valid dictionary"),
    Invalid(
        "unknown policy",
        setting(STACK, {"cpuManagerPolicy": "Static"}),
        f"{STACK}.cpuManagerPolicy",
        "not one of none, static",
    ),
    Invalid(
        "unreservable resource",
        setting(STACK, {"kubeReserved": {"hugepages-2Mi": "1Gi"}}),
        f"{STACK}.kubeReserved.hugepages-2Mi",
        "not reservable",
    ),
    # fields the program owns, each naming what to use instead
    Invalid("cgroupRoot", setting(STACK, {"cgroupRoot": "/kubepods"}), f"{STACK}.cgroupRoot", "NUMA node's slice"),
    Invalid("cgroupDriver", setting(HOST, {"cgroupDriver": "cgroupfs"}), f"{HOST}.cgroupDriver", "systemd"),
    Invalid(
        "runtime endpoint",
        setting(STACK, {"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock"}),
        f"{STACK}.containerRuntimeEndpoint",
        "containerd@numa<N>",
    ),
    Invalid("port", setting(KUBELET, {"port": 10250}), f"{KUBELET}.port", "use hosts[].kubelets[].port"),
    Invalid(
        "healthzPort", setting(HOST, {"healthzPort": 0}), f"{HOST}.healthzPort", "use hosts[].kubelets[].healthzPort"
    ),
    Invalid("maxPods", setting(STACK, {"maxPods": 250}), f"{STACK}.maxPods", "use hosts[].kubelets[].maxPods"),
    Invalid("podLogsDir", setting(STACK, {"podLogsDir": "/var/log/pods"}), f"{STACK}.podLogsDir", "its own"),
    Invalid(
        "systemReserved memory",
        setting(HOST, {"systemReserved": {"memory": "1Gi"}}),
        f"{HOST}.systemReserved.memory",
        "use kubeReserved.memory",
    ),
    Invalid(
        "reservedSystemCPUs",
        setting(KUBELET, {"reservedSystemCPUs": "0,4"}),
        f"{KUBELET}.reservedSystemCPUs",
        "every online CPU outside the kubelet's slice",
    ),
    Invalid(
        "reservedMemory",
        setting(STACK, {"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}),
        f"{STACK}.reservedMemory",
        "sum rule",
    ),
    Invalid(
        "serverTLSBootstrap",
        setting(STACK, {"serverTLSBootstrap": True}),
        f"{STACK}.serverTLSBootstrap",
        "use cluster.servingCertificates",
    ),
    Invalid(
        "registerWithTaints",
        setting(KUBELET, {"registerWithTaints": [{"key": "a", "effect": "NoSchedule"}]}),
        f"{KUBELET}.registerWithTaints",
        "use hosts[].kubelets[].taints",
    ),
    Invalid(
        "authentication with a cluster",
        both(joining_cluster, setting(STACK, {"authentication": {"anonymous": {"enabled": True}}})),
        f"{STACK}.authentication",
        "client certificate",
    ),
    # what the declared kubelet version lacks
    Invalid("kubeletVersion too old", setting("kubeletVersion", "1.29"), "kubeletVersion", "not supported"),
    Invalid("kubeletVersion malformed", setting("kubeletVersion", "v1.30.2"), "kubeletVersion", "minor version"),
    Invalid(
        "policy option newer than the declared kubelet",
        setting(STACK, {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"strict-cpu-reservation": "true"}}),
        f"{STACK}.cpuManagerPolicyOptions.strict-cpu-reservation",
        "kubelet 1.30 (kubeletVersion) has no strict-cpu-reservation",
    ),
    Invalid(
        "unknown policy option",
        setting(STACK, {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"full-pcpu-only": "true"}}),
        f"{STACK}.cpuManagerPolicyOptions.full-pcpu-only",
        "unknown option",
    ),
    Invalid(
        "alpha option without its feature gate",
        both(
            setting("kubeletVersion", "1.32"),
            setting(
                HOST, {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"strict-cpu-reservation": "true"}}
            ),
        ),
        f"{HOST}.cpuManagerPolicyOptions.strict-cpu-reservation",
        "alpha in kubelet 1.32: it needs featureGates.CPUManagerPolicyAlphaOptions: true",
        fleet=True,
    ),
    Invalid(
        "CPU manager options without the static policy",
        both(
            setting(STACK, {"cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}),
            setting(KUBELET, {"cpuManagerPolicy": "none"}),
        ),
        f"{STACK}.cpuManagerPolicyOptions",
        "need cpuManagerPolicy: static",
        fleet=True,
    ),
    Invalid(
        "topology manager on more than 8 NUMA nodes with kubelet 1.30",
        both(
            adding_host(name="numa-big", address="192.0.2.12", numaNodes=NINE_NODES),
            setting("hosts[1].kubeletConfig", {"topologyManagerPolicy": "single-numa-node"}),
        ),
        "hosts[1].kubeletConfig.topologyManagerPolicy",
        "refuses more than 8 without max-allowable-numa-nodes",
        fleet=True,
    ),
    Invalid(
        "percentage eviction threshold with the Static memory manager",
        setting(STACK, {"memoryManagerPolicy": "Static", "evictionHard": {"memory.available": "5%"}}),
        f"{STACK}.evictionHard.memory.available",
        "exact quantity",
        fleet=True,
    ),
]


def test_there_are_at_least_fifteen_new_cases():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_invalid_kubelet_configuration_is_refused_with_its_path(case: Invalid):
    raw = base_config()
    case.modify(raw)
    error = problems_of(raw, fleet=case.fleet)
    assert_reported(error, case.path, case.fragment)


def test_problems_of_every_layer_are_reported_at_once():
    raw = base_config()
    setting(STACK, {"maxPods": 1, "evictionHardd": {}})(raw)
    setting(HOST, {"cgroupRoot": "/x"})(raw)
    setting(KUBELET, {"port": 1})(raw)
    error = problems_of(raw, fleet=False)
    assert sorted(p.path for p in error.problems) == sorted(
        [f"{STACK}.maxPods", f"{STACK}.evictionHardd", f"{HOST}.cgroupRoot", f"{KUBELET}.port"]
    )


GATE_CASES = [
    Invalid(
        "feature gate the declared kubelet does not know",
        both(setting("kubeletVersion", "1.37"), setting(STACK, {"featureGates": {"NoSuchFeatureGate": True}})),
        f"{STACK}.featureGates.NoSuchFeatureGate",
        "kubelet 1.37 (kubeletVersion) has no such feature gate",
        fleet=True,
    ),
    Invalid(
        "locked feature gate set against its default, judged at the kubelet's own version",
        both(
            setting(STACK, {"featureGates": {"KubeletTracing": False}}),
            setting("hosts[0].kubelets[1].kubeletVersion", "1.37"),
        ),
        f"{STACK}.featureGates.KubeletTracing",
        "locked to true in kubelet 1.37 (GA)",
        fleet=True,
    ),
    Invalid(
        "feature gate enabled without its dependency, in the merged map",
        both(
            setting("kubeletVersion", "1.37"),
            setting(
                STACK,
                {
                    "featureGates": {
                        "CompositePodGroup": True,
                        "TopologyAwareWorkloadScheduling": True,
                        "GenericWorkload": True,
                    }
                },
            ),
            setting(KUBELET, {"featureGates": {"GenericWorkload": False}}),
        ),
        f"{KUBELET}.featureGates",
        "CompositePodGroup is enabled in kubelet 1.37, but it needs GenericWorkload",
        fleet=True,
    ),
]


@pytest.mark.parametrize("case", GATE_CASES, ids=lambda case: case.name)
def test_feature_gates_the_kubelet_refuses_are_refused_with_the_path_that_set_them(case: Invalid):
    raw = base_config()
    case.modify(raw)
    error = problems_of(raw, fleet=case.fleet)
    assert_reported(error, case.path, case.fragment)
    # Only where it was set (the other kubelet's merged map is fine), and once for both kubelets.
    assert {p.path for p in error.problems} == {case.path}, error
    assert len(error.problems) == len({p.message for p in error.problems}), error


def test_a_gate_set_by_a_lower_layer_and_overridden_by_a_higher_one_is_judged_as_merged():
    raw = base_config()
    both(
        setting("kubeletVersion", "1.37"),
        setting(STACK, {"featureGates": {"KubeletTracing": False}}),
        setting(HOST, {"featureGates": {"KubeletTracing": True}}),
    )(raw)
    build_plan(load_config(raw))
