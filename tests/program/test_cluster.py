"""The cluster side under the mock engine: the managed bootstrap token and its RBAC, cluster DNS,
each kubelet's Node (readiness wait, removal order, label patch, taints)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pulumi
import pytest
import yaml

from tests.program import harness
from tests.program.conftest import BOOTSTRAP_TOKEN, KUBECONFIG
from tests.program.harness import TOKEN_ID, TOKEN_SECRET, is_secret_envelope, run_program

SECRET = "kubernetes:core/v1:Secret"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
SERVICE = "kubernetes:core/v1:Service"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
LIFECYCLE = "pulumi-python:dynamic/numa-kubelets:NodeLifecycle"
PREFLIGHT = "pulumi-python:dynamic/numa-kubelets:ClusterPreflight"
CLUSTER_NODE = "numa-kubelets:index:ClusterNode"
MANAGED_TOKEN = f"{TOKEN_ID}.{TOKEN_SECRET}"


@pytest.fixture
def managed_config(cluster_config):
    del cluster_config["bootstrapToken"]
    return cluster_config


def plain_strings(value: Any) -> list[str]:
    """Every string the engine would see outside a secret envelope."""
    if is_secret_envelope(value):
        return []
    if isinstance(value, dict):
        return [s for key, item in value.items() if key != "__provider" for s in [key, *plain_strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in plain_strings(item)]
    return [value] if isinstance(value, str) else []


def kubelet_configuration(run: harness.ProgramRun, command: str) -> dict:
    """The KubeletConfiguration inside a kubelet installer's script."""
    script = run.named(command).inputs["create"]
    start = script.index("kind: KubeletConfiguration\n")
    start = script.rindex("\n", 0, script.rindex("apiVersion:", 0, start)) + 1
    end = script.index("NUMA_KUBELETS_", start)
    return yaml.safe_load(script[start:end])


def installed_yaml(run: harness.ProgramRun, command: str, path: str) -> dict:
    """The YAML file `path` as a remote command's apply script writes it."""
    script = run.named(command).inputs["create"]
    match = re.search(rf"write_file '?{re.escape(path)}'? \S+ \S+ <<'(\w+)'\n(.*?)\n\1\n", script, re.DOTALL)
    assert match, f"{command} does not write {path}"
    return yaml.safe_load(match.group(2))


# ---------------------------------------------------------------- managed bootstrap token


def test_the_stack_creates_the_token_secret_and_its_bindings(managed_config):
    run = run_program(managed_config)
    [secret] = run.of_type(SECRET)
    assert secret.inputs["metadata"]["name"] == f"bootstrap-token-{TOKEN_ID}"
    assert secret.inputs["metadata"]["namespace"] == "kube-system"
    assert secret.inputs["type"] == "bootstrap.kubernetes.io/token"
    data = secret.inputs["stringData"]
    assert {key: data[key] for key in data if key != "description"} == {
        "token-id": TOKEN_ID,
        "token-secret": TOKEN_SECRET,
        "usage-bootstrap-authentication": "true",
        "auth-extra-groups": "system:bootstrappers:numa-kubelets:test",
    }
    assert is_secret_envelope(secret.raw_inputs["stringData"])
    bindings = {b.name: (b.inputs["roleRef"], b.inputs["subjects"]) for b in run.of_type(BINDING)}
    group = [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:bootstrappers:numa-kubelets:test"}
    ]

    def role(name: str) -> dict:
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}

    assert bindings == {
        "numa-kubelets:test:node-bootstrapper": (role("system:node-bootstrapper"), group),
        "numa-kubelets:test:nodeclient": (
            role("system:certificates.k8s.io:certificatesigningrequests:nodeclient"),
            group,
        ),
    }
    provider_urn = next(urn for urn in run.requests if urn.endswith("pulumi:providers:kubernetes::cluster"))
    for resource in [secret, *run.of_type(BINDING)]:
        assert run.request_of(resource).provider.startswith(provider_urn + "::")


def test_the_managed_token_is_only_ever_inside_secrets(managed_config):
    run = run_program(managed_config)
    for resource in run.resources:
        leaked = [s for s in plain_strings(resource.raw_inputs) if TOKEN_SECRET in s]
        assert not leaked, f"{resource.type} {resource.name} carries the token outside a secret"
    assert TOKEN_SECRET not in repr(run.outputs)
    for command in run.commands():
        for field in ("create", "update", "delete"):
            assert TOKEN_SECRET not in command.inputs.get(field, ""), f"{command.name}.{field}"


