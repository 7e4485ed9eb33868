"""Host classes (numa_kubelets/host_classes.py): a host with `class` is the host written out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.host_classes import expand_host_classes
from numa_kubelets.plan import Plan, build_plan
from numa_kubelets.review import render_stack
from tests.unit.builders import origin_config

PROJECT_DIR = Path(__file__).resolve().parents[2]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample0"
DUAL = {
    "numaNodes": [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "8-15"}],
    "systemCpus": "0,8",
    "kubelets": [{"numaNode": 0, "labels": {"pool": "a"}}, {"numaNode": 1, "labels": {"pool": "b"}}],
    "kubeletConfig": {"cpuManagerPolicy": "static", "evictionHard": {"memory.available": "200Mi"}},
    "rollout": {"maxUnavailable": 1},
}


def host(index: int, **own: Any) -> dict[str, Any]:
    return {"name": f"rack1-{index:02d}", "address": f"192.0.2.{index + 10}", "hostKey": KEY, **own}


def fleet(*hosts: dict[str, Any], **classes: dict[str, Any]) -> dict[str, Any]:
    return origin_config(hosts=list(hosts), hostClasses=classes or {"dual-8x8": DUAL})


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        build_plan(load_config(raw))
    return [str(problem) for problem in error.value.problems]


def test_a_host_with_a_class_is_the_host_written_out():
    expansion = expand_host_classes([host(1, **{"class": "dual-8x8"})], {"dual-8x8": DUAL})
    assert expansion.problems == ()
    assert expansion.hosts == [{"class": "dual-8x8", **DUAL, **host(1)}]


def test_a_hosts_own_key_replaces_the_classs_whole():
    own_kubelets = [{"numaNode": 1, "maxPods": 20}]
    plan = build_plan(load_config(fleet(host(1, **{"class": "dual-8x8", "kubelets": own_kubelets}))))
    [kubelet] = plan.hosts[0].kubelets
    assert (kubelet.numa_node, kubelet.max_pods, kubelet.user_labels) == (1, 20, {})


def test_kubelet_config_layers_stack_class_host_kubelet():
    dual = {
        **DUAL,
        "kubeletConfig": {"evictionHard": {"memory.available": "200Mi", "nodefs.available": "10%"}, "maxOpenFiles": 2},
        "kubelets": [{"numaNode": 0, "kubeletConfig": {"evictionHard": {"imagefs.available": "15%"}}}],
    }
    raw = fleet(
        host(1, **{"class": "dual-8x8", "kubeletConfig": {"evictionHard": {"nodefs.available": "5%"}}}),
        **{"dual-8x8": dual},
    )
    raw["kubeletConfig"] = {"evictionHard": {"memory.available": "100Mi", "pid.available": "5%"}, "maxOpenFiles": 1}
    [kubelet] = build_plan(load_config(raw)).kubelets
    assert kubelet.settings.user_fields == {
        "evictionHard": {
            "pid.available": "5%",  # the stack's
            "memory.available": "200Mi",  # the class's over the stack's
            "nodefs.available": "5%",  # the host's over the class's
            "imagefs.available": "15%",  # the kubelet's
        },
        "maxOpenFiles": 2,
    }


def test_a_problem_inside_a_class_names_the_classs_path_once():
    dual = {**DUAL, "numaNodes": [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "7-15"}]}
    hosts = [host(index, **{"class": "dual-8x8"}) for index in range(3)]
    assert problems_of(fleet(*hosts, **{"dual-8x8": dual})) == [
        "hostClasses.dual-8x8.numaNodes[1].cpus: CPU 7 is also on NUMA node 0"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"systemCpus": "0,99"}, "hostClasses.dual-8x8.systemCpus: CPUs 99 are on no declared NUMA node"),
        ({"sshPort": 0}, "hostClasses.dual-8x8.sshPort: Input should be greater than or equal to 1"),
        ({"numaNodes": [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "8-x"}]}, "hostClasses.dual-8x8.numaNodes[1].cpus"),
        ({"kubelets": [{"numaNode": 3}]}, "hostClasses.dual-8x8.kubelets[0].numaNode: NUMA node 3 is not declared"),
        ({"kubeletConfig": {"cpuManagerPolicy": "dynamic"}}, "hostClasses.dual-8x8.kubeletConfig.cpuManagerPolicy"),
        ({"rollout": {"maxUnavailable": "0%"}}, "hostClasses.dual-8x8.rollout.maxUnavailable"),
        ({"netwrok": {}}, "hostClasses.dual-8x8.netwrok: unknown key"),
    ],
)
def test_every_problem_inside_a_class_carries_its_path(change, expected):
    raw = fleet(host(1, **{"class": "dual-8x8"}), host(2, **{"class": "dual-8x8"}), **{"dual-8x8": {**DUAL, **change}})
    found = problems_of(raw)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_a_class_problem_is_found_even_when_no_host_uses_the_class():
    raw = origin_config(hostClasses={"spare": {**DUAL, "systemCpus": "0,99"}})
    raw["hosts"][0]["hostKey"] = KEY
    assert problems_of(raw) == ["hostClasses.spare.systemCpus: CPUs 99 are on no declared NUMA node"]


def test_a_problem_only_one_host_has_names_that_host_too():
    dual = {**DUAL, "kubelets": [{"numaNode": 0, "port": 2222}, {"numaNode": 1}]}
    raw = fleet(
        host(1, **{"class": "dual-8x8"}), host(2, **{"class": "dual-8x8", "sshPort": 2222}), **{"dual-8x8": dual}
    )
    assert problems_of(raw) == [
        "hostClasses.dual-8x8.kubelets[0].port (for hosts[1]): port 2222 collides with sshd on host rack1-02"
    ]


def test_a_hosts_own_key_keeps_the_hosts_path():
    raw = fleet(host(1, **{"class": "dual-8x8", "systemCpus": "0,99"}))
    assert problems_of(raw) == ["hosts[0].systemCpus: CPUs 99 are on no declared NUMA node"]


def test_an_unknown_class_lists_the_classes_there_are():
    hosts = [host(index, **{"class": "dual-8x8"}) for index in range(12)] + [host(12, **{"class": "dual"})]
    raw = fleet(*hosts, **{"dual-8x8": DUAL, "quad-4x4": DUAL})
    assert problems_of(raw) == ['hosts[12].class: unknown class "dual"; classes are: dual-8x8, quad-4x4']


def test_a_class_without_classes_says_there_are_none():
    raw = origin_config(hosts=[host(1, **{"class": "dual"})])
    assert problems_of(raw) == ['hosts[0].class: unknown class "dual"; the stack defines no hostClasses']


def test_a_key_neither_the_host_nor_its_class_sets_names_both():
    dual = {key: value for key, value in DUAL.items() if key not in ("numaNodes", "systemCpus", "kubelets")}
    raw = fleet(host(1, **{"class": "dual-8x8"}), **{"dual-8x8": dual})
    assert problems_of(raw) == [
        "hosts[0].numaNodes: required key is missing: neither the host nor its class dual-8x8 sets it"
    ]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("name", "each host's own: set it on the hosts, not in a class"),
        ("address", "each host's own: set it on the hosts, not in a class"),
        ("hostKey", "each host's own: set it on the hosts, not in a class"),
        ("class", "a class cannot take another class"),
    ],
)
def test_keys_a_class_may_not_set(key, message):
    value = {"name": "x", "address": "192.0.2.99", "hostKey": KEY, "class": "dual-8x8"}[key]
    raw = fleet(host(1, **{"class": "dual-8x8"}), **{"dual-8x8": {**DUAL, key: value}})
    assert problems_of(raw) == [f"hostClasses.dual-8x8.{key}: {message}"]


@pytest.mark.parametrize("name", ["Dual", "dual_8x8", "-dual", "a" * 64])
def test_a_class_name_is_a_dns_label(name):
    raw = fleet(host(1, numaNodes=DUAL["numaNodes"]), **{name: DUAL})
    [problem] = problems_of(raw)
    assert problem.startswith(f"hostClasses.{name}: ")


def test_the_example_stacks_review_is_the_same_written_with_a_class():
    """The pull-request plan comment and every review file stay as they are when the example
    stack's hosts move their shared keys into a class."""
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.example-cluster.yaml").read_text())
    hosts = document["config"]["numa-kubelets:hosts"]
    shared = {key: value for key, value in hosts[1].items() if key not in ("name", "address", "hostKey")}
    with_class = copy.deepcopy(document)
    with_class["config"]["numa-kubelets:hostClasses"] = {"two-socket": shared}
    with_class["config"]["numa-kubelets:hosts"] = [
        hosts[0],
        {key: hosts[1][key] for key in ("name", "address", "hostKey") if key in hosts[1]} | {"class": "two-socket"},
    ]
    assert render_stack(with_class) == render_stack(document)


