"""The Kubernetes layer under the mock engine: demo pods, their provider, the probes and the placement outputs.

The mocks play the API server and the hosts: a pod lands on a node and gets a uid, a probe
reports what the host saw. By default everything is where it should be; a test changes one fact.
"""

import uuid
from collections.abc import Callable

import kubernetes_validate
import pulumi
import pytest
from kubernetes_validate.utils import latest_version

from numa_kubelets.config import load_config
from numa_kubelets.placement import demo_pods, namespace_manifest, service_account_manifest
from numa_kubelets.plan import build_plan
from tests.program import harness
from tests.program.conftest import KUBECONFIG

DEMO = "numa-kubelets:index:DemoPlacement"
POD = "kubernetes:core/v1:Pod"
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
PROVIDER = "pulumi:providers:kubernetes"
COMMAND = "command:remote:Command"
KUBERNETES_VERSIONS = ["1.30", latest_version()]


def uid_of(pod_name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, pod_name))


def secret(value: str) -> dict:
    return {harness.SECRET_SIGNATURE_KEY: harness.SECRET_SIGNATURE, "value": value}


class ClusterMocks(harness.RecordingMocks):
    """RecordingMocks plus what the API server and the hosts would report after a real create.

    `node_of` and `probe_of` take the Pulumi name of the pod's DemoPlacement (`numa-demo-<node>`,
    which its Pod and probe resources are named after): the pod's own name carries a hash."""

    def __init__(self, node_of: Callable[[str], str | None], probe_of: Callable[[str], str]) -> None:
        super().__init__()
        self.node_of = node_of
        self.probe_of = probe_of

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, state = super().new_resource(args)
        if args.typ == POD:
            state = {
                **state,
                "metadata": {**state["metadata"], "uid": uid_of(state["metadata"]["name"])},
                "spec": {**state["spec"], "nodeName": self.node_of(args.name)},
            }
        elif args.typ == COMMAND and args.name.endswith("-probe"):
            # The stricter case: stdout marked secret, as a provider could for a secret key. (1.2.1
            # leaves it plain, tests/e2e/test_command_plugin.py; the placement must be plain either way.)
            state = {**state, "stdout": secret(self.probe_of(args.name.removesuffix("-probe")))}
        return resource_id, state


def faithful_facts(config: dict) -> tuple[Callable[[str], str | None], Callable[[str], str]]:
    """Every pod on its intended kubelet; its container confined to that kubelet's CPUs and memory node."""
    plan = build_plan(load_config(config))
    kubelets = {f"numa-demo-{k.node_name}": k for k in plan.kubelets}  # by DemoPlacement name

    def node_of(pod: str) -> str:
        return kubelets[pod].node_name

    def probe_of(pod: str) -> str:
        kubelet = kubelets[pod]
        return f"container={'c' * 64} pid={4000 + kubelet.numa_node} cpus={kubelet.cpus} mems={kubelet.mems}\n"

    return node_of, probe_of


def run(monkeypatch, config: dict, mocks: ClusterMocks | None = None, preview: bool = False) -> harness.ProgramRun:
    mocks = mocks or ClusterMocks(*faithful_facts(config))
    monkeypatch.setattr(harness, "RecordingMocks", lambda **_: mocks)
    return harness.run_program(config, preview=preview)


def as_deployed(value):
    """Numbers cross the engine as doubles; the provider sends integral ones to the API as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: as_deployed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_deployed(item) for item in value]
    return value


@pytest.fixture
def demo_config(cluster_config):
    """numa-a: four kubelets with their own labels; numa-b: four defaulted ones, selected by automatic labels."""
    del cluster_config["hosts"][1]["kubelets"]
    cluster_config["demo"] = {"enabled": True, "readyTimeout": "3m"}
    return cluster_config


def node_names(config: dict) -> list[str]:
    return [k.node_name for k in build_plan(load_config(config)).kubelets]


def pod_names(config: dict) -> dict[str, str]:
    """DemoPlacement name (`numa-demo-<node>`) -> the pod's own name (with the hash of its spec)."""
    loaded = load_config(config)
    return {pod.resource_name: pod.name for pod in demo_pods(loaded, build_plan(loaded))}


# ---------------------------------------------------------------- resources


