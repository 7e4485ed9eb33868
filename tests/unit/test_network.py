"""Namespace mode (hosts[].network): validation with paths, the network plan, and what it renders."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from numa_kubelets import network
from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.outputs import hosts_output
from numa_kubelets.plan import build_plan
from numa_kubelets.render import (
    containerd_namespace_script,
    containerd_unit,
    kubelet_arguments,
    kubelet_config,
    kubelet_unit,
    netns_files,
)
from numa_kubelets.scripts import netns_scripts, preflight_scripts
from tests.unit.builders import namespace_host, origin_config, origin_host, plan_of
from tests.unit.test_render import install_binaries, install_units, verify_problems
from tests.unit.test_scripts import tool

Raw = dict[str, Any]


def namespace_config(uplink: str = "macvlan", **host: Any) -> Raw:
    return origin_config(hosts=[namespace_host(uplink, **host)])


# ---------------------------------------------------------------- invalid configurations


def _set(raw: Raw, path: list[str | int], value: Any) -> None:
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value


_DELETE = object()
H = ["hosts", 0]
NET = [*H, "network"]
K0 = [*H, "kubelets", 0]
K1 = [*H, "kubelets", 1]

# (name, base uplink, [(path, value)...], reported path, message fragment)
INVALID: list[tuple[str, str, list[tuple[list[str | int], Any]], str, str]] = [
    ("unknown mode", "macvlan", [([*NET, "mode"], "bridge")], "hosts[0].network.mode", "'host' or 'namespace'"),
    ("unknown uplink", "macvlan", [([*NET, "uplink"], "veth")], "hosts[0].network.uplink", "'macvlan'"),
    ("typo in a network key", "macvlan", [([*NET, "gatway"], "192.0.2.1")], "hosts[0].network.gatway", "unknown key"),
    ("no gateway", "macvlan", [([*NET, "gateway"], _DELETE)], "hosts[0].network.gateway", "required in namespace"),
    ("macvlan without parent", "macvlan", [([*NET, "parent"], _DELETE)], "hosts[0].network.parent", "required with"),
    ("parent with device uplink", "device", [([*NET, "parent"], "eno1")], "hosts[0].network.parent", "not used with"),
    ("parent name too long", "macvlan", [([*NET, "parent"], "a" * 16)], "hosts[0].network.parent", "1-15 characters"),
    ("parent name with a slash", "ipvlan", [([*NET, "parent"], "eno/1")], "hosts[0].network.parent", "interface name"),
    ("gateway not an address", "macvlan", [([*NET, "gateway"], "gw.example")], "hosts[0].network.gateway", "IPv4"),
    ("mtu too small", "macvlan", [([*NET, "mtu"], 100)], "hosts[0].network.mtu", "greater than or equal to 576"),
    ("dns not an address", "macvlan", [([*NET, "dns"], ["192.0.2.53", "dns1"])], "hosts[0].network.dns[1]", "IPv4"),
    ("four dns servers", "macvlan", [([*NET, "dns"], ["192.0.2.5"] * 4)], "hosts[0].network.dns", "at most 3"),
    (
        "private path is /etc",
        "macvlan",
        [([*NET, "privatePaths"], ["/etc"])],
        "hosts[0].network.privatePaths[0]",
        "system directory",
    ),
    (
        "nested private paths",
        "macvlan",
        [([*NET, "privatePaths"], ["/etc/cni", "/etc/cni/net.d"])],
        "hosts[0].network.privatePaths[1]",
        "nested",
    ),
    (
        "private path inside the program's own tree",
        "macvlan",
        [([*NET, "privatePaths"], ["/etc/numa-kubelets/x"])],
        "hosts[0].network.privatePaths[0]",
        "managed by numa-kubelets",
    ),
    ("kubelet without address", "macvlan", [([*K0, "address"], _DELETE)], "hosts[0].kubelets[0].address", "required"),
    ("address without prefix", "macvlan", [([*K0, "address"], "192.0.2.21")], "hosts[0].kubelets[0].address", "prefix"),
    ("address is IPv6", "macvlan", [([*K0, "address"], "2001:db8::5/64")], "hosts[0].kubelets[0].address", "IPv4"),
    (
        "address not canonical",
        "macvlan",
        [([*K0, "address"], "192.0.2.021/24")],
        "hosts[0].kubelets[0].address",
        "IPv4 address",
    ),
    (
        "address twice on a host",
        "macvlan",
        [([*K1, "address"], "192.0.2.21/24")],
        "hosts[0].kubelets[1].address",
        "also hosts[0].kubelets[0].address",
    ),
    (
        "address is the host's SSH address",
        "macvlan",
        [([*K0, "address"], "192.0.2.10/24")],
        "hosts[0].kubelets[0].address",
        "host's own (SSH) address",
    ),
    (
        "gateway outside the subnet",
        "macvlan",
        [([*K1, "address"], "198.51.100.22/24")],
        "hosts[0].kubelets[1].address",
        "gateway 192.0.2.1 is outside this address's subnet 198.51.100.0/24",
    ),
    (
        "address is the gateway",
        "macvlan",
        [([*K0, "address"], "192.0.2.1/24")],
        "hosts[0].kubelets[0].address",
        "gateway",
    ),
    (
        "address is the broadcast address",
        "macvlan",
        [([*K0, "address"], "192.0.2.255/24")],
        "hosts[0].kubelets[0].address",
        "broadcast",
    ),
    ("device missing", "device", [([*K1, "device"], _DELETE)], "hosts[0].kubelets[1].device", "required with uplink"),
    (
        "device twice on a host",
        "device",
        [([*K1, "device"], "ens1f0v0")],
        "hosts[0].kubelets[1].device",
        "already the device of kubelets[0]",
    ),
    (
        "device with macvlan",
        "macvlan",
        [([*K0, "device"], "ens1f0v0")],
        "hosts[0].kubelets[0].device",
        "only used with",
    ),
    ("device name too long", "device", [([*K0, "device"], "ens1f0v0-virtual")], "hosts[0].kubelets[0].device", "1-15"),
    (
        "kubelets not listed",
        "macvlan",
        [([*H, "kubelets"], _DELETE)],
        "hosts[0].kubelets",
        "needs the kubelets listed",
    ),
    (
        "address in host mode",
        "macvlan",
        [(NET, {"mode": "host"})],
        "hosts[0].kubelets[0].address",
        "only used in namespace",
    ),
    (
        "gateway in host mode",
        "macvlan",
        [(NET, {"gateway": "192.0.2.1"}), ([*K0, "address"], _DELETE), ([*K1, "address"], _DELETE)],
        "hosts[0].network.gateway",
        "only used in namespace mode",
    ),
]


def invalid_config(uplink: str, changes: list[tuple[list[str | int], Any]]) -> Raw:
    raw = copy.deepcopy(namespace_config(uplink))
    for path, value in changes:
        _set(raw, path, value)
    return raw


def problems_of(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as error:
        build_plan(load_config(raw))
    return [str(problem) for problem in error.value.problems]


def test_the_namespace_base_configurations_are_valid():
    for uplink in ("macvlan", "ipvlan", "device"):
        plan_of(namespace_config(uplink))


@pytest.mark.parametrize(("name", "uplink", "changes", "path", "fragment"), INVALID, ids=[case[0] for case in INVALID])
def test_invalid_network_configuration_is_refused_with_its_path(name, uplink, changes, path, fragment):
    problems = problems_of(invalid_config(uplink, changes))
    assert any(p.startswith(f"{path}: ") and fragment in p for p in problems), problems


def test_a_node_address_is_unique_across_the_stack():
    second = namespace_host(name="numa-b", address="192.0.2.11")
    second["kubelets"][0]["address"] = "192.0.2.31/24"
    second["kubelets"][1]["address"] = "192.0.2.21/24"
    problems = problems_of(origin_config(hosts=[namespace_host(), second]))
    assert problems == ["hosts[1].kubelets[1].address: address 192.0.2.21 is also hosts[0].kubelets[0].address"]


def test_every_network_problem_of_a_host_is_reported_at_once():
    raw = invalid_config(
        "macvlan",
        [([*NET, "gateway"], _DELETE), ([*NET, "parent"], _DELETE), ([*K0, "address"], _DELETE), ([*K1, "port"], 6443)],
    )
    paths = sorted(p.split(":")[0] for p in problems_of(raw))
    assert paths == [
        "hosts[0].kubelets[0].address",
        "hosts[0].kubelets[1].port",
        "hosts[0].network.gateway",
        "hosts[0].network.parent",
    ]


# ---------------------------------------------------------------- the plan


def test_host_mode_is_the_default_and_plans_no_network():
    plan = plan_of(origin_config())
    assert plan.hosts[0].network is None and all(k.network is None for k in plan.kubelets)
    assert [k.port for k in plan.kubelets] == [10250, 10350]


def test_namespace_mode_plans_one_namespace_per_kubelet_with_the_default_ports():
    plan = plan_of(namespace_config())
    host = plan.hosts[0]
    assert host.network == network.HostNetwork(
        uplink="macvlan",
        parent="eno1",
        gateway="192.0.2.1",
        mtu=None,
        dns=(),
        private_paths=network.DEFAULT_PRIVATE_PATHS,
    )
    assert [(k.port, k.healthz_port) for k in host.kubelets] == [(10250, 10248), (10250, 10248)]
    numa1 = host.kubelets[1].network
    assert numa1 is not None
    assert (numa1.netns, numa1.netns_path, numa1.unit) == ("numa1", "/run/netns/numa1", "numa-netns@numa1.service")
    assert (numa1.address, numa1.node_ip, numa1.link) == ("192.0.2.22/24", "192.0.2.22", "uplink")
    assert numa1.private_copy("/etc/cni/net.d") == "/var/lib/numa-kubelets/numa1/etc/cni/net.d"


def test_namespace_ports_only_avoid_what_runs_in_the_namespace():
    raw = namespace_config()
    raw["hosts"][0]["sshPort"] = 10250  # sshd stays in the host's namespace
    assert [k.port for k in plan_of(raw).kubelets] == [10250, 10250]
    raw["hosts"][0]["kubelets"][1]["port"] = 10249  # kube-proxy's metrics port, in the same namespace
    assert problems_of(raw) == ["hosts[0].kubelets[1].port: port 10249 collides with kube-proxy metrics on host numa-a"]


def test_outputs_carry_address_and_netns_in_namespace_mode_only():
    kubelets = hosts_output(plan_of(namespace_config()))["numa-a"]["kubelets"]
    assert {name: (k["address"], k["netns"]) for name, k in kubelets.items()} == {
        "numa-a-numa0": ("192.0.2.21/24", "numa0"),
        "numa-a-numa1": ("192.0.2.22/24", "numa1"),
    }
    for kubelet in hosts_output(plan_of(origin_config()))["numa-a"]["kubelets"].values():
        assert "address" not in kubelet and "netns" not in kubelet


# ---------------------------------------------------------------- rendered units and scripts


def test_containerd_and_kubelet_join_the_namespace_without_private_mounts():
    plan = plan_of(namespace_config(network={"mode": "namespace", "uplink": "macvlan", "parent": "eno1",
                                            "gateway": "192.0.2.1", "dns": ["192.0.2.53"]}))  # fmt: skip
    kubelet = plan.kubelets[0]
    runtime = containerd_unit(kubelet, plan.containerd_path).content
    for line in (
        "Requires=numa-netns@numa0.service\n",
        "After=numa-netns@numa0.service\n",
        "NetworkNamespacePath=/run/netns/numa0\n",
        "PrivateMounts=no\n",
    ):
        assert line in runtime
    assert "BindPaths" not in runtime and "BindReadOnlyPaths" not in runtime
    launcher = containerd_namespace_script(kubelet).content
    binds = [line for line in launcher.splitlines() if line.startswith("bind_private ")]
    assert binds[:4] == [
        "bind_private /run/containerd-numa0/run /run/containerd",
        "bind_private /var/lib/numa-kubelets/numa0/etc/cni/net.d /etc/cni/net.d",
        "bind_private /var/lib/numa-kubelets/numa0/var/lib/cni /var/lib/cni",
        "bind_private /var/lib/numa-kubelets/numa0/run/flannel /run/flannel",
    ]
    assert binds[-1] == "bind_private /etc/numa-kubelets/numa0/resolv.conf /etc/resolv.conf ro"
    unit = kubelet_unit(kubelet, plan).content
    for line in (
        "Requires=numa-netns@numa0.service\n",
        "NetworkNamespacePath=/run/netns/numa0\n",
        "PrivateMounts=no\n",
    ):
        assert line in unit
    # A bind in the kubelet's unit would make its volume mounts slaves that never reach containerd.
    assert "BindPaths" not in unit
    assert "--node-ip=192.0.2.21" in kubelet_arguments(kubelet, plan.cluster)
    assert "resolvConf: /etc/numa-kubelets/numa0/resolv.conf\n" in kubelet_config(kubelet, plan.cluster).content


def test_host_mode_units_are_unchanged_by_the_network_feature():
    plan = plan_of(origin_config())
    for kubelet in plan.kubelets:
        text = containerd_unit(kubelet, plan.containerd_path).content + kubelet_unit(kubelet, plan).content
        assert "NetworkNamespacePath" not in text and "numa-netns" not in text
        assert not any(a.startswith("--node-ip") for a in kubelet_arguments(kubelet, plan.cluster))


def test_up_script_builds_the_namespace_and_never_touches_the_parent():
    network_plan = plan_of(namespace_config(network={"mode": "namespace", "parent": "eno1", "gateway": "192.0.2.1",
                                                    "mtu": 1400}))  # fmt: skip
    kubelet_network = network_plan.kubelets[1].network
    assert kubelet_network is not None
    up = network.netns_up_script_text(kubelet_network, "")
    assert "ip netns add numa1" in up and "ip -n numa1 link set dev lo up\n" in up
    assert "ip link add link eno1 name uplink netns numa1 type macvlan mode bridge\n" in up
    assert "ip -n numa1 link set dev uplink mtu 1400\n" in up
    assert "ip -n numa1 addr replace 192.0.2.22/24 dev uplink\n" in up
    assert "ip -n numa1 route replace default via 192.0.2.1 dev uplink\n" in up
    # Every command that changes something runs inside the namespace, or creates the link there.
    code = "\n".join(line for line in up.splitlines() if not line.lstrip().startswith("#"))
    commands = re.findall(r"(?<![-\w])ip [^;\n)]*", code)
    changing = [c.strip() for c in commands if not c.startswith(("ip -n numa1 ", "ip link show "))]
    assert changing == ["ip netns add numa1", "ip link add link eno1 name uplink netns numa1 type macvlan mode bridge"]


def test_device_uplink_moves_only_an_unused_device_and_returns_it():
    kubelet_network = plan_of(namespace_config("device")).kubelets[0].network
    assert kubelet_network is not None
    up = network.netns_up_script_text(kubelet_network, "")
    assert "ip link set dev ens1f0v0 netns numa0\n" in up
    assert "refusing to move it" in up
    assert "ip -n numa0 addr replace 192.0.2.21/24 dev ens1f0v0\n" in up
    down = network.netns_down_script_text(kubelet_network, "")
    assert "ip -n numa0 link set dev ens1f0v0 netns 1" in down


def test_ipvlan_uplink_is_created_in_l2_mode():
    kubelet_network = plan_of(namespace_config("ipvlan")).kubelets[0].network
    assert kubelet_network is not None
    assert "type ipvlan mode l2\n" in network.netns_up_script_text(kubelet_network, "")


def test_preflight_checks_parent_duplicate_addresses_and_a_loopback_resolver():
    plan = plan_of(namespace_config())
    preflight = preflight_scripts(plan.hosts[0], plan).stdin
    assert "parent interface eno1 does not exist" in preflight
    assert "arping -D -q -c 2 -w 3 -I eno1 192.0.2.21" in preflight
    assert "arping -D -q -c 2 -w 3 -I eno1 192.0.2.22" in preflight
    assert "points at a loopback resolver" in preflight
    with_dns = plan_of(namespace_config(network={"mode": "namespace", "parent": "eno1", "gateway": "192.0.2.1",
                                                "dns": ["192.0.2.53"]}))  # fmt: skip
    assert "loopback resolver" not in preflight_scripts(with_dns.hosts[0], with_dns).stdin
    assert "arping" not in preflight_scripts(plan_of(origin_config()).hosts[0], plan_of(origin_config())).stdin


def test_netns_scripts_reload_in_place_and_remove_everything():
    plan = plan_of(namespace_config())
    scripts = netns_scripts(plan.hosts[0], plan.kubelets[0])
    assert "systemctl reload numa-netns@numa0.service" in scripts.apply
    assert "systemctl restart" not in scripts.apply
    for fragment in (
        "systemctl disable --no-reload --now numa-netns@numa0.service",
        "rm -rf /var/lib/numa-kubelets/numa0\n",
        'find "$top" -depth -type d -empty -delete',
    ):
        assert fragment in scripts.delete


@pytest.mark.parametrize("uplink", ["macvlan", "ipvlan", "device"])
def test_netns_scripts_pass_shellcheck(tmp_path, uplink):
    kubelet_network = plan_of(namespace_config(uplink)).kubelets[0].network
    assert kubelet_network is not None
    for file in netns_files(kubelet_network):
        if not file.content.startswith("#!/bin/sh\n"):
            continue
        path = tmp_path / Path(file.path).name
        path.write_text(file.content)
        result = subprocess.run([tool("shellcheck"), "--format=gcc", str(path)], capture_output=True, text=True)
        assert (result.returncode, result.stdout) == (0, ""), result.stdout


@pytest.mark.parametrize("uplink", ["macvlan", "device"])
def test_namespace_units_pass_systemd_analyze_verify(tmp_path, uplink):
    binaries = install_binaries(tmp_path / "bin")
    raw = origin_config(hosts=[namespace_host(uplink)], **binaries)
    units = install_units(plan_of(raw), tmp_path / "units")
    assert "numa-netns@numa0.service" in [unit.name for unit in units]
    assert verify_problems(tmp_path / "units", units) == []


def test_rendering_is_deterministic():
    first = plan_of(namespace_config())
    second = plan_of(namespace_config())
    for a, b in zip(first.kubelets, second.kubelets, strict=True):
        assert a.network is not None and b.network is not None
        assert netns_files(a.network) == netns_files(b.network)


def test_origin_host_of_builders_stays_in_host_mode():
    assert "network" not in origin_host()


def test_the_namespaces_of_all_numa_nodes_remove_the_created_mount_points_at_once(tmp_path: Path) -> None:
    """`pulumi destroy` deletes every kubelet's namespace side by side (seen failing under the real
    engine: both remove scripts found no namespace left, and one's `find` lost the directories the
    other's had just deleted). Run side by side, again and again, both succeed and leave nothing."""
    private_root, lock_dir, etc = tmp_path / "private", tmp_path / "run", tmp_path / "etc"
    script = network.remove_created_mount_points_shell(str(private_root), str(lock_dir))
    for _ in range(40):
        records = private_root / "created-mount-points"
        records.mkdir(parents=True)
        for top in ("cni", "calico", "cilium"):
            for leaf in ("a/b/c", "a/d", "e"):
                (etc / top / leaf).mkdir(parents=True)
            (records / f"_etc_{top}").write_text(f"{etc / top}\n")
        runs = [subprocess.Popen(["sh", "-eu", "-c", script], stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for run in runs:
            _, stderr = run.communicate(timeout=30)
            assert run.returncode == 0, stderr
        assert not private_root.exists() and list(etc.iterdir()) == []
        assert list(lock_dir.iterdir()) == []
