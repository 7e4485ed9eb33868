"""The REAL kubelet (built by `make tools`) standalone, on a 3-NUMA-node machine whose CPUs are
interleaved across the nodes (0,3,6 / 1,4,7 / 2,5, as some BIOSes number them): the test host's
second topology, with the program's defaults everywhere.

No cluster: the REAL Pulumi engine applies the stack (`pulumi up` / `destroy` of this
repository's program through the built CLI, language host and plugin cache:
tests/realengine/engine.py), and each kubelet@numa<N> runs the real kubelet binary, started by
the program's own scripts in numa<N>.slice, with a static pod from a `staticPodPath` given through the stack's
`kubeletConfig`. The binary is copied into the guest at test time to the stack's `kubeletPath`
(/usr/local/bin/kubelet), so the image's stand-in at /usr/bin/kubelet stays what it was. Images
stay registry-free: the busybox-based pause and workload images are imported into each
containerd instance before the static pod is written, and the sandbox image is the stack's
`containerd.sandboxImage`. The stack turns on anonymous access to the kubelets' own port (no
cluster: authorization is AlwaysAllow), so the test reads each kubelet's effective configuration
from its /configz: what the real kubelet made of the program's file and drop-ins.

Per test host OS (default trixie: containerd 1.7, systemd 257; bookworm's real kubelets go
through the same checks in the real-cluster module; NUMA_KUBELETS_STANDALONE_SUITES picks), on
a machine of its own, the scenarios build on each other in file order: apply (the defaults'
CPUs, ports and node names; the runtime versions the preflight reports), healthz, an unknown
field, the static pods (the program's probe and verdict, systemd-cgls, Cpus_allowed_list), a
container outside its slice judged not ok, a kubelet restart, a containerd restart, a kubelet
restart after it, destroy. The machine is stopped at the end of the session.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shlex
import uuid
from typing import Any

import pytest
import yaml

from numa_kubelets.config import load_config
from numa_kubelets.placement import DemoPod, StackKubelets, judge_placement, parse_probe_output, probe_scripts
from numa_kubelets.plan import build_plan
from numa_kubelets.problems import ConfigError
from numa_kubelets.render import SYSTEMD_CGROUP_CONTROLLERS
from tests import realtools
from tests.cri import PAUSE_IMAGE, WORKLOAD_IMAGE, ContainerSpec, CriTestClient, PodSpec, pod_cgroup_parent
from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import (
    ANONYMOUS_ACCESS,
    GUEST_KUBELET,
    KUBELET_START_TIMEOUT,
    POD_START_TIMEOUT,
    check_preflight_report,
    configz,
    healthz,
    install_built_program,
    kubelet_journal,
    wait_for,
    write_atomically,
)
from tests.realengine.engine import project_engine
from tests.testhost import recipe
from tests.testhost.fixtures import STANDALONE_SUITES
from tests.testhost.topology import format_cpulist
from tests.timings import TIMINGS, Stopwatch

# The last family it needs: the kubelet, built after the engine (the CLI, its language host, the
# plugin doubles). Yet it runs after the whole build: beside the origin machine (tests/conftest.py
# MACHINE_UNITS) it would take the CPU the build still needs for the families the origin machine's
# real-cluster and real-engine scenarios wait for; after the build it runs beside those.
pytestmark = [pytest.mark.realtools("kubelet"), pytest.mark.after_the_build]

q = shlex.quote

NAMESPACE = "numa-demo"
POD_NAME = "numa-demo"  # the kubelet names a static pod <name>-<nodeName>: the demo pod's name
COMMAND = ("/bin/sleep", "3600")
# One CPU per socket, interleaved across the nodes; 1 GiB of memory on each.
NODES = ((0, 3, 6), (1, 4, 7), (2, 5))
MEMORY_MIB = 3072
HOST = "numa-c"
NUMAS = (0, 1, 2)
# The defaults for it (DESIGN.md section 3): the lowest CPU of each node for the host's services,
# the rest for its kubelet; ports spread by 100 per NUMA node.
SYSTEM_CPUS = "0-2"
CPUS = {0: "3,6", 1: "4,7", 2: "5"}
PORTS = {0: 10250, 1: 10350, 2: 10450}
HEALTHZ_PORTS = {0: 10248, 1: 10348, 2: 10448}
NODE_NAMES = {numa: f"{HOST}-numa{numa}" for numa in NUMAS}
KUBELETS = " ".join(f"kubelet@numa{numa}.service" for numa in NUMAS)
RUNTIMES = " ".join(f"containerd@numa{numa}.service" for numa in NUMAS)
# Test-owned paths, removed by the fixture (the program's destroy does not know them).
MANIFESTS_ROOT = "/etc/numa-kubelets-test"
MANIFESTS_DIR = f"{MANIFESTS_ROOT}/static-pods"  # every kubelet's: each runs the pod as its own
CNI_CONFLIST_PATH = "/etc/cni/net.d/10-numa-kubelets-test.conflist"
CNI_NETWORK = "numa-kubelets-test"
ROOT_SUBTREE_CONTROL = "/sys/fs/cgroup/cgroup.subtree_control"
CNI_CONFLIST = {
    "cniVersion": "0.4.0",
    "name": CNI_NETWORK,
    "plugins": [
        {
            "type": "bridge",
            "bridge": "cnitest1",
            "isGateway": True,
            "ipMasq": False,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.0.0/24"}]]},
        }
    ],
}


def socket_of(numa: int) -> str:
    return f"/run/containerd-numa{numa}/containerd.sock"


def static_pod_manifest() -> str:
    """A BestEffort pod that needs nothing from a registry."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD_NAME, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": POD_NAME}},
        "spec": {
            "containers": [
                {
                    "name": "demo",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": list(COMMAND),
                }
            ],
            "terminationGracePeriodSeconds": 2,
        },
    }
    return yaml.safe_dump(pod, sort_keys=False)