def test_one_demo_placement_with_its_pod_per_kubelet(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    expected = [f"numa-demo-{node}" for node in node_names(demo_config)]
    # Registration order is not program order (see ProgramRun.resources); the placement output's
    # order is, and test_placement_outputs_when_every_pod_is_in_place checks it.
    assert sorted(d.name for d in result.of_type(DEMO)) == sorted(expected)
    for pod in result.of_type(POD):
        assert result.parent_of(pod) == (DEMO, pod.name)
        assert pod.inputs["metadata"]["namespace"] == "numa-demo"
    selectors = {pod.name: pod.inputs["spec"]["nodeSelector"] for pod in result.of_type(POD)}
    assert selectors["numa-demo-numa-a-numa2"] == {"numa-slot": "numa-a-2"}
    assert selectors["numa-demo-numa-b-numa3"] == {"numa-kubelets.io/host": "numa-b", "numa-kubelets.io/numa-node": "3"}
    assert len(selectors) == 8


def test_every_kubernetes_resource_uses_the_stack_provider(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    [provider] = result.of_type(PROVIDER)
    assert harness.is_secret_envelope(provider.raw_inputs["kubeconfig"])
    assert provider.inputs["kubeconfig"] == KUBECONFIG
    provider_urn = next(urn for urn in result.requests if urn.endswith(f"{PROVIDER}::{provider.name}"))
    kubernetes_resources = [r for r in result.resources if r.type.startswith("kubernetes:")]
    # The namespace, the pods' ServiceAccount, eight pods, eight Node label patches, and the read
    # of the cluster's DNS Service.
    assert len(kubernetes_resources) == 19
    for resource in kubernetes_resources:
        assert result.request_of(resource).provider.startswith(provider_urn + "::"), resource.name


def test_without_a_kubeconfig_secret_the_provider_uses_the_ambient_one(monkeypatch, demo_config):
    del demo_config["kubeconfig"]
    [provider] = run(monkeypatch, demo_config).of_type(PROVIDER)
    assert "kubeconfig" not in provider.inputs


def test_the_namespace_exists_and_pods_wait_for_it_and_for_their_labelled_node(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    [namespace] = result.of_type(NAMESPACE)
    assert namespace.inputs["metadata"]["name"] == "numa-demo"
    pod = result.named("numa-demo-numa-b-numa1", POD)
    dependencies = result.dependencies_of(pod)
    # The Node's label patch, which waits for the Node to be Ready, which waits for the kubelet.
    assert {"numa-demo", "numa-b-numa1"} <= set(dependencies)
    assert not any(name.startswith("numa-b-numa0") for name in dependencies)
    assert "numa-b-numa1-lifecycle" in result.dependencies_of(
        result.named("numa-b-numa1", "kubernetes:core/v1:NodePatch")
    )


def typed_dependencies_of(result: harness.ProgramRun, resource: harness.RegisteredResource) -> set[tuple[str, str]]:
    """(type, name) of each resource it depends on: the Namespace and the ServiceAccount share names."""
    typed = (urn.split("::")[-2:] for urn in result.request_of(resource).dependencies)
    return {(qualified_type.rsplit("$", 1)[-1], name) for qualified_type, name in typed}


@pytest.mark.parametrize("namespace", [None, "placement"])
def test_one_service_account_for_the_pods_after_the_namespace_and_before_every_pod(monkeypatch, demo_config, namespace):
    # A pod naming a ServiceAccount that does not exist yet is refused; the namespace's `default`
    # comes from the controller manager some time after the namespace, so the stack makes its own.
    if namespace:
        demo_config["demo"]["namespace"] = namespace
    namespace = namespace or "numa-demo"
    result = run(monkeypatch, demo_config)
    [account] = result.of_type(SERVICE_ACCOUNT)  # once per stack, not per pod
    assert account.name == f"{namespace}/numa-demo"
    assert account.inputs["metadata"]["name"] == "numa-demo"
    assert account.inputs["metadata"]["namespace"] == namespace
    assert account.inputs["automountServiceAccountToken"] is False
    # Created after the namespace, deleted before it (the engine deletes in reverse dependency order).
    assert (NAMESPACE, namespace) in typed_dependencies_of(result, account)
    pods = result.of_type(POD)
    assert len(pods) == 8
    for pod in pods:
        assert pod.inputs["spec"]["serviceAccountName"] == "numa-demo"
        assert pod.inputs["spec"]["automountServiceAccountToken"] is False
        assert pod.inputs["metadata"]["namespace"] == namespace
        # ... and each pod after it, deleted before it.
        assert (SERVICE_ACCOUNT, account.name) in typed_dependencies_of(result, pod), pod.name


def test_pods_wait_for_readiness_within_the_configured_timeout(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    for pod in result.of_type(POD):
        request = result.request_of(pod)
        assert (request.customTimeouts.create, request.customTimeouts.update) == ("3m", "3m")
        assert request.deleteBeforeReplace  # maxPods: 1 leaves no room for the new pod beside the old
        assert "pulumi.com/skipAwait" not in pod.inputs["metadata"].get("annotations", {})
        assert "tolerations" not in pod.inputs["spec"]


def test_each_pod_is_replaced_with_a_restart_of_its_kubelet(monkeypatch, demo_config):
    """A restart drains the Node, which evicts the bare demo pod for good: the pod carries its
    kubelet's restart revision as its replacement trigger, so the same update creates it again."""
    result = run(monkeypatch, demo_config)
    triggers = {}
    for pod in result.of_type(POD):
        node = pod.name.removeprefix("numa-demo-")  # its DemoPlacement names the kubelet it is meant for
        drain = result.named(f"{node}-drain", "pulumi-python:dynamic/numa-kubelets:NodeDrain")
        triggers[node] = result.request_of(pod).replacement_trigger.string_value
        assert triggers[node] == drain.inputs["revision"], pod.name
    assert len(set(triggers.values())) == len(triggers)  # each kubelet's own


def deployed_pods(result: harness.ProgramRun) -> dict[str, dict]:
    """Pulumi name of each Pod resource -> its metadata.name, nodeSelector and the probe looking for it."""
    return {
        pod.name: {
            "pod": pod.inputs["metadata"]["name"],
            "selector": pod.inputs["spec"]["nodeSelector"],
            "probe": result.named(f"{pod.name}-probe").inputs["create"],
        }
        for pod in result.of_type(POD)
    }


def test_a_label_change_renames_that_pod_under_its_readable_prefix_and_nothing_else(monkeypatch, demo_config):
    before = deployed_pods(run(monkeypatch, demo_config))
    assert deployed_pods(run(monkeypatch, demo_config)) == before  # nothing changed: the same names
    demo_config["hosts"][0]["kubelets"][2]["labels"] = {"numa-slot": "numa-a-2-green"}
    after = deployed_pods(run(monkeypatch, demo_config))
    # The same resources (so `pulumi preview --diff` shows a replacement of that Pod) ...
    assert set(after) == set(before)
    changed = {name for name in before if after[name] != before[name]}
    assert changed == {"numa-demo-numa-a-numa2"}
    old, new = before["numa-demo-numa-a-numa2"], after["numa-demo-numa-a-numa2"]
    # ... whose new name cannot collide with the old pod's, and still reads as whose pod it is.
    assert old["pod"] != new["pod"]
    for pod in (old["pod"], new["pod"]):
        prefix, digest = pod.rsplit("-", 1)
        assert prefix == "numa-demo-numa-a-numa2" and len(digest) == 8, pod
    assert new["selector"] == {"numa-slot": "numa-a-2-green"}
    # The probe asks the host for the new pod.
    assert f'labels."io.kubernetes.pod.name"=="{new["pod"]}"' in new["probe"]
    assert old["pod"] not in new["probe"]


def test_an_image_change_renames_every_pod(monkeypatch, demo_config):
    before = deployed_pods(run(monkeypatch, demo_config))
    demo_config["demo"]["image"] = "registry.k8s.io/pause:3.9"
    after = deployed_pods(run(monkeypatch, demo_config))
    assert all(after[name]["pod"] != before[name]["pod"] for name in before)
    assert all(after[name]["pod"].startswith(name + "-") for name in before)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_deployed_manifests_are_the_core_manifests_and_valid_kubernetes(monkeypatch, demo_config, version):
    demo_config["demo"]["command"] = ["/usr/bin/sleep", "3600"]
    result = run(monkeypatch, demo_config)
    config = load_config(demo_config)
    expected = {pod.resource_name: pod.manifest() for pod in demo_pods(config, build_plan(config))}
    deployed = [r for r in result.resources if r.type in (POD, NAMESPACE, SERVICE_ACCOUNT)]
    assert len(deployed) == 10
    for resource in deployed:
        manifest = as_deployed(resource.inputs)
        if resource.type == POD:
            assert manifest == expected[resource.name]
        elif resource.type == SERVICE_ACCOUNT:
            assert manifest == service_account_manifest("numa-demo")
        else:
            assert manifest == namespace_manifest("numa-demo")
        kubernetes_validate.validate(manifest, version, strict=True)


def test_a_probe_per_pod_on_the_intended_kubelets_host(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    probes = [c for c in result.commands() if c.name.endswith("-probe")]
    assert len(probes) == 8
    probe = result.named("numa-demo-numa-b-numa2-probe")
    assert result.parent_of(probe) == (DEMO, "numa-demo-numa-b-numa2")
    assert "numa-demo-numa-b-numa2" in result.dependencies_of(probe)
    assert probe.inputs["connection"]["host"] == "192.0.2.11"
    script = probe.inputs["create"]
    assert "--address /run/containerd-numa2/containerd.sock -n k8s.io" in script
    name = pod_names(demo_config)["numa-demo-numa-b-numa2"]
    assert f'labels."io.kubernetes.pod.name"=="{name}"' in script
    assert probe.inputs["stdin"] == uid_of(name)  # a new pod re-runs the probe
    assert "delete" not in probe.inputs  # nothing to undo
    assert probe.inputs["addPreviousOutputInEnv"] is False


# ---------------------------------------------------------------- outputs and verdicts


def test_placement_outputs_when_every_pod_is_in_place(monkeypatch, demo_config):
    result = run(monkeypatch, demo_config)
    placement = result.outputs["placement"]
    names = pod_names(demo_config)
    assert [entry["pod"] for entry in placement] == [names[f"numa-demo-{n}"] for n in node_names(demo_config)]
    assert all(entry["ok"] for entry in placement)
    assert placement[1] == {
        "pod": names["numa-demo-numa-a-numa1"],
        "namespace": "numa-demo",
        "nodeSelector": {"numa-slot": "numa-a-1"},
        "nodeName": "numa-a-numa1",
        "host": "numa-a",
        "numaNode": 1,
        "expectedCpus": "9-15",
        "observedCpus": "9-15",
        "ok": True,
    }
    assert result.outputs["placementOk"] is True


def test_a_pod_on_the_wrong_kubelet_fails_the_update(monkeypatch, demo_config):
    node_of, probe_of = faithful_facts(demo_config)
    mocks = ClusterMocks(lambda pod: "numa-a-numa3" if pod == "numa-demo-numa-a-numa0" else node_of(pod), probe_of)
    with pytest.raises(pulumi.RunError) as failure:
        run(monkeypatch, demo_config, mocks)
    message = str(failure.value)
    name = pod_names(demo_config)["numa-demo-numa-a-numa0"]
    assert f"demo pod numa-demo/{name} (nodeSelector {{numa-slot: numa-a-0}})" in message
    assert "landed on numa-a-numa3; intended numa-a-numa0" in message
    assert "saw: container cccccccccccc (pid 4000) on CPUs 1-7, memory nodes 0" in message


def test_cpus_outside_the_slice_fail_the_update(monkeypatch, demo_config):
    node_of, probe_of = faithful_facts(demo_config)
    escaped = "container=abc pid=77 cpus=0-7 mems=0\n"
    mocks = ClusterMocks(node_of, lambda pod: escaped if pod == "numa-demo-numa-b-numa0" else probe_of(pod))
    with pytest.raises(pulumi.RunError, match=r"may run on CPUs 0-7; numa0.slice has CPUs 1-7"):
        run(monkeypatch, demo_config, mocks)


def test_a_preview_shows_the_verdict_without_failing(monkeypatch, demo_config):
    node_of, _ = faithful_facts(demo_config)
    result = run(monkeypatch, demo_config, ClusterMocks(node_of, lambda pod: ""), preview=True)
    assert result.outputs["placementOk"] is False
    assert {entry["observedCpus"] for entry in result.outputs["placement"]} == {None}


def test_no_demo_resources_when_the_demo_is_disabled(monkeypatch, cluster_config, dev_config):
    for config in (cluster_config, dev_config):  # disabled explicitly; no cluster at all
        result = run(monkeypatch, config, ClusterMocks(lambda pod: None, lambda pod: ""))
        assert result.of_type(DEMO) == []
        assert result.of_type(POD) == [] and result.of_type(NAMESPACE) == []
        assert result.of_type(SERVICE_ACCOUNT) == []
        assert [c for c in result.commands() if c.name.endswith("-probe")] == []
        assert set(result.outputs) == {"hosts", "kubeletRevisions"}  # no placement outputs


def test_an_ambiguous_selector_stops_the_program_before_any_resource(monkeypatch, demo_config):
    demo_config["hosts"][0]["kubelets"][3]["labels"] = {"numa-slot": "numa-a-1"}
    mocks = ClusterMocks(lambda pod: None, lambda pod: "")
    with pytest.raises(pulumi.RunError) as failure:
        run(monkeypatch, demo_config, mocks)
    assert (
        "hosts[0].kubelets[3].labels: demo selector {numa-slot: numa-a-1} "
        "also matches numa-a-numa1 (hosts[0].kubelets[1])"
    ) in str(failure.value)
    assert mocks.resources == []