def test_kubelets_join_with_the_managed_token_once_the_secret_and_bindings_exist(managed_config):
    run = run_program(managed_config)
    kubelet = run.named("numa-b-numa2-kubelet")
    assert is_secret_envelope(kubelet.raw_inputs["stdin"])
    users = yaml.safe_load(kubelet.inputs["stdin"])["users"]
    assert users == [{"name": "kubelet-bootstrap", "user": {"token": MANAGED_TOKEN}}]
    dependencies = set(run.dependencies_of(kubelet))
    assert {
        "cluster-bootstrap-token",
        "numa-kubelets:test:node-bootstrapper",
        "numa-kubelets:test:nodeclient",
    } <= dependencies


def test_a_given_bootstrap_token_creates_no_secret_bindings_or_random_values(cluster_config):
    run = run_program(cluster_config)
    assert run.of_type(SECRET) == [] and run.of_type(BINDING) == []
    assert [r for r in run.resources if r.type.startswith("random:")] == []
    users = yaml.safe_load(run.named("numa-a-numa0-kubelet").inputs["stdin"])["users"]
    assert users[0]["user"]["token"] == BOOTSTRAP_TOKEN


def test_standalone_stacks_have_no_cluster_side(dev_config):
    run = run_program(dev_config)
    assert [r for r in run.resources if r.type.startswith(("kubernetes:", "random:", "pulumi-python:"))] == []
    assert [r for r in run.resources if "Cluster" in r.type] == []


# ---------------------------------------------------------------- cluster DNS


def test_cluster_dns_comes_from_the_kube_dns_service(cluster_config):
    run = run_program(cluster_config)
    [service] = run.of_type(SERVICE)
    assert run.request_of(service).id == "kube-system/kube-dns"
    # Read after the preflight, whose error names cluster.dns when the Service is missing.
    assert run.dependencies_of(service) == ["cluster-preflight"]
    [preflight] = [r for r in run.resources if r.name == "cluster-preflight"]
    assert preflight.inputs["clusterDnsFromService"] is True
    configuration = kubelet_configuration(run, "numa-a-numa1-kubelet")
    assert configuration["clusterDNS"] == [harness.KUBE_DNS_CLUSTER_IP]
    assert configuration["clusterDomain"] == "cluster.local"
    assert configuration["serverTLSBootstrap"] is False


def test_cluster_dns_and_domain_can_be_set(cluster_config):
    cluster_config["cluster"] = {**cluster_config["cluster"], "dns": "10.32.0.10", "domain": "k8s.example"}
    run = run_program(cluster_config)
    assert run.of_type(SERVICE) == []  # nothing to read
    configuration = kubelet_configuration(run, "numa-a-numa1-kubelet")
    assert (configuration["clusterDNS"], configuration["clusterDomain"]) == (["10.32.0.10"], "k8s.example")


@pytest.mark.parametrize("cluster_ip", [None, "None"], ids=["no kube-dns Service", "headless kube-dns"])
def test_without_a_dns_service_the_program_says_which_key_to_set(monkeypatch, cluster_config, cluster_ip):
    mocks = harness.RecordingMocks(kube_dns_cluster_ip=cluster_ip)
    monkeypatch.setattr(harness, "RecordingMocks", lambda **_: mocks)
    with pytest.raises(Exception) as failure:
        run_program(cluster_config)
    if cluster_ip is None:  # the provider's read fails, as a real one does on a missing object
        assert "kube-system/kube-dns" in str(failure.value)
    else:
        assert isinstance(failure.value, pulumi.RunError)
        assert "set numa-kubelets:cluster.dns" in str(failure.value)
    assert [c for c in mocks.resources if c.type == "command:remote:Command" and c.name.endswith("-kubelet")] == []


def test_bootstrap_serving_certificates(cluster_config):
    cluster_config["cluster"] = {**cluster_config["cluster"], "servingCertificates": "bootstrap"}
    run = run_program(cluster_config)
    assert kubelet_configuration(run, "numa-a-numa0-kubelet")["serverTLSBootstrap"] is True


# ---------------------------------------------------------------- each kubelet's Node


