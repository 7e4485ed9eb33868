"""REAL kubelets of the emulated 2-socket machine joining the session's REAL control plane.

The whole join runs as in production: the program's scripts start the kubelet built by
`make tools` in each NUMA slice (namespace mode: each kubelet its own network namespace and
address in qemu's user network), with the bootstrap kubeconfig on stdin; the real
kube-apiserver (reached at 10.0.2.100:6443, qemu's one forwarding rule to this machine)
authenticates the bootstrap token, the real kube-controller-manager approves and signs each
kubelet's client certificate and gives its Node a podCIDR, the real scheduler places pods.

What a real cluster adds around the kubelets is played by the test, each with the program's
own pieces where it has them:
- the token: the program's own Secret and RBAC manifests (`cluster.bootstrap_token_secret`,
  `bootstrap_bindings`), created as a user who brings `bootstrapToken` would;
- the CNI DaemonSet: the conflist such an agent writes (bridge + host-local over the Node's
  podCIDR) into each kubelet's private `/etc/cni/net.d`, once the Node has its podCIDR, and
  for Services the routes a host-gw agent adds between the nodes' namespaces;
- kube-proxy is the real one (built by `make tools`), run as a DaemonSet as clusters run it;
- the Pulumi engine: the replay runner (tests/integration/engine.py) runs the remote
  commands, and the program's own NodeLifecycle provider (wait Ready; cordon, drain and
  delete on removal) is called with the inputs the program gave it, with the stack credential
  of docs/cluster.md's least-privilege rights; for the rolling changes the runner plays the
  NodeDrains and NodeLifecycles too, through their providers, each step as soon as what it
  depends on is done, as the real engine does;
- the demo pods: the program's own manifests (`DemoPod.manifest()`), created through the API,
  judged by the program's probe and verdict.

Scenarios build on each other in file order; the fixture leaves host and cluster as it found them.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from components.node_drain import NodeDrainProvider
from components.node_lifecycle import NodeLifecycleError, NodeLifecycleProvider, NodeOperations, stack_api_client
from numa_kubelets import cluster, placement
from numa_kubelets.config import load_config
from numa_kubelets.placement import DemoPod, StackKubelets, judge_placement
from numa_kubelets.plan import build_plan
from tests.cri import WORKLOAD_IMAGE, CriTestClient, device_plugin_image, kube_proxy_image
from tests.cri.device_plugin_image import DEVICE_PLUGIN_ARCHIVE, DEVICE_PLUGIN_IMAGE
from tests.cri.device_plugin_image import PROGRAM as DEVICE_PLUGIN_PROGRAM
from tests.cri.kube_proxy_image import KUBE_PROXY_ARCHIVE, KUBE_PROXY_IMAGE
from tests.integration.engine import CommandFailed, Engine
from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import (
    GUEST_KUBELET,
    GUEST_KUBELET_PREVIOUS,
    POD_START_TIMEOUT,
    check_preflight_report,
    install_built_program,
    kubelet_journal,
    wait_for,
    write_atomically,
)
from tests.integration.test_network_namespaces import GATEWAY, namespace_stack, net_of, netns_inode, parent_interface
from tests.polling import Polling
from tests.realcluster.clients import api_for, create_managed_token
from tests.realcluster.controlplane import POD_CIDR, ControlPlane, inline_kubeconfig
from tests.realengine.agent import cni_conflist  # what the node agent writes, the same config
from tests.testhost.pci import GuestPciDevice, device_nodes, pci_devices
from tests.testhost.recipe import DEFAULT_SUITE
from tests.testhost.topology import parse_cpulist
from tests.timings import TIMINGS

pytestmark = pytest.mark.realtools("kubelet_previous")  # the control plane and both kubelets: built by tools/build.sh

q = shlex.quote

STACK = "test"  # the stack name the program runs under (tests/program/harness.py): the token's group has it
TOKEN_ID, TOKEN_SECRET = "c7d8e9", "0a1b2c3d4e5f6a7b"
CLUSTER_DNS = "10.96.0.10"  # given: the control plane runs no DNS add-on for the program to read
NAMESPACE = "numa-demo"
COMMAND = ("/bin/sleep", "3600")
LIFECYCLE = "pulumi-python:dynamic/numa-kubelets:NodeLifecycle"
DRAIN = "pulumi-python:dynamic/numa-kubelets:NodeDrain"
CPUS = {0: "1-3", 1: "5-7"}
# 64 x 2 MiB hugepages on NUMA node 1, before the kubelets start (they read sysfs at start).
HUGEPAGE_NODE, HUGEPAGES, HUGEPAGE_KIB = 1, 64, 2048
HUGEPAGE_POOL = f"/sys/devices/system/node/node{HUGEPAGE_NODE}/hugepages/hugepages-{HUGEPAGE_KIB}kB/nr_hugepages"
# The kubelet's default hard eviction threshold for memory (the stack sets no evictionHard).
EVICTION_HARD_MEMORY_BYTES = 100 * 1024 * 1024
NODE_JOIN_TIMEOUT = 300.0
MAX_PODS = 10
# Waits on what only the API server shows poll every half second: each read costs the guest nothing,
# and the Node, pod and drain events they wait for land at any moment (a 2 s poll overshot each by
# about a second, some 80 waits in this module). Checks that run a command in the guest keep 2 s.
API_POLL_SECONDS = 0.5
# The pods this module makes for itself (not the program's demo pods) stop within a second: their
# `sleep` as PID 1 ignores SIGTERM, so each graceful stop waited out the demo's 5 s grace for the
# SIGKILL that ends it anyway. Deletions and evictions stay graceful (SIGTERM, then SIGKILL).
TEST_POD_GRACE_SECONDS = 1


def api_wait(what: str, check: Callable[[], Any], timeout: float, diagnose: Callable[[], str]) -> Any:
    return wait_for(what, check, timeout, diagnose, interval=API_POLL_SECONDS)


def api_polling_operations(kubeconfig: str | None) -> NodeOperations:
    """The program's drain and lifecycle calls, polling the API server as often as api_wait."""
    return NodeOperations(kube_client.CoreV1Api(stack_api_client(kubeconfig)), poll_seconds=API_POLL_SECONDS)


CNI_CONFLIST = "10-numa-kubelets-test-bridge.conflist"
NVME = "numa-kubelets.io/nvme"
GUEST_GENERIC_DEVICE_PLUGIN = "/usr/local/bin/generic-device-plugin"