# ---------------------------------------------------------------- property: random fleets

# Pools of values that fit every topology below, so that most random fleets are valid.
TOPOLOGIES = [
    [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}],
    [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "8-15"}],
    [{"id": 0, "cpus": "0-5"}, {"id": 1, "cpus": "6-11"}, {"id": 2, "cpus": ""}],
]
HOST_KEYS = {
    "numaNodes": st.sampled_from(TOPOLOGIES),
    "systemCpus": st.sampled_from(["0", "0,1", "0,4"]),
    "kubelets": st.sampled_from(
        [
            [{"numaNode": 0, "labels": {"pool": "a"}}, {"numaNode": 1, "labels": {"pool": "b"}}],
            [{"numaNode": 1, "maxPods": 20, "kubeletConfig": {"evictionHard": {"imagefs.available": "15%"}}}],
        ]
    ),
    "kubeletConfig": st.sampled_from(
        [
            {},
            {"cpuManagerPolicy": "static"},
            {"evictionHard": {"memory.available": "200Mi"}},
            {"evictionHard": {"nodefs.available": "10%"}, "maxOpenFiles": 4096},
        ]
    ),
    "network": st.sampled_from([{"mode": "host"}, {}]),
    "rollout": st.sampled_from([{"maxUnavailable": 1}, {"maxUnavailable": "50%"}, {}]),
    "user": st.sampled_from(["root", "deploy"]),
    "sshPort": st.sampled_from([22, 2222]),
    "kubeletPath": st.sampled_from(["/opt/k8s/v1.37.2/kubelet", "/usr/local/bin/kubelet"]),
    "kubeletVersion": st.sampled_from(["1.36", "1.37"]),
}
CLASS_NAMES = ["dual", "small-2x4", "odd"]


