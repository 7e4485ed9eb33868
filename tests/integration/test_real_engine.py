"""The program under the REAL Pulumi engine on the emulated origin machine, joined to the session's
REAL control plane: `pulumi preview` / `up` / `refresh` / `destroy` of this repository's program
through the built CLI, its Python language host and the plugin cache of `make tools` (the
kubernetes provider itself, the conformant doubles of pulumi-command and pulumi-random).

The stack is `make demo`'s (tests/realengine/demo.py): the dev stack in namespace mode with a
cluster and the demo pods, its stack file written as a user writes it, the stack's kubeconfig set
as a secret. While an update runs, the node agent (tests/realengine/agent.py) does what a
cluster's DaemonSets would: the images into each containerd, each Node's CNI config.

Scenarios build on each other in file order (preview, a first up killed, up, secrets, re-apply,
label change, the API server down during a port change and the port change converging after it,
rolling restart of both, an interrupted update, the host lost mid-rollout, refresh after a reboot,
destroy); the fixture destroys what is left if one fails.
"""

from __future__ import annotations

import base64
import copy
import json
import shlex
import signal
from typing import Any

import pytest
import yaml
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from tests import realtools
from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import kubelet_journal, wait_for
from tests.integration.test_network_namespaces import snapshot
from tests.integration.test_real_cluster import running_container_id  # (the same demo namespace)
from tests.polling import Polling
from tests.realcluster.controlplane import ControlPlane
from tests.realengine.demo import (
    NAMESPACE,
    WORKLOAD,
    DemoStack,
    demo_stack_config,
    dev_stack_config,
    parent_interface,
    plan_of,
)
from tests.realengine.engine import UpdateFailed
from tests.realengine.relay import SshRelay
from tests.testhost.pci import pci_devices
from tests.timings import TIMINGS

# The last family it needs: the kubernetes provider comes after the CLI and the doubles.
pytestmark = pytest.mark.realtools("pulumi_kubernetes")

CPUS = {0: "1-3", 1: "5-7"}
NODES = ("numa-a-numa0", "numa-a-numa1")
UNITS = tuple(f"{kind}@numa{numa}.service" for numa in (0, 1) for kind in ("numa-netns", "containerd", "kubelet"))
HOST_COMMANDS = (
    "numa-a-preflight",
    "numa-a-host-services",
    *(f"numa-a-numa{numa}-{step}" for numa in (0, 1) for step in ("slice", "netns", "containerd", "kubelet")),
)
PROBES = tuple(f"numa-demo-numa-a-numa{numa}-probe" for numa in (0, 1))
NODE_READY_TIMEOUT = 300.0
NVME = "0x010802"  # the PCI class of an NVMe controller


@pytest.fixture(scope="module")
def deployed(numa_host, origin_kubelet, control_plane: ControlPlane, tmp_path_factory):
    realtools.require("pulumi", "pulumi-language-python")
    for plugin in ("command", "random", "kubernetes"):
        realtools.require_plugin(plugin, realtools.pins()[f"pulumi-{plugin}"])
    directory = tmp_path_factory.mktemp("real-engine")
    project = realtools.copy_project(directory / "numa-kubelets")
    demo = DemoStack(project, directory / "state", None, control_plane.admin_kubeconfig)
    view = HostView(numa_host)
    parent = parent_interface(numa_host)
    # The stack reaches the host through a relay the SSH scenario cuts; the tests reach it directly.
    relay = SshRelay(numa_host.port)
    relay.start()
    config = demo_stack_config(numa_host, parent, control_plane)
    config["hosts"][0]["sshPort"] = relay.port
    state: dict[str, Any] = {
        "host": numa_host,
        "view": view,
        "demo": demo,
        "core": demo.core,
        "config": config,
        "relay": relay,
        "parent": parent,
        "before": snapshot(view, parent),
        "plane": control_plane,
        # The session's other modules' tokens (the control plane is shared): not this stack's.
        "tokens_before": bootstrap_tokens(demo.core),
    }
    yield state
    relay.ensure_started()
    if demo.engine.created and demo.engine.resources():
        demo.destroy()
    relay.stop()
    for name in NODES:
        try:
            demo.core.delete_node(name)
        except ApiException as error:
            if error.status != 404:
                raise


def bootstrap_tokens(core: kube_client.CoreV1Api) -> set[str]:
    return {s.metadata.name for s in core.list_namespaced_secret("kube-system").items if s.type.startswith("bootstrap")}