def node_ready(node: kube_client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def read_node(core: kube_client.CoreV1Api, name: str) -> kube_client.V1Node | None:
    try:
        return core.read_node(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def sysfs_node_memory_bytes(view: HostView, numa: int) -> int:
    """MemTotal of the node's own meminfo ("Node 1 MemTotal:  1031612 kB"), in bytes."""
    line = view.sh(f"grep -w MemTotal /sys/devices/system/node/node{numa}/meminfo")
    return int(line.split()[3]) * 1024


def sysfs_pool_pages(view: HostView, numa: int, counter: str = "nr_hugepages") -> int:
    """Node `numa`'s 2 MiB pool as the host's sysfs has it."""
    return int(view.sh(f"cat /sys/devices/system/node/node{numa}/hugepages/hugepages-{HUGEPAGE_KIB}kB/{counter}"))


def sysfs_hugepage_bytes(view: HostView, numa: int) -> int:
    total = 0
    for pool in view.sh(f"ls /sys/devices/system/node/node{numa}/hugepages").split():
        size_kib = int(pool.removeprefix("hugepages-").removesuffix("kB"))
        pages = int(view.sh(f"cat /sys/devices/system/node/node{numa}/hugepages/{pool}/nr_hugepages"))
        total += size_kib * 1024 * pages
    return total


def quantity_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity.removesuffix(suffix)) * factor
    return int(quantity)


@pytest.fixture(scope="module")
def joined(numa_host, origin_kubelet, control_plane: ControlPlane):
    host, view = numa_host, HostView(numa_host)
    admin_api = api_for(control_plane.admin_kubeconfig)
    core = kube_client.CoreV1Api(admin_api)
    # The kubelets start on the previous minor; the rolling upgrade takes them to this one's.
    newer = origin_kubelet
    version = install_built_program(view, "kubelet-previous", GUEST_KUBELET_PREVIOUS)
    token = create_managed_token(admin_api, TOKEN_ID, TOKEN_SECRET, STACK)

    install_built_program(view, "generic-device-plugin", GUEST_GENERIC_DEVICE_PLUGIN)
    config = namespace_stack(host, parent_interface(view))
    config.update(
        kubeletPath=GUEST_KUBELET_PREVIOUS,
        kubeletVersion=minor_of(version),
        cluster={"server": control_plane.guest_server, "caCert": control_plane.ca_pem, "dns": CLUSTER_DNS},
        bootstrapToken=token,
        kubeconfig=inline_kubeconfig(control_plane.stack_kubeconfig),
        demo={"enabled": False},  # the test creates the program's demo pods itself (module docstring)
        genericDevicePluginPath=GUEST_GENERIC_DEVICE_PLUGIN,
        devices=[{"resource": NVME, "select": {"driver": "nvme"}}],
    )
    declare_nvme_drives(config["hosts"][0], pci_devices(host))
    for entry in config["hosts"][0]["kubelets"]:
        entry["maxPods"] = MAX_PODS  # the dev stack's 1 leaves no room for a second pod
    plan = build_plan(load_config(config))
    view.sh(f"echo {HUGEPAGES} > {HUGEPAGE_POOL}")
    assert int(view.sh(f"cat {HUGEPAGE_POOL}")) == HUGEPAGES, "the guest could not reserve the hugepages"
    engine = Engine(
        lambda script, stdin: host.run(script, stdin=stdin, check=False),
        providers={
            DRAIN: NodeDrainProvider(api_polling_operations),
            LIFECYCLE: NodeLifecycleProvider(api_polling_operations),
        },
    )
    state: dict[str, Any] = {
        "host": host,
        "view": view,
        "core": core,
        "engine": engine,
        "config": config,
        "plan": plan,
        "version": version,
        "newer_version": newer,
        "stack_kubeconfig": control_plane.stack_kubeconfig,
    }
    yield state
    if engine.state:
        engine.destroy()
    for kubelet in plan.kubelets:
        try:
            core.delete_node(kubelet.node_name)
        except ApiException as error:
            if error.status != 404:
                raise
    apps, rbac = kube_client.AppsV1Api(admin_api), kube_client.RbacAuthorizationV1Api(admin_api)
    for delete in (
        lambda: core.delete_namespace(NAMESPACE),
        lambda: apps.delete_namespaced_daemon_set(KUBE_PROXY, "kube-system"),
        lambda: core.delete_namespaced_config_map(KUBE_PROXY, "kube-system"),
        lambda: core.delete_namespaced_service_account(KUBE_PROXY, "kube-system"),
        lambda: rbac.delete_cluster_role_binding(KUBE_PROXY_BINDING),
    ):
        try:
            delete()
        except ApiException as error:
            if error.status != 404:
                raise
    view.sh(
        f"echo 0 > {HUGEPAGE_POOL}; rm -f {q(GUEST_KUBELET_PREVIOUS)} {BR_NETFILTER_CONF}; "
        "modprobe -r br_netfilter 2>/dev/null || true"
    )


def minor_of(version: str) -> str:
    """'Kubernetes v1.36.3' -> '1.36'."""
    return ".".join(version.removeprefix("Kubernetes v").split(".")[:2])


def lifecycles(joined) -> list[dict[str, Any]]:
    """The inputs the program gave each kubelet's NodeLifecycle (secrets unwrapped)."""
    found = [r.inputs for r in joined["engine"].last_run.of_type(LIFECYCLE)]
    assert len(found) == len(joined["plan"].kubelets)
    return found


def test_each_real_kubelet_registers_its_node_through_the_bootstrap_flow(joined, stopwatch):
    engine, view, core, plan = joined["engine"], joined["view"], joined["core"], joined["plan"]
    with stopwatch("real cluster: apply (namespace mode, bootstrap kubeconfig on stdin)"):
        engine.up(joined["config"])
    versions = check_preflight_report(view.host, engine.state["numa-a-preflight"].inputs, DEFAULT_SUITE)
    TIMINGS.append((f"real cluster: [{DEFAULT_SUITE}] {versions}", 0.0))
    for kubelet in plan.kubelets:
        numa = kubelet.numa_node
        with stopwatch(f"real cluster: Node {kubelet.node_name} registered with a podCIDR"):
            node = api_wait(
                f"Node {kubelet.node_name} registered and given a podCIDR",
                lambda k=kubelet: (n := read_node(core, k.node_name)) is not None and n.spec.pod_cidr and n,
                NODE_JOIN_TIMEOUT,
                lambda n=numa: kubelet_journal(view, n),
            )
        # The identity labels the kubelet registered itself with (--node-labels).
        assert kubelet.identity_labels.items() <= (node.metadata.labels or {}).items()
        # Its client certificate came from a CSR the bootstrap token made and the controller-manager signed.
        cert_dir = kubelet.layout.cert_dir
        # (The file holds the key too: only its certificate block leaves the guest.)
        pem = view.sh(f"sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' {q(cert_dir)}/kubelet-client-current.pem")
        certificate = x509.load_pem_x509_certificate(pem.encode())
        assert certificate.subject.rfc4514_string() == f"CN=system:node:{kubelet.node_name},O=system:nodes"
        # The kubelet's own cluster credential, next to it; the bootstrap token stays in its 0600 file.
        assert view.sh(f"stat -c %a {q(kubelet.layout.bootstrap_kubeconfig)}") == "600"
        assert view.exists(kubelet.layout.kubeconfig)
        joined.setdefault("pod_cidrs", {})[numa] = node.spec.pod_cidr
    signed = [
        csr
        for csr in kube_client.CertificatesV1Api(joined["core"].api_client).list_certificate_signing_request().items
        if csr.spec.username == f"system:bootstrap:{TOKEN_ID}"
    ]
    assert len(signed) >= len(plan.kubelets)
    for csr in signed:
        assert csr.spec.signer_name == "kubernetes.io/kube-apiserver-client-kubelet"
        assert any(c.type == "Approved" for c in csr.status.conditions or []) and csr.status.certificate


def test_every_node_turns_ready_once_its_cni_config_exists_and_gets_the_stacks_labels(joined, stopwatch):
    host, view, plan = joined["host"], joined["view"], joined["plan"]
    for kubelet in plan.kubelets:
        numa = kubelet.numa_node
        assert kubelet.network is not None
        # The pods' images, into this kubelet's own containerd (no registry here).
        assert CriTestClient(host, kubelet.layout.containerd_socket).import_images() == ["pause.tar", "workload.tar"]
        private_cni_dir = kubelet.network.private_copy("/etc/cni/net.d")
        write_atomically(view, f"{private_cni_dir}/{CNI_CONFLIST}", cni_conflist(joined["pod_cidrs"][numa], numa))
    # The program's own lifecycle decides Ready, with the labels the program expects.
    provider = NodeLifecycleProvider(api_polling_operations)
    for props in lifecycles(joined):
        with stopwatch(f"real cluster: {props['nodeName']} Ready (the program's NodeLifecycle create)"):
            provider.create(dict(props))
    apply_node_patches(joined, plan)
    for kubelet in plan.kubelets:
        node = joined["core"].read_node(kubelet.node_name)
        assert node_ready(node), node.status.conditions
        # The kubelet registered its identity labels, the stack's patch added the user's.
        assert {**kubelet.identity_labels, **kubelet.label_map}.items() <= node.metadata.labels.items()
        assert node.status.node_info.kubelet_version == joined["version"].removeprefix("Kubernetes ")
        # The InternalIP is the kubelet's own address in its namespace (--node-ip).
        addresses = {a.type: a.address for a in node.status.addresses}
        assert kubelet.network is not None and addresses["InternalIP"] == kubelet.network.node_ip


def apply_node_patches(joined, plan) -> None:
    """The stack's labels, as its NodePatch applies them: server-side apply under the stack's
    field manager, forced, with the stack's own credential."""
    stack_core = kube_client.CoreV1Api(api_for(joined["stack_kubeconfig"]))
    for kubelet in plan.kubelets:
        patch = cluster.node_label_patch(kubelet, STACK)
        stack_core.patch_node(
            kubelet.node_name,
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": patch["name"], "labels": patch["labels"]}},
            field_manager=patch["annotations"][cluster.PATCH_FIELD_MANAGER_ANNOTATION],
            force=True,
            _content_type="application/apply-patch+yaml",
        )


def test_a_label_change_reaches_the_node_and_runs_nothing_on_the_host(joined):
    engine, core, plan = joined["engine"], joined["core"], joined["plan"]
    kubelet = plan.kubelets[0]
    changed = copy.deepcopy(joined["config"])
    entry = changed["hosts"][0]["kubelets"][0]
    entry["labels"] = {"numa-type": "green", "rack": "r7"}  # was {numa-type: red}
    assert engine.up(changed) == []  # with a cluster the kubelet registers only its identity labels
    apply_node_patches(joined, build_plan(load_config(changed)))
    labels = core.read_node(kubelet.node_name).metadata.labels
    assert labels["numa-type"] == "green" and labels["rack"] == "r7"
    assert kubelet.identity_labels.items() <= labels.items()  # the kubelet's own stay
    # Back to the stack as it was: the label the stack no longer declares goes with its owner.
    assert engine.up(joined["config"]) == []
    apply_node_patches(joined, plan)
    labels = core.read_node(kubelet.node_name).metadata.labels
    assert labels["numa-type"] == "red" and "rack" not in labels
    assert kubelet.identity_labels.items() <= labels.items()


def test_allocatable_is_the_numa_nodes_share_to_the_byte(joined):
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    machine_memory = int(view.sh("awk '$1 == \"MemTotal:\" { print $2 }' /proc/meminfo")) * 1024
    machine_cpus = int(view.sh("nproc --all"))
    for kubelet in plan.kubelets:
        numa = kubelet.numa_node
        node = core.read_node(kubelet.node_name)
        own_memory = sysfs_node_memory_bytes(view, numa)
        own_hugepages = sysfs_hugepage_bytes(view, numa)
        expected_memory = own_memory - own_hugepages - EVICTION_HARD_MEMORY_BYTES
        allocatable, capacity = node.status.allocatable, node.status.capacity
        slice_cpus = parse_cpulist(view.effective(f"numa{numa}.slice", "cpus"))
        assert view.effective(f"numa{numa}.slice", "cpus") == CPUS[numa]
        assert int(allocatable["cpu"]) == len(slice_cpus)
        assert int(allocatable["pods"]) == MAX_PODS
        assert quantity_bytes(allocatable["memory"]) == expected_memory, (
            f"node {numa}: allocatable {allocatable['memory']}, expected {expected_memory} "
            f"(MemTotal {own_memory} - hugepages {own_hugepages} - evictionHard {EVICTION_HARD_MEMORY_BYTES})"
        )
        # CPU and memory capacity stay machine-wide, as upstream documents.
        assert int(capacity["cpu"]) == machine_cpus
        assert quantity_bytes(capacity["memory"]) == machine_memory
        # Hugepages are the node's own: each page size the kernel offers, at this node's pool.
        for size_kib in hugepage_sizes_kib(view):
            own_pool = int(
                view.sh(f"cat /sys/devices/system/node/node{numa}/hugepages/hugepages-{size_kib}kB/nr_hugepages")
            )
            resource = f"hugepages-{size_kib // 1024}Mi" if size_kib < 1048576 else f"hugepages-{size_kib // 1048576}Gi"
            for reported in (capacity, allocatable):
                assert quantity_bytes(reported.get(resource, "0")) == own_pool * size_kib * 1024, (numa, resource)
    assert sysfs_pool_pages(view, HUGEPAGE_NODE) == HUGEPAGES and sysfs_pool_pages(view, 1 - HUGEPAGE_NODE) == 0
    TIMINGS.append((f"real cluster: hugepages on node {HUGEPAGE_NODE}: {HUGEPAGES} x {HUGEPAGE_KIB} KiB", 0.0))


def hugepage_sizes_kib(view: HostView) -> list[int]:
    pools = view.sh("ls /sys/kernel/mm/hugepages").split()
    return sorted(int(pool.removeprefix("hugepages-").removesuffix("kB")) for pool in pools)


def machine_pool_in(view: HostView, pid: int, path: str) -> int:
    """A pool counter as process `pid`'s mount namespace sees it."""
    return int(view.sh(f"nsenter -t {int(pid)} -m cat {q(path)}"))


def test_each_kubelet_sees_its_own_nodes_hugepages_and_nothing_else_does(joined):
    """The hugepage view lives in each kubelet's mount namespace only (numa_kubelets/hugepages.py)."""
    view = joined["view"]
    machine = f"/sys/kernel/mm/hugepages/hugepages-{HUGEPAGE_KIB}kB/nr_hugepages"
    # The host: the machine's pools, no mount there (nothing propagated out of a kubelet's namespace).
    assert int(view.sh(f"cat {machine}")) == HUGEPAGES
    assert view.sh("findmnt -rn -o TARGET | grep -e '^/sys/kernel/mm' -e '^/sys/devices/system/node' || true") == ""
    for numa in (0, 1):
        kubelet = view.main_pid(f"kubelet@numa{numa}.service")
        own = HUGEPAGES if numa == HUGEPAGE_NODE else 0
        assert machine_pool_in(view, kubelet, machine) == own, f"kubelet of node {numa}"
        for other in (0, 1):
            node_pool = f"/sys/devices/system/node/node{other}/hugepages/hugepages-{HUGEPAGE_KIB}kB/nr_hugepages"
            expected = own if other == numa else 0
            assert machine_pool_in(view, kubelet, node_pool) == expected, f"kubelet of node {numa}: node {other}"
        # Its containerd (another mount namespace of its own) sees the machine as it is.
        containerd = view.main_pid(f"containerd@numa{numa}.service")
        assert machine_pool_in(view, containerd, machine) == HUGEPAGES


HUGEPAGE_POD = "hugepages-2mi"
HUGEPAGE_POD_PAGES = 2


def hugepage_pod(demo: DemoPod, name: str, pinned: bool) -> dict[str, Any]:
    """A Guaranteed pod asking for 2 MiB pages, which it takes from a hugetlbfs volume. Pinned: with
    `demo`'s nodeSelector; else without any, so that the scheduler chooses by hugepages alone."""
    manifest = demo.manifest()
    manifest["metadata"]["name"] = name
    manifest["metadata"]["labels"] = {"app.kubernetes.io/name": name}
    manifest["spec"]["terminationGracePeriodSeconds"] = TEST_POD_GRACE_SECONDS
    if not pinned:
        del manifest["spec"]["nodeSelector"]
    size = f"{HUGEPAGE_POD_PAGES * HUGEPAGE_KIB // 1024}Mi"
    [container] = manifest["spec"]["containers"]
    size_bytes = HUGEPAGE_POD_PAGES * HUGEPAGE_KIB * 1024  # busybox takes bytes, not a quantity
    container["command"] = ["/bin/sh", "-c", f"fallocate -l {size_bytes} /hugepages/pages && exec {' '.join(COMMAND)}"]
    limits = {"cpu": "100m", "memory": "32Mi", f"hugepages-{HUGEPAGE_KIB // 1024}Mi": size}
    container["resources"] = {"requests": limits, "limits": limits}
    container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": "hugepages", "mountPath": "/hugepages"}]
    manifest["spec"]["volumes"] = [
        *manifest["spec"].get("volumes", []),
        {"name": "hugepages", "emptyDir": {"medium": "HugePages"}},
    ]
    # The kubelet mounts hugetlbfs root-owned; fsGroup gives the (non-root) workload its group.
    manifest["spec"]["securityContext"]["fsGroup"] = manifest["spec"]["securityContext"]["runAsGroup"]
    return manifest


def pod_slice_file(view: HostView, numa: int, uid: str, name: str) -> str:
    """A file of a Guaranteed pod's cgroup (right under numa<N>-kubepods.slice)."""
    pod_slice = f"numa{numa}-kubepods-pod{uid.replace('-', '_')}.slice"
    return view.sh(f"cat /sys/fs/cgroup/numa{numa}.slice/numa{numa}-kubepods.slice/{pod_slice}/{name}")


def unschedulable_message(core: kube_client.CoreV1Api, name: str) -> str | None:
    pod = core.read_namespaced_pod(name, NAMESPACE)
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.reason == "Unschedulable":
            return condition.message
    return None


def run_hugepage_pod(joined, stopwatch, name: str) -> tuple[kube_client.V1Pod, dict[str, str]]:
    """The unpinned hugepage pod, running; its workload's status. Its pages come from node 1's pool."""
    core, view = joined["core"], joined["view"]
    free_before = sysfs_pool_pages(view, HUGEPAGE_NODE, "free_hugepages")
    core.create_namespaced_pod(NAMESPACE, hugepage_pod(demo_pods(joined)[HUGEPAGE_NODE], name, pinned=False))
    with stopwatch(f"real cluster: {name} scheduled by its hugepages and running"):
        pod = api_wait(
            f"{name} running",
            lambda: running_pod(core, name),
            POD_START_TIMEOUT,
            lambda: kubelet_journal(view, HUGEPAGE_NODE),
        )
    assert pod.spec.node_name == demo_pods(joined)[HUGEPAGE_NODE].kubelet.node_name
    assert pod.status.qos_class == "Guaranteed"
    size_bytes = HUGEPAGE_POD_PAGES * HUGEPAGE_KIB * 1024
    usage_file = f"hugetlb.{HUGEPAGE_KIB // 1024}MB.current"

    def usage() -> int:
        return int(pod_slice_file(view, HUGEPAGE_NODE, pod.metadata.uid, usage_file))

    # Running is the container's start; its fallocate takes the pages a moment later.
    wait_for(
        f"{name}'s pages charged to its cgroup ({usage_file})",
        lambda: usage() == size_bytes,
        60,
        lambda: (
            f"{usage_file}: {usage()}; free pages of node {HUGEPAGE_NODE}: "
            f"{sysfs_pool_pages(view, HUGEPAGE_NODE, 'free_hugepages')} (before: {free_before})\n"
            f"containers: {core.read_namespaced_pod(name, NAMESPACE).status.container_statuses}\n"
            + kubelet_journal(view, HUGEPAGE_NODE)
        ),
    )
    # The pages were taken from node 1's own pool.
    assert sysfs_pool_pages(view, HUGEPAGE_NODE, "free_hugepages") == free_before - HUGEPAGE_POD_PAGES
    return pod, view.process_status(workload_pid(view, HUGEPAGE_NODE, pod.metadata.uid))


def delete_pod(core: kube_client.CoreV1Api, name: str) -> None:
    core.delete_namespaced_pod(name, NAMESPACE)
    api_wait(f"{name} deleted", lambda: pod_gone(core, name), POD_START_TIMEOUT, lambda: "")


def demo_pods(joined) -> dict[int, DemoPod]:
    return {
        kubelet.numa_node: DemoPod(kubelet, NAMESPACE, WORKLOAD_IMAGE, COMMAND, "10m")
        for kubelet in joined["plan"].kubelets
    }


def running_pod(core: kube_client.CoreV1Api, name: str) -> kube_client.V1Pod | None:
    pod = core.read_namespaced_pod(name, NAMESPACE)
    return pod if pod.status.phase == "Running" else None


def verdict(joined, demo: DemoPod, pod: kube_client.V1Pod):
    plan = joined["plan"]
    result = joined["host"].run(probe_for(demo, plan), stdin=pod.metadata.uid + "\n", check=False)
    assert result.rc == 0, result.stderr
    return result.stdout, judge_placement(demo, StackKubelets(plan), pod.spec.node_name, result.stdout)


def probe_for(demo: DemoPod, plan) -> str:
    return placement.probe_scripts(demo, plan.hosts[0], plan).apply


def test_the_real_scheduler_places_each_demo_pod_on_its_numa_node(joined, stopwatch):
    core, view = joined["core"], joined["view"]
    core.create_namespace(placement.namespace_manifest(NAMESPACE))
    # The demo pods run as the program's own service account (components/demo.py makes it).
    core.create_namespaced_service_account(NAMESPACE, placement.service_account_manifest(NAMESPACE))
    pods = demo_pods(joined)
    for demo in pods.values():
        core.create_namespaced_pod(NAMESPACE, demo.manifest())
    for numa, demo in pods.items():
        with stopwatch(f"real cluster: demo pod {demo.name} scheduled and running"):
            pod = api_wait(
                f"demo pod {demo.name} running",
                lambda d=demo: running_pod(core, d.name),
                POD_START_TIMEOUT,
                lambda n=numa: kubelet_journal(view, n),
            )
        assert pod.spec.node_name == demo.kubelet.node_name
        _, judged = verdict(joined, demo, pod)
        assert judged.ok, judged.failure_message()
        [reading] = judged.readings
        assert view.process_status(reading.pid) == {"Cpus_allowed_list": CPUS[numa], "Mems_allowed_list": str(numa)}
        # The picture of the origin experiment: the pod's container under its NUMA node's kubepods slice.
        tree = view.sh(f"systemd-cgls --no-pager -u numa{numa}.slice")
        lines = [line.lstrip("│├└─ ") for line in tree.splitlines()]
        order = [f"numa{numa}-kubepods.slice", f"kubelet@numa{numa}.service"]
        assert all(any(line.startswith(name) for line in lines) for name in order), tree
        assert any(line.endswith(" ".join(COMMAND)) for line in lines), tree
        # Namespace mode: the pod's network is made inside its kubelet's namespace, from the
        # instance's private CNI files: the host end of its veth on that namespace's bridge,
        # its host-local lease in the instance's own /var/lib/cni.
        network = demo.kubelet.network
        assert network is not None
        assert view.sh(f"ip -n numa{numa} -o link show type veth master cni0") != ""
        leases = network.private_copy("/var/lib/cni") + f"/networks/numa-kubelets-test-{numa}"
        assert view.exists(f"{leases}/{pod.status.pod_ip}"), view.sh(f"ls -A {q(leases)} || true")
    # Nothing of theirs in the host's own namespace, nor in the host's CNI directory.
    assert view.sh("ip -o link show type veth; ip -o link show dev cni0 2>/dev/null || true") == ""
    assert view.sh("ls -A /etc/cni/net.d 2>/dev/null || true") == ""


def pod_gone(core: kube_client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def test_a_demo_pod_forced_onto_the_other_numa_node_is_judged_not_ok(joined):
    core, view = joined["core"], joined["view"]
    pods = demo_pods(joined)
    intended, other = pods[0], pods[1]
    core.delete_namespaced_pod(intended.name, NAMESPACE, grace_period_seconds=TEST_POD_GRACE_SECONDS)
    api_wait(f"{intended.name} deleted", lambda: pod_gone(core, intended.name), POD_START_TIMEOUT, lambda: "")
    # The same pod, bound by hand past the scheduler onto the other NUMA node's Node; without its
    # nodeSelector, which that kubelet's admission would refuse, it runs there.
    manifest = intended.manifest()
    del manifest["spec"]["nodeSelector"]
    manifest["spec"]["nodeName"] = other.kubelet.node_name
    core.create_namespaced_pod(NAMESPACE, manifest)
    pod = api_wait(
        f"{intended.name} running on {other.kubelet.node_name}",
        lambda: running_pod(core, intended.name),
        POD_START_TIMEOUT,
        lambda: kubelet_journal(view, other.kubelet.numa_node),
    )
    _, judged = verdict(joined, intended, pod)
    assert not judged.ok
    assert judged.readings == ()  # nothing of it in its own NUMA node's containerd
    assert any(f"not on {intended.kubelet.node_name}" in reason for reason in judged.reasons), judged.reasons


def test_the_scheduler_places_a_hugepage_pod_on_the_node_with_the_pages_only(joined, stopwatch):
    core = joined["core"]
    pinned_elsewhere = f"{HUGEPAGE_POD}-on-node-{1 - HUGEPAGE_NODE}"
    core.create_namespaced_pod(NAMESPACE, hugepage_pod(demo_pods(joined)[1 - HUGEPAGE_NODE], pinned_elsewhere, True))
    message = api_wait(
        f"{pinned_elsewhere} refused by the scheduler",
        lambda: unschedulable_message(core, pinned_elsewhere),
        60,
        lambda: str(core.read_namespaced_pod(pinned_elsewhere, NAMESPACE).status),
    )
    assert f"Insufficient hugepages-{HUGEPAGE_KIB // 1024}Mi" in message, message
    delete_pod(core, pinned_elsewhere)
    _, status = run_hugepage_pod(joined, stopwatch, HUGEPAGE_POD)
    assert status["Mems_allowed_list"] == str(HUGEPAGE_NODE)
    delete_pod(core, HUGEPAGE_POD)


# --- devices: each Node offers its own NUMA node's NVMe drives -------------------------------
# The machine carries qemu NVMe controllers on both NUMA nodes and one without affinity
# (tests/testhost/fixtures.py ORIGIN_PCI); the stack declares them as discover prints them and
# offers every NVMe drive as NVME through the generic device plugin of `make tools`, one per kubelet.


def declare_nvme_drives(entry: dict[str, Any], found: list[GuestPciDevice]) -> None:
    """The host entry's inventory of the guest's NVMe controllers, each under its NUMA node (or
    the host's `pciDevices` without affinity), as discover writes it."""
    nodes = {node["id"]: node for node in entry["numaNodes"]}
    for device in (d for d in found if d.driver == "nvme"):
        declared = {
            "address": device.address,
            "class": device.pci_class,
            "vendor": device.vendor,
            "device": device.device,
            "driver": device.driver,
        }
        owner = entry if device.numa_node == -1 else nodes[device.numa_node]
        owner.setdefault("pciDevices", []).append(declared)


def nvme_drives(view: HostView) -> dict[str, tuple[int, frozenset[str]]]:
    """The guest's NVMe controllers read from sysfs: address -> (NUMA node, its device nodes)."""
    return {
        device.address: (device.numa_node, frozenset(n.path for n in device_nodes(view.host, device.address)))
        for device in pci_devices(view.host)
        if device.driver == "nvme"
    }


def nvme_capacity(core: kube_client.CoreV1Api, node_name: str) -> tuple[str | None, str | None]:
    status = core.read_node(node_name).status
    return (status.capacity or {}).get(NVME), (status.allocatable or {}).get(NVME)


def nvme_pod(demo: DemoPod, name: str) -> dict[str, Any]:
    """A demo pod (its restricted security context) without its nodeSelector, asking for one NVMe
    drive; it prints the device nodes it sees and each controller's NUMA node, read inside its
    container, then sleeps."""
    manifest = demo.manifest()
    manifest["metadata"]["name"] = name
    manifest["metadata"]["labels"] = {"app.kubernetes.io/name": name}
    del manifest["spec"]["nodeSelector"]
    [container] = manifest["spec"]["containers"]
    container["command"] = [
        "/bin/sh",
        "-c",
        'for d in /dev/nvme* /dev/ng*; do [ -e "$d" ] && echo "node $d"; done; '
        'for c in /sys/class/nvme/*; do [ -e "/dev/${c##*/}" ] && echo "numa ${c##*/} $(cat "$c/device/numa_node")"; done; '
        f"exec {' '.join(COMMAND)}",
    ]
    # The demo pod's own requests and limits (a 16Mi limit left runc's init too little: the
    # containers started only after the kubelet's back-off), and one drive.
    container["resources"]["limits"][NVME] = "1"
    return manifest


def container_report(view: HostView, joined, pod: kube_client.V1Pod) -> tuple[frozenset[str], dict[str, int]]:
    """What the pod's container printed (its log file under its kubelet's podLogsDir on the host):
    the device nodes it has and the NUMA node of each controller among them."""
    kubelet = next(k for k in joined["plan"].kubelets if k.node_name == pod.spec.node_name)
    [container] = pod.spec.containers
    log_dir = f"{kubelet.layout.pod_logs_dir}/{NAMESPACE}_{pod.metadata.name}_{pod.metadata.uid}/{container.name}"

    def report() -> str | None:
        out = view.sh(f"cat {q(log_dir)}/0.log 2>/dev/null || true")
        return out if "numa " in out else None

    text = wait_for(
        f"{pod.metadata.name}'s report",
        report,
        60,
        lambda: view.sh(f"ls -lR {q(log_dir)} 2>&1 || true"),
    )
    # CRI log lines: "<time> stdout F <line>".
    lines = [line.split(" ", 3)[3] for line in text.splitlines() if line.count(" ") >= 3]
    nodes = frozenset(line.split()[1] for line in lines if line.startswith("node "))
    numa = {line.split()[1]: int(line.split()[2]) for line in lines if line.startswith("numa ")}
    return nodes, numa


def test_each_node_offers_exactly_its_numa_nodes_nvme_drives(joined, stopwatch):
    """The real generic device plugin, one per kubelet in its own device-plugins directory, offers
    each Node the NVMe drives of its NUMA node as the guest's sysfs places them, and the drive
    without affinity on no Node."""
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    drives = nvme_drives(view)
    per_node = {numa: sum(1 for node, _ in drives.values() if node == numa) for numa in (-1, 0, 1)}
    assert per_node == {-1: 1, 0: 1, 1: 2}, drives  # as the machine was booted (ORIGIN_PCI)
    for kubelet in plan.kubelets:
        expected = str(per_node[kubelet.numa_node])
        with stopwatch(f"real cluster: {NVME} on {kubelet.node_name}"):
            api_wait(
                f"{NVME}: {expected} in the capacity and allocatable of {kubelet.node_name}",
                lambda k=kubelet, e=expected: nvme_capacity(core, k.node_name) == (e, e),
                120,
                lambda k=kubelet: view.sh(f"journalctl --no-pager -u 'numa-device-plugin@numa{k.numa_node}-*' -n 30"),
            )
    # Each kubelet offers its own drives under the resource, in the plan and the hosts output.
    for kubelet in plan.kubelets:
        [offered] = kubelet.devices
        assert offered.resource == NVME
        assert set(offered.addresses) == {a for a, (numa, _) in drives.items() if numa == kubelet.numa_node}


def test_pods_asking_for_a_drive_get_one_of_their_nodes_numa_node_each_and_one_too_many_stays_pending(
    joined, stopwatch
):
    """Pods without a nodeSelector asking for a drive: the real scheduler places them where one is
    free; each container has exactly one drive's device nodes, on its Node's NUMA node; every drive
    is used once; one more pod stays Pending for want of a drive."""
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    drives = nvme_drives(view)
    placed = sorted(address for address, (numa, _) in drives.items() if numa >= 0)
    names = [f"drive-{index}" for index in range(len(placed) + 1)]
    numa_of_node = {k.node_name: k.numa_node for k in plan.kubelets}
    try:
        demo = demo_pods(joined)[0]
        for name in names[:-1]:
            core.create_namespaced_pod(NAMESPACE, nvme_pod(demo, name))
        used: list[str] = []
        for name in names[:-1]:
            with stopwatch(f"real cluster: {name} scheduled with a drive and running"):
                pod = api_wait(f"{name} running", lambda n=name: running_pod(core, n), POD_START_TIMEOUT, lambda: "")
            nodes, numa = container_report(view, joined, pod)
            [address] = [a for a, (_, own) in drives.items() if own == nodes]  # exactly one drive's nodes
            assert drives[address][0] == numa_of_node[pod.spec.node_name], (address, pod.spec.node_name)
            assert set(numa.values()) == {numa_of_node[pod.spec.node_name]}, numa  # read inside the container
            used.append(address)
        assert sorted(used) == placed  # each drive once; the one without affinity never
        core.create_namespaced_pod(NAMESPACE, nvme_pod(demo, names[-1]))
        message = api_wait(f"{names[-1]} unschedulable", lambda: unschedulable_message(core, names[-1]), 60, lambda: "")
        assert f"Insufficient {NVME}" in message
        assert core.read_namespaced_pod(names[-1], NAMESPACE).status.phase == "Pending"
    finally:
        for name in names:
            try:
                core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
            except ApiException as error:
                if error.status != 404:
                    raise
        for name in names:
            api_wait(f"{name} deleted", lambda n=name: pod_gone(core, n), POD_START_TIMEOUT, lambda: "")


def test_a_kubelet_restart_re_registers_its_plugin_and_the_other_nodes_drives_stay(joined, stopwatch):
    """A starting kubelet deletes the plugin's socket; the plugin, not restarted, registers with
    it again; the other Node's drives never change meanwhile."""
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    restarted, other = plan.kubelets
    unit = f"kubelet@numa{restarted.numa_node}.service"
    plugins = f"numa-device-plugin@numa{restarted.numa_node}-*"
    before = {k.node_name: nvme_capacity(core, k.node_name) for k in plan.kubelets}
    plugin_pids = view.sh(f"systemctl show -p MainPID --value {q(plugins)}")
    view.sh(f"systemctl restart {unit}")
    seen_other: set[tuple[str | None, str | None]] = set()

    def registered_again() -> bool:
        seen_other.add(nvme_capacity(core, other.node_name))
        invocation = view.sh(f"systemctl show -p InvocationID --value {unit}")
        log = view.sh(f"journalctl --no-pager _SYSTEMD_INVOCATION_ID={q(invocation)} | grep -F {q(NVME)} || true")
        return "Got registration request from device plugin" in log

    with stopwatch(f"real cluster: {restarted.node_name}'s device plugin registered again"):
        wait_for(
            f"the device plugin registered with the restarted {restarted.node_name}",
            lambda: registered_again() and nvme_capacity(core, restarted.node_name) == before[restarted.node_name],
            120,
            lambda: (
                view.sh(f"journalctl --no-pager -u {q(plugins)} -n 20") + kubelet_journal(view, restarted.numa_node)
            ),
        )
    assert view.sh(f"systemctl show -p MainPID --value {q(plugins)}") == plugin_pids  # the plugin kept running
    assert seen_other == {before[other.node_name]}


# A vendor's device plugin as vendors ship it: a DaemonSet whose pods mount the host path
# /var/lib/kubelet/device-plugins. The real generic plugin stands in for one (an image built in the
# guest), offering /dev/null, which every container has, under a resource of its own.
VENDOR_PLUGIN = "vendor-device-plugin"
VENDOR_PLUGIN_LABELS = {"app": VENDOR_PLUGIN}
VENDOR_RESOURCE = "vendor.example/null"
VENDOR_IMAGE_DIR = "/var/tmp/numa-kubelets-device-plugin-image"


def vendor_plugin_daemonset() -> dict[str, Any]:
    domain, name = VENDOR_RESOURCE.split("/")
    device = json.dumps({"name": name, "groups": [{"paths": [{"path": "/dev/null"}]}]})
    container = {
        "name": VENDOR_PLUGIN,
        "image": DEVICE_PLUGIN_IMAGE,
        "imagePullPolicy": "Never",
        "command": [f"/{DEVICE_PLUGIN_PROGRAM}", f"--device={device}", f"--domain={domain}", "--listen=127.0.0.1:0"],
        "volumeMounts": [{"name": "device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }
    return {
        "metadata": {"name": VENDOR_PLUGIN, "labels": VENDOR_PLUGIN_LABELS},
        "spec": {
            "selector": {"matchLabels": VENDOR_PLUGIN_LABELS},
            "template": {
                "metadata": {"labels": VENDOR_PLUGIN_LABELS},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "device-plugins",
                            "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
                        }
                    ],
                },
            },
        },
    }


def import_image_built_in_guest(joined, builder: ModuleType, program: str, output_dir: str, archive: str) -> None:
    """Runs the image builder module `builder` (tests/cri) in the guest on `program`, which writes
    `archive` into `output_dir`; imports it into every kubelet's containerd and removes `output_dir`."""
    view = joined["view"]
    joined["host"].run(f"python3 - {q(program)} {q(output_dir)}", stdin=Path(builder.__file__).read_bytes())
    for kubelet in joined["plan"].kubelets:
        view.sh(
            f"ctr --address {q(kubelet.layout.containerd_socket)} -n k8s.io images import "
            f"{q(output_dir)}/{archive} >/dev/null"
        )
    view.sh(f"rm -rf {q(output_dir)}")


def registrations(view: HostView, numa: int, resource: str) -> int:
    """How often the running kubelet of NUMA node `numa` logged a registration of `resource`."""
    unit = f"kubelet@numa{numa}.service"
    invocation = view.sh(f"systemctl show -p InvocationID --value {unit}")
    log = view.sh(f"journalctl --no-pager _SYSTEMD_INVOCATION_ID={q(invocation)}")
    return sum(
        1 for line in log.splitlines() if "Got registration request from device plugin" in line and resource in line
    )


def test_a_vendor_plugin_daemonset_registers_with_its_own_nodes_kubelet_on_each_numa_node(joined, stopwatch):
    """The DaemonSet's pod on Node N, through the host path every vendor plugin mounts, reaches
    kubelet N's own device-plugins directory (containerd N's view of it) and registers there: each
    Node offers the plugin's one device, each kubelet got exactly one registration."""
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    apps = kube_client.AppsV1Api(core.api_client)
    with stopwatch("real cluster: device plugin image built in the guest and imported into both instances"):
        import_image_built_in_guest(
            joined, device_plugin_image, GUEST_GENERIC_DEVICE_PLUGIN, VENDOR_IMAGE_DIR, DEVICE_PLUGIN_ARCHIVE
        )
    apps.create_namespaced_daemon_set("kube-system", vendor_plugin_daemonset())
    try:
        with stopwatch(f"real cluster: {VENDOR_RESOURCE} on every Node from the DaemonSet"):
            api_wait(
                f"{VENDOR_RESOURCE}: 1 in the allocatable of every Node",
                lambda: all(
                    (core.read_node(k.node_name).status.allocatable or {}).get(VENDOR_RESOURCE) == "1"
                    for k in plan.kubelets
                ),
                POD_START_TIMEOUT,
                lambda: (
                    str(
                        [
                            (p.spec.node_name, p.status.phase)
                            for p in core.list_namespaced_pod(
                                "kube-system", label_selector=f"app={VENDOR_PLUGIN}"
                            ).items
                        ]
                    )
                    + kubelet_journal(view, 0)
                    + kubelet_journal(view, 1)
                ),
            )
        pods = core.list_namespaced_pod("kube-system", label_selector=f"app={VENDOR_PLUGIN}").items
        assert sorted(p.spec.node_name for p in pods) == sorted(k.node_name for k in plan.kubelets)
        # One registration per kubelet: each pod reached its own Node's kubelet, none the other's.
        assert {k.numa_node: registrations(view, k.numa_node, VENDOR_RESOURCE) for k in plan.kubelets} == {0: 1, 1: 1}
        # Nothing of the plugin's under the host's own directory, which no kubelet reads.
        assert not view.sh("ls -A /var/lib/kubelet/device-plugins 2>/dev/null || true")
    finally:
        apps.delete_namespaced_daemon_set(VENDOR_PLUGIN, "kube-system")
        api_wait(
            f"the {VENDOR_PLUGIN} pods gone",
            lambda: not core.list_namespaced_pod("kube-system", label_selector=f"app={VENDOR_PLUGIN}").items,
            POD_START_TIMEOUT,
            lambda: "",
        )


def test_a_declared_drive_the_host_lacks_fails_the_update_before_anything_changes(joined):
    """The preflight finds a declared drive missing and names host, device, NUMA node and kubelet;
    no command after it runs: no plugin's config or process changes."""
    engine, view = joined["engine"], joined["view"]
    changed = copy.deepcopy(joined["config"])
    missing = {"address": "0000:7f:00.0", "class": "0x010802", "vendor": "0x1b36", "device": "0x0010"}
    changed["hosts"][0]["numaNodes"][1]["pciDevices"].append({**missing, "driver": "nvme"})
    plugins = "numa-device-plugin@*.service"
    before = view.sh(
        f"systemctl show -p MainPID --value {q(plugins)}; cat /run/numa-kubelets/numa*/device-plugin-*.yaml"
    )
    with pytest.raises(CommandFailed) as failed:
        engine.up(changed)
    assert failed.value.name == "numa-a-preflight"
    assert (
        "PCI device 0000:7f:00.0 of host numa-a (NUMA node 1, for kubelet numa-a-numa1) is missing"
        in failed.value.result.stderr + failed.value.result.stdout
    )
    assert (
        view.sh(f"systemctl show -p MainPID --value {q(plugins)}; cat /run/numa-kubelets/numa*/device-plugin-*.yaml")
        == before
    )
    assert engine.up(joined["config"]) == []  # the stack as it was: nothing to do


# --- kube-proxy per NUMA node, and a host reboot -------------------------------------------
# kube-proxy as clusters run it: a DaemonSet (hostNetwork, privileged, its kubeconfig and
# KubeProxyConfiguration from a ConfigMap, the service account's token), nftables mode, with the
# one setting docs/networking.md names for namespace mode. The image is the built kube-proxy plus the
# host's nft (tests/cri/kube_proxy_image.py), imported into each instance like the others.
KUBE_PROXY = "kube-proxy"
KUBE_PROXY_LABELS = {"k8s-app": KUBE_PROXY}
KUBE_PROXY_BINDING = "numa-kubelets-test-kube-proxy"
KUBE_PROXY_CONFIG_DIR = "/var/lib/kube-proxy"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GUEST_IMAGE_DIR = "/var/tmp/numa-kubelets-kube-proxy-image"
# Bridged replies of a same-node Service connection must pass the host's netfilter to be
# un-NATed, as on any node whose pods share a bridge: kubeadm's prerequisites load it too.
BR_NETFILTER_CONF = "/etc/modules-load.d/numa-kubelets-test-br_netfilter.conf"
SERVICE, BACKEND, BACKEND_PORT = "numa1-backend", "numa1-backend", 8080
BACKEND_REPLY = "served-by-the-backend-on-numa-node-1"
CLIENT_ATTEMPTS = 40


def kube_proxy_configmap(server: str) -> dict[str, Any]:
    configuration = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clusterCIDR": POD_CIDR,
        "clientConnection": {"kubeconfig": f"{KUBE_PROXY_CONFIG_DIR}/kubeconfig.conf"},
        # nf_conntrack_max is read-only outside the host's network namespace (docs/networking.md).
        "conntrack": {"maxPerCore": 0},
    }
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "default", "cluster": {"server": server, "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt"}}
        ],
        "users": [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}],
        "contexts": [{"name": "default", "context": {"cluster": "default", "user": "default"}}],
        "current-context": "default",
    }
    return {
        "metadata": {"name": KUBE_PROXY},
        "data": {"config.conf": yaml.safe_dump(configuration), "kubeconfig.conf": yaml.safe_dump(kubeconfig)},
    }


