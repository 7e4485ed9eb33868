"""discover's decisions for many hosts (numa_kubelets/fleet.py): destinations, names, classes, YAML."""

from __future__ import annotations

import pytest
import yaml

from numa_kubelets.config import load_config
from numa_kubelets.fleet import (
    HOST_KEY_ALGORITHMS,
    Destination,
    DestinationError,
    Endpoint,
    HostReading,
    assign_names,
    class_base_name,
    derived_name,
    duplicate_destinations,
    group_into_classes,
    parse_destination,
    parse_hosts_file,
    parse_ssh_config_dump,
    progress_due,
    progress_line,
    recorded_host_key,
    render_fleet,
    single_host_snippet,
    ssh_arguments,
)
from numa_kubelets.plan import build_plan
from numa_kubelets.review import plan_from_stack
from numa_kubelets.topology import Topology, parse_topology, stack_snippet

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExampleA"
KEY_B = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBExample="

DUAL_8 = "node 0 0-7\nnode 1 8-15\nonline 0-15\n"
DUAL_8_SMT = "node 0 0-3,8-11\nnode 1 4-7,12-15\nonline 0-15\nsiblings 0 0,8\nsiblings 4 4,12\n"
MEMORY_ONLY = "node 0 0-7\nnode 1 8-15\nnode 2\nonline 0-15\n"
QUAD_4 = "node 0 0-3\nnode 1 4-7\nnode 2 8-11\nnode 3 12-15\nonline 0-15\n"


def reading(name: str, topology: str, **endpoint: object) -> HostReading:
    where = {"address": f"192.0.2.{len(name)}", "port": 22, "user": "root", **endpoint}
    return HostReading(name, Endpoint(**where), KEY_A, parse_topology(topology))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "written, expected",
    [
        ("numa-a", Destination("numa-a")),
        ("root@numa-a", Destination("numa-a", user="root")),
        ("root@10.0.0.1:2222", Destination("10.0.0.1", user="root", port=2222)),
        ("rack1-01=admin@10.0.0.1", Destination("10.0.0.1", user="admin", name="rack1-01")),
        ("2001:db8::1", Destination("2001:db8::1")),
        ("ops@[2001:db8::1]:2200", Destination("2001:db8::1", user="ops", port=2200)),
        ("[2001:db8::1]", Destination("2001:db8::1")),
        ("  numa-a.example.com  ", Destination("numa-a.example.com")),
    ],
)
def test_destinations(written: str, expected: Destination) -> None:
    assert parse_destination(written) == expected


@pytest.mark.parametrize(
    "written, message",
    [
        ("numa-a:0", "port '0'"),
        ("numa-a:ssh", "port 'ssh'"),
        ("Rack=numa-a", "not a DNS-1123 label"),
        ("Root@numa-a", "not a valid user name"),
        ("root@", "not a host name"),
        ("numa a", "not a host name"),
        ("2001:db8::zz", "not an IPv6 address"),
        ("[numa-a]:22", "not a host name"),
    ],
)
def test_malformed_destinations(written: str, message: str) -> None:
    with pytest.raises(DestinationError, match=message):
        parse_destination(written)


def test_a_destination_prints_as_written_back() -> None:
    for written in ("numa-a", "root@10.0.0.1:2222", "ops@[2001:db8::1]:2200", "2001:db8::1"):
        assert str(parse_destination(written)) == written


def test_hosts_file_skips_blank_lines_and_comments() -> None:
    assert parse_hosts_file("# rack 1\nroot@10.0.0.1\n\n  10.0.0.2:2222  # spare\n") == [
        "root@10.0.0.1",
        "10.0.0.2:2222",
    ]


def test_duplicate_destinations_are_named() -> None:
    destinations = [parse_destination(d) for d in ("root@a", "root@A", "a", "root@a:2222")]
    assert duplicate_destinations(destinations) == ["root@A"]


@pytest.mark.parametrize(
    "host, name",
    [
        ("numa-a", "numa-a"),
        ("Rack1-01.DC.example.com", "rack1-01"),
        ("10.0.0.1", "host-10-0-0-1"),
        ("2001:db8::1", "host-2001-db8-1"),
        ("under_score", "under-score"),
        ("x" * 80 + ".example", "x" * 63),
    ],
)
def test_derived_names_are_dns_labels(host: str, name: str) -> None:
    assert derived_name(host) == name


