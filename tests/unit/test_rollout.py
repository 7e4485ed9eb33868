"""Which kubelets a stack change restarts, in which batches (numa_kubelets/rollout.py, revision.py)."""

from __future__ import annotations

import copy

import pytest

from numa_kubelets.cluster import node_readiness
from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.plan import Plan, build_plan
from numa_kubelets.revision import restart_revision
from numa_kubelets.rollout import RolloutKubelet, RolloutPolicy, restart_batches, restarting, waits_for
from numa_kubelets.scripts import parse_kubelet_started
from tests.unit.builders import origin_config, origin_host, with_cluster


def two_by_two(**stack: object) -> dict:
    """2 hosts x 2 NUMA nodes, joined to a cluster."""
    second = origin_host(name="numa-b", address="192.0.2.11")
    return with_cluster(origin_config(hosts=[origin_host(), second], **stack))


def plan_of(config: dict) -> Plan:
    return build_plan(load_config(config))


def revisions(plan: Plan) -> dict[str, str]:
    return {k.node_name: restart_revision(k, plan) for k in plan.kubelets}


def batches_for(before: dict, after: dict) -> list[list[str]]:
    """The batches of the change from stack config `before` to `after`."""
    old, new = plan_of(before), plan_of(after)
    kubelets = [RolloutKubelet(k.node_name, k.host, restart_revision(k, new)) for k in new.kubelets]
    return restart_batches(kubelets, revisions(old), new.rollout, {h.name: h.rollout for h in new.hosts})


def changed(config: dict, **stack: object) -> dict:
    config = copy.deepcopy(config)
    config.update(stack)
    return config


def test_a_binary_change_on_2_hosts_x_2_numa_nodes_restarts_one_kubelet_at_a_time():
    before = two_by_two()
    batches = batches_for(before, changed(before, kubeletPath="/opt/kubernetes/v1.37/kubelet"))
    # Hosts take turns: one NUMA node of each host before the second of either.
    assert batches == [["numa-a-numa0"], ["numa-b-numa0"], ["numa-a-numa1"], ["numa-b-numa1"]]


def test_max_unavailable_2_halves_the_batches_and_never_takes_a_whole_host():
    before = two_by_two(rollout={"maxUnavailable": 2})
    batches = batches_for(before, changed(before, kubeletPath="/opt/kubernetes/v1.37/kubelet"))
    assert batches == [["numa-a-numa0", "numa-b-numa0"], ["numa-a-numa1", "numa-b-numa1"]]


def test_a_label_or_taint_change_restarts_nothing():
    before = two_by_two()
    after = copy.deepcopy(before)
    after["hosts"][0]["kubelets"] = [
        {
            "numaNode": 0,
            "labels": {"tier": "gold"},
            "taints": [{"key": "tenant", "value": "a", "effect": "NoSchedule"}],
        },
        {"numaNode": 1},
    ]
    assert batches_for(before, after) == []


def test_a_kubelet_config_change_of_one_host_restarts_only_its_kubelets():
    before = two_by_two()
    after = copy.deepcopy(before)
    after["hosts"][1]["kubeletConfig"] = {"cpuManagerPolicy": "static"}
    assert batches_for(before, after) == [["numa-b-numa0"], ["numa-b-numa1"]]


def test_new_and_unchanged_kubelets_are_not_restarted():
    before = with_cluster(origin_config())
    after = two_by_two(kubeletPath="/opt/kubelet")  # numa-b is new; numa-a's binary changed
    assert batches_for(before, after) == [["numa-a-numa0"], ["numa-a-numa1"]]
    assert batches_for(after, after) == []


def test_the_first_update_restarts_nothing():
    plan = plan_of(two_by_two())
    kubelets = [RolloutKubelet(k.node_name, k.host, "r") for k in plan.kubelets]
    assert restarting(kubelets, None) == [] and restarting(kubelets, {}) == []


def test_a_hosts_own_limit_holds_within_the_stacks():
    kubelets = [RolloutKubelet(f"{host}-numa{n}", host, "new") for host in ("a", "b") for n in range(3)]
    previous = {k.node_name: "old" for k in kubelets}
    batches = restart_batches(kubelets, previous, RolloutPolicy(4, True), {"a": RolloutPolicy(1, True)})
    assert batches == [["a-numa0", "b-numa0", "b-numa1", "b-numa2"], ["a-numa1"], ["a-numa2"]]