def kube_proxy_daemonset() -> dict[str, Any]:
    container = {
        "name": KUBE_PROXY,
        "image": KUBE_PROXY_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["/usr/local/bin/kube-proxy", f"--config={KUBE_PROXY_CONFIG_DIR}/config.conf"],
        "args": ["--hostname-override=$(NODE_NAME)"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": KUBE_PROXY, "mountPath": KUBE_PROXY_CONFIG_DIR}],
    }
    return {
        "metadata": {"name": KUBE_PROXY, "labels": KUBE_PROXY_LABELS},
        "spec": {
            "selector": {"matchLabels": KUBE_PROXY_LABELS},
            "template": {
                "metadata": {"labels": KUBE_PROXY_LABELS},
                "spec": {
                    "serviceAccountName": KUBE_PROXY,
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [container],
                    "volumes": [{"name": KUBE_PROXY, "configMap": {"name": KUBE_PROXY}}],
                },
            },
        },
    }


def pinned_pod(demo: DemoPod, name: str, command: list[str], restart: str, labels: dict[str, str]) -> dict[str, Any]:
    """A busybox pod on `demo`'s NUMA node: its nodeSelector, tolerations and the security
    settings the demo namespace's `restricted` Pod Security level demands; /www is writable."""
    manifest = demo.manifest()
    spec, [demo_container] = manifest["spec"], manifest["spec"]["containers"]
    container = {
        "name": "main",
        "image": WORKLOAD_IMAGE,
        "command": command,
        "securityContext": demo_container["securityContext"],
        "volumeMounts": [{"name": "www", "mountPath": "/www"}],
    }
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "nodeSelector": spec["nodeSelector"],
            "tolerations": spec.get("tolerations", []),
            "securityContext": spec["securityContext"],
            "restartPolicy": restart,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": TEST_POD_GRACE_SECONDS,
            "containers": [container],
            "volumes": [{"name": "www", "emptyDir": {}}],
        },
    }


