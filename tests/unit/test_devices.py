"""Devices (numa_kubelets/devices.py): each kubelet offers its own NUMA node's PCI devices."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numa_kubelets import devices
from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.devices import (
    DeviceResource,
    KubeletDevices,
    OfferedResource,
    PciDevice,
    Selector,
    assign,
    generic_plugin_instances,
)
from numa_kubelets.picture import host_picture
from numa_kubelets.plan import Plan, build_plan
from numa_kubelets.review import summary
from numa_kubelets.revision import restart_revision
from numa_kubelets.scripts import pci_device_checks, preflight_scripts
from tests.unit.builders import HOST_KEY, origin_config, origin_host


def nvme(address: str) -> dict[str, str]:
    return {"address": address, "class": "0x010802", "vendor": "0x1b36", "device": "0x0010", "driver": "nvme"}


def gpu(address: str) -> dict[str, str]:
    return {"address": address, "class": "0x030200", "vendor": "0x10de", "device": "0x2330", "driver": "nvidia"}


def vf(address: str) -> dict[str, str]:
    return {"address": address, "class": "0x020000", "vendor": "0x8086", "device": "0x154c", "driver": "vfio-pci"}


# The fixture: one NVMe drive on node 0, two on node 1, one without affinity; GPUs and
# SR-IOV VFs on both nodes.
NODES = [
    {"id": 0, "cpus": "0-3", "pciDevices": [nvme("0000:01:00.0"), gpu("0000:02:00.0"), vf("0000:03:00.2")]},
    {
        "id": 1,
        "cpus": "4-7",
        "pciDevices": [
            nvme("0000:42:00.0"),
            nvme("0000:41:00.0"),
            gpu("0000:43:00.0"),
            gpu("0000:45:00.0"),
            vf("0000:44:00.2"),
        ],
    },
]
UNAFFINE = [nvme("0000:00:05.0")]
NVME = {"resource": "example.com/nvme", "select": {"class": "0x0108"}}
GPUS = {"resource": "nvidia.com/gpu", "plugin": "nvidia", "select": {"vendor": "0x10de", "class": "0x03"}}
VFS = {"resource": "intel.com/sriov_vf", "plugin": "sriov", "select": {"driver": "vfio-pci"}}


def device_host(**overrides: Any) -> dict[str, Any]:
    return origin_host(**{"numaNodes": copy.deepcopy(NODES), "pciDevices": copy.deepcopy(UNAFFINE), **overrides})


def plan_of(raw: dict[str, Any]) -> Plan:
    return build_plan(load_config(raw))


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        build_plan(load_config(raw))
    return [str(problem) for problem in error.value.problems]


def offered(plan: Plan) -> dict[str, dict[str, list[str]]]:
    return {k.node_name: {r.resource: list(r.addresses) for r in k.devices} for k in plan.kubelets}


def test_each_kubelet_offers_its_own_nodes_devices_and_the_unaffine_one_nobody():
    plan = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    assert offered(plan) == {
        "numa-a-numa0": {"example.com/nvme": ["0000:01:00.0"]},
        "numa-a-numa1": {"example.com/nvme": ["0000:41:00.0", "0000:42:00.0"]},
    }


def test_stacks_without_devices_keep_one_shared_empty_tuple():
    plan = plan_of(origin_config())
    assert all(k.devices == () for k in plan.kubelets)
    assert plan.hosts[0].pci_devices == ()


def test_adopting_gives_a_device_away_from_its_own_nodes_kubelet():
    host = device_host(
        kubelets=[{"numaNode": 0, "adoptDevices": ["0000:41:00.0", "0000:00:05.0"]}, {"numaNode": 1}],
    )
    plan = plan_of(origin_config(hosts=[host], devices=[NVME]))
    assert offered(plan) == {
        "numa-a-numa0": {"example.com/nvme": ["0000:00:05.0", "0000:01:00.0", "0000:41:00.0"]},
        "numa-a-numa1": {"example.com/nvme": ["0000:42:00.0"]},
    }


def test_the_most_specific_resource_list_replaces_the_others_whole():
    host = device_host(
        devices=[GPUS],
        kubelets=[{"numaNode": 0, "devices": [VFS]}, {"numaNode": 1}],
    )
    plan = plan_of(origin_config(hosts=[host], devices=[NVME]))
    assert offered(plan) == {
        "numa-a-numa0": {"intel.com/sriov_vf": ["0000:03:00.2"]},
        "numa-a-numa1": {"nvidia.com/gpu": ["0000:43:00.0", "0000:45:00.0"]},
    }


def test_a_class_gives_its_hosts_the_inventory_and_resources():
    klass = {"numaNodes": copy.deepcopy(NODES), "pciDevices": copy.deepcopy(UNAFFINE), "devices": [NVME]}
    hosts = [{"name": "a", "address": "192.0.2.1", "hostKey": HOST_KEY, "class": "gpu"}]
    written = [{"name": "a", "address": "192.0.2.1", "hostKey": HOST_KEY, **copy.deepcopy(klass)}]
    assert (
        plan_of(origin_config(hosts=hosts, hostClasses={"gpu": klass})).hosts
        == plan_of(origin_config(hosts=written)).hosts
    )


def test_a_kubelet_selecting_another_nodes_device_without_adopting_it_is_refused():
    host = device_host(
        kubelets=[
            {"numaNode": 0, "devices": [{"resource": "example.com/nvme", "select": {"addresses": ["0000:41:00.0"]}}]},
            {"numaNode": 1},
        ]
    )
    assert problems_of(origin_config(hosts=[host])) == [
        "hosts[0].kubelets[0].devices[0].select.addresses[0]: PCI device 0000:41:00.0 of host numa-a is on NUMA "
        "node 1, offered by kubelet numa-a-numa1 (hosts[0].kubelets[1]), not on kubelet numa-a-numa0's NUMA node 0; "
        "to offer it here anyway (remote to this kubelet's CPUs), add it to hosts[0].kubelets[0].adoptDevices"
    ]


def test_addresses_the_host_lacks_are_refused_with_their_path():
    host = device_host(kubelets=[{"numaNode": 0, "adoptDevices": ["0000:99:00.0"]}, {"numaNode": 1}])
    resource = {"resource": "example.com/nvme", "select": {"addresses": ["0000:98:00.0"]}}
    problems = problems_of(origin_config(hosts=[host], devices=[resource]))
    assert problems == [
        "devices[0].select.addresses[0]: PCI device 0000:98:00.0 is not declared on host numa-a (neither in "
        "numaNodes[].pciDevices nor in pciDevices; python -m numa_kubelets.discover lists them)",
        "hosts[0].kubelets[0].adoptDevices[0]: PCI device 0000:99:00.0 is not declared on host numa-a (neither in "
        "numaNodes[].pciDevices nor in pciDevices; python -m numa_kubelets.discover lists them)",
    ]


def test_one_device_under_two_resources_of_a_kubelet_is_refused():
    both = [NVME, {"resource": "example.com/drive", "select": {"vendor": "0x1b36"}}]
    problems = problems_of(origin_config(hosts=[device_host()], devices=both))
    assert "devices[1].select: PCI device 0000:01:00.0 of kubelet numa-a-numa0 is also selected by devices[0] " in (
        "\n".join(problems)
    )


def test_adopting_twice_or_ones_own_device_is_refused():
    host = device_host(
        kubelets=[
            {"numaNode": 0, "adoptDevices": ["0000:00:05.0", "0000:01:00.0"]},
            {"numaNode": 1, "adoptDevices": ["0000:00:05.0"]},
        ]
    )
    assert problems_of(origin_config(hosts=[host])) == [
        "hosts[0].kubelets[0].adoptDevices[1]: PCI device 0000:01:00.0 is on NUMA node 0, this kubelet's own: it is "
        "offered here without adoptDevices",
        "hosts[0].kubelets[1].adoptDevices[0]: PCI device 0000:00:05.0 is already adopted by kubelet numa-a-numa0 "
        "(hosts[0].kubelets[0]); a device is offered by one kubelet only",
    ]


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ({"resource": "example.com/nvme", "select": {}}, "devices[0].select: selects nothing"),
        ({"resource": "nvme", "select": {"class": "0x01"}}, "devices[0].resource: 'nvme' is not an extended"),
        ({"resource": "kubernetes.io/nvme", "select": {"class": "0x01"}}, "in the kubernetes.io/ namespace"),
        ({"resource": "a.kubernetes.io/nvme", "select": {"class": "0x01"}}, "in the kubernetes.io/ namespace"),
        ({"resource": "requests.x/nvme", "select": {"class": "0x01"}}, "may not start with 'requests.'"),
        ({"resource": "Example.com/nvme", "select": {"class": "0x01"}}, "is not a DNS-1123 subdomain"),
        ({"resource": "example.com/-x", "select": {"class": "0x01"}}, "name '-x' must be"),
        ({"resource": "example.com/x", "select": {"class": "0x1"}}, "devices[0].select.class: '0x1' is not a PCI"),
        ({"resource": "example.com/x", "select": {"addresses": ["41:00.0"]}}, "is not a PCI address"),
        (
            {"resource": "example.com/x", "plugin": "sriov", "select": {"class": "0x02"}, "deviceNodes": ["/dev/x"]},
            "devices[0].deviceNodes: only the generic plugin takes deviceNodes",
        ),
        ({"resource": "example.com/x", "select": {"class": "0x01"}, "deviceNodes": ["/dev/../x"]}, "not a glob"),
        ({"resource": "example.com/a-b", "plugin": "sriov", "select": {"class": "0x02"}}, "letters, digits and '_'"),
        ({"resource": "example.com/x", "plugin": "nvidia", "select": {"class": "0x01"}}, "is not an NVIDIA GPU"),
        ({"resource": "example.com/x", "plugin": "cuda", "select": {"class": "0x01"}}, "devices[0].plugin:"),
    ],
)
def test_malformed_resources_are_refused_with_their_path(resource, expected):
    problems = problems_of(origin_config(hosts=[device_host()], devices=[resource]))
    assert any(expected in problem for problem in problems), problems


def test_a_device_declared_twice_on_a_host_is_refused():
    host = device_host(pciDevices=[nvme("0000:01:00.0")])
    assert problems_of(origin_config(hosts=[host])) == [
        "hosts[0].pciDevices[0].address: PCI device 0000:01:00.0 is already declared at "
        "hosts[0].numaNodes[0].pciDevices[0]"
    ]


def test_a_resource_declared_twice_in_one_list_is_refused():
    problems = problems_of(origin_config(hosts=[device_host()], devices=[NVME, {**NVME, "select": {"vendor": "0x1"}}]))
    assert any("devices[1].select.vendor" in p for p in problems)
    problems = problems_of(origin_config(hosts=[device_host()], devices=[NVME, {**GPUS, "resource": NVME["resource"]}]))
    assert "devices[1].resource: resource example.com/nvme is already declared (devices[0])" in problems


def test_problems_of_a_classs_resources_name_the_class():
    klass = {
        "numaNodes": copy.deepcopy(NODES),
        "devices": [{"resource": "example.com/nvme", "select": {"addresses": ["0000:98:00.0"]}}],
    }
    hosts = [
        {"name": "a", "address": "192.0.2.1", "hostKey": HOST_KEY, "class": "gpu"},
        {"name": "b", "address": "192.0.2.2", "hostKey": HOST_KEY, "class": "gpu"},
    ]
    problems = problems_of(origin_config(hosts=hosts, hostClasses={"gpu": klass}))
    assert [p.split(":")[0] for p in problems] == [
        "hostClasses.gpu.devices[0].select.addresses[0] (for hosts[0])",
        "hostClasses.gpu.devices[0].select.addresses[0] (for hosts[1])",
    ]


def test_generic_resources_group_into_one_plugin_per_domain():
    kubelet = (
        OfferedResource("b.example/x", "generic", ("0000:01:00.0",)),
        OfferedResource("a.example/z", "generic", ("0000:02:00.0",), ("/dev/nvme*",)),
        OfferedResource("a.example/y", "generic", ("0000:03:00.0",)),
        OfferedResource("nvidia.com/gpu", "nvidia", ("0000:04:00.0",)),
    )
    instances = generic_plugin_instances(kubelet)
    assert [(i.domain, [r.name for r in i.resources]) for i in instances] == [
        ("a.example", ["y", "z"]),
        ("b.example", ["x"]),
    ]


# ------------------------------------------------------------------ properties of the assignment

addresses = st.integers(0, 255).map(lambda bus: f"0000:{bus:02x}:00.0")
inventories = st.lists(
    st.tuples(addresses, st.one_of(st.none(), st.integers(0, 3)), st.sampled_from(["0x010802", "0x030200"])),
    unique_by=lambda item: item[0],
    max_size=12,
).map(lambda items: tuple(PciDevice(a, n, c, "0x10de", "0x0001") for a, n, c in items))


@st.composite
def hosts(draw: st.DrawFn) -> tuple[tuple[PciDevice, ...], tuple[KubeletDevices, ...]]:
    inventory = draw(inventories)
    nodes = draw(st.lists(st.integers(0, 3), unique=True, min_size=1, max_size=4))
    resources = (
        DeviceResource("example.com/nvme", "generic", Selector(pci_class="0x0108"), path="devices[0]"),
        DeviceResource("example.com/any", "generic", Selector(vendor="0x10de"), path="devices[1]"),
    )
    pool = [d.address for d in inventory]
    kubelets = tuple(
        KubeletDevices(
            f"k{node}",
            node,
            resources,
            adopt=tuple(draw(st.lists(st.sampled_from(pool), unique=True, max_size=3))) if pool else (),
        )
        for node in nodes
    )
    return inventory, kubelets


@settings(max_examples=200, deadline=None)
@given(hosts())
def test_every_device_is_offered_at_most_once(host):
    inventory, kubelets = host
    every = [a for kubelet in assign(inventory, kubelets) for r in kubelet for a in r.addresses]
    assert len(every) == len(set(every))
    assert set(every) <= {d.address for d in inventory}


@settings(max_examples=200, deadline=None)
@given(hosts())
def test_without_adoption_each_offered_device_is_on_its_kubelets_own_node(host):
    inventory, kubelets = host
    kubelets = tuple(KubeletDevices(k.node_name, k.numa_node, k.resources) for k in kubelets)
    node_of = {d.address: d.numa_node for d in inventory}
    for kubelet, resources in zip(kubelets, assign(inventory, kubelets), strict=True):
        for resource in resources:
            assert all(node_of[a] == kubelet.numa_node for a in resource.addresses)
            assert list(resource.addresses) == sorted(resource.addresses)


@settings(max_examples=200, deadline=None)
@given(hosts())
def test_an_adopted_device_is_offered_by_its_first_adopter_only(host):
    inventory, kubelets = host
    result = assign(inventory, kubelets)
    for address, owner in devices.owners(inventory, kubelets).items():
        holders = [i for i, resources in enumerate(result) if any(address in r.addresses for r in resources)]
        assert holders in ([], [owner])


# ------------------------------------------------------------------ the preflight's device checks


def run_device_checks(plan: Plan, sysfs: Path) -> list[str]:
    """The preflight's device steps against a fake /sys/bus/pci/devices: the findings, one a line."""
    steps = "".join(pci_device_checks(plan.hosts[0])).replace("/sys/bus/pci/devices/", f"{sysfs}/")
    script = 'problems=\nfail() { problems="$problems\n$*"; }\n' + steps + 'printf "%s" "$problems"\n'
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()