def test_one_node_lifecycle_per_kubelet_removed_before_anything_on_its_host(cluster_config):
    run = run_program(cluster_config)
    lifecycles = {r.name: r for r in run.of_type(LIFECYCLE)}
    assert len(lifecycles) == 8
    lifecycle = lifecycles["numa-b-numa2-lifecycle"]
    assert run.parent_of(lifecycle) == (CLUSTER_NODE, "numa-b-numa2")
    assert run.parent_of(run.named("numa-b-numa2", CLUSTER_NODE)) == (
        "numa-kubelets:index:KubeletInstance",
        "numa-b-numa2",
    )
    # Deletion runs in reverse dependency order: the Node leaves before the kubelet and the
    # host's services are touched, and a failed drain stops the update before them.
    assert {"numa-b-numa2-kubelet", "numa-b-host-services"} <= set(run.dependencies_of(lifecycle))
    inputs = lifecycle.inputs
    assert inputs["nodeName"] == "numa-b-numa2"
    assert inputs["identityLabels"] == {"numa-kubelets.io/host": "numa-b", "numa-kubelets.io/numa-node": "2"}
    assert (inputs["removeNode"], inputs["drainTimeoutSeconds"], inputs["readyTimeoutSeconds"]) == (True, 300, 600)
    assert inputs["journalCommand"] == "ssh root@192.0.2.11 journalctl -u kubelet@numa2.service -n 100 --no-pager"
    assert inputs["kubeconfig"] == KUBECONFIG and is_secret_envelope(lifecycle.raw_inputs["kubeconfig"])


def test_removal_settings_reach_the_lifecycle(cluster_config):
    cluster_config["cluster"] = {**cluster_config["cluster"], "removeNodes": False, "drainTimeout": "90s"}
    cluster_config["demo"] = {"enabled": False, "readyTimeout": "2m"}
    inputs = run_program(cluster_config).named("numa-a-numa0-lifecycle", LIFECYCLE).inputs
    assert (inputs["removeNode"], inputs["drainTimeoutSeconds"], inputs["readyTimeoutSeconds"]) == (False, 90, 120)


def test_one_label_patch_per_node_with_exactly_the_declared_labels(cluster_config):
    run = run_program(cluster_config)
    patches = {p.name: p for p in run.of_type(NODE_PATCH)}
    assert sorted(patches) == sorted(k.inputs["nodeName"] for k in run.of_type(LIFECYCLE))
    patch = patches["numa-a-numa3"]
    assert patch.inputs["metadata"]["name"] == "numa-a-numa3"
    assert patch.inputs["metadata"]["labels"] == {
        "numa-slot": "numa-a-3",
        "numa-kubelets.io/host": "numa-a",
        "numa-kubelets.io/numa-node": "3",
    }
    assert patch.inputs["metadata"]["annotations"] == {
        "pulumi.com/patchFieldManager": "numa-kubelets-test",
        "pulumi.com/patchForce": "true",
    }
    assert run.dependencies_of(patch) == ["numa-a-numa3-lifecycle"]
    provider_urn = next(urn for urn in run.requests if urn.endswith("pulumi:providers:kubernetes::cluster"))
    assert run.request_of(patch).provider.startswith(provider_urn + "::")


def test_a_label_change_changes_the_patch_and_not_the_kubelet_registration(cluster_config):
    before = run_program(cluster_config)
    cluster_config["hosts"][0]["kubelets"][1]["labels"] = {"numa-slot": "renamed", "tier": "gold"}
    after = run_program(cluster_config)
    labels = after.named("numa-a-numa1", NODE_PATCH).inputs["metadata"]["labels"]
    assert labels["numa-slot"] == "renamed" and labels["tier"] == "gold"
    # The kubelet registers only the automatic labels: its unit does not change with the stack's labels.
    assert before.named("numa-a-numa1-kubelet").inputs["create"] == after.named("numa-a-numa1-kubelet").inputs["create"]
    assert (
        "--node-labels=numa-kubelets.io/host=numa-a,numa-kubelets.io/numa-node=1"
        in after.named("numa-a-numa1-kubelet").inputs["create"]
    )