def static_pod_sandbox(cri: CriTestClient, numa: int) -> dict[str, Any] | None:
    name = f"{POD_NAME}-{NODE_NAMES[numa]}"
    for sandbox in cri.pods():
        labels = sandbox.get("labels", {})
        if labels.get("io.kubernetes.pod.name") == name and sandbox.get("state") == "SANDBOX_READY":
            return sandbox
    return None


def running_static_pod(cri: CriTestClient, numa: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    sandbox = static_pod_sandbox(cri, numa)
    if sandbox is None:
        return None
    running = [c for c in cri.containers(sandbox["id"]) if c["state"] == "CONTAINER_RUNNING"]
    return (sandbox, running[0]) if running else None


def standalone_stack(host) -> dict[str, Any]:
    """Defaults everywhere but what a standalone real kubelet needs: its binary, a sandbox image no
    registry has to provide, the static pods' directory, and anonymous access for /configz."""
    return {
        "sshPrivateKeyPath": str(host.key_path),
        "kubeletPath": GUEST_KUBELET,
        "containerd": {"sandboxImage": PAUSE_IMAGE},
        # Verbosity 2: the kubelet says why it replaces a pod's sandbox ("... Need to start a new
        # one") only from there, which a failed restart scenario shows (sandbox_history).
        "kubeletConfig": {"staticPodPath": MANIFESTS_DIR, "logging": {"verbosity": 2}, **ANONYMOUS_ACCESS},
        "hosts": [
            {
                "name": HOST,
                "address": host.address,
                "sshPort": host.port,
                "hostKey": host.host_key,
                "numaNodes": [{"id": numa, "cpus": format_cpulist(cpus)} for numa, cpus in enumerate(NODES)],
            }
        ],
    }


@pytest.fixture(scope="module", params=STANDALONE_SUITES)
def real(request, boot_testhost, tmp_path_factory):
    """Per test host OS: a 3-node interleaved machine of that OS, booted for this module."""
    if request.param not in recipe.SUITES:
        raise ValueError(f"NUMA_KUBELETS_STANDALONE_SUITES: unknown suite {request.param!r} (known: {recipe.SUITES})")
    realtools.wait_until_the_build_ended()
    with Stopwatch(f"[{request.param}] boot the 3-node interleaved machine"):
        host = boot_testhost(NODES, memory_mib=MEMORY_MIB, suite=request.param)
    view = HostView(host)
    # The emulated firmware numbers the CPUs as asked (the test host's topology, not the program).
    cpulists = "for node in $(ls -d /sys/devices/system/node/node[0-9]* | sort -V); do cat $node/cpulist; done"
    assert view.sh(cpulists).split() == ["0,3,6", "1,4,7", "2,5"]
    assert view.sh("numactl --hardware | head -1") == "available: 3 nodes (0-2)"
    version = install_built_program(view)

    config = standalone_stack(host)
    host.run(
        f"mkdir -p {q(MANIFESTS_DIR)} /etc/cni/net.d && cat > {q(CNI_CONFLIST_PATH)}", stdin=json.dumps(CNI_CONFLIST)
    )
    engine = project_engine(tmp_path_factory.mktemp(f"standalone-{request.param}"), f"standalone-{request.param}")
    state = {
        "host": host,
        "view": view,
        "engine": engine,
        "config": config,
        "version": version,
        "suite": request.param,
        "root_controllers": view.sh(f"cat {ROOT_SUBTREE_CONTROL}"),
        "netns_mount_point": view.host.run("mountpoint -q /run/netns", check=False).rc == 0,
    }
    yield state
    if engine.created and engine.resources():
        engine.destroy()
    view.sh(
        f"rm -rf {q(MANIFESTS_ROOT)} {q(GUEST_KUBELET)} {q(CNI_CONFLIST_PATH)}; "
        f"ip link delete cnitest1 2>/dev/null || true; rm -rf /var/lib/cni/networks/{CNI_NETWORK}"
    )
    # This machine is the module's alone: stopped now, not at the session's end (an idle guest with
    # its kubelets gone still costs a quarter of a core under TCG, which the later modules need).
    host.shutdown()


def test_apply_starts_the_real_kubelet_in_each_slice_of_the_defaults(real, stopwatch):
    engine, view = real["engine"], real["view"]
    with stopwatch(f"[{real['suite']}] real kubelet: apply (3 NUMA nodes, 11 remote commands)"):
        assert len(engine.up(real["config"])) == 11
    for numa in NUMAS:
        assert view.effective(f"numa{numa}.slice", "cpus") == CPUS[numa]
        assert view.effective(f"numa{numa}.slice", "mems") == str(numa)
        unit = f"kubelet@numa{numa}.service"

        def main_pid_is_the_kubelet(unit: str = unit) -> int:
            pid = view.main_pid(unit)
            exe = view.host.run(f"readlink /proc/{pid}/exe", check=False).stdout.strip()
            return pid if view.active(unit) and exe == GUEST_KUBELET else 0

        pid = wait_for(
            f"{unit} running {GUEST_KUBELET}", main_pid_is_the_kubelet, 60, lambda n=numa: kubelet_journal(view, n)
        )
        assert view.cgroup_of(pid) == f"/numa{numa}.slice/{unit}"
        # The kubelet checks its cgroupRoot for every controller it uses; systemd never offers hugetlb.
        assert "hugetlb" in view.sh(f"cat /sys/fs/cgroup/numa{numa}.slice/cgroup.controllers").split()
        assert view.process_status(pid) == {"Cpus_allowed_list": CPUS[numa], "Mems_allowed_list": str(numa)}
        cmdline = view.sh(f"tr '\\0' ' ' < /proc/{pid}/cmdline")
        assert cmdline.startswith(f"{GUEST_KUBELET} --config=/etc/numa-kubelets/numa{numa}/kubelet-config.yaml")
        config = view.sh(f"cat /etc/numa-kubelets/numa{numa}/containerd.toml")
        assert f'sandbox_image = "{PAUSE_IMAGE}"' in config
    # Live on every systemd (257 does not apply the drop-ins on daemon-reload alone), and no
    # `set-property --runtime` drop-in is left to shadow the persistent ones.
    assert view.effective("system.slice", "cpus") == SYSTEM_CPUS
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == SYSTEM_CPUS
    assert view.runtime_control_dropins() == ""


def test_the_preflight_reports_the_runtime_versions_of_the_host(real):
    suite, engine = real["suite"], real["engine"]
    versions = check_preflight_report(real["host"], engine.commands()[f"{HOST}-preflight"], suite)
    TIMINGS.append((f"[{suite}] {versions}", 0.0))


def test_each_kubelet_answers_healthz_on_its_port(real, stopwatch):
    view = real["view"]
    for numa in NUMAS:
        with stopwatch(f"[{real['suite']}] real kubelet: kubelet@numa{numa} healthz ok after apply"):
            wait_for(
                f"kubelet@numa{numa} healthz on 127.0.0.1:{HEALTHZ_PORTS[numa]}",
                lambda n=numa: healthz(view, HEALTHZ_PORTS[n]) == "ok",
                KUBELET_START_TIMEOUT,
                lambda n=numa: kubelet_journal(view, n),
            )
    # Still the same processes: no kubelet exited and was restarted on the way.
    for numa in NUMAS:
        assert view.unit(f"kubelet@numa{numa}.service", "NRestarts")["NRestarts"] == "0", kubelet_journal(view, numa)


def test_each_kubelet_runs_with_its_own_ports_and_reservations(real):
    """What each real kubelet made of its file and drop-ins: its own ports, pod logs and runtime,
    and as systemReserved the CPUs outside its slice and a share of the memory of the other nodes."""
    view = real["view"]
    for numa in NUMAS:
        effective = configz(view, PORTS[numa])  # served on the kubelet's own port: it listens there
        # /configz leaves out what is zero (readOnlyPort 0: no read-only port).
        assert (effective["port"], effective["healthzPort"], effective.get("readOnlyPort", 0)) == (
            PORTS[numa],
            HEALTHZ_PORTS[numa],
            0,
        )
        assert effective["cgroupRoot"] == f"/numa{numa}" and effective["podLogsDir"] == f"/var/log/pods-numa{numa}"
        assert effective["containerRuntimeEndpoint"] == f"unix:///run/containerd-numa{numa}/containerd.sock"
        assert effective["staticPodPath"] == MANIFESTS_DIR
        reserved = effective["systemReserved"]
        assert reserved["cpu"] == str(8 - len(CPUS[numa].split(","))), reserved
        assert reserved["memory"].endswith("Ki") and int(reserved["memory"][:-2]) > 0, reserved


UNKNOWN_FIELD = "podLogDirectory"  # a plausible misspelling of podLogsDir


def test_an_unknown_kubelet_configuration_field_is_refused_by_the_core_the_real_kubelet_ignores_it(real):
    """Measured: kubelet 1.37 decodes its file strictly, and on an unknown field logs the error
    and decodes it again leniently, dropping the field. A misspelt field would go unnoticed on
    the host: the core's refusal is the only guard."""
    config = copy.deepcopy(real["config"])
    config["kubeletConfig"] = {UNKNOWN_FIELD: "/var/log/pods"}
    with pytest.raises(ConfigError, match=f"kubeletConfig.{UNKNOWN_FIELD}: unknown KubeletConfiguration field"):
        load_config(config)
    document = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", UNKNOWN_FIELD: "x"}
    path = f"{MANIFESTS_ROOT}/strict-decoding.yaml"
    write_atomically(real["view"], path, yaml.safe_dump(document))
    # It then stops for want of an API server (webhook authentication by default): not the file.
    result = real["host"].run(f"timeout 120 {q(GUEST_KUBELET)} --config={q(path)}", check=False)
    output = result.stdout + result.stderr
    assert f'strict decoding error: unknown field \\"{UNKNOWN_FIELD}\\"' in output, output
    assert "Using lenient decoding as strict decoding failed" in output
    assert "failed to load kubelet config file" not in output


def test_each_kubelet_runs_its_static_pod_from_the_imported_images(real, stopwatch):
    host, view = real["host"], real["view"]
    for numa in NUMAS:
        cri = CriTestClient(host, socket_of(numa))
        assert cri.version()["runtime_name"] == "containerd"
        assert cri.import_images() == ["pause.tar", "workload.tar"]
        assert cri.image_present(PAUSE_IMAGE) and cri.image_present(WORKLOAD_IMAGE)
    write_atomically(view, f"{MANIFESTS_DIR}/numa-demo.yaml", static_pod_manifest())
    real["pods"] = {}
    for numa in NUMAS:
        cri = CriTestClient(host, socket_of(numa))
        with stopwatch(f"[{real['suite']}] real kubelet: static pod running on kubelet@numa{numa}"):
            sandbox, container = wait_for(
                f"static pod {POD_NAME}-{NODE_NAMES[numa]} running through containerd@numa{numa}",
                lambda c=cri, n=numa: running_static_pod(c, n),
                POD_START_TIMEOUT,
                lambda n=numa: kubelet_journal(view, n),
            )
        real["pods"][numa] = (sandbox, container)
        assert sandbox["metadata"]["namespace"] == NAMESPACE
        # The sandbox runs the configured image, which no registry could have provided.
        info = json.loads(view.sh(f"ctr --address {socket_of(numa)} -n k8s.io containers info {sandbox['id']}"))
        assert info["Image"] == PAUSE_IMAGE
        assert cri.pod_status(sandbox["id"])["status"]["network"]["ip"].startswith("10.89.0.")
        assert container["labels"]["io.kubernetes.pod.uid"] == sandbox["metadata"]["uid"]
    statuses = {numa: CriTestClient(host, socket_of(numa)).status() for numa in NUMAS}
    # containerd 1.7.24 (trixie) adds a third condition, ContainerdHasNoDeprecationWarnings: all must hold.
    for status in statuses.values():
        assert {"RuntimeReady", "NetworkReady"} <= status.keys() and all(status.values()), statuses


@dataclasses.dataclass(frozen=True)
class StaticDemoPod(DemoPod):
    """The demo pod as a static pod: named by the kubelet `<manifest name>-<nodeName>`, where the
    program's pods carry a hash of their spec (DemoPod.name); the probe looks for this name."""

    @property
    def name(self) -> str:
        return f"{POD_NAME}-{self.kubelet.node_name}"


def probe(real, numa: int, uid: str) -> tuple[str, Any]:
    """The program's own probe script on the host, and the program's own verdict on its output."""
    plan = build_plan(load_config(real["config"]))
    kubelet = next(k for k in plan.kubelets if k.numa_node == numa)
    demo = StaticDemoPod(kubelet, NAMESPACE, WORKLOAD_IMAGE, COMMAND, "10m")
    result = real["host"].run(probe_scripts(demo, plan.hosts[0], plan).apply, stdin=uid + "\n", check=False)
    assert result.rc == 0, result.stderr
    return result.stdout, judge_placement(demo, StackKubelets(plan), kubelet.node_name, result.stdout)


def test_static_pods_containers_are_confined_to_their_slice(real):
    view = real["view"]
    for numa in NUMAS:
        sandbox, container = real["pods"][numa]
        uid = sandbox["metadata"]["uid"]
        stdout, verdict = probe(real, numa, uid)
        assert verdict.ok, verdict.failure_message()
        readings, unparsable = parse_probe_output(stdout)
        assert unparsable == [] and [r.container for r in readings] == [container["id"]]
        [reading] = readings
        assert view.process_status(reading.pid) == {"Cpus_allowed_list": CPUS[numa], "Mems_allowed_list": str(numa)}
        expected_parent = pod_cgroup_parent(f"/numa{numa}", "besteffort", uid)
        assert view.cgroup_of(reading.pid) == f"{expected_parent}/cri-containerd-{container['id']}.scope"
        assert view.sh(f"tr '\\0' ' ' < /proc/{reading.pid}/cmdline").strip() == " ".join(COMMAND)


def test_systemd_cgls_shows_the_real_kubelets_pod_under_its_kubepods_slice(real):
    view = real["view"]
    for numa in NUMAS:
        sandbox, container = real["pods"][numa]
        uid = sandbox["metadata"]["uid"]
        tree = view.sh(f"systemd-cgls --no-pager -u numa{numa}.slice")
        lines = [line.lstrip("│├└─ ") for line in tree.splitlines()]
        order = [
            f"numa{numa}-kubepods.slice",
            f"numa{numa}-kubepods-besteffort.slice",
            f"numa{numa}-kubepods-besteffort-pod{uid.replace('-', '_')}.slice",
            f"cri-containerd-{container['id']}.scope",
        ]
        positions = [next(i for i, line in enumerate(lines) if line.startswith(name)) for name in order]
        assert positions == sorted(positions), tree
        assert any(line.endswith(" ".join(COMMAND)) for line in lines), tree
        assert any(line.startswith(f"kubelet@numa{numa}.service") for line in lines), tree
        assert any(GUEST_KUBELET in line for line in lines), tree


def workload_pids(real) -> dict[int, int]:
    return {
        numa: parse_probe_output(probe(real, numa, real["pods"][numa][0]["metadata"]["uid"])[0])[0][0].pid
        for numa in NUMAS
    }


def wait_for_healthz(view: HostView, numa: int, what: str) -> None:
    wait_for(
        f"kubelet@numa{numa} healthz {what}",
        lambda: healthz(view, HEALTHZ_PORTS[numa]) == "ok",
        KUBELET_START_TIMEOUT,
        lambda: kubelet_journal(view, numa),
    )


def test_a_container_outside_its_slice_is_judged_not_ok_with_its_cpus(real):
    """A pod started under the kubelet's default cgroupRoot ("/"): the machine-wide kubepods.slice.
    Started through the CRI while kubelet@numa0 is stopped: a running kubelet kills a sandbox it
    did not create (its housekeeping), before the probe could see it."""
    host, view = real["host"], real["view"]
    cri = CriTestClient(host, socket_of(0))
    uid = str(uuid.uuid4())
    spec = PodSpec(
        name=f"{POD_NAME}-{NODE_NAMES[0]}",  # the demo pod's name (the probe looks for it), its own uid
        namespace=NAMESPACE,
        uid=uid,
        cgroup_root="/",
        pod_logs_dir="/var/log/pods-numa0",
        containers=[ContainerSpec("demo", WORKLOAD_IMAGE, command=list(COMMAND))],
    )
    view.sh("systemctl stop kubelet@numa0.service")
    try:
        misplaced = cri.run_pod(spec)
        try:
            assert misplaced.cgroup_parent.startswith("/kubepods.slice/kubepods-besteffort.slice/")
            _, verdict = probe(real, 0, uid)
            assert not verdict.ok
            message = verdict.failure_message()
            assert f"may run on CPUs 0-7; numa0.slice has CPUs {CPUS[0]}" in message, message
            assert "may allocate on memory nodes 0-2; numa0.slice has memory node 0" in message, message
        finally:
            cri.remove_pod(misplaced.sandbox_id, grace_seconds=0)
            # A kubelet removes the pod's slices; the CRI client does not, so the test does.
            view.sh("systemctl stop kubepods.slice")
    finally:
        view.sh("systemctl start kubelet@numa0.service")
    wait_for_healthz(view, 0, "after its stop")
    assert all(pod["labels"].get("io.kubernetes.pod.uid") != uid for pod in cri.pods())
    assert static_pod_sandbox(cri, 0)["id"] == real["pods"][0][0]["id"]


def sandbox_history(real, numa: int) -> str:
    """What a failed restart check shows: the instance's sandboxes and containers, and what its
    kubelet said about sandboxes."""
    view, cri = real["view"], CriTestClient(real["host"], socket_of(numa))
    listing = "".join(
        f"sandbox {p['id'][:12]} {p['state']} {p['labels'].get('io.kubernetes.pod.name')}\n" for p in cri.pods()
    ) + "".join(
        f"container {c['id'][:12]} {c['state']} of {c.get('podSandboxId', '?')[:12]}\n" for c in cri.containers()
    )
    said = view.host.run(
        f"journalctl --no-pager -u kubelet@numa{numa}.service "
        "| grep -iE 'new one|killing|unwanted|PodSandbox|no IP' | grep -v 'ListPodSandbox with filter' "
        "| tail -n 25",
        check=False,
    ).stdout
    runtime = view.host.run(
        f"journalctl --no-pager -u containerd@numa{numa}.service "
        "| grep -iE 'sandbox|recover|shim|netns|level=(warning|error)' | grep -v 'loading plugin' | tail -n 40",
        check=False,
    ).stdout
    return (
        f"--- containerd@numa{numa}\n{listing}--- kubelet@numa{numa} on sandboxes\n{said}"
        f"--- containerd@numa{numa} said\n{runtime}"
    )


def test_static_pods_survive_a_kubelet_restart(real, stopwatch):
    view, before = real["view"], workload_pids(real)
    with stopwatch(f"[{real['suite']}] real kubelet: restart every kubelet, healthz ok again"):
        view.sh(f"systemctl restart {KUBELETS}")
        for numa in NUMAS:
            wait_for_healthz(view, numa, "after a restart")
    # The restarted kubelet adopts its running pod: same sandbox, same container process.
    after = {numa: static_pod_sandbox(CriTestClient(real["host"], socket_of(numa)), numa) for numa in NUMAS}
    assert {n: (sandbox or {}).get("id") for n, sandbox in after.items()} == {
        n: real["pods"][n][0]["id"] for n in NUMAS
    }, "\n".join(sandbox_history(real, n) for n in NUMAS)
    assert workload_pids(real) == before, "\n".join(sandbox_history(real, n) for n in NUMAS)
    for numa in NUMAS:
        cri = CriTestClient(real["host"], socket_of(numa))
        assert running_static_pod(cri, numa) is not None
        assert static_pod_sandbox(cri, numa)["id"] == real["pods"][numa][0]["id"]


def sandbox_address(cri: CriTestClient, sandbox_id: str) -> str:
    return cri.pod_status(sandbox_id)["status"].get("network", {}).get("ip", "")


def test_static_pods_survive_a_containerd_restart(real, stopwatch):
    view, before = real["view"], workload_pids(real)
    addresses = {
        numa: sandbox_address(CriTestClient(real["host"], socket_of(numa)), real["pods"][numa][0]["id"])
        for numa in NUMAS
    }
    assert all(addresses.values()), addresses
    # containerd mounts each pod's network namespace where the host sees it, so it outlives
    # containerd's own mount namespace (render.containerd_namespace_script).
    for numa in NUMAS:
        netns = view.host.run(
            f"ctr --address {socket_of(numa)} -n k8s.io containers info {real['pods'][numa][0]['id']} "
            "| grep -o '/var/run/netns/cni-[0-9a-f-]*' | head -n 1",
            check=False,
        ).stdout.strip()
        assert netns and view.host.run(f"mountpoint -q {netns}", check=False).rc == 0, (
            f"numa{numa}: the pod's network namespace {netns or '(none)'} is no mount point in the host's view"
        )
    with stopwatch(f"[{real['suite']}] real kubelet: restart every containerd instance"):
        view.sh(f"systemctl restart {RUNTIMES}")
        for numa in NUMAS:
            cri = CriTestClient(real["host"], socket_of(numa))
            wait_for(
                f"containerd@numa{numa} RuntimeReady after a restart",
                lambda c=cri: c.status().get("RuntimeReady"),
                120,
                lambda n=numa: kubelet_journal(view, n),
            )
    # The kubelet rides out its runtime's restart, and keeps the running pod: same process.
    replaced = set()
    for numa in NUMAS:
        cri = CriTestClient(real["host"], socket_of(numa))
        sandbox = static_pod_sandbox(cri, numa)
        if sandbox is None or sandbox["id"] != real["pods"][numa][0]["id"]:
            # The one exception let through, named in docs/limitations.md: containerd 1.7
            # starting again may take a running sandbox's shim for a leaked one and kill it
            # (trixie's 1.7.24 under load; the same cleanup as containerd/containerd#10437).
            # The kubelet then runs the pod again in a new sandbox, which the later scenarios
            # go on with.
            assert killed_as_leaked_shim(view, numa, real["pods"][numa][0]["id"]), sandbox_history(real, numa)
            real["pods"][numa] = wait_for(
                f"kubelet@numa{numa} runs its static pod again in a new sandbox",
                lambda c=cri, n=numa: running_static_pod(c, n),
                POD_START_TIMEOUT,
                lambda n=numa: sandbox_history(real, n),
            )
            replaced.add(numa)
        else:
            # The restarted containerd finds the pod's network namespace again: a sandbox reported
            # without its address is one a starting kubelet replaces.
            assert sandbox_address(cri, sandbox["id"]) == addresses[numa], sandbox_history(real, numa)
        assert probe(real, numa, real["pods"][numa][0]["metadata"]["uid"])[1].ok
        assert view.active(f"kubelet@numa{numa}.service")
    kept = [numa for numa in NUMAS if numa not in replaced]
    after = workload_pids(real)
    assert {n: after[n] for n in kept} == {n: before[n] for n in kept}


def killed_as_leaked_shim(view: HostView, numa: int, sandbox_id: str) -> bool:
    """containerd@numa<N> said, starting, that it cleaned up that sandbox's shim as a leaked one."""
    said = f'msg="cleaning leaked shim process" id={sandbox_id}'
    return (
        view.host.run(f"journalctl --no-pager -u containerd@numa{numa}.service | grep -qF {q(said)}", check=False).rc
        == 0
    )


def test_static_pods_survive_a_kubelet_restart_after_the_containerd_restart(real, stopwatch):
    """Found with the real kubelet: with containerd in a systemd mount namespace, this replaced every sandbox."""
    view, before = real["view"], workload_pids(real)
    with stopwatch(f"[{real['suite']}] real kubelet: restart every kubelet after its runtime"):
        view.sh(f"systemctl restart {KUBELETS}")
        for numa in NUMAS:
            wait_for_healthz(view, numa, "after a restart")
    for numa in NUMAS:
        cri = CriTestClient(real["host"], socket_of(numa))
        wait_for(
            f"kubelet@numa{numa} reports its static pod running again",
            lambda c=cri, n=numa: running_static_pod(c, n),
            120,
            lambda n=numa: sandbox_history(real, n),
        )
        assert static_pod_sandbox(cri, numa)["id"] == real["pods"][numa][0]["id"], sandbox_history(real, numa)
    assert workload_pids(real) == before, "\n".join(sandbox_history(real, n) for n in NUMAS)


def test_destroy_stops_the_kubelets_and_their_pods(real, stopwatch):
    view, engine = real["view"], real["engine"]
    pids = workload_pids(real)
    with stopwatch(f"[{real['suite']}] real kubelet: destroy with static pods running"):
        engine.destroy()
    for pid in pids.values():
        assert not view.exists(f"/proc/{pid}"), pid
    assert view.sh("pgrep -x kubelet || true") == ""
    assert view.sh("pgrep -f '[c]ontainerd-shim' || true") == ""
    assert view.sh("systemctl list-units --all --plain --no-legend 'cri-containerd-*' 'numa*' 'kubelet@*'") == ""
    # The pods' CNI network namespaces went with them (the host ends of their veths inside).
    assert view.sh("ip netns list") == ""
    assert view.sh("ip -o link show type veth") == ""
    # A mount point containerd's prepare script made for them is gone too.
    assert (view.host.run("mountpoint -q /run/netns", check=False).rc == 0) == real["netns_mount_point"]
    # The host services' CPU restriction is lifted live, without a runtime drop-in left behind.
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0-7"
    assert view.runtime_control_dropins() == ""
    for numa in NUMAS:
        assert not view.exists(f"/sys/fs/cgroup/numa{numa}.slice")
        assert not view.exists(f"/var/lib/kubelet-numa{numa}")
        assert not view.exists(f"/var/lib/containerd-numa{numa}")
        assert not view.exists(f"/run/containerd-numa{numa}")
    # What the kubelets (hugetlb) and runc (rdma, misc) turned on in the root cgroup is off again;
    # the controllers systemd manages are its own business.
    after = set(view.sh(f"cat {ROOT_SUBTREE_CONTROL}").split()) - set(SYSTEMD_CGROUP_CONTROLLERS)
    assert after == set(real["root_controllers"].split()) - set(SYSTEMD_CGROUP_CONTROLLERS)
    assert not view.exists("/run/numa-kubelets")
    TIMINGS.append((f"[{real['suite']}] real kubelet: version in the guest: " + real["version"], 0.0))
