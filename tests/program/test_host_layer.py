"""The whole program under the mock engine: components, parents, scripts, secrets, outputs."""

import re

import pulumi
import pytest

from tests.program.conftest import BOOTSTRAP_TOKEN
from tests.program.harness import is_secret_envelope, run_program

HOST = "numa-kubelets:index:NumaHost"
SLICE = "numa-kubelets:index:NumaSlice"
KUBELET = "numa-kubelets:index:KubeletInstance"
COMMAND = "command:remote:Command"


def written_paths(script: str) -> list[str]:
    return re.findall(r"^write_file (\S+) ", script, flags=re.M)


def test_origin_components_and_parents(dev_config):
    run = run_program(dev_config)
    assert [r.name for r in run.of_type(HOST)] == ["numa-a"]
    assert sorted(r.name for r in run.of_type(SLICE)) == ["numa-a-numa0", "numa-a-numa1"]
    assert sorted(r.name for r in run.of_type(KUBELET)) == ["numa-a-numa0", "numa-a-numa1"]
    expected_parents = {
        "numa-a-preflight": (HOST, "numa-a"),
        "numa-a-host-services": (HOST, "numa-a"),
        "numa-a-numa0-slice": (SLICE, "numa-a-numa0"),
        "numa-a-numa1-slice": (SLICE, "numa-a-numa1"),
        "numa-a-numa0-containerd": (KUBELET, "numa-a-numa0"),
        "numa-a-numa0-kubelet": (KUBELET, "numa-a-numa0"),
        "numa-a-numa1-containerd": (KUBELET, "numa-a-numa1"),
        "numa-a-numa1-kubelet": (KUBELET, "numa-a-numa1"),
    }
    assert {c.name: run.parent_of(c) for c in run.commands()} == expected_parents
    for slice_component in run.of_type(SLICE):
        assert run.parent_of(slice_component) == (HOST, "numa-a")
    for kubelet in run.of_type(KUBELET):
        assert run.parent_of(kubelet) == (SLICE, kubelet.name)


def test_origin_scripts_carry_the_plan(dev_config):
    run = run_program(dev_config)
    slice0 = run.named("numa-a-numa0-slice").inputs["create"]
    assert "AllowedCPUs=1-3\nAllowedMemoryNodes=0\n" in slice0
    assert "AllowedCPUs=5-7\nAllowedMemoryNodes=1\n" in run.named("numa-a-numa1-slice").inputs["create"]
    host_services = run.named("numa-a-host-services").inputs["create"]
    assert host_services.count("AllowedCPUs=0,4\nAllowedMemoryNodes=0-1\n") == 3
    kubelet1 = run.named("numa-a-numa1-kubelet").inputs["create"]
    for fragment in (
        "port: 10350\n",
        "healthzPort: 10348\n",
        "readOnlyPort: 0\n",
        "maxPods: 1\n",
        "cgroupRoot: /numa1\n",
        "Slice=numa1.slice\n",
        "--hostname-override=numa-a-numa1",
        "numa-type=blue",
        "--root-dir=/var/lib/kubelet-numa1",
    ):
        assert fragment in kubelet1, fragment
    containerd0 = run.named("numa-a-numa0-containerd").inputs["create"]
    assert 'address = "/run/containerd-numa0/containerd.sock"' in containerd0
    assert "Slice=numa0.slice\n" in containerd0 and "Delegate=yes\n" in containerd0
    # The preflight's script on stdin, read by a fixed command line (a failure's error repeats it).
    assert run.named("numa-a-preflight").inputs["create"] == "/bin/sh -s"
    preflight = run.named("numa-a-preflight").inputs["stdin"]
    assert "/sys/devices/system/node/node1/cpulist" in preflight and "4-7" in preflight


def test_every_command_is_an_idempotent_installer_with_a_matching_delete(dev_config):
    run = run_program(dev_config)
    for command in run.commands():
        inputs = command.inputs
        request = run.request_of(command)
        assert inputs["addPreviousOutputInEnv"] is False, command.name
        assert request.deleteBeforeReplace, command.name
        assert "update" not in inputs, command.name  # a changed input re-runs the idempotent create
        if command.name.endswith("-preflight"):
            assert "delete" not in inputs  # it writes nothing
            assert not written_paths(inputs["create"])
            continue
        for path in written_paths(inputs["create"]):
            assert path in inputs["delete"], f"{command.name}: delete leaves {path}"


def test_dependencies_order_installers(dev_config):
    run = run_program(dev_config)
    assert run.dependencies_of(run.named("numa-a-host-services")) == ["numa-a-preflight"]
    assert run.dependencies_of(run.named("numa-a-numa0-kubelet")) == ["numa-a-numa0-containerd"]
    # Children do not inherit a component's dependencies, so each installer names its own. The
    # first one also waits for its turn in the rollout, decided from the stack's previous outputs.
    assert sorted(run.dependencies_of(run.named("numa-a-numa0-slice"))) == ["numa-a-preflight", "previous-update"]
    assert run.dependencies_of(run.named("numa-a-numa0-containerd")) == ["numa-a-numa0-slice"]


