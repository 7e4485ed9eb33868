"""The program applied to an emulated 2-socket NUMA machine through a whole lifecycle by the REAL
Pulumi engine (`pulumi up` / `destroy` of this repository's program through the built CLI, its
Python language host and plugin cache: tests/realengine/engine.py), with the REAL kubelet (built
by `make tools`) as each kubelet@numa<N>.

The scenarios build on each other (apply, re-apply, change, replace, destroy), in file order, on
one host; the destroy at the end also runs if a scenario fails. The stack is the dev stack
(standalone, no cluster) with the real kubelet's path and anonymous access to the kubelets' own
ports, so the tests read what each kubelet runs with: its command line and its effective
configuration (/configz, tests/integration/realkubelet.py). An interrupted update is the cluster
stack's (test_real_engine.py: SIGINT and SIGKILL of the CLI during the kubelet's step).
"""

from __future__ import annotations

import pytest

from tests.integration.hostcheck import DEV_STACK_CREATED_PATHS, DEV_STACK_UNITS, HostView
from tests.integration.realkubelet import (
    ANONYMOUS_ACCESS,
    GUEST_KUBELET,
    healthz,
    kubelet_journal,
    pod_volume_mounted_by_the_kubelet,
    running_kubelet,
    wait_for,
)
from tests.program.harness import load_stack_file
from tests.realengine.engine import UpdateFailed, project_engine
from tests.timings import TIMINGS

# The last family it needs: the kubelet, built after the engine (the CLI, its language host, the
# plugin doubles).
pytestmark = pytest.mark.realtools("kubelet")


def stack_for(host, base: str = "dev") -> dict:
    config = load_stack_file(base)
    config["sshPrivateKeyPath"] = str(host.key_path)
    entry = config["hosts"][0]
    entry.update(address=host.address, sshPort=host.port, hostKey=host.host_key)
    # The dev stack cannot know a test host's key (made with each image); this one pins it.
    del config["insecureSkipHostKeyCheck"]
    return config


@pytest.fixture(scope="module")
def deployment(numa_host, testhost_image, origin_kubelet, tmp_path_factory):
    TIMINGS.append(("test host image build (as recorded when it was built)", testhost_image.build_seconds))
    TIMINGS.append(("boot origin machine to SSH", numa_host.boot_seconds))
    engine = project_engine(tmp_path_factory.mktemp("lifecycle"), "lifecycle")
    config = stack_for(numa_host)
    config.update(kubeletPath=GUEST_KUBELET, kubeletConfig=ANONYMOUS_ACCESS)
    state = {"config": config, "engine": engine, "view": HostView(numa_host)}
    yield state
    if engine.created and engine.resources():
        engine.destroy()


def test_apply_confines_every_slice_unit_and_process(deployment, stopwatch):
    engine, view = deployment["engine"], deployment["view"]
    with stopwatch("first apply (origin machine, 8 remote commands)"):
        ran = engine.up(deployment["config"])
    assert len(ran) == 8 and all(phase == "create" for _, phase in ran)

    assert (view.effective("numa0.slice", "cpus"), view.effective("numa0.slice", "mems")) == ("1-3", "0")
    assert (view.effective("numa1.slice", "cpus"), view.effective("numa1.slice", "mems")) == ("5-7", "1")
    for host_unit in ("system.slice", "init.scope", "user.slice"):
        assert view.effective(host_unit, "cpus") == "0,4", host_unit
    assert view.process_status(1)["Cpus_allowed_list"] == "0,4"
    assert view.process_status(view.pid_of("sshd"))["Cpus_allowed_list"] == "0,4"
    assert view.runtime_control_dropins() == ""

    view.assert_runtimes_and_kubelets_confined({0: "1-3", 1: "5-7"})


