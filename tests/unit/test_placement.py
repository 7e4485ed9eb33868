"""Demo pods, their validation, the host probe and the placement verdict (numa_kubelets/placement.py)."""

import dataclasses
import os
import re
import shlex
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
from kubernetes_validate.utils import latest_version

from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.placement import (
    StackKubelets,
    check_demo,
    demo_pods,
    demo_problems,
    judge_placement,
    kubelet_config_paths,
    namespace_manifest,
    parse_probe_output,
    probe_scripts,
    selector_problems,
    service_account_manifest,
    spec_hash,
)
from numa_kubelets.plan import build_plan
from tests.unit.builders import origin_config, origin_host, with_cluster

# The oldest kubelet the docs support (kubeletVersion), and the newest schema kubernetes-validate ships.
KUBERNETES_VERSIONS = ["1.30", latest_version()]
UID = "6f1c2a9e-3b4d-4e5f-8a7b-0c1d2e3f4a5b"


def origin_with_colors(**demo):
    """The origin machine joining a cluster: numa0 is red (CPUs 1-3, mem 0), numa1 is blue (CPUs 5-7, mem 1)."""
    host = origin_host(
        systemCpus="0,4",
        kubelets=[{"numaNode": 0, "labels": {"numa-type": "red"}}, {"numaNode": 1, "labels": {"numa-type": "blue"}}],
    )
    return with_cluster(origin_config(hosts=[host], demo={"enabled": True, **demo}))


def loaded(raw):
    config = load_config(raw)
    return config, build_plan(config)


@pytest.fixture
def origin():
    config, plan = loaded(origin_with_colors())
    red, blue = demo_pods(config, plan)
    return plan, red, blue


# ---------------------------------------------------------------- pods and manifests


POD_NAME = re.compile(r"(?P<prefix>numa-demo-[a-z0-9-]+)-(?P<hash>[0-9a-f]{8})")


def test_one_pod_per_kubelet_selected_by_its_labels(origin):
    _plan, red, blue = origin
    assert (red.resource_name, red.kubelet.node_name) == ("numa-demo-numa-a-numa0", "numa-a-numa0")
    assert red.selector == {"numa-type": "red"}
    assert (blue.resource_name, blue.selector) == ("numa-demo-numa-a-numa1", {"numa-type": "blue"})
    manifest = red.manifest()
    assert manifest["metadata"] == {
        "name": red.name,
        "namespace": "numa-demo",
        "labels": {
            "app.kubernetes.io/name": "numa-demo",
            "app.kubernetes.io/managed-by": "numa-kubelets",
            "numa-kubelets.io/expected-node": "numa-a-numa0",
        },
    }
    spec = manifest["spec"]
    assert spec["nodeSelector"] == {"numa-type": "red"}
    assert "tolerations" not in spec
    [container] = spec["containers"]
    assert container["image"] == "registry.k8s.io/pause:3.10"
    assert "command" not in container  # the image's own entrypoint
    assert container["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}


def test_pods_run_as_their_own_service_account_without_an_api_token(origin):
    # Not the namespace's `default`: the controller manager makes it some time after the namespace,
    # and the API server refuses a pod whose ServiceAccount does not exist yet. The stack makes this one.
    _plan, red, blue = origin
    for pod in (red, blue):
        spec = pod.manifest()["spec"]
        assert spec["serviceAccountName"] == "numa-demo"
        assert spec["automountServiceAccountToken"] is False
        assert "serviceAccount" not in spec  # the deprecated alias
    assert service_account_manifest("numa-demo") == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "numa-demo",
            "namespace": "numa-demo",
            "labels": {"app.kubernetes.io/name": "numa-demo", "app.kubernetes.io/managed-by": "numa-kubelets"},
        },
        "automountServiceAccountToken": False,
    }