def test_hosts_output_for_the_origin(dev_config):
    outputs = run_program(dev_config).outputs
    numa_a = outputs["hosts"]["numa-a"]
    assert numa_a["systemCpus"] == "0,4"
    assert numa_a["kubelets"]["numa-a-numa0"] == {
        "numaNode": 0,
        "cpus": "1-3",
        "mems": "0",
        "port": 10250,
        "healthzPort": 10248,
        "labels": {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "0", "numa-type": "red"},
        "slice": "numa0.slice",
        "unit": "kubelet@numa0.service",
        "hugepages": {},  # read on the host by the kubelet command: nothing ran under mocks
    }
    assert numa_a["kubelets"]["numa-a-numa1"]["port"] == 10350


def test_four_numa_nodes_on_two_hosts(cluster_config):
    run = run_program(cluster_config)
    assert len(run.of_type(HOST)) == 2
    assert len(run.of_type(SLICE)) == 8 and len(run.of_type(KUBELET)) == 8
    assert len(run.commands()) == 2 * (2 + 4 * 3)
    kubelet = run.named("numa-b-numa3-kubelet")
    assert run.parent_of(kubelet) == (KUBELET, "numa-b-numa3")
    script = kubelet.inputs["create"]
    assert "port: 10550\n" in script and "healthzPort: 10548\n" in script
    assert "--bootstrap-kubeconfig=/etc/numa-kubelets/numa3/bootstrap-kubeconfig" in script
    assert run.named("numa-b-numa3-slice").inputs["create"].count("AllowedCPUs=25-31\n") == 1
    assert run.named("numa-b-numa0-kubelet").inputs["connection"]["host"] == "192.0.2.11"


def test_no_secret_in_command_strings_or_outputs(cluster_config):
    run = run_program(cluster_config)
    secrets = (
        BOOTSTRAP_TOKEN,
        BOOTSTRAP_TOKEN.split(".")[1],
        "c2VjcmV0LWtleS1tYXRlcmlhbA",
        "kubeconfig-secret-0123456789",
    )
    for command in run.commands():
        for field in ("create", "update", "delete"):
            text = command.inputs.get(field, "")
            assert not any(secret in text for secret in secrets), f"{command.name}.{field} leaks a secret"
    assert not any(secret in repr(run.outputs) for secret in secrets)
    kubelet = run.named("numa-a-numa0-kubelet")
    assert is_secret_envelope(kubelet.raw_inputs["stdin"])
    assert BOOTSTRAP_TOKEN in kubelet.inputs["stdin"]  # the token reaches the host, on stdin only
    assert is_secret_envelope(kubelet.raw_inputs["connection"])


def test_host_key_is_pinned(cluster_config):
    cluster_config["hosts"][0]["hostKey"] = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0example0key0material0000000000000000 root@numa-a"
    )
    run = run_program(cluster_config)
    connection = run.named("numa-a-preflight").inputs["connection"]
    assert connection["hostKey"] == "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0example0key0material0000000000000000"
    assert connection["hostKey"] != run.named("numa-b-preflight").inputs["connection"]["hostKey"]


def test_unpinned_hosts_stop_the_program_before_any_resource(cluster_config):
    del cluster_config["hosts"][0]["hostKey"]
    del cluster_config["hosts"][1]["hostKey"]
    with pytest.raises(pulumi.RunError, match=r"no hostKey pinned for 2 host\(s\): numa-a \(hosts\[0\]\), numa-b"):
        run_program(cluster_config)


def test_the_explicit_opt_out_connects_to_unpinned_hosts_with_any_key(cluster_config):
    del cluster_config["hosts"][1]["hostKey"]
    cluster_config["insecureSkipHostKeyCheck"] = True
    run = run_program(cluster_config)
    assert "hostKey" in run.named("numa-a-preflight").inputs["connection"]
    assert "hostKey" not in run.named("numa-b-preflight").inputs["connection"]


def test_invalid_config_creates_nothing(dev_config):
    dev_config["hosts"][0]["kubelets"][1]["cpus"] = "5-9"
    with pytest.raises(pulumi.RunError, match=r"hosts\[0\]\.kubelets\[1\]\.cpus: CPU 8 is not on NUMA node 1"):
        run_program(dev_config)


def test_unknown_top_level_key_is_reported(dev_config):
    dev_config["hostz"] = "typo"
    with pytest.raises(pulumi.RunError, match=r"hostz: unknown key"):
        run_program(dev_config)


def test_unreadable_key_file_names_the_config_path(dev_config, tmp_path):
    dev_config["sshPrivateKeyPath"] = str(tmp_path / "missing")
    with pytest.raises(pulumi.RunError, match=r"sshPrivateKeyPath: cannot read"):
        run_program(dev_config)


def test_both_example_stacks_evaluate(dev_config, cluster_config):
    assert run_program(dev_config).outputs["hosts"]
    assert run_program(cluster_config).outputs["hosts"]