def fake_device(sysfs: Path, address: str, numa_node: int, pci_class: str, vendor: str, device: str, driver: str):
    directory = sysfs / address
    directory.mkdir(parents=True)
    for name, value in (("numa_node", numa_node), ("class", pci_class), ("vendor", vendor), ("device", device)):
        (directory / name).write_text(f"{value}\n")
    (directory / "driver").symlink_to(f"../../../bus/pci/drivers/{driver}")


def test_the_preflight_finds_every_device_as_declared(tmp_path):
    plan = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    for d in plan.hosts[0].pci_devices:
        node = -1 if d.numa_node is None else d.numa_node
        fake_device(tmp_path, d.address, node, d.pci_class, d.vendor, d.device, d.driver or "none")
    assert run_device_checks(plan, tmp_path) == []


def test_the_preflight_names_host_device_numa_node_and_kubelet_of_each_finding(tmp_path):
    plan = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    for d in plan.hosts[0].pci_devices:
        node = -1 if d.numa_node is None else d.numa_node
        if d.address == "0000:41:00.0":
            node = 0  # moved to another slot
        if d.address != "0000:42:00.0":  # removed
            fake_device(tmp_path, d.address, node, d.pci_class, d.vendor, d.device, d.driver or "none")
    assert run_device_checks(plan, tmp_path) == [
        "PCI device 0000:41:00.0 of host numa-a (NUMA node 1, for kubelet numa-a-numa1) is on NUMA node 0, the "
        "configuration declares 1",
        "PCI device 0000:42:00.0 of host numa-a (NUMA node 1, for kubelet numa-a-numa1) is missing (run discover)",
    ]