def test_taints_are_registered_with_the_kubelet_and_reconciled(cluster_config):
    cluster_config["hosts"][0]["kubelets"][2]["taints"] = [
        {"key": "tenant", "value": "a", "effect": "NoSchedule"},
        {"key": "example.com/dedicated", "effect": "NoExecute"},
    ]
    run = run_program(cluster_config)
    expected = [
        {"key": "tenant", "value": "a", "effect": "NoSchedule"},
        {"key": "example.com/dedicated", "effect": "NoExecute"},
    ]
    taints_file = "/etc/numa-kubelets/numa2/register-with-taints.conf"
    assert installed_yaml(run, "numa-a-numa2-kubelet", taints_file)["registerWithTaints"] == expected
    assert run.named("numa-a-numa2-lifecycle", LIFECYCLE).inputs["taints"] == expected
    assert "registerWithTaints" not in kubelet_configuration(run, "numa-a-numa2-kubelet")
    taints_file = "/etc/numa-kubelets/numa1/register-with-taints.conf"
    assert installed_yaml(run, "numa-a-numa1-kubelet", taints_file)["registerWithTaints"] == []
    assert run.named("numa-a-numa1-lifecycle", LIFECYCLE).inputs["taints"] == []


def test_the_engine_loads_the_node_lifecycle_provider_from_the_project(cluster_config):
    """The engine's dynamic provider host unpickles the provider in a process of its own, started
    in the project directory: the provider must be importable there, not inlined from this process."""
    lifecycle = run_program(cluster_config).named("numa-a-numa0-lifecycle", LIFECYCLE)
    serialized = lifecycle.inputs["__provider"]
    assert len(serialized) < 2000  # a reference to the class, not a copy of the code
    load = (
        "import base64, sys, dill\n"
        "provider = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "print(type(provider).__module__, type(provider).__name__, provider.operations.__name__)\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", load],
        input=serialized,
        cwd=harness.PROJECT_DIR,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.split() == ["components.node_lifecycle", "NodeLifecycleProvider", "operations_for"]


def test_cluster_server_is_checked_on_each_host_and_the_token_at_the_credentials_address(cluster_config):
    run = run_program(cluster_config)
    [preflight] = run.of_type(PREFLIGHT)
    # Nothing of cluster.server reaches the cluster preflight: it asks the credential's address.
    assert set(preflight.inputs) == {
        "__provider",
        "bootstrapToken",
        "kubeconfig",
        "stackRights",
        "clusterDnsFromService",
    }
    server = cluster_config["cluster"]["server"]
    for host in ("numa-a", "numa-b"):
        script = run.named(f"{host}-preflight").inputs["stdin"]
        assert f"cannot reach cluster.server {server} from this host, trusting only caCert" in script
        assert cluster_config["cluster"]["caCert"].strip() in script
        assert BOOTSTRAP_TOKEN not in script


@pytest.mark.parametrize("managed", [True, False], ids=["managed token", "given token"])
def test_kubelets_join_only_after_the_cluster_preflight(cluster_config, managed):
    if managed:
        del cluster_config["bootstrapToken"]
    run = run_program(cluster_config)
    [preflight] = run.of_type(PREFLIGHT)
    assert run.parent_of(preflight) == ("numa-kubelets:index:ClusterJoin", "cluster")
    assert is_secret_envelope(preflight.raw_inputs["bootstrapToken"])
    assert preflight.inputs["bootstrapToken"] == (MANAGED_TOKEN if managed else BOOTSTRAP_TOKEN)
    assert is_secret_envelope(preflight.raw_inputs["kubeconfig"])
    assert {(r["verb"], r["resource"], r["subresource"]) for r in preflight.inputs["stackRights"]} >= {
        ("delete", "nodes", ""),
        ("create", "pods", "eviction"),
    }
    for kubelet in [c for c in run.commands() if c.name.endswith("-kubelet")]:
        assert "cluster-preflight" in run.dependencies_of(kubelet)


def test_a_demo_pod_tolerates_exactly_its_kubelets_declared_taints(monkeypatch, cluster_config):
    from tests.program.test_demo import POD, run

    cluster_config["demo"] = {"enabled": True}
    cluster_config["hosts"][0]["kubelets"][1]["taints"] = [
        {"key": "tenant", "value": "a", "effect": "NoSchedule"},
        {"key": "example.com/dedicated", "effect": "NoExecute"},
    ]
    result = run(monkeypatch, cluster_config)
    tainted = result.named("numa-demo-numa-a-numa1", POD).inputs["spec"]
    assert tainted["tolerations"] == [
        {"key": "tenant", "value": "a", "effect": "NoSchedule", "operator": "Equal"},
        {"key": "example.com/dedicated", "effect": "NoExecute", "operator": "Exists"},
    ]
    assert "tolerations" not in result.named("numa-demo-numa-a-numa2", POD).inputs["spec"]