def test_a_pod_is_named_after_its_kubelet_and_a_hash_of_its_spec(origin):
    _plan, red, blue = origin
    match = POD_NAME.fullmatch(red.name)
    assert match is not None and match["prefix"] == red.resource_name == "numa-demo-numa-a-numa0"
    assert match["hash"] == spec_hash(red.manifest()["spec"])
    assert red.name != blue.name and blue.name.startswith("numa-demo-numa-a-numa1-")
    assert red.probe_name == "numa-demo-numa-a-numa0-probe"  # the probe's Pulumi name stays readable


def test_the_same_spec_gives_the_same_name_and_another_spec_another_name(origin):
    _plan, red, _ = origin
    config, again = loaded(origin_with_colors())
    assert demo_pods(config, again)[0].name == red.name  # nothing changed, nothing renamed
    green = tuple((key, "green" if key == "numa-type" else value) for key, value in red.kubelet.labels)
    changes = {
        "selector": dataclasses.replace(red, kubelet=dataclasses.replace(red.kubelet, labels=green)),
        "image": dataclasses.replace(red, image="quay.io/fedora/fedora:41"),
        "command": dataclasses.replace(red, command=("/usr/bin/sleep", "3600")),
    }
    names = {what: pod.name for what, pod in changes.items()}
    for what, name in names.items():
        assert name != red.name, what
        assert name.startswith(red.resource_name + "-"), what
    assert len(set(names.values())) == len(names)
    # The readiness timeout is no part of the pod: the same name.
    assert dataclasses.replace(red, ready_timeout="1h").name == red.name


def test_the_hash_ignores_key_order_only():
    assert spec_hash({"a": 1, "b": [1, 2]}) == spec_hash({"b": [1, 2], "a": 1})
    assert spec_hash({"a": 1, "b": [1, 2]}) != spec_hash({"a": 1, "b": [2, 1]})
    assert re.fullmatch(r"[0-9a-f]{8}", spec_hash({}))


def test_kubelets_without_labels_are_selected_by_host_and_numa_node():
    config, plan = loaded(with_cluster(origin_config()))
    assert config.demo_enabled
    assert [pod.selector for pod in demo_pods(config, plan)] == [
        {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "0"},
        {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "1"},
    ]


def test_configured_image_command_and_namespace():
    config, plan = loaded(
        origin_with_colors(namespace="placement", image="quay.io/fedora/fedora:41", command=["/usr/bin/sleep", "3600"])
    )
    manifest = demo_pods(config, plan)[0].manifest()
    assert manifest["metadata"]["namespace"] == "placement"
    assert service_account_manifest("placement")["metadata"]["namespace"] == "placement"
    assert manifest["spec"]["containers"][0]["image"] == "quay.io/fedora/fedora:41"
    assert manifest["spec"]["containers"][0]["command"] == ["/usr/bin/sleep", "3600"]