def test_the_preflight_checks_class_ids_and_driver(tmp_path):
    plan = plan_of(origin_config(hosts=[origin_host(pciDevices=[nvme("0000:00:05.0")])]))
    fake_device(tmp_path, "0000:00:05.0", -1, "0x010800", "0x8086", "0x0a54", "vfio-pci")
    assert run_device_checks(plan, tmp_path) == [
        f"PCI device 0000:00:05.0 of host numa-a (no NUMA affinity, offered by no kubelet) {finding}"
        for finding in (
            "is of class 0x010800, the configuration declares 0x010802",
            "has vendor 0x8086, the configuration declares 0x1b36",
            "has device id 0x0a54, the configuration declares 0x0010",
            "is bound to driver vfio-pci, the configuration declares nvme",
        )
    ]


def test_a_host_without_devices_keeps_its_preflight():
    plan = plan_of(origin_config())
    assert pci_device_checks(plan.hosts[0]) == []
    assert "check_pci" not in (preflight_scripts(plan.hosts[0], plan).stdin or "")


def test_the_pull_request_plan_shows_each_nodes_devices():
    plan = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    text = summary(plan)
    assert "| numa-a | numa-a-numa1 | example.com/nvme | generic | 0000:41:00.0, 0000:42:00.0 |" in text
    assert "example.com/nvme: 0000:41:00.0, 0000:42:00.0" in host_picture(plan.hosts[0])
    assert "PCI devices: 9 declared, 3 offered, each by its NUMA node's Node" in host_picture(plan.hosts[0])
    assert "## Devices" not in summary(plan_of(origin_config()))