def test_without_a_cluster_everything_restarts_at_once_unless_limited():
    before = origin_config(hosts=[origin_host(), origin_host(name="numa-b", address="192.0.2.11")])
    after = changed(before, kubeletPath="/opt/kubelet")
    assert batches_for(before, after) == [["numa-a-numa0", "numa-b-numa0", "numa-a-numa1", "numa-b-numa1"]]
    limited = changed(after, rollout={"maxUnavailable": 1})
    assert len(batches_for(changed(before, rollout={"maxUnavailable": 1}), limited)) == 4


def test_each_batch_waits_for_the_whole_previous_one():
    assert waits_for([["a", "b"], ["c"], ["d", "e"]]) == {"c": ["a", "b"], "d": ["c"], "e": ["c"]}


def test_the_policy_defaults_and_a_hosts_override():
    plan = plan_of(two_by_two())
    assert plan.rollout == RolloutPolicy(max_unavailable=1, drain=True)
    config = two_by_two(rollout={"maxUnavailable": 3})
    config["hosts"][1]["rollout"] = {"drain": False, "maxUnavailable": 1}
    plan = plan_of(config)
    assert plan.rollout == RolloutPolicy(3, True)
    assert [h.rollout for h in plan.hosts] == [RolloutPolicy(3, True), RolloutPolicy(1, False)]
    assert plan_of(origin_config()).rollout == RolloutPolicy(None, False)


@pytest.mark.parametrize(
    ("config", "path", "message"),
    [
        (origin_config(rollout={"drain": True}), "rollout.drain", "no cluster to drain from"),
        (
            origin_config(hosts=[origin_host(rollout={"drain": True})]),
            "hosts[0].rollout.drain",
            "no cluster to drain from",
        ),
        (origin_config(rollout={"maxUnavailable": 0}), "rollout.maxUnavailable", "neither a count of at least 1"),
        (origin_config(rollout={"maxUnavail": 1}), "rollout.maxUnavail", "unknown key"),
    ],
)
def test_a_bad_rollout_names_its_path(config, path, message):
    with pytest.raises(ConfigError) as error:
        load_config(config)
    assert any(p.path == path and message in p.message for p in error.value.problems), error.value.problems


def test_a_canary_kubelet_runs_its_own_binary_and_version():
    config = two_by_two(kubeletPath="/opt/k8s/v1.36/kubelet", kubeletVersion="1.36")
    config["hosts"][0]["kubelets"] = [
        {"numaNode": 0, "kubeletPath": "/opt/k8s/v1.37/kubelet", "kubeletVersion": "1.37"},
        {"numaNode": 1},
    ]
    config["hosts"][1]["kubeletPath"] = "/usr/local/bin/kubelet"
    plan = plan_of(config)
    binaries = {k.node_name: (k.kubelet_path, k.kubelet_version) for k in plan.kubelets}
    assert binaries == {
        "numa-a-numa0": ("/opt/k8s/v1.37/kubelet", "1.37"),
        "numa-a-numa1": ("/opt/k8s/v1.36/kubelet", "1.36"),
        "numa-b-numa0": ("/usr/local/bin/kubelet", "1.36"),
        "numa-b-numa1": ("/usr/local/bin/kubelet", "1.36"),
    }


@pytest.mark.parametrize(
    ("where", "path"),
    [("host", "hosts[0].kubeletVersion"), ("kubelet", "hosts[0].kubelets[0].kubeletVersion")],
)
def test_an_unsupported_per_host_or_kubelet_version_names_its_path(where, path):
    host = (
        origin_host(kubeletVersion="1.20")
        if where == "host"
        else origin_host(kubelets=[{"numaNode": 0, "kubeletVersion": "1.20"}])
    )
    with pytest.raises(ConfigError) as error:
        load_config(origin_config(hosts=[host]))
    assert any(p.path == path and "not supported" in p.message for p in error.value.problems), error.value.problems


def test_the_kubelets_start_time_is_read_from_its_apply_scripts_output():
    line = "numa-kubelets: the kubelet runs since 2026-12-01T18:00:07Z\n"
    assert parse_kubelet_started("other output\n" + line) == "2026-12-01T18:00:07Z"
    assert parse_kubelet_started("numa-kubelets: the kubelet runs since Tue 2026-12-01\n") == ""
    assert parse_kubelet_started(None) == ""