def test_names_are_unique_and_follow_the_order_given() -> None:
    destinations = [
        parse_destination(d)
        for d in ("a.rack1.example", "a.rack2.example", "10.0.0.1", "10.0.0.1:2222", "host-10-0-0-1-2=10.0.0.2", "b")
    ]
    assert assign_names(destinations) == [
        "a-rack1-example",
        "a-rack2-example",
        "host-10-0-0-1",
        "host-10-0-0-1-3",  # -2 is a name given
        "host-10-0-0-1-2",
        "b",
    ]


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(DestinationError, match="more than once: a"):
        assign_names([parse_destination("a=10.0.0.1"), parse_destination("a=10.0.0.2")])


def test_ssh_config_dump_gives_where_ssh_connects() -> None:
    dump = "user alice\nhostname 10.0.0.5\nport 2222\nhostkeyalias none\n"
    assert parse_ssh_config_dump(dump) == Endpoint("10.0.0.5", 2222, "alice")
    with pytest.raises(ValueError, match="hostname"):
        parse_ssh_config_dump("user alice\nport 22\n")


@pytest.mark.parametrize(
    "known_hosts",
    [
        f"[127.0.0.1]:2222 {KEY_A}\n",
        f"|1|c2FsdA==|aGFzaA== {KEY_A}\n",
        f"numa-a {KEY_A} a comment\n",
        f"# ssh writes no comments, but one is harmless\n127.0.0.1 {KEY_A}\n",
    ],
)
def test_the_recorded_host_key_is_type_and_key(known_hosts: str) -> None:
    assert recorded_host_key(known_hosts) == KEY_A


@pytest.mark.parametrize(
    "known_hosts, message",
    [
        ("", "recorded 0 host keys"),
        (f"a {KEY_A}\na {KEY_B}\n", "recorded 2 host keys"),
        (f"@cert-authority * {KEY_A}\n", "unexpected known_hosts line"),
        ("a ssh-dss AAAAB3NzaC1kc3M=\n", "cannot pin"),
    ],
)
def test_anything_but_one_recorded_key_is_refused(known_hosts: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recorded_host_key(known_hosts)


def test_ssh_records_the_connection_s_key_in_the_fresh_file_only() -> None:
    arguments = ssh_arguments(parse_destination("root@a:2222"), 22, "/keys/id", "/tmp/x/known_hosts", 10)
    options = {arguments[i + 1] for i, a in enumerate(arguments) if a == "-o"}
    assert {
        "UserKnownHostsFile=/tmp/x/known_hosts",
        "GlobalKnownHostsFile=/dev/null",
        "StrictHostKeyChecking=accept-new",
        "UpdateHostKeys=no",
        "BatchMode=yes",
        f"HostKeyAlgorithms={','.join(HOST_KEY_ALGORITHMS)}",
    } <= options
    assert HOST_KEY_ALGORITHMS[0] == "ssh-ed25519"
    assert arguments[-4:] == ["-p", "2222", "-i", "/keys/id"]  # the destination's port before -p's
    assert "-p" not in ssh_arguments(parse_destination("a"), None, None, "k", 10)  # ssh's own default
    assert ssh_arguments(parse_destination("a"), 2200, None, "k", 10)[-2:] == ["-p", "2200"]


@pytest.mark.parametrize(
    "topology, name",
    [(DUAL_8, "2x8-cpus"), (DUAL_8_SMT, "2x8-cpus"), (MEMORY_ONLY, "8-8-0-cpus"), (QUAD_4, "4x4-cpus")],
)
def test_class_names_describe_the_topology(topology: str, name: str) -> None:
    assert class_base_name(parse_topology(topology)) == name


def test_a_class_name_too_long_for_a_label_is_shortened() -> None:
    uneven = "".join(f"node {n} {2 * n}-{2 * n + (n % 2)}\n" for n in range(32)) + "online 0-63\n"
    name = class_base_name(parse_topology(uneven))
    assert name.startswith("32-nodes-") and len(name) == len("32-nodes-") + 8


def test_one_class_per_distinct_topology_named_independently_of_host_order() -> None:
    readings = [reading("a", DUAL_8_SMT), reading("b", DUAL_8), reading("c", QUAD_4), reading("d", DUAL_8)]
    classes, names = group_into_classes(readings)
    assert list(classes) == ["2x8-cpus", "2x8-cpus-2", "4x4-cpus"]
    # Same base name: numbered in the order of their layouts' text ("0:0-3,8-11;..." < "0:0-7;...").
    assert names == ["2x8-cpus", "2x8-cpus-2", "4x4-cpus", "2x8-cpus-2"]
    assert classes["2x8-cpus"] == {
        "numaNodes": [{"id": 0, "cpus": "0-3,8-11"}, {"id": 1, "cpus": "4-7,12-15"}],
        "systemCpus": "0,4,8,12",
    }
    reversed_classes, reversed_names = group_into_classes(readings[::-1])
    assert reversed_classes == classes and reversed_names == names[::-1]


def test_the_fleet_loads_and_plans_as_printed() -> None:
    readings = [
        reading("rack1-01", DUAL_8),
        reading("rack1-02", QUAD_4, port=2222, user="admin"),
        reading("rack1-03", DUAL_8, address="2001:db8::3"),
    ]
    document = yaml.safe_load(render_fleet(readings))
    config = document["config"]
    assert config["numa-kubelets:hosts"] == [
        {"name": "rack1-01", "address": "192.0.2.8", "class": "2x8-cpus", "hostKey": KEY_A},
        {
            "name": "rack1-02",
            "address": "192.0.2.8",
            "sshPort": 2222,
            "user": "admin",
            "class": "4x4-cpus",
            "hostKey": KEY_A,
        },
        {"name": "rack1-03", "address": "2001:db8::3", "class": "2x8-cpus", "hostKey": KEY_A},
    ]
    # As the program reads the stack file (review.plan_from_stack), and as load_config takes it.
    _config, plan = plan_from_stack(document)
    assert [len(host.kubelets) for host in plan.hosts] == [2, 4, 2]
    raw = {key.removeprefix("numa-kubelets:"): value for key, value in config.items()}
    assert build_plan(load_config(raw)) == plan


def test_each_host_is_one_line_and_offline_cpus_are_called_out() -> None:
    readings = [reading("a", DUAL_8), reading("b", "node 0 0-7\nnode 1 8-15\nonline 0-14\n")]
    text = render_fleet(readings)
    hosts = text.split("numa-kubelets:hosts:\n", 1)[1].splitlines()
    assert hosts[0].startswith("    - {name: a, ") and hosts[0].endswith(f"hostKey: {KEY_A}}}")
    assert hosts[1] == "    # CPUs 15 are offline on b: the preflight requires every declared CPU online."
    assert hosts[2].startswith("    - {name: b, ")
    assert len(hosts) == 3


def test_one_host_keeps_today_s_snippet_with_its_key() -> None:
    topology: Topology = parse_topology(DUAL_8)
    text = single_host_snippet(stack_snippet(topology), KEY_A)
    assert text.startswith(stack_snippet(topology))
    assert yaml.safe_load(text) == {**yaml.safe_load(stack_snippet(topology)), "hostKey": KEY_A}


def test_progress() -> None:
    assert progress_line(37, 625, 2) == "discover: 37/625 hosts read, 2 failed"
    assert [done for done in range(1, 26) if progress_due(done, 25)] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 25]
    assert all(progress_due(done, 3) for done in range(1, 4))