def test_no_pods_without_the_demo():
    config, plan = loaded(origin_with_colors(enabled=False))
    assert demo_pods(config, plan) == ()
    config, plan = loaded(origin_config())  # no cluster: the demo defaults to off
    assert demo_pods(config, plan) == ()


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_validate_against_the_kubernetes_schema(version):
    config, plan = loaded(origin_with_colors(command=["/usr/bin/sleep", "3600"]))
    manifests = [pod.manifest() for pod in demo_pods(config, plan)]
    manifests += [namespace_manifest("numa-demo"), service_account_manifest("numa-demo")]
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_schema_validation_catches_a_typo():
    config, plan = loaded(origin_with_colors())
    manifest = demo_pods(config, plan)[0].manifest()
    manifest["spec"]["nodeSelecter"] = manifest["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, latest_version(), strict=True)


# ---------------------------------------------------------------- validation


def two_hosts(a_kubelets, b_kubelets):
    hosts = [
        origin_host(name="numa-a", kubelets=a_kubelets),
        origin_host(name="numa-b", address="192.0.2.11", kubelets=b_kubelets),
    ]
    return with_cluster(origin_config(hosts=hosts))


def test_a_selector_matching_another_kubelet_is_a_config_error():
    raw = two_hosts(
        [{"numaNode": 0, "labels": {"numa-type": "blue"}}, {"numaNode": 1, "labels": {"numa-type": "red"}}],
        [{"numaNode": 0, "labels": {"numa-type": "red"}}, {"numaNode": 1, "labels": {"numa-type": "green"}}],
    )
    config, plan = loaded(raw)
    assert [str(p) for p in demo_problems(config, plan)] == [
        "hosts[0].kubelets[1].labels: demo selector {numa-type: red} also matches numa-b-numa0 (hosts[1].kubelets[0])",
        "hosts[1].kubelets[0].labels: demo selector {numa-type: red} also matches numa-a-numa1 (hosts[0].kubelets[1])",
    ]
    with pytest.raises(ConfigError, match=r"hosts\[0\]\.kubelets\[1\]\.labels: demo selector"):
        check_demo(config, plan)


def test_only_the_selector_that_is_a_subset_is_ambiguous():
    raw = two_hosts(
        [{"numaNode": 0, "labels": {"numa-type": "red"}}],
        [{"numaNode": 0, "labels": {"numa-type": "red", "tier": "gold"}}],
    )
    config, plan = loaded(raw)
    assert [str(p) for p in demo_problems(config, plan)] == [
        "hosts[0].kubelets[0].labels: demo selector {numa-type: red} also matches numa-b-numa0 (hosts[1].kubelets[0])"
    ]


def test_a_selector_matching_no_kubelet_is_reported():
    config, plan = loaded(origin_with_colors())
    red = plan.kubelets[0]
    problems = selector_problems(red, {"numa-type": "green"}, StackKubelets(plan), kubelet_config_paths(config, plan))
    assert [str(p) for p in problems] == [
        "hosts[0].kubelets[0].labels: demo selector {numa-type: green} does not match its kubelet numa-a-numa0"
    ]


def test_automatic_selectors_are_never_ambiguous():
    raw = two_hosts(None, None)
    config, plan = loaded(raw)
    assert demo_problems(config, plan) == []


def test_ambiguity_does_not_matter_without_the_demo():
    red = [{"numaNode": 0, "labels": {"numa-type": "red"}}]
    raw = two_hosts(red, red)
    raw["demo"] = {"enabled": False}
    config, plan = loaded(raw)
    assert demo_problems(config, plan) == []


@pytest.mark.parametrize("namespace", ["default", "kube-system"])
def test_a_shared_namespace_is_refused(namespace):
    config, plan = loaded(origin_with_colors(namespace=namespace))
    assert [p.path for p in demo_problems(config, plan)] == ["demo.namespace"]


def test_a_node_name_too_long_for_a_label_value_is_refused():
    long_name = "numa-kubelet-zero." + "n" * 40 + ".example.internal"  # a valid DNS name of 75 characters
    host = origin_host(kubelets=[{"numaNode": 0, "nodeName": long_name}])
    config, plan = loaded(with_cluster(origin_config(hosts=[host])))
    [problem] = demo_problems(config, plan)
    assert problem.path == "hosts[0].kubelets[0].nodeName"
    assert "longer than 63 characters" in problem.message


# ---------------------------------------------------------------- verdict


def reading(cpus, mems, container="3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2", pid=4242):
    return f"container={container} pid={pid} cpus={cpus} mems={mems}\n"


def test_a_pod_where_it_should_be_is_ok(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", reading("1-3", "0"))
    assert verdict.ok, verdict.reasons
    assert verdict.output() == {
        "pod": red.name,
        "namespace": "numa-demo",
        "nodeSelector": {"numa-type": "red"},
        "nodeName": "numa-a-numa0",
        "host": "numa-a",
        "numaNode": 0,
        "expectedCpus": "1-3",
        "observedCpus": "1-3",
        "ok": True,
    }


def test_a_container_on_part_of_the_slice_is_ok_and_observed_cpus_are_the_union(origin):
    # e.g. a Guaranteed pod pinned by the static CPU manager: a subset is inside the slice.
    plan, red, _ = origin
    stdout = reading("1", "0", container="aaa", pid=10) + reading("3", "0", container="bbb", pid=11)
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", stdout)
    assert verdict.ok and verdict.output()["observedCpus"] == "1,3"


def test_a_pod_on_the_other_kubelet_is_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa1", "")
    assert not verdict.ok
    assert "it runs on numa-a-numa1 (host numa-a, NUMA node 1), not on numa-a-numa0" in verdict.reasons
    assert any("do not satisfy the nodeSelector {numa-type: red}" in r for r in verdict.reasons)
    assert verdict.output()["nodeName"] == "numa-a-numa1" and verdict.output()["ok"] is False


def test_a_pod_on_a_node_outside_the_stack_is_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "worker-7", "")
    assert "it runs on node worker-7, which is not a kubelet of this stack" in verdict.reasons


def test_a_pod_without_a_node_is_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), None, reading("1-3", "0"))
    assert verdict.reasons == ("the API reports no node for the pod (spec.nodeName is empty)",)