def node_ready(node: kube_client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def main_pids(view: HostView) -> dict[str, int]:
    return {unit: view.main_pid(unit) for unit in UNITS}


def preview_steps(deployed, config: dict[str, Any]) -> dict[str, str]:
    """`pulumi preview --json` of `config`: each resource the engine would change, by name, its op."""
    engine = deployed["demo"].engine
    engine.write_config(config)
    document = json.loads(engine.stack.run("preview", "--json").stdout)
    return {
        step["urn"].rsplit("::", 1)[-1] + " " + step["urn"].rsplit("$", 1)[-1].split("::")[0]: step["op"]
        for step in document.get("steps", [])
        if step["op"] not in ("same", "read")  # (the program reads its own stack's last outputs)
    }


def secrets_of(deployed) -> dict[str, str]:
    """Every secret the stack holds, as text that must appear in no preview, output or export."""
    # A line of the key's private part (its first two base64 lines are the format's header and the
    # public key, the same in any such key).
    private_line = [line for line in deployed["host"].key_path.read_text().splitlines() if "-----" not in line][2]
    kubeconfig = yaml.safe_load(deployed["demo"].engine.secrets["kubeconfig"])
    client_key = kubeconfig["users"][0]["user"]["client-key-data"]
    found = {"ssh key": private_line, "kubeconfig client key": client_key[20:80]}
    for secret in deployed["core"].list_namespaced_secret("kube-system").items:
        if secret.type == "bootstrap.kubernetes.io/token":
            found["bootstrap token secret"] = base64.b64decode(secret.data["token-secret"]).decode()
    return found


def assert_no_secret(deployed, text: str, where: str) -> None:
    for what, value in secrets_of(deployed).items():
        assert value not in text, f"the {what} is in {where}"


def test_the_stacks_host_is_what_discover_read_from_the_machine(deployed):
    """The stack's host entry is discover's output for the booted machine (issue 44): the key its
    image made and the origin machine's topology; every later scenario applies that stack as is."""
    [entry] = deployed["config"]["hosts"]
    [declared] = dev_stack_config()["hosts"]
    assert entry["hostKey"] == " ".join(deployed["host"].host_key.split()[:2])
    topology = [{"id": node["id"], "cpus": node["cpus"]} for node in entry["numaNodes"]]
    assert (topology, entry["systemCpus"]) == (declared["numaNodes"], declared["systemCpus"])
    # The machine's NVMe drives (tests/testhost/fixtures.py ORIGIN_PCI) under their NUMA nodes, as
    # its sysfs places them.
    drives = {
        d["address"]: node["id"]
        for node in entry["numaNodes"]
        for d in node.get("pciDevices", [])
        if d["class"] == NVME
    }
    on_the_machine = {d.address: d.numa_node for d in pci_devices(deployed["host"]) if d.pci_class == NVME}
    assert drives == {a: n for a, n in on_the_machine.items() if n >= 0} and sorted(drives.values()) == [0, 1, 1]


def test_a_fresh_stacks_preview_names_every_host_resource_and_shows_no_secret(deployed):
    demo, view = deployed["demo"], deployed["view"]
    text = demo.engine.preview(deployed["config"])
    for name in (*HOST_COMMANDS, *PROBES):
        assert f"::{name}]" in text, name
    # Each script by its first line, as a reviewer reads it.
    assert "numa0.slice on host numa-a: CPUs 1-3, memory node 0" in text
    assert "numa1.slice on host numa-a: CPUs 5-7, memory node 1" in text
    assert "+ 40 to create" in text, text[-2000:]
    assert_no_secret(deployed, text, "the preview")
    assert not view.exists("/etc/systemd/system/numa0.slice"), "a preview changed the host"


def pending_creates(deployed) -> set[str]:
    """The resources the engine's state holds as still being created, by name."""
    deployment = json.loads(deployed["demo"].stack.export())["deployment"]
    return {
        operation["resource"]["urn"].rsplit("::", 1)[-1]
        for operation in deployment.get("pending_operations") or []
        if operation["type"] == "creating"
    }


def test_a_first_up_killed_while_creating_is_finished_by_the_next(deployed, stopwatch):
    """The CLI killed (SIGKILL, a runner lost) while the first `pulumi up` creates a kubelet: what the
    state holds, what the next `pulumi up` demands and does, and `pulumi refresh
    --clear-pending-creates` for the engine's record (docs/rolling-changes.md "When an update is interrupted")."""
    demo = deployed["demo"]
    demo.engine.write_config(deployed["config"])
    with stopwatch("real engine: a first up killed during a kubelet's create"):
        killed = demo.engine.interrupted_up(signal.SIGKILL, "numa-a-numa1-kubelet")
    assert killed.returncode == -signal.SIGKILL
    demo.stack.run("cancel", "--yes")  # the killed CLI's lock (shown refused in the SIGKILL scenario below)
    pending = pending_creates(deployed)
    TIMINGS.append((f"real engine: pending creates after the kill: {', '.join(sorted(pending))}", 0.0))
    assert "numa-a-numa1-kubelet" in pending, pending
    created = set(demo.engine.commands())
    assert created < set(HOST_COMMANDS) and not pending & created
    deployed["created_by_the_killed_up"] = created
    deployed["pending"] = pending


def test_up_joins_both_kubelets_and_proves_each_demo_pods_placement(deployed, stopwatch):
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    with stopwatch("real engine: pulumi up of the demo stack (cluster, namespace mode, demo pods)"):
        steps = demo.up(deployed["host"], deployed["config"])
    # The killed update's pending creates are no obstacle: the engine warns and creates them again
    # (their scripts are idempotent), with everything the killed update had not reached.
    assert "pending operations from previous deployment" in demo.engine.last_output
    created = deployed["created_by_the_killed_up"]
    assert sorted([*created, *(name for name, _ in steps)]) == sorted((*HOST_COMMANDS, *PROBES))
    assert {op for _, op in steps} == {"create"}
    # The engine keeps its record of them until it is told to drop it.
    assert pending_creates(deployed) == deployed["pending"]
    demo.stack.run("refresh", "--yes", "--skip-preview", "--clear-pending-creates")
    assert pending_creates(deployed) == set()
    outputs = demo.stack.outputs()
    assert outputs["placementOk"] is True
    verdicts = {verdict["numaNode"]: verdict for verdict in outputs["placement"]}
    for numa, cpus in CPUS.items():
        verdict = verdicts[numa]
        assert (verdict["nodeName"], verdict["observedCpus"], verdict["ok"]) == (f"numa-a-numa{numa}", cpus, True)
    plan = plan_of(deployed["config"])
    for kubelet in plan.kubelets:
        node = core.read_node(kubelet.node_name)
        assert node_ready(node), node.status.conditions
        assert {**kubelet.identity_labels, **kubelet.label_map}.items() <= node.metadata.labels.items()
    # The origin experiment's picture: each demo pod's container under its NUMA node's slice.
    report = demo.report(deployed["host"])
    for numa in CPUS:
        assert f"numa{numa}-kubepods.slice" in report
    assert sum(line.endswith(f" {WORKLOAD}") for line in report.splitlines()) == 2, report
    deployed["pids"] = main_pids(view)
    deployed["pods"] = {pod.metadata.name: pod.metadata.uid for pod in core.list_namespaced_pod(NAMESPACE).items}


def test_no_secret_in_the_outputs_or_the_exported_state(deployed):
    demo = deployed["demo"]
    assert "bootstrap token secret" in secrets_of(deployed), "the stack's managed token is not in the cluster"
    assert_no_secret(deployed, demo.stack.export(), "`pulumi stack export`")
    assert_no_secret(deployed, demo.stack.run("stack", "output", "--json").stdout, "`pulumi stack output`")


def test_a_second_up_changes_and_restarts_nothing(deployed):
    demo, view = deployed["demo"], deployed["view"]
    demo.stack.run("preview", "--expect-no-changes")
    # --skip-preview: the preview just run is the one `up` would run first (here and below).
    assert demo.up(deployed["host"], deployed["config"], "--skip-preview") == []
    assert main_pids(view) == deployed["pids"]
    pods = {pod.metadata.name: pod.metadata.uid for pod in deployed["core"].list_namespaced_pod(NAMESPACE).items}
    assert pods == deployed["pods"]


def test_a_label_change_previews_the_node_patch_and_no_host_command(deployed):
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    changed = copy.deepcopy(deployed["config"])
    changed["hosts"][0]["kubelets"][0]["labels"] = {"numa-type": "green", "rack": "r7"}  # was {numa-type: red}
    # The Node's labels change through the API; the kubelet and its host are left alone. The demo
    # pod selects its Node by the kubelet's labels (numa_kubelets/placement.py): a pod's selector
    # cannot change, so that pod is replaced and probed again.
    assert preview_steps(deployed, changed) == {
        "numa-a-numa0 kubernetes:core/v1:NodePatch": "update",
        "numa-demo-numa-a-numa0 kubernetes:core/v1:Pod": "replace",
        "numa-demo-numa-a-numa0-probe command:remote:Command": "update",
    }
    assert demo.up(deployed["host"], changed, "--skip-preview") == [("numa-demo-numa-a-numa0-probe", "update")]
    labels = core.read_node("numa-a-numa0").metadata.labels
    assert (labels["numa-type"], labels["rack"]) == ("green", "r7")
    assert demo.stack.outputs()["placementOk"] is True
    # Back as it was: the label the stack no longer declares goes with its owner.
    assert demo.up(deployed["host"], deployed["config"]) == [("numa-demo-numa-a-numa0-probe", "update")]
    labels = core.read_node("numa-a-numa0").metadata.labels
    assert labels["numa-type"] == "red" and "rack" not in labels
    assert main_pids(view) == deployed["pids"]
    deployed["pods"] = {pod.metadata.name: pod.metadata.uid for pod in core.list_namespaced_pod(NAMESPACE).items}


def restarted(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return [unit for unit in UNITS if after[unit] != before[unit]]


def port_changed(config: dict[str, Any]) -> dict[str, Any]:
    """The stack with numa1's kubelet on another port: a change that restarts that kubelet alone."""
    changed = copy.deepcopy(config)
    changed["hosts"][0]["kubelets"][1]["port"] = 10260
    return changed


def test_an_update_while_the_api_server_is_down_fails_naming_it_and_changes_nothing(deployed):
    """The API server stopped, a change that restarts a kubelet (the port change of the next test):
    the update fails before anything changes on the host, naming the server's address. The next
    test's update of the same change, with the server back, is the next update that converges."""
    demo, view, plane = deployed["demo"], deployed["view"], deployed["plane"]
    plane.stop_apiserver()
    try:
        with pytest.raises(UpdateFailed) as failure:
            demo.up(deployed["host"], port_changed(deployed["config"]))
        TIMINGS.append(("real engine: the error with the API server down: " + error_line(failure.value.output), 0.0))
        assert f"127.0.0.1:{plane.port}" in failure.value.output, failure.value.output[-3000:]
        assert failure.value.steps == []  # no host command ran
        assert main_pids(view) == deployed["pids"]
    finally:
        plane.start_apiserver_again()


def test_a_port_change_restarts_that_kubelet_alone_and_replaces_its_demo_pod(deployed, stopwatch):
    """Right after the update the API server's outage failed: the same change converges now."""
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    changed = port_changed(deployed["config"])
    previewed = preview_steps(deployed, changed)
    assert previewed["numa-a-numa1-kubelet command:remote:Command"] == "update"
    assert previewed["numa-a-numa1-drain pulumi-python:dynamic/numa-kubelets:NodeDrain"] == "update"
    # The drain evicts numa1's bare demo pod: it is replaced (and probed again) in the same update.
    assert previewed["numa-demo-numa-a-numa1 kubernetes:core/v1:Pod"] == "replace"
    assert not any("numa0" in name for name in previewed), previewed
    with stopwatch("real engine: a port change (drain, restart, Ready, demo pod again)"):
        steps = demo.up(deployed["host"], changed, "--skip-preview")
    assert steps == [("numa-a-numa1-kubelet", "update"), ("numa-demo-numa-a-numa1-probe", "update")], steps
    after = main_pids(view)
    assert restarted(deployed["pids"], after) == ["kubelet@numa1.service"]
    assert view.sh("ip netns exec numa1 ss -Hltn 'sport = :10260' | wc -l") != "0"
    pods = {pod.metadata.name: pod for pod in core.list_namespaced_pod(NAMESPACE).items}
    assert set(pods) == set(deployed["pods"])  # the same names: the spec did not change
    renewed = [name for name, pod in pods.items() if pod.metadata.uid != deployed["pods"][name]]
    assert renewed == [name for name in pods if "numa-a-numa1" in name], renewed
    assert demo.stack.outputs()["placementOk"] is True
    node = core.read_node("numa-a-numa1")
    assert node_ready(node) and not node.spec.unschedulable
    deployed["config"], deployed["pids"] = changed, after
    deployed["pods"] = {name: pod.metadata.uid for name, pod in pods.items()}


def test_a_change_to_both_kubelets_restarts_them_one_after_the_other(deployed, stopwatch):
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    changed = copy.deepcopy(deployed["config"])
    for kubelet in changed["hosts"][0]["kubelets"]:
        kubelet["maxPods"] = 3
    unschedulable_at_once = []
    samples: list[dict[str, bool]] = []

    def sample() -> None:
        state = {name: bool(core.read_node(name).spec.unschedulable) for name in NODES}
        samples.append(state)
        if all(state.values()):
            unschedulable_at_once.append(state)

    with (
        stopwatch("real engine: both kubelets restarted, one NUMA node at a time"),
        Polling(sample, 0.5, once_more=True),
    ):
        steps = demo.up(deployed["host"], changed)
    kubelets = [name for name, _ in steps if name.endswith("-kubelet")]
    assert sorted(kubelets) == ["numa-a-numa0-kubelet", "numa-a-numa1-kubelet"], steps
    assert unschedulable_at_once == [], "both NUMA nodes were cordoned at once"
    assert all(any(s[name] for s in samples) for name in NODES), "a Node was never cordoned (drained)"
    # The second kubelet restarted after the first one's Node was Ready again: its unit started later.
    first, second = (int(k.split("numa-a-numa")[1][0]) for k in kubelets)
    assert int(view.started_at(f"kubelet@numa{second}.service")) > int(view.started_at(f"kubelet@numa{first}.service"))
    after = main_pids(view)
    assert sorted(restarted(deployed["pids"], after)) == ["kubelet@numa0.service", "kubelet@numa1.service"]
    assert demo.stack.outputs()["placementOk"] is True
    for name in NODES:
        node = core.read_node(name)
        assert node_ready(node) and not node.spec.unschedulable
    TIMINGS.append((f"real engine: samples of the Nodes during the rolling restart: {len(samples)}", 0.0))
    deployed["config"], deployed["pids"] = changed, after


def test_an_interrupted_up_converges_on_the_next_one(deployed, stopwatch):
    """Ctrl-C (SIGINT) while the kubelet's command runs, then a SIGKILL of the CLI at the same point of
    a second run, with the engine's checkpoints on as in a user's own `pulumi up`: what the CLI
    says and demands, and the next `pulumi up` converging (the scripts are idempotent)."""
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    changed = copy.deepcopy(deployed["config"])
    changed["hosts"][0]["kubelets"][0]["maxPods"] = 4
    demo.engine.write_config(changed)
    with stopwatch("real engine: an up interrupted with SIGINT during the kubelet step"):
        interrupted = demo.engine.interrupted_up(signal.SIGINT, "numa-a-numa0-kubelet")
    # The CLI finishes the step under way, starts no other, and fails the update.
    assert interrupted.returncode != 0, interrupted.stdout[-3000:]
    assert "received; cancelling" in interrupted.stdout and "update canceled" in interrupted.stdout
    assert "numa-a-numa0-kubelet updated" in interrupted.stdout
    # Drained for the restart, its NodeLifecycle (which uncordons) never ran: cordoned until the next up.
    assert core.read_node("numa-a-numa0").spec.unschedulable
    with stopwatch("real engine: the next up after the SIGINT"):
        steps = demo.up(deployed["host"], changed)
    assert "numa-a-numa0-kubelet" not in dict(steps), steps  # it had finished: nothing to redo
    assert not core.read_node("numa-a-numa0").spec.unschedulable
    assert demo.stack.outputs()["placementOk"] is True

    changed["hosts"][0]["kubelets"][0]["maxPods"] = 5
    demo.engine.write_config(changed)
    killed = demo.engine.interrupted_up(signal.SIGKILL, "numa-a-numa0-kubelet")
    assert killed.returncode == -signal.SIGKILL
    # The killed CLI's lock stays: the next update is refused, naming `pulumi cancel`.
    with pytest.raises(UpdateFailed) as refused:
        demo.up(deployed["host"], changed)
    assert "the stack is currently locked" in refused.value.output and "pulumi cancel" in refused.value.output
    assert refused.value.steps == []
    demo.stack.run("cancel", "--yes")
    with stopwatch("real engine: the next up after the SIGKILL and `pulumi cancel`"):
        steps = demo.up(deployed["host"], changed)
    # The interrupted step is a pending operation the engine warns of, and runs again.
    assert "pending operations from previous deployment" in demo.engine.last_output
    assert ("numa-a-numa0-kubelet", "update") in steps, steps
    assert "maxPods: 5" in view.sh("cat /etc/numa-kubelets/numa0/kubelet-config.yaml")
    assert view.sh("ls /run/numa-kubelets/pending 2>/dev/null || true") == ""
    demo.stack.run("preview", "--expect-no-changes")
    assert demo.stack.outputs()["placementOk"] is True
    node = core.read_node("numa-a-numa0")
    assert node_ready(node) and not node.spec.unschedulable
    deployed["config"], deployed["pids"] = changed, main_pids(view)


KUBELET_STEPS = tuple(f"numa-a-numa{numa}-kubelet" for numa in (0, 1))


def test_a_host_lost_mid_rollout_stops_it_at_that_step_and_the_next_up_resumes(deployed, stopwatch):
    """A change that restarts both kubelets; the host stops answering SSH (the relay cut) as soon
    as the engine starts the first kubelet's step. The update fails naming that step, the second
    kubelet is never touched; with SSH back, the next update re-runs the step and goes on."""
    demo, view, core, relay = deployed["demo"], deployed["view"], deployed["core"], deployed["relay"]
    changed = copy.deepcopy(deployed["config"])
    for kubelet in changed["hosts"][0]["kubelets"]:
        kubelet["maxPods"] = 6
    cut: list[str] = []

    def lose_the_host(step: str) -> None:
        relay.cut()
        cut.append(step)

    try:
        with stopwatch("real engine: an update that loses the host mid-step"), pytest.raises(UpdateFailed) as failure:
            # No preview first: its events would name the step before the update reaches it.
            demo.up(deployed["host"], changed, "--skip-preview", when_started=(KUBELET_STEPS, lose_the_host))
    finally:
        relay.ensure_started()
    [first] = cut
    [second] = [step for step in KUBELET_STEPS if step != first]
    output = failure.value.output
    TIMINGS.append(("real engine: the error with the host lost: " + error_line(output), 0.0))
    assert f"command:remote:Command ({first}):" in output, output[-3000:]
    # Lost while connecting (refused, retried) or while the script ran (the session ended).
    assert f"127.0.0.1:{relay.port}" in output or "without exit status" in output, output[-3000:]
    assert first not in dict(failure.value.steps) and second not in dict(failure.value.steps)
    # The rollout stopped there: the other kubelet untouched, its Node never drained.
    second_unit = f"kubelet@numa{KUBELET_STEPS.index(second)}.service"
    assert view.main_pid(second_unit) == deployed["pids"][second_unit]
    assert not core.read_node(second.removesuffix("-kubelet")).spec.unschedulable
    # The first one's Node, drained before its step, stays cordoned until an update finishes it.
    assert core.read_node(first.removesuffix("-kubelet")).spec.unschedulable
    with stopwatch("real engine: the next up with the host back"):
        steps = demo.up(deployed["host"], changed)
    kubelets = [name for name, _ in steps if name.endswith("-kubelet")]
    assert kubelets == [first, second], steps
    for numa in CPUS:
        assert "maxPods: 6" in view.sh(f"cat /etc/numa-kubelets/numa{numa}/kubelet-config.yaml")
    assert view.sh("ls /run/numa-kubelets/pending 2>/dev/null || true") == ""
    for name in NODES:
        node = core.read_node(name)
        assert node_ready(node) and not node.spec.unschedulable
    assert demo.stack.outputs()["placementOk"] is True
    demo.stack.run("preview", "--expect-no-changes")
    deployed["config"], deployed["pids"] = changed, main_pids(view)


def error_line(output: str) -> str:
    """The first `error:` line of the CLI's output, for the timings' report."""
    return next((line.split("error:", 1)[1].strip() for line in output.splitlines() if "error:" in line), "(none)")[
        :160
    ]


# What a refresh may find changed after a reboot: the live status the kubernetes provider keeps in
# a Pod's and a patched Node's outputs (new containers, a new boot id), and the program's read of
# its own stack's last outputs (read again by every update). Nothing else may change.
LIVE_STATUS_TYPES = {"kubernetes:core/v1:Pod", "kubernetes:core/v1:NodePatch", "pulumi:pulumi:StackReference"}


def test_refresh_after_a_reboot_reports_no_drift(deployed, stopwatch):
    """The host rebooted: each namespace, runtime and kubelet is back, each demo pod runs again in a
    new container on its NUMA node's CPUs, and `pulumi refresh` then `pulumi preview` find nothing
    for the program to do (the replay-tier's reboot checks of the cluster, here under the engine)."""
    demo, host, view, core = deployed["demo"], deployed["host"], deployed["view"], deployed["core"]
    boot_ids = {name: core.read_node(name).status.node_info.boot_id for name in NODES}
    uids = {pod.metadata.name: pod.metadata.uid for pod in core.list_namespaced_pod(NAMESPACE).items}
    assert len(uids) == len(NODES), uids
    containers = {name: running_container_id(core, name) for name in uids}
    with stopwatch("real engine: host reboot, Nodes Ready again"):
        host.reboot()
        for numa, name in enumerate(NODES):
            wait_for(
                f"Node {name} Ready with a new boot id",
                lambda n=name: (node := core.read_node(n)).status.node_info.boot_id != boot_ids[n] and node_ready(node),
                NODE_READY_TIMEOUT,
                lambda n=numa: kubelet_journal(view, n),
            )
    with stopwatch("real engine: the demo pods running again after the reboot"):
        for name in uids:
            wait_for(
                f"pod {name} running in a new container",
                lambda n=name: running_container_id(core, n) not in (None, containers[n]),
                NODE_READY_TIMEOUT,
                lambda: kubelet_journal(view, 0) + kubelet_journal(view, 1),
            )
    pods = {pod.metadata.name: pod.metadata.uid for pod in core.list_namespaced_pod(NAMESPACE).items}
    assert pods == uids  # the same pods, bound to their Nodes
    # Each NUMA node's namespace rebuilt before its runtime, each demo container on its CPUs again.
    for numa in CPUS:
        assert view.sh(f"ip -n numa{numa} route show default").startswith("default via ")
        for unit in (f"containerd@numa{numa}.service", f"kubelet@numa{numa}.service"):
            assert view.active(unit), unit
    sleepers = view.sh(f"pgrep -fx {shlex.quote(WORKLOAD)}").split()
    confined = {}
    for pid in sleepers:
        [numa] = [n for n in CPUS if f"/numa{n}.slice/" in view.sh(f"cat /proc/{pid}/cgroup")]
        confined[numa] = view.process_status(int(pid))["Cpus_allowed_list"]
    assert confined == CPUS, confined
    before = {resource["urn"]: resource.get("outputs") for resource in demo.engine.resources()}
    demo.stack.run("refresh", "--yes", "--skip-preview")
    after = {resource["urn"]: resource for resource in demo.engine.resources()}
    assert set(after) == set(before)
    changed = sorted(urn for urn, resource in after.items() if resource.get("outputs") != before[urn])
    TIMINGS.append((f"real engine: refreshed after the reboot with new outputs: {len(changed)}", 0.0))
    assert {after[urn]["type"] for urn in changed} <= LIVE_STATUS_TYPES, changed
    demo.stack.run("preview", "--expect-no-changes")


def test_destroy_leaves_the_host_as_it_was_and_no_node(deployed, stopwatch):
    demo, view, core = deployed["demo"], deployed["view"], deployed["core"]
    with stopwatch("real engine: pulumi destroy"):
        steps = demo.destroy()
    # Every command goes (the preflight's and the probes' have no delete script: nothing to undo).
    assert sorted(name for name, _ in steps) == sorted((*HOST_COMMANDS, *PROBES))
    assert snapshot(view, deployed["parent"]) == deployed["before"]
    assert view.sh("systemctl list-units --all --plain --no-legend 'kubelet@*' 'containerd@*' 'numa*'") == ""
    for path in ("/etc/numa-kubelets", "/var/lib/numa-kubelets", "/etc/netns", "/run/numa-kubelets"):
        assert not view.exists(path), path
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0-7"
    assert [node.metadata.name for node in core.list_node().items if node.metadata.name in NODES] == []
    assert bootstrap_tokens(core) == deployed["tokens_before"]  # the stack's managed token went
    with pytest.raises(ApiException) as gone:
        core.read_namespace(NAMESPACE)
    assert gone.value.status == 404 or (core.read_namespace(NAMESPACE).status.phase == "Terminating")