def backend_pod(demo: DemoPod) -> dict[str, Any]:
    serve = f"echo {BACKEND_REPLY} > /www/index.html && exec /bin/busybox httpd -f -p {BACKEND_PORT} -h /www"
    return pinned_pod(demo, BACKEND, ["/bin/sh", "-c", serve], "Always", {"app": BACKEND})


def client_pod(demo: DemoPod, name: str, cluster_ip: str) -> dict[str, Any]:
    """Succeeds once the Service's ClusterIP answers with the backend's reply (kube-proxy may
    still be writing its rules when it starts). busybox's `nc`: its static `wget` crashes."""
    ask = (
        f"i=0; while [ $i -lt {CLIENT_ATTEMPTS} ]; do "
        f"reply=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 {cluster_ip} 80); echo \"$reply\"; "
        f'case "$reply" in *{BACKEND_REPLY}*) exit 0;; esac; i=$((i + 1)); sleep 2; done; exit 1'
    )
    return pinned_pod(demo, name, ["/bin/sh", "-c", ask], "Never", {"app": "service-client"})


def backend_diagnosis(joined) -> str:
    statuses = joined["core"].read_namespaced_pod(BACKEND, NAMESPACE).status.container_statuses or []
    return f"\n--- {BACKEND}: {statuses}\n{container_log(joined, 1, BACKEND)}"


