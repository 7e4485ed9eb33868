"""Pods through the real container runtime, on every test host OS (Debian bookworm and trixie).

The program configures its containerd instances; the CRI test client (tests/cri, not a
kubelet) then starts pods through them as a kubelet with `cgroupRoot: /numa<N>` and the
systemd cgroup driver would, with a sandbox image imported without a registry
(`containerd.sandboxImage`) and a CNI network. The program's own demo probe and verdict
judge where the pods run. Scenarios build on each other in file order, per OS: apply, pods,
probe, misplacement, systemd-cgls, containerd restart, kubelet restart, destroy.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from numa_kubelets.config import load_config
from numa_kubelets.placement import DemoPod, StackKubelets, judge_placement, parse_probe_output, probe_scripts
from numa_kubelets.plan import build_plan
from tests.cri import PAUSE_IMAGE, WORKLOAD_IMAGE, ContainerSpec, CriTestClient, PodSpec, pod_cgroup_parent
from tests.integration.conftest import TIMINGS
from tests.integration.engine import Engine
from tests.integration.hostcheck import HostView
from tests.integration.test_lifecycle import stack_for
from tests.testhost.fixtures import HOST_SUITES

NAMESPACE = "numa-demo"
COMMAND = ("/bin/sleep", "3600")
CPUS = {0: "1-3", 1: "5-7"}
# One bridge network for both instances (host network mode shares /etc/cni/net.d); host-local
# IPAM keeps its leases in the shared /var/lib/cni, so the two instances never hand out one IP twice.
CNI_CONFLIST_PATH = "/etc/cni/net.d/10-numa-kubelets-test.conflist"
CNI_CONFLIST = {
    "cniVersion": "0.4.0",
    "name": "numa-kubelets-test",
    "plugins": [
        {
            "type": "bridge",
            "bridge": "cnitest0",
            "isGateway": True,
            "ipMasq": False,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24"}]]},
        }
    ],
}


def socket_of(numa: int) -> str:
    return f"/run/containerd-numa{numa}/containerd.sock"


def demo_pod_spec(numa: int, uid: str, **overrides) -> PodSpec:
    spec = {
        "name": f"numa-demo-numa-a-numa{numa}",
        "namespace": NAMESPACE,
        "uid": uid,
        "cgroup_root": f"/numa{numa}",
        "pod_logs_dir": f"/var/log/pods-numa{numa}",
        "containers": [ContainerSpec("demo", WORKLOAD_IMAGE, command=list(COMMAND))],
    }
    spec.update(overrides)
    return PodSpec(**spec)


@pytest.fixture(scope="module", params=HOST_SUITES)
def pods(request, origin_host_of, testhost_image_of):
    """One test host per OS with the program applied (the session's origin machine of that OS)."""
    suite = request.param
    image = testhost_image_of(suite)
    TIMINGS.append((f"[{suite}] test host image build (as recorded when it was built)", image.build_seconds))
    host = origin_host_of(suite)
    TIMINGS.append((f"[{suite}] boot origin machine to SSH", host.boot_seconds))
    config = stack_for(host)
    config["containerd"] = {"sandboxImage": PAUSE_IMAGE}
    view = HostView(host)
    host.run(f"mkdir -p /etc/cni/net.d && cat > {CNI_CONFLIST_PATH}", stdin=json.dumps(CNI_CONFLIST))
    engine = Engine(lambda script, stdin: host.run(script, stdin=stdin, check=False))
    state = {"suite": suite, "host": host, "view": view, "engine": engine, "config": config, "pods": {}}
    yield state
    if engine.state:
        engine.destroy()
    # What the misplacement scenario left outside the program's slices, and the test network.
    # The test network: its bridge and host-local leases (destroy leaves CNI IPAM state alone).
    view.sh(
        f"systemctl stop kubepods.slice 2>/dev/null || true; rm -f {CNI_CONFLIST_PATH}; "
        "ip link delete cnitest0 2>/dev/null || true; rm -rf /var/lib/cni/networks/numa-kubelets-test"
    )


def plan_and_demo_pod(config: dict, numa: int):
    plan = build_plan(load_config(config))
    kubelet = next(k for k in plan.kubelets if k.numa_node == numa)
    return plan, DemoPod(kubelet, NAMESPACE, WORKLOAD_IMAGE, COMMAND, "10m")


def probe(pods, numa: int, uid: str) -> tuple[str, object]:
    """The program's own probe script on the host, and the program's own verdict on its output."""
    plan, demo = plan_and_demo_pod(pods["config"], numa)
    script = probe_scripts(demo, plan.hosts[0], plan).apply
    result = pods["host"].run(script, stdin=uid + "\n", check=False)
    assert result.rc == 0, result.stderr
    return result.stdout, judge_placement(demo, StackKubelets(plan), demo.kubelet.node_name, result.stdout)


def test_apply_and_preflight_report_the_runtime_versions(pods, stopwatch):
    suite, engine = pods["suite"], pods["engine"]
    with stopwatch(f"[{suite}] apply (8 remote commands)"):
        engine.up(pods["config"])
    preflight = pods["host"].run(engine.state["numa-a-preflight"].inputs["create"])
    line = preflight.stdout.strip()
    TIMINGS.append((f"[{suite}] {line.removeprefix('numa-kubelets preflight passed on host numa-a ')}", 0.0))
    expected = {"bookworm": ("systemd 252", "containerd 1.6."), "trixie": ("systemd 257", "containerd 1.7.")}[suite]
    assert line.startswith("numa-kubelets preflight passed on host numa-a (systemd ")
    for fragment in expected:
        assert fragment in line
    assert "runc 1." in line
    for numa in (0, 1):
        config = pods["view"].sh(f"cat /etc/numa-kubelets/numa{numa}/containerd.toml")
        assert f'sandbox_image = "{PAUSE_IMAGE}"' in config
    # Live on every systemd (257 does not apply the drop-ins on daemon-reload alone), and no
    # `set-property --runtime` drop-in is left to shadow the persistent ones.
    view = pods["view"]
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0,4"
    assert view.runtime_control_dropins() == ""


def test_each_instance_runs_a_demo_like_pod_with_the_sandbox_image_and_cni(pods, stopwatch):
    view = pods["view"]
    for numa in (0, 1):
        cri = CriTestClient(pods["host"], socket_of(numa))
        assert cri.version()["runtime_name"] == "containerd"
        assert cri.import_images() == ["pause.tar", "workload.tar"]
        assert cri.image_present(PAUSE_IMAGE) and cri.image_present(WORKLOAD_IMAGE)
        uid = str(uuid.uuid4())
        with stopwatch(f"[{pods['suite']}] run pod through containerd@numa{numa}"):
            running = cri.run_pod(demo_pod_spec(numa, uid))
        pods["pods"][numa] = (uid, running)
        [container] = cri.containers(running.sandbox_id)
        assert container["state"] == "CONTAINER_RUNNING"
        assert container["labels"]["io.kubernetes.pod.uid"] == uid
        status = cri.pod_status(running.sandbox_id)["status"]
        assert status["state"] == "SANDBOX_READY"
        assert status["network"]["ip"].startswith("10.88.0."), status  # the CNI bridge's address
        # The sandbox container runs the configured image, which no registry could have provided.
        info = json.loads(view.sh(f"ctr --address {socket_of(numa)} -n k8s.io containers info {running.sandbox_id}"))
        assert info["Image"] == PAUSE_IMAGE
        assert running.cgroup_parent == pod_cgroup_parent(f"/numa{numa}", "besteffort", uid)
    statuses = {numa: CriTestClient(pods["host"], socket_of(numa)).status() for numa in (0, 1)}
    # containerd 1.7.24 (trixie) adds a third condition, ContainerdHasNoDeprecationWarnings: all must hold.
    for status in statuses.values():
        assert {"RuntimeReady", "NetworkReady"} <= status.keys() and all(status.values()), statuses


def test_the_programs_probe_finds_each_pod_and_judges_it_ok(pods):
    view = pods["view"]
    for numa in (0, 1):
        uid, running = pods["pods"][numa]
        stdout, verdict = probe(pods, numa, uid)
        assert verdict.ok, verdict.failure_message()
        # The real output has the shape the unit tests' fake `ctr` assumed: one reading per running
        # container, for the workload container alone (not the sandbox).
        readings, unparsable = parse_probe_output(stdout)
        assert unparsable == [] and [r.container for r in readings] == [running.containers["demo"]]
        [reading] = readings
        assert (reading.cpus.format(), reading.mems.format()) == (CPUS[numa], str(numa))
        scope = f"cri-containerd-{reading.container}.scope"
        assert view.cgroup_of(reading.pid) == running.cgroup_parent + "/" + scope
        assert view.sh(f"cat /proc/{reading.pid}/cmdline | tr '\\0' ' '").strip() == " ".join(COMMAND)


def test_a_container_outside_its_slice_is_judged_not_ok_with_its_cpus(pods):
    """A pod started under the kubelet's default cgroupRoot ("/"): the machine-wide kubepods.slice."""
    host = pods["host"]
    cri = CriTestClient(host, socket_of(0))
    uid = str(uuid.uuid4())
    misplaced = cri.run_pod(demo_pod_spec(0, uid, cgroup_root="/"))
    try:
        assert misplaced.cgroup_parent.startswith("/kubepods.slice/kubepods-besteffort.slice/")
        _, verdict = probe(pods, 0, uid)
        assert not verdict.ok
        message = verdict.failure_message()
        assert "may run on CPUs 0-7; numa0.slice has CPUs 1-3" in message, message
        assert "may allocate on memory nodes 0-1; numa0.slice has memory node 0" in message, message
    finally:
        cri.remove_pod(misplaced.sandbox_id, grace_seconds=0)
        # The kubelet removes the pod's slices; the client does not, so the test does.
        pods["view"].sh("systemctl stop kubepods.slice")
    assert [pod["id"] for pod in cri.pods()] == [pods["pods"][0][1].sandbox_id]


def test_systemd_cgls_shows_each_pod_under_its_kubepods_slice(pods):
    view = pods["view"]
    for numa in (0, 1):
        uid, running = pods["pods"][numa]
        tree = view.sh(f"systemd-cgls --no-pager -u numa{numa}.slice")
        lines = [line.lstrip("│├└─ ") for line in tree.splitlines()]
        pod_slice = f"numa{numa}-kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
        order = [
            f"numa{numa}-kubepods.slice",
            f"numa{numa}-kubepods-besteffort.slice",
            pod_slice,
            f"cri-containerd-{running.containers['demo']}.scope",
        ]
        positions = [next(i for i, line in enumerate(lines) if line.startswith(name)) for name in order]
        assert positions == sorted(positions), tree
        assert any(line.endswith(" ".join(COMMAND)) for line in lines), tree
        assert any(line.startswith(f"containerd@numa{numa}.service") for line in lines), tree


def workload_pids(pods) -> dict[int, int]:
    return {numa: parse_probe_output(probe(pods, numa, pods["pods"][numa][0])[0])[0][0].pid for numa in (0, 1)}


def wait_for_cri(cri: CriTestClient, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cri.status().get("RuntimeReady"):
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def test_pods_survive_a_containerd_restart(pods, stopwatch):
    view, before = pods["view"], workload_pids(pods)
    with stopwatch(f"[{pods['suite']}] restart both containerd instances"):
        view.sh("systemctl restart containerd@numa0.service containerd@numa1.service")
        for numa in (0, 1):
            wait_for_cri(CriTestClient(pods["host"], socket_of(numa)))
    for numa in (0, 1):
        cri = CriTestClient(pods["host"], socket_of(numa))
        [container] = cri.containers(pods["pods"][numa][1].sandbox_id)
        assert container["state"] == "CONTAINER_RUNNING"
        assert probe(pods, numa, pods["pods"][numa][0])[1].ok
    assert workload_pids(pods) == before


def test_pods_survive_a_kubelet_restart(pods):
    view, before = pods["view"], workload_pids(pods)
    view.sh("systemctl restart kubelet@numa0.service kubelet@numa1.service")
    assert view.active("kubelet@numa0.service") and view.active("kubelet@numa1.service")
    assert workload_pids(pods) == before


def test_destroy_stops_and_removes_the_pods(pods, stopwatch):
    view, engine = pods["view"], pods["engine"]
    pids = workload_pids(pods)
    with stopwatch(f"[{pods['suite']}] destroy with pods running"):
        engine.destroy()
    for pid in pids.values():
        assert not view.exists(f"/proc/{pid}"), pid
    assert view.sh("pgrep -f '[c]ontainerd-shim' || true") == ""
    assert view.sh("systemctl list-units --all --plain --no-legend 'cri-containerd-*' 'numa*'") == ""
    # The pods' CNI network namespaces went with them (the host ends of their veths inside).
    assert view.sh("ip netns list") == ""
    assert view.sh("ip -o link show type veth") == ""
    # The host services' CPU restriction is lifted live, without a runtime drop-in left behind.
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0-7"
    assert view.runtime_control_dropins() == ""
    for numa in (0, 1):
        assert not view.exists(f"/sys/fs/cgroup/numa{numa}.slice")
        assert not view.exists(f"/var/lib/containerd-numa{numa}")
        assert not view.exists(f"/run/containerd-numa{numa}")
