"""The rollout's wiring: what each kubelet's host commands wait for, across two updates.

The first run is the stack's first update (no previous outputs); the second is evaluated with
the first one's outputs, as the program reads them back from its own stack.
"""

from __future__ import annotations

import copy
import itertools

from tests.program.harness import ProgramRun, run_program

DRAIN = "pulumi-python:dynamic/numa-kubelets:NodeDrain"
LIFECYCLE = "pulumi-python:dynamic/numa-kubelets:NodeLifecycle"
NODES = [f"numa-{host}-numa{n}" for host in "ab" for n in range(4)]
# Hosts take turns (numa_kubelets/rollout.py).
TURNS = [f"numa-{host}-numa{n}" for n in range(4) for host in "ab"]


# Waited for by every first command and NodeDrain, whatever the rollout: the host's preflight, and
# what the turns are decided from: the stack reference, and the cluster's DNS Service read (the
# kubelet configuration, and so its revision, holds its IP).
ALWAYS = {"numa-a-preflight", "numa-b-preflight", "previous-update", "cluster-kube-dns"}


def waited_for(run: ProgramRun, name: str, type_token: str) -> set[str]:
    """What a resource waits for besides what it always waits for."""
    return set(run.dependencies_of(run.named(name, type_token))) - ALWAYS


def slice_of(node: str) -> str:
    return f"{node}-slice"  # the default node name is also the prefix of its resources' names


def updated(config: dict, **stack: object) -> dict:
    config = copy.deepcopy(config)
    config.update(stack)
    return config


def test_the_first_update_creates_every_kubelet_at_once_and_records_the_revisions(cluster_config):
    run = run_program(cluster_config)
    revisions = run.outputs["kubeletRevisions"]
    assert sorted(revisions) == sorted(NODES)
    for name in NODES:
        drain = run.named(f"{name}-drain", DRAIN)
        assert drain.inputs["revision"] == revisions[name]
        # When its kubelet last started, from the kubelet command's output (nothing ran under mocks).
        assert run.named(f"{name}-lifecycle", LIFECYCLE).inputs["kubeletStarted"] == ""
        assert waited_for(run, f"{name}-drain", DRAIN) == set()
        assert waited_for(run, slice_of(name), "command:remote:Command") == {f"{name}-drain"}


def test_a_binary_change_drains_and_restarts_one_kubelet_after_the_other(cluster_config):
    first = run_program(cluster_config)
    run = run_program(
        updated(cluster_config, kubeletPath="/opt/kubernetes/v1.37/kubelet"), previous_outputs=first.outputs
    )
    for name in NODES:
        assert run.named(f"{name}-drain", DRAIN).inputs["revision"] != first.outputs["kubeletRevisions"][name]
        # Its host commands start only once its Node is drained.
        assert waited_for(run, slice_of(name), "command:remote:Command") == {f"{name}-drain"}
    # Each drain starts once the previous kubelet's Node is Ready again (its lifecycle).
    assert waited_for(run, f"{TURNS[0]}-drain", DRAIN) == set()
    for before, after in itertools.pairwise(TURNS):
        assert waited_for(run, f"{after}-drain", DRAIN) == {f"{before}-lifecycle"}


def test_max_unavailable_2_lets_two_kubelets_restart_together(cluster_config):
    config = updated(cluster_config, rollout={"maxUnavailable": 2})
    first = run_program(config)
    run = run_program(updated(config, kubeletPath="/opt/kubelet"), previous_outputs=first.outputs)
    assert waited_for(run, "numa-a-numa0-drain", DRAIN) == waited_for(run, "numa-b-numa0-drain", DRAIN) == set()
    assert waited_for(run, "numa-a-numa1-drain", DRAIN) == {"numa-a-numa0-lifecycle", "numa-b-numa0-lifecycle"}


def test_a_label_change_orders_nothing(cluster_config):
    first = run_program(cluster_config)
    config = copy.deepcopy(cluster_config)
    config["hosts"][0]["kubelets"][1]["labels"] = {"numa-slot": "moved"}
    run = run_program(config, previous_outputs=first.outputs)
    assert run.outputs["kubeletRevisions"] == first.outputs["kubeletRevisions"]
    assert all(waited_for(run, f"{name}-drain", DRAIN) == set() for name in NODES)


def test_without_drain_the_next_kubelet_waits_for_the_previous_node_to_be_ready(cluster_config):
    config = updated(cluster_config, rollout={"drain": False})
    first = run_program(config)
    assert not first.of_type(DRAIN)
    run = run_program(updated(config, kubeletPath="/opt/kubelet"), previous_outputs=first.outputs)
    for before, after in itertools.pairwise(TURNS):
        assert waited_for(run, slice_of(after), "command:remote:Command") == {f"{before}-lifecycle"}


def test_without_a_cluster_a_limited_rollout_waits_for_the_previous_kubelet_command(dev_config):
    config = updated(dev_config, rollout={"maxUnavailable": 1})
    first = run_program(config)
    run = run_program(updated(config, kubeletPath="/opt/kubelet"), previous_outputs=first.outputs)
    assert waited_for(run, "numa-a-numa0-slice", "command:remote:Command") == set()
    assert waited_for(run, "numa-a-numa1-slice", "command:remote:Command") == {"numa-a-numa0-kubelet"}
    # No limit (the default without a cluster): all at once.
    first = run_program(dev_config)
    run = run_program(updated(dev_config, kubeletPath="/opt/kubelet"), previous_outputs=first.outputs)
    assert waited_for(run, "numa-a-numa1-slice", "command:remote:Command") == set()
