"""Invalid stack configurations: each is refused with a problem naming its path and what is wrong.

Every case is the valid base configuration changed in one place. Problems that only the whole
fleet reveals (names across hosts, ports) come from `build_plan`, the rest from `load_config`;
either way no plan is produced.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from numa_kubelets.config import ConfigError, load_config, load_stack_values, plaintext_secret_problems
from numa_kubelets.plan import build_plan
from tests.unit.builders import BOOTSTRAP_TOKEN, CA_CERT, origin_config, origin_host, with_cluster

Raw = dict[str, Any]


def base_config() -> Raw:
    """The origin with its kubelets listed, as in Pulumi.dev.yaml."""
    kubelets = [{"numaNode": 0, "labels": {"numa-type": "red"}}, {"numaNode": 1, "labels": {"numa-type": "blue"}}]
    return origin_config(hosts=[origin_host(kubelets=kubelets)])


def _keys(path: str) -> list[str | int]:
    return [int(index) if index else key for index, key in re.findall(r"\[(\d+)\]|([^.\[\]]+)", path)]


def _parent(raw: Raw, path: str) -> tuple[Any, str | int]:
    keys = _keys(path)
    target = raw
    for key in keys[:-1]:
        target = target[key] if isinstance(key, int) else target.setdefault(key, {})
    return target, keys[-1]


def setting(path: str, value: Any) -> Callable[[Raw], None]:
    def modify(raw: Raw) -> None:
        target, key = _parent(raw, path)
        target[key] = value

    return modify


def removing(path: str) -> Callable[[Raw], None]:
    def modify(raw: Raw) -> None:
        target, key = _parent(raw, path)
        del target[key]

    return modify


def both(*modifiers: Callable[[Raw], None]) -> Callable[[Raw], None]:
    def modify(raw: Raw) -> None:
        for modifier in modifiers:
            modifier(raw)

    return modify


def adding_host(**host: Any) -> Callable[[Raw], None]:
    def modify(raw: Raw) -> None:
        raw["hosts"].append(origin_host(**host))

    return modify


def joining_cluster(raw: Raw) -> None:
    raw.update(with_cluster(raw))


def label(key: str, value: str = "x") -> Callable[[Raw], None]:
    return setting("hosts[0].kubelets[0].labels", {key: value})


@dataclass(frozen=True)
class Invalid:
    name: str
    modify: Callable[[Raw], None]
    path: str
    fragment: str
    fleet: bool = False  # found by build_plan, which sees every host at once


CASES = [
    # malformed cpulists
    Invalid(
        "descending range",
        setting("hosts[0].numaNodes[0].cpus", "3-1"),
        "hosts[0].numaNodes[0].cpus",
        "descending",
    ),
    Invalid(
        "trailing comma",
        setting("hosts[0].numaNodes[1].cpus", "4-7,"),
        "hosts[0].numaNodes[1].cpus",
        "not a cpulist",
    ),
    Invalid("empty item", setting("hosts[0].kubelets[0].cpus", "1,,2"), "hosts[0].kubelets[0].cpus", "not a cpulist"),
    Invalid("semicolon", setting("hosts[0].systemCpus", "0;4"), "hosts[0].systemCpus", "not a cpulist"),
    Invalid(
        "cpus as a list",
        setting("hosts[0].numaNodes[0].cpus", [0, 1]),
        "hosts[0].numaNodes[0].cpus",
        "cpulist string",
    ),
    # topology
    Invalid(
        "CPU on two NUMA nodes",
        setting("hosts[0].numaNodes[1].cpus", "3-7"),
        "hosts[0].numaNodes[1].cpus",
        "CPU 3 is also on NUMA node 0",
    ),
    Invalid(
        "duplicate NUMA id",
        setting("hosts[0].numaNodes[1].id", 0),
        "hosts[0].numaNodes[1].id",
        "NUMA node 0 is declared twice",
    ),
    Invalid(
        "no NUMA node has CPUs",
        both(
            setting("hosts[0].numaNodes[0].cpus", ""),
            setting("hosts[0].numaNodes[1].cpus", ""),
            removing("hosts[0].kubelets"),
        ),
        "hosts[0].numaNodes",
        "no NUMA node has CPUs",
    ),
    # kubelet CPUs
    Invalid(
        "kubelet CPU beyond its node",
        setting("hosts[0].kubelets[1].cpus", "5-7,9"),
        "hosts[0].kubelets[1].cpus",
        "CPU 9 is not on NUMA node 1 (cpus 4-7)",
    ),
    Invalid(
        "kubelet CPU on another node",
        setting("hosts[0].kubelets[0].cpus", "3-4"),
        "hosts[0].kubelets[0].cpus",
        "CPU 4 is not on NUMA node 0 (cpus 0-3)",
    ),
    Invalid(
        "kubelet cpus empty",
        setting("hosts[0].kubelets[1].cpus", ""),
        "hosts[0].kubelets[1].cpus",
        "at least one CPU",
    ),
    Invalid(
        "kubelet empty after systemCpus",
        setting("hosts[0].systemCpus", "0,4-7"),
        "hosts[0].kubelets[1].cpus",
        "no CPU left after systemCpus",
    ),
    Invalid(
        "systemCpus take a whole node, kubelets defaulted",
        both(removing("hosts[0].kubelets"), setting("hosts[0].systemCpus", "0-4")),
        "hosts[0].systemCpus",
        "takes every CPU of NUMA node 0",
    ),
    Invalid(
        "systemCpus on no node",
        setting("hosts[0].systemCpus", "0,4,8"),
        "hosts[0].systemCpus",
        "8 are on no declared NUMA node",
    ),
    Invalid("systemCpus empty", setting("hosts[0].systemCpus", ""), "hosts[0].systemCpus", "at least one CPU"),
    Invalid(
        "undeclared numaNode",
        setting("hosts[0].kubelets[1].numaNode", 2),
        "hosts[0].kubelets[1].numaNode",
        "NUMA node 2 is not declared",
    ),
    Invalid(
        "two kubelets on one node",
        setting("hosts[0].kubelets[1].numaNode", 0),
        "hosts[0].kubelets[1].numaNode",
        "NUMA node 0 already has a kubelet",
    ),
    Invalid(
        "kubelet on a memory-only node",
        setting("hosts[0].numaNodes[1].cpus", ""),
        "hosts[0].kubelets[1].numaNode",
        "NUMA node 1 has no CPUs",
    ),
    # names across the fleet
    Invalid(
        "duplicate host name",
        adding_host(address="192.0.2.11"),
        "hosts[1].name",
        "'numa-a' is already the name of hosts[0]",
        fleet=True,
    ),
    Invalid(
        "duplicate host endpoint",
        adding_host(name="numa-b"),
        "hosts[1].address",
        "192.0.2.10:22 is also hosts[0]",
        fleet=True,
    ),
    Invalid(
        "duplicate nodeName on one host",
        both(setting("hosts[0].kubelets[0].nodeName", "worker"), setting("hosts[0].kubelets[1].nodeName", "worker")),
        "hosts[0].kubelets[1].nodeName",
        "'worker' is already used by hosts[0].kubelets[0]",
        fleet=True,
    ),
    Invalid(
        "duplicate nodeName across hosts",
        adding_host(name="numa-b", address="192.0.2.11", kubelets=[{"numaNode": 0, "nodeName": "numa-a-numa1"}]),
        "hosts[1].kubelets[0].nodeName",
        "'numa-a-numa1' is already used by hosts[0].kubelets[1]",
        fleet=True,
    ),
    Invalid(
        "explicit nodeName equals another host's default",
        both(
            setting("hosts[0].kubelets[0].nodeName", "numa-b-numa1"),
            adding_host(name="numa-b", address="192.0.2.11"),
        ),
        "hosts[1]",
        "'numa-b-numa1' is already used by hosts[0].kubelets[0]",
        fleet=True,
    ),
    # ports
    Invalid(
        "port of another kubelet",
        setting("hosts[0].kubelets[1].port", 10250),
        "hosts[0].kubelets[1].port",
        "port 10250 collides with numa0 port",
        fleet=True,
    ),
    Invalid(
        "healthzPort equals own port",
        setting("hosts[0].kubelets[1].healthzPort", 10350),
        "hosts[0].kubelets[1].healthzPort",
        "port 10350 collides with numa1 port",
        fleet=True,
    ),
    Invalid(
        "readOnlyPort on another healthzPort",
        setting("hosts[0].kubelets[1].readOnlyPort", 10248),
        "hosts[0].kubelets[1].readOnlyPort",
        "port 10248 collides with numa0 healthzPort",
        fleet=True,
    ),
    Invalid(
        "port on kube-apiserver",
        setting("hosts[0].kubelets[0].port", 6443),
        "hosts[0].kubelets[0].port",
        "port 6443 collides with kube-apiserver",
        fleet=True,
    ),
    Invalid(
        "port on etcd client",
        setting("hosts[0].kubelets[1].port", 2379),
        "hosts[0].kubelets[1].port",
        "port 2379 collides with etcd",
        fleet=True,
    ),
    Invalid(
        "healthzPort on etcd peer",
        setting("hosts[0].kubelets[0].healthzPort", 2380),
        "hosts[0].kubelets[0].healthzPort",
        "port 2380 collides with etcd",
        fleet=True,
    ),
    Invalid(
        "port on kube-proxy metrics",
        setting("hosts[0].kubelets[0].port", 10249),
        "hosts[0].kubelets[0].port",
        "port 10249 collides with kube-proxy",
        fleet=True,
    ),
    Invalid(
        "healthzPort on kube-proxy health",
        setting("hosts[0].kubelets[1].healthzPort", 10256),
        "hosts[0].kubelets[1].healthzPort",
        "port 10256 collides with kube-proxy",
        fleet=True,
    ),
    Invalid(
        "readOnlyPort on kube-controller-manager",
        setting("hosts[0].kubelets[0].readOnlyPort", 10257),
        "hosts[0].kubelets[0].readOnlyPort",
        "port 10257 collides with kube-controller-manager",
        fleet=True,
    ),
    Invalid(
        "port on kube-scheduler",
        setting("hosts[0].kubelets[1].port", 10259),
        "hosts[0].kubelets[1].port",
        "port 10259 collides with kube-scheduler",
        fleet=True,
    ),
    Invalid(
        "port on sshd",
        setting("hosts[0].kubelets[0].port", 22),
        "hosts[0].kubelets[0].port",
        "port 22 collides with sshd",
        fleet=True,
    ),
    Invalid(
        "sshPort on a default kubelet port",
        setting("hosts[0].sshPort", 10350),
        "hosts[0].kubelets[1].port",
        "port 10350 collides with sshd",
        fleet=True,
    ),
    Invalid("port above 65535", setting("hosts[0].kubelets[0].port", 70000), "hosts[0].kubelets[0].port", "65535"),
    Invalid("sshPort 0", setting("hosts[0].sshPort", 0), "hosts[0].sshPort", "greater than or equal to 1"),
    Invalid(
        "port given as a boolean",
        setting("hosts[0].kubelets[0].port", True),
        "hosts[0].kubelets[0].port",
        "integer",
    ),
    Invalid(
        "maxPods 0",
        setting("hosts[0].kubelets[0].maxPods", 0),
        "hosts[0].kubelets[0].maxPods",
        "greater than or equal to 1",
    ),
    # unknown keys
    Invalid("maxPod typo", setting("hosts[0].kubelets[0].maxPod", 1), "hosts[0].kubelets[0].maxPod", "unknown key"),
    Invalid(
        "numaNode misspelled",
        both(removing("hosts[0].kubelets[0].numaNode"), setting("hosts[0].kubelets[0].numaNod", 0)),
        "hosts[0].kubelets[0].numaNod",
        "unknown key",
    ),
    Invalid("numa-kubelets:hostz", setting("hostz", []), "hostz", "unknown key"),
    Invalid("systemCPUs typo", setting("hosts[0].systemCPUs", "0,4"), "hosts[0].systemCPUs", "unknown key"),
    Invalid(
        "numaNodes entry typo",
        setting("hosts[0].numaNodes[0].cpu", "0-3"),
        "hosts[0].numaNodes[0].cpu",
        "unknown key",
    ),
    Invalid("demo typo", setting("demo.enable", False), "demo.enable", "unknown key"),
    Invalid(
        "cluster typo",
        both(joining_cluster, setting("cluster.caCertificate", CA_CERT)),
        "cluster.caCertificate",
        "unknown key",
    ),
    # labels
    Invalid("label key with a space", label("numa type"), "hosts[0].kubelets[0].labels.numa type", "label key"),
    Invalid(
        "label key with an empty prefix",
        label("/numa-type"),
        "hosts[0].kubelets[0].labels./numa-type",
        "empty prefix",
    ),
    Invalid(
        "label value starting with '-'",
        setting("hosts[0].kubelets[0].labels.numa-type", "-red"),
        "hosts[0].kubelets[0].labels.numa-type",
        "label value",
    ),
    Invalid(
        "label value of 64 characters",
        setting("hosts[0].kubelets[0].labels.numa-type", "r" * 64),
        "hosts[0].kubelets[0].labels.numa-type",
        "at most 63",
    ),
    Invalid(
        "label under kubernetes.io/",
        label("kubernetes.io/hostname"),
        "hosts[0].kubelets[0].labels.kubernetes.io/hostname",
        "may not set labels under kubernetes.io/",
    ),
    Invalid(
        "label under node-role.kubernetes.io/",
        label("node-role.kubernetes.io/worker", ""),
        "hosts[0].kubelets[0].labels.node-role.kubernetes.io/worker",
        "may not set labels under node-role.kubernetes.io/",
    ),
    Invalid(
        "label under k8s.io/",
        label("k8s.io/team"),
        "hosts[0].kubelets[0].labels.k8s.io/team",
        "may not set labels under k8s.io/",
    ),
    Invalid(
        "label under a subdomain of k8s.io/",
        label("apps.k8s.io/team"),
        "hosts[0].kubelets[0].labels.apps.k8s.io/team",
        "may not set labels under apps.k8s.io/",
    ),
    Invalid(
        "label under numa-kubelets.io/",
        label("numa-kubelets.io/numa-node", "3"),
        "hosts[0].kubelets[0].labels.numa-kubelets.io/numa-node",
        "set by numa-kubelets itself",
    ),
    # names
    Invalid("host name Numa_A", setting("hosts[0].name", "Numa_A"), "hosts[0].name", "not a DNS-1123 label"),
    Invalid("host name with a dot", setting("hosts[0].name", "numa.a"), "hosts[0].name", "not a DNS-1123 label"),
    Invalid("host name of 64 characters", setting("hosts[0].name", "n" * 64), "hosts[0].name", "not a DNS-1123 label"),
    Invalid(
        "nodeName with capitals",
        setting("hosts[0].kubelets[0].nodeName", "Numa-A-0"),
        "hosts[0].kubelets[0].nodeName",
        "not a DNS-1123 subdomain",
    ),
    Invalid(
        "nodeName with underscore",
        setting("hosts[0].kubelets[1].nodeName", "numa_a_1"),
        "hosts[0].kubelets[1].nodeName",
        "not a DNS-1123 subdomain",
    ),
    Invalid(
        "demo namespace",
        both(joining_cluster, setting("demo.namespace", "Numa_Demo")),
        "demo.namespace",
        "not a DNS-1123 label",
    ),
    # cluster, secrets, demo
    Invalid(
        "bootstrap token with capitals",
        both(joining_cluster, setting("bootstrapToken", "ABCDEF.0123456789ABCDEF")),
        "bootstrapToken",
        "[a-z0-9]{6}.[a-z0-9]{16}",
    ),
    Invalid(
        "bootstrap token too short",
        both(joining_cluster, setting("bootstrapToken", "abcdef.0123")),
        "bootstrapToken",
        "[a-z0-9]{6}.[a-z0-9]{16}",
    ),
    Invalid(
        "bootstrapToken without cluster",
        setting("bootstrapToken", BOOTSTRAP_TOKEN),
        "bootstrapToken",
        "no cluster to join",
    ),
    Invalid("demo without cluster", setting("demo.enabled", True), "demo.enabled", "need a cluster"),
    Invalid(
        "both SSH keys",
        both(
            setting("sshPrivateKey", "-----BEGIN OPENSSH PRIVATE KEY-----\n..."),
            setting("sshPrivateKeyPath", "/root/.ssh/id_ed25519"),
        ),
        "sshPrivateKeyPath",
        "not both",
    ),
    Invalid(
        "caCert not PEM",
        both(joining_cluster, setting("cluster.caCert", "MIIBszCCAVmgAwIBAgIU")),
        "cluster.caCert",
        "PEM certificate",
    ),
    Invalid(
        "caCert body not base64",
        both(
            joining_cluster,
            setting("cluster.caCert", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n"),
        ),
        "cluster.caCert",
        "PEM certificate",
    ),
    Invalid(
        "caCert with two certificates",
        both(joining_cluster, setting("cluster.caCert", CA_CERT + CA_CERT)),
        "cluster.caCert",
        "single PEM certificate",
    ),
    Invalid(
        "cluster server over http",
        both(joining_cluster, setting("cluster.server", "http://192.0.2.1:6443")),
        "cluster.server",
        "https:// URL",
    ),
    Invalid(
        "cluster server port out of range",
        both(joining_cluster, setting("cluster.server", "https://192.0.2.1:70000")),
        "cluster.server",
        "out of range",
    ),
    # the cluster side of the node lifecycle (issue 12)
    Invalid(
        "drain timeout in words",
        both(joining_cluster, setting("cluster.drainTimeout", "5 minutes")),
        "cluster.drainTimeout",
        "not a duration",
    ),
    Invalid(
        "zero drain timeout",
        both(joining_cluster, setting("cluster.drainTimeout", "0s")),
        "cluster.drainTimeout",
        "not a duration",
    ),
    Invalid(
        "drain timeout in days",
        both(joining_cluster, setting("cluster.drainTimeout", "1d")),
        "cluster.drainTimeout",
        "not a duration",
    ),
    Invalid(
        "drain timeout as a number",
        both(joining_cluster, setting("cluster.drainTimeout", 300)),
        "cluster.drainTimeout",
        "string",
    ),
    Invalid(
        "unknown serving certificates mode",
        both(joining_cluster, setting("cluster.servingCertificates", "auto")),
        "cluster.servingCertificates",
        "'selfSigned' or 'bootstrap'",
    ),
    Invalid(
        "removeNodes as a string",
        both(joining_cluster, setting("cluster.removeNodes", "yes")),
        "cluster.removeNodes",
        "boolean",
    ),
    Invalid(
        "removeNodes without cluster",
        setting("removeNodes", False),
        "removeNodes",
        "unknown key",
    ),
    Invalid(
        "cluster with only removeNodes",
        setting("cluster", {"removeNodes": False}),
        "cluster.server",
        "required key is missing",
    ),
    Invalid(
        "cluster dns not an address",
        both(joining_cluster, setting("cluster.dns", "kube-dns.kube-system")),
        "cluster.dns",
        "not an IP address",
    ),
    Invalid(
        "cluster dns with a scope id",
        both(joining_cluster, setting("cluster.dns", "fe80::a%eth0")),
        "cluster.dns",
        "scope ids",
    ),
    Invalid(
        "cluster domain not DNS-1123",
        both(joining_cluster, setting("cluster.domain", "Cluster.Local")),
        "cluster.domain",
        "DNS-1123",
    ),
    Invalid(
        "typo in a cluster key",
        both(joining_cluster, setting("cluster.drainTimout", "5m")),
        "cluster.drainTimout",
        "unknown key",
    ),
    # taints (issue 13)
    Invalid(
        "taint with an unknown effect",
        setting("hosts[0].kubelets[0].taints", [{"key": "tenant", "value": "a", "effect": "NoSchedul"}]),
        "hosts[0].kubelets[0].taints[0].effect",
        "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
    ),
    Invalid(
        "taint without an effect",
        setting("hosts[0].kubelets[0].taints", [{"key": "tenant", "value": "a"}]),
        "hosts[0].kubelets[0].taints[0].effect",
        "required key is missing",
    ),
    Invalid(
        "duplicate taint key and effect",
        setting(
            "hosts[0].kubelets[1].taints",
            [
                {"key": "tenant", "value": "a", "effect": "NoSchedule"},
                {"key": "tenant", "effect": "NoExecute"},
                {"key": "tenant", "value": "b", "effect": "NoSchedule"},
            ],
        ),
        "hosts[0].kubelets[1].taints[2]",
        "tenant:NoSchedule is already declared (taints[0])",
    ),
    Invalid(
        "taint under a Kubernetes prefix",
        setting("hosts[0].kubelets[0].taints", [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        "hosts[0].kubelets[0].taints[0].key",
        "managed by Kubernetes itself",
    ),
    Invalid(
        "taint under the automatic prefix",
        setting("hosts[0].kubelets[0].taints", [{"key": "numa-kubelets.io/host", "effect": "NoSchedule"}]),
        "hosts[0].kubelets[0].taints[0].key",
        "reserved for numa-kubelets",
    ),
    Invalid(
        "taint key with a space",
        setting("hosts[0].kubelets[0].taints", [{"key": "tenant a", "effect": "NoSchedule"}]),
        "hosts[0].kubelets[0].taints[0].key",
        "at most 63 characters",
    ),
    Invalid(
        "taint value with a slash",
        setting("hosts[0].kubelets[0].taints", [{"key": "tenant", "value": "a/b", "effect": "NoSchedule"}]),
        "hosts[0].kubelets[0].taints[0].value",
        "label value",
    ),
    Invalid(
        "taint with an operator",
        setting("hosts[0].kubelets[0].taints", [{"key": "tenant", "operator": "Exists", "effect": "NoSchedule"}]),
        "hosts[0].kubelets[0].taints[0].operator",
        "unknown key",
    ),
    # required keys
    Invalid("no hosts", removing("hosts"), "hosts", "required key is missing"),
    Invalid("empty hosts", setting("hosts", []), "hosts", "at least 1"),
    Invalid("hosts not a list", setting("hosts", "numa-a"), "hosts", "list"),
    Invalid("host without name", removing("hosts[0].name"), "hosts[0].name", "required key is missing"),
    Invalid("host without address", removing("hosts[0].address"), "hosts[0].address", "required key is missing"),
    Invalid("host without numaNodes", removing("hosts[0].numaNodes"), "hosts[0].numaNodes", "required key is missing"),
    Invalid("empty numaNodes", setting("hosts[0].numaNodes", []), "hosts[0].numaNodes", "at least 1"),
    Invalid(
        "NUMA node without cpus",
        removing("hosts[0].numaNodes[1].cpus"),
        "hosts[0].numaNodes[1].cpus",
        "required key is missing",
    ),
    Invalid(
        "kubelet without numaNode",
        removing("hosts[0].kubelets[1].numaNode"),
        "hosts[0].kubelets[1].numaNode",
        "required key is missing",
    ),
    Invalid(
        "cluster without caCert",
        both(joining_cluster, removing("cluster.caCert")),
        "cluster.caCert",
        "required key is missing",
    ),
]


def problems_of(raw: Raw, *, fleet: bool) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        if fleet:
            build_plan(load_config(raw))
        else:
            load_config(raw)
    return caught.value


def assert_reported(error: ConfigError, path: str, fragment: str) -> None:
    found = [p for p in error.problems if p.path == path and fragment in p.message]
    assert found, f"expected a problem at {path!r} mentioning {fragment!r}; got:\n{error}"


def test_the_base_configurations_are_valid():
    assert len(build_plan(load_config(base_config())).kubelets) == 2
    assert len(build_plan(load_config(with_cluster(base_config()))).kubelets) == 2


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_invalid_configuration_is_refused_with_its_path(case: Invalid):
    raw = base_config()
    case.modify(raw)
    error = problems_of(raw, fleet=case.fleet)
    assert_reported(error, case.path, case.fragment)
    assert f"{case.path}: " in str(error)


# ---------------------------------------------------------------- values that reach scripts and unit files

SHELL_BREAKERS = {
    "newline": "\n",
    "single quote": "'",
    "double quote": '"',
    "dollar": "$",
    "semicolon": ";",
    "space": " ",
    "backtick": "`",
    "backslash": "\\",
}

# (path, a valid value, where to splice the bad character in)
SCRIPT_REACHING_VALUES = [
    ("hosts[0].address", "numa-a.example.com", 6),
    ("hosts[0].user", "admin", 2),
    ("hosts[0].hostKey", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", 6),
    ("hosts[0].kubelets[0].nodeName", "numa-a-numa0", 6),
    ("hosts[0].kubelets[0].labels.numa-type", "red", 2),
    ("kubeletPath", "/usr/bin/kubelet", 13),
    ("containerdPath", "/usr/bin/containerd", 13),
    ("demo.image", "registry.k8s.io/pause:3.10", 21),
    ("cluster.server", "https://192.0.2.1:6443", 17),
]


def test_the_unspliced_values_are_valid():
    raw = with_cluster(base_config())
    for path, value, _ in SCRIPT_REACHING_VALUES:
        setting(path, value)(raw)
    assert build_plan(load_config(raw)).kubelets


@pytest.mark.parametrize("character", SHELL_BREAKERS.values(), ids=SHELL_BREAKERS.keys())
@pytest.mark.parametrize(("path", "value", "at"), SCRIPT_REACHING_VALUES, ids=[p for p, _, _ in SCRIPT_REACHING_VALUES])
def test_value_that_would_break_a_script_is_refused(path, value, at, character):
    raw = with_cluster(base_config())
    setting(path, value[:at] + character + value[at:])(raw)
    assert_reported(problems_of(raw, fleet=False), path, "")


@pytest.mark.parametrize(
    ("path", "value"),
    [(path, value) for path, value, _ in SCRIPT_REACHING_VALUES if path != "hosts[0].hostKey"],
    ids=[path for path, _, _ in SCRIPT_REACHING_VALUES if path != "hosts[0].hostKey"],
)
def test_value_with_a_trailing_newline_is_refused(path, value):
    raw = with_cluster(base_config())
    setting(path, value + "\n")(raw)
    assert_reported(problems_of(raw, fleet=False), path, "")


def test_host_key_keeps_only_type_and_key_so_a_comment_cannot_reach_a_script():
    raw = base_config()
    setting("hosts[0].hostKey", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 root@$(reboot)\n")(raw)
    assert load_config(raw).hosts[0].host_key == "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"


def test_ipv6_scope_id_cannot_smuggle_script_breaking_characters():
    accepted = []
    for name, character in SHELL_BREAKERS.items():
        raw = base_config()
        setting("hosts[0].address", f"fe80::1%eth0{character}x")(raw)
        try:
            load_config(raw)
        except ConfigError as error:
            assert_reported(error, "hosts[0].address", "")
        else:
            accepted.append(name)
    assert not accepted, f"hosts[0].address accepted an IPv6 scope id containing: {', '.join(accepted)}"


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/instance-type",
        "kubelet.kubernetes.io/pool",
        "cluster.x-k8s.io/pool",
        "example.com/team",
        "numa-type",
    ],
)
def test_label_keys_a_kubelet_may_set_are_accepted(key):
    raw = base_config()
    label(key, "a")(raw)
    assert build_plan(load_config(raw)).kubelets[0].label_map[key] == "a"


# ---------------------------------------------------------------- secrets and reporting


def test_bad_bootstrap_token_is_not_echoed():
    token = "SECRET.0123456789SECRETXX"
    raw = with_cluster(base_config())
    raw["bootstrapToken"] = token
    error = problems_of(raw, fleet=False)
    assert token not in str(error)
    assert not any(token in problem.message or token in problem.path for problem in error.problems)


def test_field_problems_in_many_places_are_all_reported_at_once():
    raw = base_config()
    setting("hosts[0].name", "Numa_A")(raw)
    setting("hosts[0].numaNodes[0].cpus", "3-1")(raw)
    setting("hosts[0].kubelets[1].maxPod", 1)(raw)
    setting("hosts[0].kubelets[1].labels.numa-type", "blue;")(raw)
    setting("kubeletPath", "usr/bin/kubelet")(raw)
    setting("demo.image", "pause 3.10")(raw)
    error = problems_of(raw, fleet=False)
    expected_paths = [
        "hosts[0].name",
        "hosts[0].numaNodes[0].cpus",
        "hosts[0].kubelets[1].maxPod",
        "hosts[0].kubelets[1].labels.numa-type",
        "kubeletPath",
        "demo.image",
    ]
    assert sorted(p.path for p in error.problems) == sorted(expected_paths)
    lines = str(error).splitlines()
    for problem in error.problems:
        assert f"  - {problem.path}: {problem.message}" in lines


def test_topology_problems_of_several_hosts_are_all_reported_at_once():
    raw = base_config()
    setting("hosts[0].numaNodes[1].cpus", "3-7")(raw)
    setting("hosts[0].kubelets[0].cpus", "1-3,8")(raw)
    adding_host(name="numa-b", address="192.0.2.11", systemCpus="0,9")(raw)
    setting("bootstrapToken", BOOTSTRAP_TOKEN)(raw)
    error = problems_of(raw, fleet=False)
    assert_reported(error, "hosts[0].numaNodes[1].cpus", "CPU 3 is also on NUMA node 0")
    assert_reported(error, "hosts[0].kubelets[0].cpus", "CPU 8 is not on NUMA node 0 (cpus 0-3)")
    assert_reported(error, "hosts[1].systemCpus", "9 are on no declared NUMA node")
    assert_reported(error, "bootstrapToken", "no cluster to join")
    assert str(error).count("\n  - ") == len(error.problems) == 4


def test_fleet_problems_are_all_reported_at_once():
    raw = base_config()
    setting("hosts[0].kubelets[1].port", 6443)(raw)
    adding_host(address="192.0.2.11", kubelets=[{"numaNode": 0, "nodeName": "numa-a-numa0", "healthzPort": 10250}])(raw)
    error = problems_of(raw, fleet=True)
    assert_reported(error, "hosts[0].kubelets[1].port", "collides with kube-apiserver")
    assert_reported(error, "hosts[1].name", "already the name of hosts[0]")
    assert_reported(error, "hosts[1].kubelets[0].nodeName", "already used by hosts[0].kubelets[0]")
    assert_reported(error, "hosts[1].kubelets[0].healthzPort", "collides with numa0 port")
    assert len(error.problems) == 4


def test_problems_are_listed_in_a_stable_order():
    raw = base_config()
    setting("hosts[0].numaNodez", [])(raw)
    setting("hosts[0].kubeletz", [])(raw)
    shuffled = copy.deepcopy(raw)
    shuffled["hosts"][0] = dict(reversed(list(shuffled["hosts"][0].items())))
    assert str(problems_of(raw, fleet=False)) == str(problems_of(shuffled, fleet=False))


def test_a_typo_does_not_hide_what_is_wrong_inside_a_well_formed_host():
    config = origin_config()
    config["demo"] = {"enabld": False}
    config["hosts"][0]["numaNodes"][1]["cpus"] = "3-7"
    with pytest.raises(ConfigError) as failure:
        load_config(config)
    paths = {problem.path for problem in failure.value.problems}
    assert paths == {"demo.enabld", "hosts[0].numaNodes[1].cpus"}


# ---------------------------------------------------------------- secrets given in plain text


def as_pulumi_values(raw: Raw) -> dict[str, str]:
    """The config as the engine hands it over: strings, structured values as JSON."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in raw.items()}