def test_kubelets_got_their_own_flags_config_and_credentials(deployment):
    view = deployment["view"]
    for numa, port, healthz_port, colour in ((0, 10250, 10248, "red"), (1, 10350, 10348, "blue")):
        record = running_kubelet(view, numa, port)
        flags, config = record["flags"], record["config"]
        assert flags["hostname-override"] == f"numa-a-numa{numa}"
        assert flags["root-dir"] == f"/var/lib/kubelet-numa{numa}"
        assert flags["cert-dir"] == f"/var/lib/kubelet-numa{numa}/pki"
        assert set(flags["node-labels"].split(",")) == {
            f"numa-type={colour}",
            "numa-kubelets.io/host=numa-a",
            f"numa-kubelets.io/numa-node={numa}",
        }
        # /configz leaves out what is zero (readOnlyPort 0: no read-only port).
        assert (config["port"], config["healthzPort"], config.get("readOnlyPort", 0)) == (port, healthz_port, 0)
        assert config["cgroupRoot"] == f"/numa{numa}" and config["maxPods"] == 1
        assert config["containerRuntimeEndpoint"] == f"unix:///run/containerd-numa{numa}/containerd.sock"
        # The reservation drop-in: CPUs outside the slice from the plan, memory of the other node.
        assert config["systemReserved"]["cpu"] == "5"
        assert config["systemReserved"]["memory"].endswith("Ki") and int(config["systemReserved"]["memory"][:-2]) > 0
        assert view.process_status(record["pid"])["Cpus_allowed_list"] == ("1-3" if numa == 0 else "5-7")
        assert healthz(view, healthz_port) == "ok"


def test_pod_volumes_reach_containerd_while_device_plugin_sockets_stay_private(deployment):
    """What the kubelet needs of its mount namespace, exercised from the running kubelet's."""
    view = deployment["view"]
    containerd = view.main_pid("containerd@numa0.service")
    with pod_volume_mounted_by_the_kubelet(view, 0, "secret") as token:
        # A projected volume the kubelet mounts is what containerd bind-mounts into the container.
        assert view.sh(f"nsenter -t {containerd} -m cat {token}") == "secret"
        assert view.sh(f"cat {token}") == "secret"
    # Each kubelet serves device plugins its own registration socket, at the path plugins know,
    # in its private directory: the host's stays empty, and the two are different sockets.
    sockets = {}
    for numa in (0, 1):
        pid = view.main_pid(f"kubelet@numa{numa}.service")
        in_kubelet = f"nsenter -t {pid} -m stat -c '%F %i' /var/lib/kubelet/device-plugins/kubelet.sock"
        sockets[numa] = wait_for(
            f"kubelet@numa{numa}'s device plugin registration socket",
            lambda command=in_kubelet: view.host.run(command, check=False).stdout.strip(),
            60,
            lambda n=numa: kubelet_journal(view, n),
        )
        assert sockets[numa] == view.sh(f"stat -c '%F %i' /var/lib/kubelet-numa{numa}/device-plugins/kubelet.sock")
        assert sockets[numa].startswith("socket ")
    assert sockets[0] != sockets[1]
    assert view.sh("ls -A /var/lib/kubelet/device-plugins 2>/dev/null || true") == ""


def test_second_apply_runs_nothing_and_rerunning_every_script_restarts_nothing(deployment):
    engine, view = deployment["engine"], deployment["view"]
    before = {unit: view.started_at(unit) for unit in DEV_STACK_UNITS}
    assert engine.up(deployment["config"]) == []
    # Each command's script as the engine holds it, run again by hand: idempotent.
    for name, inputs in engine.commands().items():
        result = view.host.run(inputs["create"], stdin=inputs.get("stdin"), check=False)
        assert result.rc == 0, f"{name}: {result.stderr}"
    assert {unit: view.started_at(unit) for unit in DEV_STACK_UNITS} == before
    assert not view.exists("/run/numa-kubelets/pending") or view.sh("ls /run/numa-kubelets/pending") == ""