def test_cpulists_with_commas_survive_the_flow_style() -> None:
    document = yaml.safe_load(render_fleet([reading("a", DUAL_8_SMT)]))
    (layout,) = document["config"]["numa-kubelets:hostClasses"].values()
    assert layout["numaNodes"] == [{"id": 0, "cpus": "0-3,8-11"}, {"id": 1, "cpus": "4-7,12-15"}]
    assert layout["systemCpus"] == "0,4,8,12"


def test_hosts_with_other_devices_get_other_classes() -> None:
    nvme = "pci 0000:41:00.0 1 0x010802 0x1b36 0x0010 nvme\n"
    readings = [
        reading("rack1-01", DUAL_8 + nvme, address="192.0.2.1"),
        reading("rack1-02", DUAL_8 + nvme, address="192.0.2.2"),
        reading("rack1-03", DUAL_8, address="192.0.2.3"),
        reading("rack1-04", DUAL_8 + "pci 0000:00:05.0 -1 0x010802 0x1b36 0x0010 nvme\n", address="192.0.2.4"),
    ]
    classes, names = group_into_classes(readings)
    assert names[0] == names[1] and len(set(names)) == 3
    with_nvme = classes[names[0]]
    assert with_nvme["numaNodes"][1]["pciDevices"] == [
        {"address": "0000:41:00.0", "class": "0x010802", "vendor": "0x1b36", "device": "0x0010", "driver": "nvme"}
    ]
    assert classes[names[3]]["pciDevices"][0]["address"] == "0000:00:05.0"
    assert "pciDevices" not in classes[names[2]]
    document = yaml.safe_load(render_fleet(readings))
    _config, plan = plan_from_stack(document)
    assert [len(host.pci_devices) for host in plan.hosts] == [1, 1, 0, 1]