def route_pod_networks(joined) -> None:
    """What a host-gw CNI agent (flannel's host-gw backend, kindnet) adds on each node: a route
    to every other Node's podCIDR through that Node's address, in this node's namespace."""
    view, plan = joined["view"], joined["plan"]
    for kubelet in plan.kubelets:
        for other in plan.kubelets:
            if other is not kubelet:
                assert other.network is not None
                view.sh(
                    f"ip -n numa{kubelet.numa_node} route replace {q(joined['pod_cidrs'][other.numa_node])} "
                    f"via {q(other.network.node_ip)} dev uplink"
                )


def kube_proxy_pods(core: kube_client.CoreV1Api) -> dict[str, kube_client.V1Pod]:
    """The running kube-proxy pods, by Node."""
    pods = core.list_namespaced_pod("kube-system", label_selector=f"k8s-app={KUBE_PROXY}").items
    return {p.spec.node_name: p for p in pods if p.status.phase == "Running"}


def pod_phase(core: kube_client.CoreV1Api, name: str) -> str:
    return core.read_namespaced_pod(name, NAMESPACE).status.phase


def container_log(joined, numa: int, pod: str) -> str:
    """The pod's container log as its kubelet wrote it (the API server here cannot reach the
    kubelets to stream it)."""
    logs = joined["plan"].kubelets[numa].layout.pod_logs_dir
    return joined["view"].sh(f"cat {q(logs)}/{NAMESPACE}_{pod}_*/*/*.log 2>&1 | tail -n 20")


def check_the_service_answers_from_each_node(joined, cluster_ip: str, round_name: str) -> None:
    core, view = joined["core"], joined["view"]
    names = {}
    for numa, demo in demo_pods(joined).items():
        names[numa] = f"client-{round_name}-numa{numa}"
        core.create_namespaced_pod(NAMESPACE, client_pod(demo, names[numa], cluster_ip))
    for numa, name in names.items():
        phase = api_wait(
            f"{name} finished",
            lambda n=name: (phase := pod_phase(core, n)) in ("Succeeded", "Failed") and phase,
            POD_START_TIMEOUT + 2 * CLIENT_ATTEMPTS,
            lambda n=numa: kubelet_journal(view, n),
        )
        answer = container_log(joined, numa, name)
        assert phase == "Succeeded", f"{name}: no answer from {SERVICE} ({cluster_ip}): {answer}" + backend_diagnosis(
            joined
        )
        assert core.read_namespaced_pod(name, NAMESPACE).spec.node_name == demo_pods(joined)[numa].kubelet.node_name
        core.delete_namespaced_pod(name, NAMESPACE)


def wait_for_kube_proxy_rules(view: HostView, cluster_ip: str) -> None:
    for numa in (0, 1):
        wait_for(
            f"kube-proxy's rules for {cluster_ip} in numa{numa}",
            lambda n=numa: cluster_ip in view.sh(f"ip netns exec numa{n} nft list table ip kube-proxy 2>&1 || true"),
            120,
            lambda n=numa: kubelet_journal(view, n),
        )


def test_kube_proxy_runs_once_per_numa_node_in_its_namespace_and_a_service_answers_from_each(joined, stopwatch):
    view, core, plan = joined["view"], joined["core"], joined["plan"]
    view.sh(f"echo br_netfilter > {BR_NETFILTER_CONF} && modprobe br_netfilter")
    route_pod_networks(joined)
    guest_kube_proxy = f"{GUEST_IMAGE_DIR}/kube-proxy"
    assert install_built_program(view, "kube-proxy", guest_kube_proxy) == joined["newer_version"]
    with stopwatch("real cluster: kube-proxy image built in the guest and imported into both instances"):
        import_image_built_in_guest(joined, kube_proxy_image, guest_kube_proxy, GUEST_IMAGE_DIR, KUBE_PROXY_ARCHIVE)
    rbac = kube_client.RbacAuthorizationV1Api(core.api_client)
    core.create_namespaced_service_account("kube-system", {"metadata": {"name": KUBE_PROXY}})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": KUBE_PROXY_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-proxier"},
            "subjects": [{"kind": "ServiceAccount", "name": KUBE_PROXY, "namespace": "kube-system"}],
        }
    )
    core.create_namespaced_config_map("kube-system", kube_proxy_configmap(joined["config"]["cluster"]["server"]))
    kube_client.AppsV1Api(core.api_client).create_namespaced_daemon_set("kube-system", kube_proxy_daemonset())
    node_names = {k.node_name for k in plan.kubelets}
    with stopwatch("real cluster: kube-proxy running on every Node"):
        api_wait(
            "a running kube-proxy pod on each Node",
            lambda: set(kube_proxy_pods(core)) == node_names,
            POD_START_TIMEOUT,
            lambda: kubelet_journal(view, 0) + kubelet_journal(view, 1),
        )
    # Each copy lives in its own NUMA node's slice and network namespace.
    pids = view.sh("pgrep -x kube-proxy").split()
    assert len(pids) == len(plan.kubelets), pids
    seen = set()
    for pid in pids:
        [numa] = {n for n in (0, 1) if f"/numa{n}.slice/" in view.sh(f"cat /proc/{pid}/cgroup")}
        assert net_of(view, int(pid)) == netns_inode(view, numa)
        seen.add(numa)
    assert seen == {0, 1}

    backend_demo = demo_pods(joined)[1]
    core.create_namespaced_pod(NAMESPACE, backend_pod(backend_demo))
    service = core.create_namespaced_service(
        NAMESPACE,
        {
            "metadata": {"name": SERVICE},
            "spec": {"selector": {"app": BACKEND}, "ports": [{"port": 80, "targetPort": BACKEND_PORT}]},
        },
    )
    cluster_ip = service.spec.cluster_ip
    api_wait(
        f"{BACKEND} running",
        lambda: running_container_id(core, BACKEND),
        POD_START_TIMEOUT,
        lambda: kubelet_journal(view, 1),
    )
    with stopwatch("real cluster: kube-proxy's rules for the Service in both namespaces"):
        wait_for_kube_proxy_rules(view, cluster_ip)
    # The rules exist only in the namespaces: the host's own has no kube-proxy table.
    assert "kube-proxy" not in view.sh("nft list tables")
    with stopwatch("real cluster: the ClusterIP answers from a pod of each NUMA node"):
        check_the_service_answers_from_each_node(joined, cluster_ip, "first")
    joined["cluster_ip"] = cluster_ip