def test_changing_one_port_restarts_that_kubelet_alone(deployment):
    engine, view = deployment["engine"], deployment["view"]
    before = {unit: view.started_at(unit) for unit in DEV_STACK_UNITS}
    deployment["config"]["hosts"][0]["kubelets"][1]["port"] = 10450
    assert engine.up(deployment["config"]) == [("numa-a-numa1-kubelet", "update")]
    after = {unit: view.started_at(unit) for unit in DEV_STACK_UNITS}
    assert [unit for unit in DEV_STACK_UNITS if after[unit] != before[unit]] == ["kubelet@numa1.service"]
    assert running_kubelet(view, 1, 10450)["config"]["port"] == 10450


def test_changing_a_slice_cpuset_applies_live_without_restarts(deployment):
    engine, view = deployment["engine"], deployment["view"]
    before = {unit: view.started_at(unit) for unit in ("containerd@numa0.service",)}
    deployment["config"]["hosts"][0]["kubelets"][0]["cpus"] = "2-3"
    ran = engine.up(deployment["config"])
    assert ("numa-a-numa0-slice", "update") in ran
    assert view.effective("numa0.slice", "cpus") == "2-3"
    assert view.process_status(view.main_pid("containerd@numa0.service"))["Cpus_allowed_list"] == "2-3"
    assert view.started_at("containerd@numa0.service") == before["containerd@numa0.service"]
    # The kubelet restarts: its systemReserved grew by one CPU.
    assert ("numa-a-numa0-kubelet", "update") in ran
    assert running_kubelet(view, 0, 10250)["config"]["systemReserved"]["cpu"] == "6"


def test_replacing_the_runtime_loses_nothing(deployment):
    """`pulumi up --replace` of a runtime's command: deleted before it is created again (its own
    delete script would otherwise remove what the new one just wrote)."""
    engine, view = deployment["engine"], deployment["view"]
    [urn] = [r["urn"] for r in engine.resources() if r["urn"].endswith("::numa-a-numa0-containerd")]
    ran = engine.up(deployment["config"], "--replace", urn)
    # The old one's delete first (delete_before_replace), then the new one's create.
    ops = ["delete-replaced", "replace", "create-replacement"]
    assert ran == [("numa-a-numa0-containerd", op) for op in ops], ran
    for path in ("/etc/numa-kubelets/numa0/containerd.toml", "/etc/systemd/system/containerd@numa0.service"):
        assert view.exists(path), path
    for unit in DEV_STACK_UNITS:
        assert view.active(unit), unit
    assert engine.up(deployment["config"]) == []


def test_destroy_leaves_the_host_as_it_was(deployment, stopwatch):
    engine, view = deployment["engine"], deployment["view"]
    with stopwatch("destroy (origin machine)"):
        ran = engine.destroy()
    # Every command goes; the preflight's has no delete script (it has nothing to undo).
    assert len(ran) == 8 and all(phase == "delete" for _, phase in ran), ran
    for path in DEV_STACK_CREATED_PATHS:
        assert not view.exists(path), path
    assert view.sh("systemctl list-units --all --plain --no-legend 'kubelet@*' 'containerd@*' 'numa*.slice'") == ""
    assert view.sh("pgrep -x containerd || true") == ""
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0-7"
    assert not view.exists("/sys/fs/cgroup/system.slice/cpuset.cpus")
    assert view.runtime_control_dropins() == ""


def test_preflight_rejects_a_host_that_differs_from_the_config(numa_host, tmp_path):
    config = stack_for(numa_host)
    config["hosts"][0]["numaNodes"] = [{"id": 0, "cpus": "0-2"}, {"id": 1, "cpus": "3-7"}]
    config["hosts"][0]["systemCpus"] = "0,3"
    engine = project_engine(tmp_path, "preflight")
    with pytest.raises(UpdateFailed) as failure:
        engine.up(config)
    message = failure.value.output
    assert "numa-a-preflight" in message
    assert "numa-kubelets preflight failed on host numa-a" in message
    assert "NUMA node 0 has cpus '0-3' on the host, the configuration declares '0-2'" in message
    assert "NUMA node 1 has cpus '4-7' on the host, the configuration declares '3-7'" in message
    assert failure.value.steps == []  # nothing else ran
    assert engine.commands() == {}