def test_cpus_outside_the_slice_are_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", reading("0-3", "0"))
    [reason] = verdict.reasons
    assert "may run on CPUs 0-3; numa0.slice has CPUs 1-3" in reason
    assert verdict.output()["observedCpus"] == "0-3"


def test_a_memory_node_outside_the_slice_is_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", reading("1-3", "0-1"))
    [reason] = verdict.reasons
    assert "may allocate on memory nodes 0-1; numa0.slice has memory node 0" in reason


def test_no_container_on_the_host_is_wrong(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", "\n")
    assert verdict.reasons == (
        "no running container of the pod was found through /run/containerd-numa0/containerd.sock on host numa-a",
    )
    assert verdict.output()["observedCpus"] is None


@pytest.mark.parametrize(
    "stdout",
    [
        "ctr: failed to dial\n",
        "container=abc pid=12 cpus=1-x mems=0\n",
        "container=abc pid=12 cpus=3-1 mems=0\n",
        "container=abc pid=12 cpus=1-3\n",
        "container=abc pid=zero cpus=1-3 mems=0\n",
    ],
)
def test_unparsable_host_output_is_wrong(origin, stdout):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa0", stdout)
    assert verdict.reasons == (f"unparsable line from host numa-a: {stdout.strip()!r}",)


def test_the_failure_message_names_the_pod_where_it_landed_and_what_was_seen(origin):
    plan, red, _ = origin
    verdict = judge_placement(red, StackKubelets(plan), "numa-a-numa1", reading("5-7", "1", container="c0ffee"))
    message = verdict.failure_message()
    assert message.splitlines()[:3] == [
        f"demo pod numa-demo/{red.name} (nodeSelector {{numa-type: red}}) is not where it should be:",
        "  landed on numa-a-numa1; intended numa-a-numa0 (host numa-a, NUMA node 0, CPUs 1-3, memory node 0)",
        "  host numa-a (containerd@numa0.service) saw: container c0ffee (pid 4242) on CPUs 5-7, memory nodes 1",
    ]
    assert all(f"  - {reason}" in message for reason in verdict.reasons)


def test_probe_output_parsing_skips_blank_lines():
    readings, unparsable = parse_probe_output("\n" + reading("1-3", "0", container="a", pid=7) + "\n")
    assert [(r.container, r.pid, r.cpus.format(), r.mems.format()) for r in readings] == [("a", 7, "1-3", "0")]
    assert unparsable == []


# ---------------------------------------------------------------- the probe script


@pytest.fixture
def probe_setup(tmp_path):
    """The probe of numa-a-numa0 with a `ctr` stand-in beside containerd (the only stand-in: /proc is real)."""
    raw = origin_with_colors()
    raw["containerdPath"] = str(tmp_path / "containerd")
    config, plan = loaded(raw)
    pod = demo_pods(config, plan)[0]
    script = probe_scripts(pod, plan.hosts[0], plan).apply
    return tmp_path, script


def fake_ctr(directory: Path, *, filter_text: str, tasks: str, fail: bool = False) -> None:
    """Answers `containers ls -q <filter>` with two ids when the filter is exactly the expected one."""
    ctr = directory / "ctr"
    ctr.write_text(
        "#!/bin/sh\n"
        + ("exit 1\n" if fail else "")
        + '[ "$1 $2 $3 $4" = "--address /run/containerd-numa0/containerd.sock -n k8s.io" ] || exit 2\n'
        "shift 4\n"
        'case "$1 $2" in\n'
        f'  "containers ls") [ "$3 $4" = {shlex.quote("-q " + filter_text)} ] && echo running1 && echo stopped1;;\n'
        f'  "tasks ls") printf %s {shlex.quote(tasks)};;\n'
        "  *) exit 3;;\n"
        "esac\n"
    )
    ctr.chmod(0o755)


def run_probe(script: str, uid: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], input=uid, capture_output=True, text=True)