def running_container_id(core: kube_client.CoreV1Api, name: str) -> str | None:
    """The pod's running container (a pod whose container keeps crashing is still phase Running)."""
    statuses = core.read_namespaced_pod(name, NAMESPACE).status.container_statuses or []
    return next((status.container_id for status in statuses if status.state.running), None)


def boot_ids(core: kube_client.CoreV1Api, plan) -> dict[str, str]:
    return {k.node_name: core.read_node(k.node_name).status.node_info.boot_id for k in plan.kubelets}


def test_a_host_reboot_brings_every_node_back_ready_with_its_pods(joined, stopwatch):
    host, view, core, plan = joined["host"], joined["view"], joined["core"], joined["plan"]
    before = boot_ids(core, plan)
    pods = [demo.name for demo in demo_pods(joined).values()] + [BACKEND]
    uids = {name: core.read_namespaced_pod(name, NAMESPACE).metadata.uid for name in pods}
    containers = {name: running_container_id(core, name) for name in pods}
    with stopwatch("real cluster: host reboot to SSH"):
        host.reboot()
    # The pool is not kept across a boot; the later scenarios' kubelet restarts read it again.
    view.sh(f"echo {HUGEPAGES} > {HUGEPAGE_POOL}")
    for kubelet in plan.kubelets:
        with stopwatch(f"real cluster: {kubelet.node_name} Ready after the reboot"):
            api_wait(
                f"Node {kubelet.node_name} Ready with a new boot id",
                lambda k=kubelet: (
                    (n := core.read_node(k.node_name)).status.node_info.boot_id != before[k.node_name] and node_ready(n)
                ),
                NODE_JOIN_TIMEOUT,
                lambda n=kubelet.numa_node: kubelet_journal(view, n),
            )
    # The boot rebuilt each network namespace before its runtime started: containerd and the
    # kubelet in their own again, its default route through the uplink.
    for numa in CPUS:
        assert view.active(f"numa-netns@numa{numa}.service")
        for unit in (f"containerd@numa{numa}.service", f"kubelet@numa{numa}.service"):
            assert net_of(view, view.main_pid(unit)) == netns_inode(view, numa), unit
        assert view.sh(f"ip -n numa{numa} route show default") == f"default via {GATEWAY} dev uplink"
    # The same pods (bound to their Nodes) run again, in new containers (the status the API held
    # until their kubelets reported is the one from before the boot).
    with stopwatch("real cluster: the pods running again after the reboot"):
        for name in pods:
            api_wait(
                f"pod {name} running in a new container",
                lambda n=name: running_container_id(core, n) not in (None, containers[n]),
                POD_START_TIMEOUT,
                lambda: kubelet_journal(view, 0) + kubelet_journal(view, 1),
            )
            assert core.read_namespaced_pod(name, NAMESPACE).metadata.uid == uids[name]
    # Node 1's demo pod, where the scheduler put it, confined to its NUMA node again (node 0's is
    # the one bound by hand onto node 1 above).
    demo = demo_pods(joined)[1]
    _, judged = verdict(joined, demo, core.read_namespaced_pod(demo.name, NAMESPACE))
    assert judged.ok, judged.failure_message()
    node_names = {k.node_name for k in plan.kubelets}
    api_wait(
        "kube-proxy running again on each Node",
        lambda: set(kube_proxy_pods(core)) == node_names,
        POD_START_TIMEOUT,
        lambda: kubelet_journal(view, 0) + kubelet_journal(view, 1),
    )
    route_pod_networks(joined)  # a CNI agent adds its routes again at its start
    wait_for_kube_proxy_rules(view, joined["cluster_ip"])
    check_the_service_answers_from_each_node(joined, joined["cluster_ip"], "after-reboot")
    core.delete_namespaced_service(SERVICE, NAMESPACE)
    core.delete_namespaced_pod(BACKEND, NAMESPACE)
    api_wait(f"{BACKEND} deleted", lambda: pod_gone(core, BACKEND), POD_START_TIMEOUT, lambda: "")


def test_a_containerd_restart_keeps_the_pods_and_the_node_ready(joined, stopwatch):
    """Before the static managers' restart of both kubelets: the kubelet reports its runtime
    down and up again after this, and the drain below must see its Node Ready."""
    view, core = joined["view"], joined["core"]
    demo = demo_pods(joined)[1]
    pid_before = verdict(joined, demo, core.read_namespaced_pod(demo.name, NAMESPACE))[1].readings[0].pid
    with stopwatch("real cluster: restart containerd@numa1"):
        view.sh("systemctl restart containerd@numa1.service")
        wait_for(
            "containerd@numa1 active again",
            lambda: view.active("containerd@numa1.service"),
            120,
            lambda: view.sh("journalctl --no-pager -u containerd@numa1.service -n 40"),
        )
    _, judged = verdict(joined, demo, core.read_namespaced_pod(demo.name, NAMESPACE))
    assert judged.ok, judged.failure_message()
    assert [r.pid for r in judged.readings] == [pid_before]  # the same process: the shim kept it
    assert node_ready(core.read_node(demo.kubelet.node_name))


ROLLING = "rolling"  # the Deployment the rolling upgrade keeps serving
ROLLING_REPLICAS = 4  # 2 per NUMA node
# The held pod's eviction is refused from the first try to the last, so the drain's failure (which
# lists every pod still there and why) is the same whatever the timeout: a short one.
ROLLING_DRAIN_TIMEOUT = "15s"
HELD_POD = "held"