def settings_subset(required: bool) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.sets(st.sampled_from(sorted(HOST_KEYS)))
    if required:
        keys = keys.map(lambda chosen: chosen | {"numaNodes"})
    return keys.flatmap(lambda chosen: st.fixed_dictionaries({key: HOST_KEYS[key] for key in sorted(chosen)}))


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A random stack written with classes, and the same stack written out host by host."""
    classes = {name: draw(settings_subset(required=False)) for name in draw(st.sets(st.sampled_from(CLASS_NAMES)))}
    hosts, written_out = [], []
    for index in range(draw(st.integers(1, 6))):
        identity = {"name": f"h{index}", "address": f"192.0.2.{index + 1}", "hostKey": KEY}
        class_name = draw(st.sampled_from([None, *sorted(classes)]))
        own = draw(settings_subset(required=class_name is None or "numaNodes" not in classes[class_name]))
        if class_name is None:
            hosts.append({**identity, **own})
            written_out.append({**identity, **own})
            continue
        hosts.append({**identity, "class": class_name, **own})
        written = {**classes[class_name], **identity, **own}
        if "kubeletConfig" in classes[class_name] and "kubeletConfig" in own:
            written["kubeletConfig"] = merged(classes[class_name]["kubeletConfig"], own["kubeletConfig"])
        written_out.append(written)
    stack = {"kubeletConfig": draw(HOST_KEYS["kubeletConfig"]), "rollout": draw(HOST_KEYS["rollout"])}
    return {**stack, "hosts": hosts, "hostClasses": classes}, {**stack, "hosts": written_out}


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The test's own deep merge: maps key by key, anything else replaced."""
    result = copy.deepcopy(base)
    for key, value in over.items():
        both_maps = isinstance(value, dict) and isinstance(result.get(key), dict)
        result[key] = merged(result[key], value) if both_maps else value
    return result


def outcome(raw: dict[str, Any]) -> Plan | type[ConfigError]:
    try:
        return build_plan(load_config(copy.deepcopy(raw)))
    except ConfigError:
        return ConfigError


@settings(max_examples=150, deadline=None)
@given(fleets())
def test_classes_expand_to_exactly_the_hosts_written_out(stacks):
    with_classes, written_out = stacks
    assert outcome(with_classes) == outcome(written_out)


def test_the_random_fleets_are_mostly_valid():
    """The property above compares plans, not just two refusals."""
    valid = 0

    @settings(max_examples=60, deadline=None, database=None)
    @given(fleets())
    def count(stacks):
        nonlocal valid
        valid += outcome(stacks[1]) is not ConfigError

    count()
    assert valid >= 20