def origin_pod_name() -> str:
    """The name of numa-a-numa0's pod (its spec's hash: the containerd path is no part of it)."""
    config, plan = loaded(origin_with_colors())
    return demo_pods(config, plan)[0].name


def test_probe_reports_each_running_container_of_the_pod(probe_setup):
    directory, script = probe_setup
    pod_name = origin_pod_name()
    with subprocess.Popen(["sleep", "60"]) as sleeper:
        try:
            fake_ctr(
                directory,
                filter_text=(
                    'labels."io.kubernetes.pod.namespace"=="numa-demo",'
                    f'labels."io.kubernetes.pod.name"=="{pod_name}",'
                    'labels."io.cri-containerd.kind"=="container",'
                    f'labels."io.kubernetes.pod.uid"=="{UID}"'
                ),
                tasks=(
                    "TASK PID STATUS\n"
                    f"running1 {sleeper.pid} RUNNING\n"
                    "stopped1 0 STOPPED\n"
                    f"another-pod {os.getpid()} RUNNING\n"
                ),
            )
            result = run_probe(script, UID + "\n")
            expected_cpus = os.sched_getaffinity(sleeper.pid)
        finally:
            sleeper.kill()
    assert result.returncode == 0, result.stderr
    readings, unparsable = parse_probe_output(result.stdout)
    assert unparsable == []
    [only] = readings
    assert (only.container, only.pid) == ("running1", sleeper.pid)
    assert set(only.cpus) == expected_cpus


def test_probe_refuses_a_missing_uid(probe_setup):
    directory, script = probe_setup
    pod_name = origin_pod_name()
    fake_ctr(directory, filter_text="", tasks="")
    result = run_probe(script, "")
    assert result.returncode == 1
    assert f"expected the uid of pod numa-demo/{pod_name} on host numa-a on stdin" in result.stderr


def test_probe_fails_clearly_when_containerd_cannot_be_reached(probe_setup):
    directory, script = probe_setup
    fake_ctr(directory, filter_text="", tasks="", fail=True)
    result = run_probe(script, UID)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "numa-kubelets: cannot query containerd@numa0.service through "
        "/run/containerd-numa0/containerd.sock on host numa-a"
    )


def test_probe_script_is_read_only_and_passes_shellcheck(probe_setup):
    _, script = probe_setup
    assert script.splitlines()[1] == "set -eu"
    for writer in ("write_file", "rm ", "mkdir", "systemctl", " > ", ">>"):
        assert writer not in script
    result = subprocess.run(["shellcheck", "-s", "sh", "-"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