def rolling_deployment(demo: DemoPod) -> dict[str, Any]:
    """4 replicas of the workload spread over the two NUMA nodes' Nodes, 2 each, as a user's app."""
    pod = demo.manifest()
    labels = {"app.kubernetes.io/name": ROLLING}
    spec = {key: value for key, value in pod["spec"].items() if key != "nodeSelector"}
    spec["terminationGracePeriodSeconds"] = TEST_POD_GRACE_SECONDS
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "numa-kubelets.io/numa-node",
            # Replacements for a drained Node's pods go to the other one.
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels},
        }
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": ROLLING, "namespace": NAMESPACE},
        "spec": {
            "replicas": ROLLING_REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def rolling_pods(core: kube_client.CoreV1Api) -> list[kube_client.V1Pod]:
    return core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={ROLLING}").items


class ClusterSampler(Polling):
    """What the API says twice a second while an update runs: each Node's schedulability and the
    rollout's mark, and every pod of the Deployment (its Node, deletion, restarts, phase)."""

    def __init__(self, core: kube_client.CoreV1Api, nodes: list[str]) -> None:
        super().__init__(self._sample, 0.5, once_more=True)
        self.core, self.nodes = core, nodes
        self.samples: list[dict[str, Any]] = []

    def _sample(self) -> None:
        nodes = {}
        for name in self.nodes:
            node = self.core.read_node(name)
            nodes[name] = {
                "unschedulable": bool(node.spec.unschedulable),
                "marked": cluster.ROLLOUT_ANNOTATION in (node.metadata.annotations or {}),
            }
        pods = {
            pod.metadata.name: {
                "node": pod.spec.node_name,
                "deleting": pod.metadata.deletion_timestamp is not None,
                "phase": pod.status.phase,
                "restarts": sum(status.restart_count for status in pod.status.container_statuses or []),
                # Set by the API server on a pod the eviction API deleted.
                "evicted": any(
                    c.type == "DisruptionTarget" and c.reason == "EvictionByEvictionAPI"
                    for c in pod.status.conditions or []
                ),
            }
            for pod in rolling_pods(self.core)
        }
        self.samples.append({"nodes": nodes, "pods": pods})

    def both_unschedulable(self) -> list[int]:
        return [i for i, s in enumerate(self.samples) if all(n["unschedulable"] for n in s["nodes"].values())]

    def ever_cordoned(self, node: str) -> bool:
        return any(s["nodes"][node]["unschedulable"] for s in self.samples)

    def pods_killed(self) -> list[str]:
        """Pods whose container restarted, or that failed without being deleted: what a kubelet
        restart without a drain does. (A deleted pod ends Failed once its container stopped.)"""
        return sorted(
            {
                name
                for s in self.samples
                for name, p in s["pods"].items()
                if p["restarts"] or (p["phase"] == "Failed" and not p["deleting"])
            }
        )

    def pods_gone_without_eviction(self) -> list[str]:
        """Pods that went away without the eviction API deleting them while the rollout had
        their Node cordoned."""
        seen: set[str] = set()
        evicted: set[str] = set()
        for sample in self.samples:
            for name, pod in sample["pods"].items():
                seen.add(name)
                if pod["evicted"] and pod["node"] and sample["nodes"][pod["node"]]["marked"]:
                    evicted.add(name)
        final = self.samples[-1]["pods"]
        return sorted(name for name in seen if name not in final and name not in evicted)

    def history(self, pods: list[str]) -> str:
        """How these pods went, sample by sample, for a failure message."""
        lines = []
        for index, sample in enumerate(self.samples):
            states = {name: sample["pods"][name] for name in pods if name in sample["pods"]}
            if states:
                lines.append(f"{index}: nodes {sample['nodes']} pods {states}")
        return "\n".join(lines[-40:])


def recreate_demo_pods(joined) -> None:
    """The demo pods are bare pods: a drain evicts them for good. The later scenarios need them."""
    core, view = joined["core"], joined["view"]
    for numa, demo in demo_pods(joined).items():
        if pod_gone(core, demo.name):
            core.create_namespaced_pod(NAMESPACE, demo.manifest())
        api_wait(
            f"demo pod {demo.name} running again",
            lambda d=demo: running_pod(core, d.name),
            POD_START_TIMEOUT,
            lambda n=numa: kubelet_journal(view, n),
        )


def kubelet_pids(view: HostView) -> dict[int, int]:
    return {numa: view.main_pid(f"kubelet@numa{numa}.service") for numa in (0, 1)}


def test_a_drain_that_times_out_fails_the_upgrade_and_leaves_every_kubelet_alone(joined, stopwatch):
    """A PodDisruptionBudget holding the first kubelet's drain: nothing restarts, nothing stays cordoned."""
    core, engine, view, plan = joined["core"], joined["engine"], joined["view"], joined["plan"]
    apps = kube_client.AppsV1Api(core.api_client)
    apps.create_namespaced_deployment(NAMESPACE, rolling_deployment(demo_pods(joined)[0]))
    api_wait(
        f"{ROLLING_REPLICAS} pods of {ROLLING} running, 2 per NUMA node",
        lambda: (
            sorted(p.spec.node_name for p in rolling_pods(core) if p.status.phase == "Running")
            == sorted([k.node_name for k in plan.kubelets] * 2)
        ),
        POD_START_TIMEOUT,
        lambda: (
            f"{[(p.metadata.name, p.spec.node_name, p.status.phase) for p in rolling_pods(core)]}\n"
            + kubelet_journal(view, 0)
            + kubelet_journal(view, 1)
        ),
    )
    policy = kube_client.PolicyV1Api(core.api_client)
    policy.create_namespaced_pod_disruption_budget(
        NAMESPACE,
        {
            "metadata": {"name": ROLLING},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": ROLLING}}},
        },
    )
    first = plan.kubelets[0]  # hosts take turns: numa0 is the first batch
    # A pod on numa0's Node that no eviction may take (its demo pod runs elsewhere by now).
    held = copy.deepcopy(demo_pods(joined)[0].manifest())
    held["metadata"].update(name=HELD_POD, labels={"app.kubernetes.io/name": HELD_POD})
    held["spec"]["terminationGracePeriodSeconds"] = TEST_POD_GRACE_SECONDS
    core.create_namespaced_pod(NAMESPACE, held)
    api_wait(
        f"{HELD_POD} running", lambda: running_pod(core, HELD_POD), POD_START_TIMEOUT, lambda: kubelet_journal(view, 0)
    )
    policy.create_namespaced_pod_disruption_budget(
        NAMESPACE,
        {
            "metadata": {"name": HELD_POD},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": HELD_POD}}},
        },
    )
    api_wait(
        "the disruption controller counting the held pod",
        lambda: (policy.read_namespaced_pod_disruption_budget(HELD_POD, NAMESPACE).status.current_healthy or 0) == 1,
        60,
        lambda: "",
    )
    pids = kubelet_pids(view)
    upgrade = upgraded(joined, cluster_drain_timeout=ROLLING_DRAIN_TIMEOUT)
    with (
        stopwatch("real cluster: upgrade held by a PDB (drain timeout, update fails)"),
        ClusterSampler(core, [k.node_name for k in plan.kubelets]) as sampler,
        pytest.raises(NodeLifecycleError) as refused,
    ):
        engine.up(upgrade, play=True)
    message = str(refused.value)
    assert f"draining Node {first.node_name} before its kubelet restarts did not finish" in message
    assert f"{NAMESPACE}/{HELD_POD}: eviction refused" in message
    # Nothing restarted, the held Node back in service, the other never touched.
    assert kubelet_pids(view) == pids
    for kubelet in plan.kubelets:
        node = core.read_node(kubelet.node_name)
        assert not node.spec.unschedulable
        assert node.status.node_info.kubelet_version == joined["version"].removeprefix("Kubernetes ")
    assert not sampler.ever_cordoned(plan.kubelets[1].node_name)
    policy.delete_namespaced_pod_disruption_budget(HELD_POD, NAMESPACE)
    core.delete_namespaced_pod(HELD_POD, NAMESPACE)
    api_wait(f"{HELD_POD} deleted", lambda: pod_gone(core, HELD_POD), POD_START_TIMEOUT, lambda: "")


def upgraded(joined, cluster_drain_timeout: str) -> dict[str, Any]:
    config = copy.deepcopy(joined["config"])
    config.update(kubeletPath=GUEST_KUBELET, kubeletVersion=minor_of(joined["newer_version"]))
    config["cluster"]["drainTimeout"] = cluster_drain_timeout
    return config


def test_a_rolling_upgrade_drains_restarts_and_readies_one_numa_node_at_a_time(joined, stopwatch):
    core, engine, view, plan = joined["core"], joined["engine"], joined["view"], joined["plan"]
    pids = kubelet_pids(view)
    upgrade = upgraded(joined, cluster_drain_timeout="5m")
    with (
        stopwatch("real cluster: rolling upgrade of 2 kubelets, v1.36 -> v1.37 (drain, restart, Ready each)"),
        ClusterSampler(core, [k.node_name for k in plan.kubelets]) as sampler,
    ):
        ran = engine.up(upgrade, play=True)
    drained = [name for name, phase in ran if name.endswith("-drain")]
    assert drained == [f"{k.node_name}-drain" for k in plan.kubelets], ran
    assert sampler.both_unschedulable() == [], "both NUMA nodes were cordoned at once"
    assert all(sampler.ever_cordoned(k.node_name) for k in plan.kubelets)
    killed = sampler.pods_killed()
    assert killed == [], f"pods were killed, not evicted:\n{sampler.history(killed)}"
    unevicted = sampler.pods_gone_without_eviction()
    assert unevicted == [], f"pods went away without an eviction:\n{sampler.history(unevicted)}"
    for numa, pid in kubelet_pids(view).items():
        assert pid != pids[numa]
    for kubelet in plan.kubelets:
        node = core.read_node(kubelet.node_name)
        assert node_ready(node) and not node.spec.unschedulable
        assert node.status.node_info.kubelet_version == joined["newer_version"].removeprefix("Kubernetes ")
        assert cluster.ROLLOUT_ANNOTATION not in (node.metadata.annotations or {})
    running = [p for p in rolling_pods(core) if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    assert len(running) == ROLLING_REPLICAS
    TIMINGS.append((f"real cluster: samples during the rolling upgrade: {len(sampler.samples)}", 0.0))
    # A re-apply without changes drains and restarts nothing.
    assert engine.up(upgrade, play=True) == []
    kube_client.AppsV1Api(core.api_client).delete_namespaced_deployment(ROLLING, NAMESPACE)
    kube_client.PolicyV1Api(core.api_client).delete_namespaced_pod_disruption_budget(ROLLING, NAMESPACE)
    # Later scenarios build on the upgraded stack.
    joined["config"], joined["version"] = upgrade, joined["newer_version"]
    recreate_demo_pods(joined)


def test_a_canary_kubelet_runs_the_newer_version_next_to_the_older(joined, stopwatch):
    core, engine, plan = joined["core"], joined["engine"], joined["plan"]
    canary = copy.deepcopy(joined["config"])
    canary.update(kubeletPath=GUEST_KUBELET_PREVIOUS, kubeletVersion="1.36")
    canary["hosts"][0]["kubelets"][0].update(kubeletPath=GUEST_KUBELET, kubeletVersion="1.37")
    with stopwatch("real cluster: canary (numa0 newer, numa1 back to the older)"):
        ran = engine.up(canary, play=True)
    assert [name for name, _ in ran if name.endswith("-drain")] == [f"{plan.kubelets[1].node_name}-drain"]
    versions = {k.node_name: core.read_node(k.node_name).status.node_info.kubelet_version for k in plan.kubelets}
    assert versions == {
        plan.kubelets[0].node_name: joined["newer_version"].removeprefix("Kubernetes "),
        plan.kubelets[1].node_name: "v1.36.3",
    }
    assert all(node_ready(core.read_node(k.node_name)) for k in plan.kubelets)
    # Not taken back to the newer version here: the static managers' update next does it (numa1's
    # kubelet path and version change with its configuration: one drain and restart, not two).


# Item 4 of issue 43 with a plugin that reports its devices' NUMA node. None that runs here does (the
# generic plugin reports none; NVIDIA's, Intel's need their hardware; the SR-IOV plugin's module is
# refused), so a double of one does: tools/topology-device-plugin, on the kubelet's own device plugin
# API, one resource per process. Both run for kubelet 1: one offers a device of its own NUMA node, the
# other a device of node 0, as a device given to another node's kubelet would report.
GUEST_TOPOLOGY_PLUGIN = "/usr/local/bin/topology-device-plugin"
TOPOLOGY_RESOURCES = {1: "numa-kubelets.test/numa1-device", 0: "numa-kubelets.test/numa0-device"}
TOPOLOGY_ALLOCATED_ENV = "TOPOLOGY_DOUBLE_DEVICES"  # what the double's Allocate sets in the container
REMOTE_DEVICE_POD = "remote-device"


def topology_plugin_unit(device_node: int) -> str:
    return f"topology-device-plugin-numa{device_node}.service"


def start_topology_plugins(joined, kubelet) -> None:
    """Both doubles, registered with `kubelet` (in its slice), until each Node offers their device."""
    view, core = joined["view"], joined["core"]
    install_built_program(view, "topology-device-plugin", GUEST_TOPOLOGY_PLUGIN)
    for device_node, resource in TOPOLOGY_RESOURCES.items():
        view.sh(
            f"systemd-run --quiet --collect --unit={topology_plugin_unit(device_node)} "
            f"--slice=numa{kubelet.numa_node}.slice {GUEST_TOPOLOGY_PLUGIN} "
            f"--dir={q(kubelet.layout.device_plugins_dir)} --resource={q(resource)} --numa-node={device_node}"
        )
    api_wait(
        f"{', '.join(TOPOLOGY_RESOURCES.values())}: 1 each in {kubelet.node_name}'s allocatable",
        lambda: all(
            (core.read_node(kubelet.node_name).status.allocatable or {}).get(resource) == "1"
            for resource in TOPOLOGY_RESOURCES.values()
        ),
        60,
        lambda: (
            view.sh(" ; ".join(f"journalctl --no-pager -u {topology_plugin_unit(n)}" for n in TOPOLOGY_RESOURCES))
            + kubelet_journal(view, kubelet.numa_node)
        ),
    )


def stop_topology_plugins(view: HostView) -> None:
    units = " ".join(topology_plugin_unit(n) for n in TOPOLOGY_RESOURCES)
    view.sh(f"systemctl stop {units} 2>/dev/null || true")


def guaranteed_variant(demo: DemoPod, name: str, resources: dict[str, str]) -> dict[str, Any]:
    """The demo pod of `demo`'s kubelet as a Guaranteed pod `name`: `resources` its requests and limits."""
    manifest = demo.manifest()
    manifest["metadata"]["name"] = name
    manifest["metadata"]["labels"] = {"app.kubernetes.io/name": name}
    manifest["spec"]["terminationGracePeriodSeconds"] = TEST_POD_GRACE_SECONDS
    [container] = manifest["spec"]["containers"]
    container["resources"] = {"requests": resources, "limits": resources}
    return manifest


def remote_device_pod(demo: DemoPod) -> dict[str, Any]:
    """A Guaranteed pod of `demo`'s Node asking for the double's device of the other NUMA node."""
    other = 1 - demo.kubelet.numa_node
    return guaranteed_variant(demo, REMOTE_DEVICE_POD, {"cpu": "1", "memory": "64Mi", TOPOLOGY_RESOURCES[other]: "1"})


STATIC_MANAGERS = {
    "cpuManagerPolicy": "static",
    "memoryManagerPolicy": "Static",
    "topologyManagerPolicy": "single-numa-node",
}
GUARANTEED_POD = "guaranteed-2-cpus"


def guaranteed_pod(demo: DemoPod) -> dict[str, Any]:
    """The demo pod of `demo`'s kubelet, as a Guaranteed pod with 2 integer CPUs, one NVMe drive (its
    plugin reports no NUMA node) and one device of the topology double's on its own NUMA node (issue 43:
    device pods under the single-numa-node Topology Manager)."""
    own = TOPOLOGY_RESOURCES[demo.kubelet.numa_node]
    return guaranteed_variant(demo, GUARANTEED_POD, {"cpu": "2", "memory": "64Mi", NVME: "1", own: "1"})


def workload_pid(view: HostView, numa: int, uid: str) -> int:
    """The pod's workload process (`sleep`, not the sandbox's pause), found in the pod's cgroup:
    Guaranteed pods sit right under numa<N>-kubepods.slice."""
    pod_slice = f"numa{numa}-kubepods-pod{uid.replace('-', '_')}.slice"
    scopes = f"/sys/fs/cgroup/numa{numa}.slice/numa{numa}-kubepods.slice/{pod_slice}/cri-containerd-*.scope"
    pids = view.sh(f"cat {scopes}/cgroup.procs").split()
    workload = [pid for pid in pids if view.sh(f"tr '\\0' ' ' < /proc/{int(pid)}/cmdline").strip() == " ".join(COMMAND)]
    assert len(workload) == 1, f"processes in {scopes}: {pids}"
    return int(workload[0])


def container_device_nodes(view: HostView, pid: int) -> frozenset[str]:
    """The NVMe device nodes in the container of process `pid`, seen through its root."""
    names = view.sh(f"ls /proc/{pid}/root/dev").split()
    return frozenset(f"/dev/{name}" for name in names if name.startswith(("nvme", "ng")))


def cpu_manager_policy(view: HostView, numa: int) -> str | None:
    result = view.host.run(f"cat /var/lib/kubelet-numa{numa}/cpu_manager_state", check=False)
    return json.loads(result.stdout)["policyName"] if result.rc == 0 and result.stdout.strip() else None


def kubelet_config(view: HostView, numa: int) -> dict[str, Any]:
    """The kubelet's file with its drop-ins over it, in the order it reads them (the prepare
    script writes the reservations it computes from sysfs at each start into a drop-in); the
    fields these tests read are top-level, so a drop-in's replace the file's."""
    merged = yaml.safe_load(view.sh(f"cat /etc/numa-kubelets/numa{numa}/kubelet-config.yaml"))
    dropins = f"/run/numa-kubelets/numa{numa}/kubelet.conf.d"
    for name in sorted(view.sh(f"ls {dropins}").split()):
        if name.endswith(".conf"):
            merged.update(yaml.safe_load(view.sh(f"cat {dropins}/{name}")) or {})
    return merged


def check_reservations_against_sysfs(view: HostView) -> None:
    """The static managers' reservations in each kubelet's file, against DESIGN.md section 6's
    formulas computed here from the guest's sysfs. (The kubelet checks only their sum: it
    refuses to start unless reservedMemory adds up to systemReserved plus evictionHard.)"""
    total = int(view.sh("awk '$1 == \"MemTotal:\" { print $2 }' /proc/meminfo")) * 1024
    memory = {numa: sysfs_node_memory_bytes(view, numa) for numa in (0, 1)}
    hugepages = {numa: sysfs_hugepage_bytes(view, numa) for numa in (0, 1)}
    assert hugepages == {0: 0, 1: HUGEPAGES * HUGEPAGE_KIB * 1024}  # the pools are in the formulas no more
    for numa in (0, 1):
        other = 1 - numa
        config = kubelet_config(view, numa)
        # Every CPU outside the slice: the kubelet hands exclusive CPUs out of its slice only.
        assert config["reservedSystemCPUs"] == ("0,4-7" if numa == 0 else "0-4")
        assert config["topologyManagerPolicy"] == "single-numa-node"
        system_reserved = quantity_bytes(config["systemReserved"]["memory"])
        assert system_reserved == total - memory[numa]
        reserved = {
            entry["numaNode"]: quantity_bytes(str(entry["limits"]["memory"])) for entry in config["reservedMemory"]
        }
        assert sum(reserved.values()) == system_reserved + EVICTION_HARD_MEMORY_BYTES  # the sum rule, to the byte
        assert reserved[other] == memory[other]  # whole: its pools read as empty in this kubelet's view
        assert reserved[numa] == EVICTION_HARD_MEMORY_BYTES + total - sum(memory.values())


def test_static_managers_give_a_guaranteed_pod_exclusive_cpus_of_its_numa_node(joined, stopwatch):
    """The worked example of docs/configuration.md with the real kubelet: its sum rule for reservedMemory accepted,
    a Guaranteed pod's CPUs exclusive and from the slice, its memory from its node."""
    engine, view, core = joined["engine"], joined["view"], joined["core"]
    before = kubelet_pids(view)
    config = {**joined["config"], "kubeletVersion": "1.37", "kubeletConfig": STATIC_MANAGERS}
    # From the canary's stack: numa0 on the newer kubelet already, numa1 taken back to it here.
    with stopwatch("real cluster: none -> static managers, numa1 newer again (each drained, restarted, Ready)"):
        ran = engine.up(config, play=True)
    assert [name for name, _ in ran if name.endswith("-drain")] == [
        f"{k.node_name}-drain" for k in joined["plan"].kubelets
    ]
    newer = joined["newer_version"].removeprefix("Kubernetes ")
    for kubelet in joined["plan"].kubelets:
        assert core.read_node(kubelet.node_name).status.node_info.kubelet_version == newer
    for numa in (0, 1):
        assert view.main_pid(f"kubelet@numa{numa}.service") != before[numa]
        # Its NodeLifecycle waited for the restarted kubelet's own report; its CPU manager runs
        # the new policy (the program removed the old state file: the kubelet refuses to start
        # on a checkpoint of another policy).
        assert cpu_manager_policy(view, numa) == "static"
    check_reservations_against_sysfs(view)
    recreate_demo_pods(joined)
    demo = demo_pods(joined)[1]
    try:
        with stopwatch("real cluster: topology-reporting device plugin doubles registered with kubelet 1"):
            start_topology_plugins(joined, demo.kubelet)
        check_guaranteed_pods_under_single_numa_node(joined, stopwatch, demo)
    finally:
        stop_topology_plugins(view)
    # The restarted kubelets read the pools again (set again after the reboot): node 1's own only.
    for kubelet in joined["plan"].kubelets:
        capacity = core.read_node(kubelet.node_name).status.capacity
        expected = HUGEPAGES if kubelet.numa_node == HUGEPAGE_NODE else 0
        assert (
            quantity_bytes(capacity.get(f"hugepages-{HUGEPAGE_KIB // 1024}Mi", "0")) == expected * HUGEPAGE_KIB * 1024
        )
    # A hugepage pod under the Static memory manager: its pages and its memory from node 1.
    _, status = run_hugepage_pod(joined, stopwatch, f"{HUGEPAGE_POD}-static")
    assert status["Mems_allowed_list"] == str(HUGEPAGE_NODE)
    delete_pod(core, f"{HUGEPAGE_POD}-static")


def check_guaranteed_pods_under_single_numa_node(joined, stopwatch, demo: DemoPod) -> None:
    """A Guaranteed pod with devices of its own NUMA node (and one with none) is admitted, its CPUs
    exclusive and of its node; a pod asking for a device that reports the other node is refused."""
    view, core = joined["view"], joined["core"]
    core.create_namespaced_pod(NAMESPACE, guaranteed_pod(demo))
    with stopwatch("real cluster: Guaranteed pod with 2 CPUs running on node 1"):
        pod = api_wait(
            "Guaranteed pod running",
            lambda: running_pod(core, GUARANTEED_POD),
            POD_START_TIMEOUT,
            lambda: kubelet_journal(view, 1),
        )
    assert pod.spec.node_name == demo.kubelet.node_name and pod.status.qos_class == "Guaranteed"
    pid = workload_pid(view, 1, pod.metadata.uid)
    status = view.process_status(pid)
    # Admitted under single-numa-node with a drive: the generic plugin gives its devices no NUMA
    # hint, so the CPU and memory managers' hints and the double's (node 1 all) decide; the drive is
    # one of node 1's, the double's device the one on node 1.
    drives = nvme_drives(view)
    [address] = [a for a, (_, nodes) in drives.items() if nodes == container_device_nodes(view, pid)]
    assert drives[address][0] == 1, (address, drives)
    environment = view.sh(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
    assert f"{TOPOLOGY_ALLOCATED_ENV}=numa1-device0" in environment, environment
    exclusive = set(parse_cpulist(status["Cpus_allowed_list"]))
    assert len(exclusive) == 2 and exclusive <= set(parse_cpulist(CPUS[1])), status
    assert status["Mems_allowed_list"] == "1"
    # The shared pool of node 1, where the (Burstable) demo pod runs, loses exactly those CPUs
    # (at the CPU manager's next reconcile, every cpuManagerReconcilePeriod: 10 s).
    shared = set(parse_cpulist(CPUS[1])) - exclusive
    demo_pod = core.read_namespaced_pod(demo.name, NAMESPACE)

    def demo_pod_cpus() -> list[set[int]]:
        _, judged = verdict(joined, demo, demo_pod)
        assert judged.ok, judged.failure_message()
        return [set(parse_cpulist(str(r.cpus))) for r in judged.readings]

    wait_for(
        f"the demo pod on node 1 confined to the shared pool {sorted(shared)}",
        lambda: demo_pod_cpus() == [shared],
        60,
        lambda: f"demo pod's CPUs: {demo_pod_cpus()}\n" + kubelet_journal(view, 1),
    )
    # Gracefully, and until gone: its sandbox is torn down by the kubelet, network namespace and all.
    delete_pod(core, GUARANTEED_POD)
    # A device that reports node 0 on node 1's Node: the device hint (node 0) and the CPU and memory
    # hints (node 1, all this kubelet has) share no NUMA node, and the kubelet refuses the pod at
    # admission rather than run it across nodes.
    core.create_namespaced_pod(NAMESPACE, remote_device_pod(demo))
    with stopwatch("real cluster: a pod with a device of the other NUMA node refused"):
        refused = api_wait(
            "the remote-device pod Failed",
            lambda: (pod := core.read_namespaced_pod(REMOTE_DEVICE_POD, NAMESPACE)).status.phase == "Failed" and pod,
            POD_START_TIMEOUT,
            lambda: kubelet_journal(view, 1),
        )
    assert refused.spec.node_name == demo.kubelet.node_name
    assert refused.status.reason == "TopologyAffinityError", refused.status
    assert not refused.status.container_statuses or not any(c.state.running for c in refused.status.container_statuses)
    delete_pod(core, REMOTE_DEVICE_POD)


def test_back_to_no_managers_is_a_rolling_restart_that_removes_their_state_again(joined, stopwatch):
    engine, view = joined["engine"], joined["view"]
    before = kubelet_pids(view)
    with stopwatch("real cluster: static -> no managers (a rolling restart)"):
        ran = engine.up(joined["config"], play=True)
    assert [name for name, _ in ran if name.endswith("-drain")] == [
        f"{k.node_name}-drain" for k in joined["plan"].kubelets
    ]
    for numa in (0, 1):
        assert view.main_pid(f"kubelet@numa{numa}.service") != before[numa]
        # The static checkpoint is gone, or the kubelet would not have started on policy none.
        assert cpu_manager_policy(view, numa) == "none"
        config = kubelet_config(view, numa)
        assert "reservedSystemCPUs" not in config and "reservedMemory" not in config
    recreate_demo_pods(joined)


def test_removing_the_nodes_drains_and_deletes_them(joined, stopwatch):
    core, engine, view = joined["core"], joined["engine"], joined["view"]
    provider = NodeLifecycleProvider(api_polling_operations)
    # A PodDisruptionBudget that forbids evicting node 1's demo pod holds its drain until the timeout.
    guarded = demo_pods(joined)[1]
    policy = kube_client.PolicyV1Api(core.api_client)
    policy.create_namespaced_pod_disruption_budget(
        NAMESPACE,
        {
            "metadata": {"name": "keep-demo"},
            "spec": {
                "minAvailable": 1,
                "selector": {"matchLabels": {placement.EXPECTED_NODE_LABEL: guarded.kubelet.node_name}},
            },
        },
    )
    held = next(p for p in lifecycles(joined) if p["nodeName"] == guarded.kubelet.node_name)
    with pytest.raises(NodeLifecycleError, match="did not finish within 8s") as refused:
        provider.delete(held["nodeName"], {**held, "drainTimeoutSeconds": 8})
    assert f"{NAMESPACE}/{guarded.name}: eviction refused" in str(refused.value)
    assert "disruption budget" in str(refused.value)
    node = core.read_node(guarded.kubelet.node_name)
    assert node.spec.unschedulable is True  # cordoned, not deleted
    assert running_pod(core, guarded.name) is not None
    policy.delete_namespaced_pod_disruption_budget("keep-demo", NAMESPACE)
    for props in lifecycles(joined):
        assert props["removeNode"] is True
        with stopwatch(f"real cluster: {props['nodeName']} cordoned, drained, deleted (NodeLifecycle delete)"):
            provider.delete(props["nodeName"], dict(props))
        assert read_node(core, props["nodeName"]) is None
    # Drained through the eviction API: no pod is left, not even an evicted one its kubelet has
    # stopped (phase Failed, no reason) but not yet deleted: the drain waits for the deletion.
    left = {
        p.metadata.name: f"{p.status.phase} ({p.status.reason}: {p.status.message}), "
        f"deletionTimestamp {p.metadata.deletion_timestamp}"
        for p in core.list_namespaced_pod(NAMESPACE).items
    }
    assert left == {}
    with stopwatch("real cluster: destroy"):
        engine.destroy()
    assert view.sh("pgrep -x kubelet || true") == ""
    assert view.sh("ip netns list") == ""