@pytest.mark.parametrize("key", ["sshPrivateKey", "bootstrapToken", "kubeconfig"])
def test_a_secret_key_in_plain_text_is_refused_naming_the_command(key):
    raw = with_cluster(base_config())
    raw["sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n"
    raw["kubeconfig"] = "apiVersion: v1\nkind: Config\n"
    values = as_pulumi_values(raw)
    encrypted = {"sshPrivateKey", "bootstrapToken", "kubeconfig"} - {key}
    with pytest.raises(ConfigError) as failure:
        load_stack_values(values, encrypted)
    [problem] = failure.value.problems
    assert problem.path == key
    assert f"pulumi config set --secret numa-kubelets:{key}" in problem.message
    assert values[key] not in str(failure.value)
    # The same values, each held as a secret: taken.
    assert load_stack_values(values, encrypted | {key}).bootstrap_token is not None


def test_plain_secrets_are_reported_with_every_other_problem():
    raw = with_cluster(base_config())
    raw["hosts"][0]["sshPort"] = 0
    with pytest.raises(ConfigError) as failure:
        load_stack_values(as_pulumi_values(raw), set())
    assert [p.path for p in failure.value.problems] == ["bootstrapToken", "hosts[0].sshPort"]


def test_keys_that_are_not_secrets_need_no_encryption():
    assert plaintext_secret_problems(["hosts", "cluster", "sshPrivateKeyPath", "demo"], set()) == []
    assert plaintext_secret_problems(["kubeconfig"], {"kubeconfig"}) == []