def test_a_ready_reported_before_the_kubelet_restarted_does_not_count():
    def node(heartbeat: str) -> dict:
        ready = {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}
        return {"metadata": {"labels": {}}, "status": {"conditions": [ready]}}

    started = "2026-12-01T18:00:07Z"
    assert not node_readiness(node("2026-12-01T18:00:06Z"), {}, started).ready
    assert node_readiness(node("2026-12-01T18:00:07Z"), {}, started).ready
    assert node_readiness(node("2026-12-01T18:00:06Z"), {}).ready  # no start time known: as it reads


def fleet(hosts: int, numa_nodes: int, **stack: object) -> dict:
    """`hosts` minimal hosts of `numa_nodes` NUMA nodes of 4 CPUs each, standalone."""
    entries = [
        origin_host(
            name=f"rack-{index:03d}",
            address=f"10.0.{index // 250}.{index % 250 + 1}",
            numaNodes=[{"id": node, "cpus": f"{4 * node}-{4 * node + 3}"} for node in range(numa_nodes)],
        )
        for index in range(hosts)
    ]
    return origin_config(hosts=entries, **stack)


def every_kubelet_restarting(plan: Plan) -> list[list[str]]:
    """The batches of a change that restarts every kubelet of the plan (a new kubelet binary)."""
    kubelets = [RolloutKubelet(k.node_name, k.host, "new") for k in plan.kubelets]
    previous = {k.node_name: "old" for k in plan.kubelets}
    return restart_batches(kubelets, previous, plan.rollout, {h.name: h.rollout for h in plan.hosts})


def test_10_percent_of_625_hosts_x_8_numa_nodes_is_10_batches_of_one_numa_node_per_host():
    plan = plan_of(fleet(625, 8, rollout={"maxUnavailable": "10%"}))
    assert plan.rollout.max_unavailable == 500  # 10% of 5,000 kubelets
    batches = every_kubelet_restarting(plan)
    assert len(batches) == 10
    assert all(len(batch) == 500 for batch in batches)
    for batch in batches:
        hosts = [name.rsplit("-numa", 1)[0] for name in batch]
        assert len(hosts) == len(set(hosts)), "a batch took two NUMA nodes of one host"
    assert sorted(name for batch in batches for name in batch) == sorted(k.node_name for k in plan.kubelets)


@pytest.mark.parametrize(
    ("percentage", "kubelets", "expected"),
    [
        ("10%", 5000, 500),
        ("10%", 19, 1),  # 1.9 rounds down
        ("10%", 5, 1),  # 0.5 rounds down to 0: at least one
        ("33%", 10, 3),
        ("50%", 3, 1),
        ("100%", 7, 7),
        ("1%", 250, 2),
    ],
)
def test_a_percentage_rounds_down_as_kubernetes_does_and_is_at_least_one(percentage, kubelets, expected):
    plan = plan_of(fleet(kubelets, 1, rollout={"maxUnavailable": percentage}))
    assert plan.rollout.max_unavailable == expected


def test_a_host_percentage_is_of_its_own_kubelets():
    config = fleet(2, 8, rollout={"maxUnavailable": "50%"})
    config["hosts"][1]["rollout"] = {"maxUnavailable": "25%"}
    plan = plan_of(config)
    assert plan.rollout.max_unavailable == 8  # half of the stack's 16
    assert [host.rollout.max_unavailable for host in plan.hosts] == [8, 2]  # the stack's; a quarter of 8


@pytest.mark.parametrize("value", ["10", "0%", "101%", "abc", "10.5%", "-5%", "%", 0, True])
@pytest.mark.parametrize("level", ["stack", "host"])
def test_a_bad_max_unavailable_is_refused_with_its_path(value, level):
    config = origin_config()
    if level == "stack":
        config["rollout"] = {"maxUnavailable": value}
        path = "rollout.maxUnavailable"
    else:
        config["hosts"][0]["rollout"] = {"maxUnavailable": value}
        path = "hosts[0].rollout.maxUnavailable"
    with pytest.raises(ConfigError) as error:
        load_config(config)
    assert [p.path for p in error.value.problems] == [path]
    assert "percentage" in error.value.problems[0].message