def test_changing_a_nodes_devices_restarts_no_kubelet():
    """Issue 43 item 5: a Node's device set is its plugin's configuration, not the kubelet's files."""
    before = plan_of(origin_config(hosts=[device_host()], devices=[NVME]))
    after = plan_of(origin_config(hosts=[device_host()], devices=[GPUS]))
    assert [k.devices for k in before.kubelets] != [k.devices for k in after.kubelets]
    assert [restart_revision(k, before) for k in before.kubelets] == [
        restart_revision(k, after) for k in after.kubelets
    ]


def test_a_generic_resource_name_too_long_for_its_plugins_socket_is_refused():
    """The generic plugin's socket path (numa_kubelets/devices.py) past 107 bytes never registers;
    at NUMA node 1 the limit is 36 bytes, measured (docs/devices-host-notes.md)."""
    fits = "example.com/" + "n" * (36 - len("example.com/"))
    assert devices.generic_socket_path_length(fits, 1) == 106
    assert devices.generic_socket_path_length(fits + "n", 1) == 110
    assert [devices.longest_generic_resource(n) for n in (0, 10, 100, 1000)] == [36, 36, 33, 33]
    plan_of(origin_config(hosts=[device_host()], devices=[{**NVME, "resource": fits}]))
    problems = problems_of(origin_config(hosts=[device_host()], devices=[{**NVME, "resource": fits + "n"}]))
    assert problems == [
        f"devices[0].resource: '{fits}n' is too long for the generic device plugin of kubelet numa-a-numa0: its "
        "socket path would take 110 bytes, Linux allows 107; use a resource name of at most 36 bytes"
    ]
