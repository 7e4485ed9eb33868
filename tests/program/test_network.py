"""Namespace mode under the mock engine: the netns command, its place in the dependency graph, outputs."""

import copy

from tests.program.harness import run_program

KUBELET = "numa-kubelets:index:KubeletInstance"


def namespace_mode(config: dict) -> dict:
    config = copy.deepcopy(config)
    host = config["hosts"][0]
    host["network"] = {"mode": "namespace", "parent": "eno1", "gateway": "192.0.2.1"}
    for kubelet, address in zip(host["kubelets"], ("192.0.2.21/24", "192.0.2.22/24"), strict=True):
        kubelet["address"] = address
    return config


def test_each_kubelet_instance_gets_a_netns_command_its_runtime_waits_for(dev_config):
    run = run_program(namespace_mode(dev_config))
    for numa in (0, 1):
        netns = run.named(f"numa-a-numa{numa}-netns")
        assert run.parent_of(netns) == (KUBELET, f"numa-a-numa{numa}")
        assert f"numa-a-numa{numa}-slice" in run.dependencies_of(netns)
        assert run.dependencies_of(run.named(f"numa-a-numa{numa}-containerd")) == [f"numa-a-numa{numa}-netns"]
        assert run.request_of(netns).deleteBeforeReplace
        script = netns.inputs["create"]
        assert f"/etc/systemd/system/numa-netns@numa{numa}.service" in script
        assert (
            f"NetworkNamespacePath=/run/netns/numa{numa}\n"
            in run.named(f"numa-a-numa{numa}-containerd").inputs["create"]
        )
        assert "--node-ip=192.0.2.2" in run.named(f"numa-a-numa{numa}-kubelet").inputs["create"]
    assert len(run.commands()) == 10


def test_outputs_name_the_address_and_namespace_of_each_kubelet(dev_config):
    kubelets = run_program(namespace_mode(dev_config)).outputs["hosts"]["numa-a"]["kubelets"]
    assert {name: (k["address"], k["netns"], k["port"]) for name, k in kubelets.items()} == {
        "numa-a-numa0": ("192.0.2.21/24", "numa0", 10250),
        "numa-a-numa1": ("192.0.2.22/24", "numa1", 10250),
    }


def test_host_mode_has_no_netns_command(dev_config):
    run = run_program(dev_config)
    assert not [c.name for c in run.commands() if c.name.endswith("-netns")]
    assert "netns" not in repr(run.outputs["hosts"])
