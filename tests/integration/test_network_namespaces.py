"""Namespace mode on the emulated NUMA machine: every NUMA node a network node of its own.

The kubelets' uplinks are macvlan children of the guest's own virtio NIC, the interface the
tests' SSH session runs through, with addresses in qemu's user network 10.0.2.0/24 and its
gateway 10.0.2.2 (DESIGN.md section 7). A second SSH connection streams a tick every half
second for the whole module: any drop or stall of the host's own network shows up there.

The stack is applied by the REAL Pulumi engine (`pulumi up` / `destroy` of this repository's
program through the built CLI, language host and plugin cache: tests/realengine/engine.py). The
kubelets are the REAL kubelet (built by `make tools`), standalone, with anonymous access
to their own ports so the tests read what each runs with (tests/integration/realkubelet.py).
The scenarios build on each other in file order on the shared origin machine: preflight,
apply, checks (a hostNetwork static pod of each kubelet; a container started through ctr as a
CNI agent's), re-apply, live change, mode change to host and back, destroy. A reboot in namespace mode is the real cluster's
(test_real_cluster.py): the namespaces rebuilt before the runtimes, real pods and kube-proxy back.
"""

from __future__ import annotations

import copy
import itertools
import json
import shlex
import threading
import time

import pytest

from tests.cri import PAUSE_IMAGE, WORKLOAD_IMAGE, CriTestClient
from tests.integration.hostcheck import HostView
from tests.integration.realkubelet import (
    ANONYMOUS_ACCESS,
    GUEST_KUBELET,
    POD_START_TIMEOUT,
    healthz,
    kubelet_journal,
    pod_volume_mounted_by_the_kubelet,
    running_kubelet,
    wait_for,
    write_atomically,
)
from tests.integration.test_lifecycle import stack_for
from tests.realengine.engine import UpdateFailed, project_engine
from tests.testhost.ssh import SshSession
from tests.timings import TIMINGS

# The last family it needs: the kubelet, built after the engine (the CLI, its language host, the
# plugin doubles).
pytestmark = pytest.mark.realtools("kubelet")

q = shlex.quote
ADDRESSES = {0: "10.0.2.21/24", 1: "10.0.2.22/24"}
STALL_LIMIT = 90.0  # seconds without a tick that count as a drop
GATEWAY = "10.0.2.2"  # qemu's user-network gateway: answers TCP with a reset
UNITS = tuple(f"{kind}@numa{numa}.service" for numa in (0, 1) for kind in ("numa-netns", "containerd", "kubelet"))
# What must read the same before the first apply and after destroy.
HOST_NETWORK_STATE = {
    "links": "ip -d link show | sed -E 's/^[0-9]+: //'",
    "routes": "ip route show table all | sed -E 's/ expires [0-9]+sec//'",
    "namespaces": "ip netns list",
    "cni dir": "ls -la /etc/cni/net.d 2>&1 || true",
    "created dirs": "ls -d /etc/cni /var/lib/cni /run/flannel /var/lib/calico /run/calico /run/cilium 2>&1 || true",
}


# A tick every half second, waited for by bash's `read -t` on a FIFO nobody writes to: a `sleep`
# process per tick cost 830 processes and 46 s of the guest's emulated CPU over the lifecycle and
# namespace modules (process accounting), CPU the scenarios it watches were waiting for.
TICKS = "exec bash -c " + shlex.quote(
    'fifo=$(mktemp -u) && mkfifo "$fifo" && exec 3<>"$fifo" && rm "$fifo" || exit 1\n'
    "while :; do echo tick; read -r -t 0.5 -u 3; done"
)


class SshTicker:
    """A second SSH connection that prints a tick every half second until stopped."""

    def __init__(self, host) -> None:
        self.session = SshSession(host.address, host.port, host.user, host.key_path, host.host_key)
        self.ticks: list[float] = []
        self.ended_early = False
        self.stopping = False
        self.channel = self.session._transport().open_session(timeout=10)
        self.channel.exec_command(TICKS)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            data = self.channel.recv(4096)
            if not data:
                self.ended_early = not self.stopping
                return
            buffer += data
            while b"\n" in buffer:
                _, buffer = buffer.split(b"\n", 1)
                self.ticks.append(time.monotonic())

    def longest_gap(self) -> float:
        points = [*self.ticks, time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(points)) if len(points) > 1 else 0.0

    def assert_alive(self, what: str) -> None:
        # A TCG guest on 2 shared cores starves for 20 s and more under load (measured: 22.6 s
        # during a first apply); an address or route taken from the NIC does not come back, so
        # the ticks would stop for good or the connection would end.
        assert not self.ended_early, f"the SSH connection dropped during {what}"
        assert self.ticks, "no tick ever arrived"
        assert self.longest_gap() < STALL_LIMIT, f"SSH stalled for {self.longest_gap():.1f} s during {what}"

    def stop(self) -> None:
        self.stopping = True
        self.channel.close()
        self.session.close()


def parent_interface(view: HostView) -> str:
    """The guest's NIC (qemu's restricted user network hands out no default route)."""
    return view.sh("ip -o -4 addr show scope global | awk '{ print $2; exit }'")


def namespace_stack(host, parent: str) -> dict:
    config = stack_for(host)
    config["kubeletPath"] = GUEST_KUBELET
    config["containerd"] = {"sandboxImage": PAUSE_IMAGE}  # the test image, imported into each instance
    entry = config["hosts"][0]
    entry["network"] = {"mode": "namespace", "parent": parent, "gateway": GATEWAY}
    for kubelet in entry["kubelets"]:
        kubelet["address"] = ADDRESSES[kubelet["numaNode"]]
    return config


def netns_inode(view: HostView, numa: int) -> str:
    return view.sh(f"stat -L -c 'net:[%i]' /run/netns/numa{numa}")


def net_of(view: HostView, pid: int) -> str:
    return view.sh(f"readlink /proc/{int(pid)}/ns/net")


def in_namespace(view: HostView, numa: int, script: str, check: bool = True):
    return view.host.run(f"ip netns exec numa{numa} bash -c {q(script)}", check=check)


def snapshot(view: HostView, parent: str) -> dict[str, str]:
    state = {name: view.sh(command) for name, command in HOST_NETWORK_STATE.items()}
    state["parent"] = view.sh(f"ip addr show dev {q(parent)} | grep -v valid_lft")  # lifetimes count down
    return state


# Test-owned: the kubelets' static pods (the program's destroy does not know it).
STATIC_PODS = "/etc/numa-kubelets-test/namespace-static-pods"


@pytest.fixture(scope="module")
def namespaced(numa_host, origin_kubelet, tmp_path_factory):
    view = HostView(numa_host)
    parent = parent_interface(view)
    engine = project_engine(tmp_path_factory.mktemp("namespace-mode"), "namespaces")
    config = namespace_stack(numa_host, parent)
    config["kubeletConfig"] = {"staticPodPath": STATIC_PODS, **ANONYMOUS_ACCESS}
    view.sh(f"mkdir -p {STATIC_PODS}")
    state = {
        "engine": engine,
        "view": view,
        "parent": parent,
        "config": config,
        "before": snapshot(view, parent),
        "ticker": SshTicker(numa_host),
    }
    yield state
    state["ticker"].stop()
    if engine.created and engine.resources():
        engine.destroy()
    view.sh("rm -rf /etc/numa-kubelets-test")


def test_preflight_reports_a_missing_parent_and_an_address_already_on_the_lan(numa_host, namespaced, tmp_path):
    config = copy.deepcopy(namespaced["config"])
    config["hosts"][0]["network"]["parent"] = "nosuch0"
    config["hosts"][0]["kubelets"][1]["address"] = "10.0.2.3/24"  # qemu's DNS address: answers ARP
    engine = project_engine(tmp_path, "preflight")
    with pytest.raises(UpdateFailed) as failure:
        engine.up(config)
    assert failure.value.steps == [] and engine.commands() == {}  # the preflight failed, nothing else ran
    assert "numa-a-preflight" in failure.value.output
    assert "parent interface nosuch0 does not exist" in failure.value.output
    config["hosts"][0]["network"]["parent"] = namespaced["parent"]
    with pytest.raises(UpdateFailed) as failure:
        engine.up(config)
    # The report's lines ("  - <problem>"; the error also quotes the script, which holds every check).
    assert "- 10.0.2.3 (for numa1) already answers on the LAN" in failure.value.output
    assert "- 10.0.2.21 (for numa0)" not in failure.value.output


def test_apply_puts_each_kubelet_and_its_containerd_in_its_own_namespace(namespaced, stopwatch):
    engine, view = namespaced["engine"], namespaced["view"]
    with stopwatch("namespace mode: first apply (10 remote commands)"):
        ran = engine.up(namespaced["config"])
    assert len(ran) == 10 and all(phase == "create" for _, phase in ran)
    assert view.sh("ip netns list | awk '{ print $1 }' | sort") == "numa0\nnuma1"
    for numa in (0, 1):
        inode = netns_inode(view, numa)
        assert inode != net_of(view, 1)
        for unit in (f"containerd@numa{numa}.service", f"kubelet@numa{numa}.service"):
            assert view.active(unit), unit
            assert net_of(view, view.main_pid(unit)) == inode, unit
        assert "UP" in view.sh(f"ip -n numa{numa} -o link show dev lo").split(">")[0]
        assert view.sh(f"ip -n numa{numa} -o -4 addr show dev uplink | awk '{{ print $4 }}'") == ADDRESSES[numa]
        assert view.sh(f"ip -n numa{numa} route show default") == f"default via {GATEWAY} dev uplink"
        record = running_kubelet(view, numa, 10250, netns=f"numa{numa}")
        assert (record["config"]["port"], record["config"]["healthzPort"]) == (10250, 10248)
        assert record["flags"]["node-ip"] == ADDRESSES[numa].split("/")[0]
        assert healthz(view, 10248, netns=f"numa{numa}") == "ok"
    # Both kubelets on 10250 at once, neither in the host's namespace.
    assert view.host.run("bash -c '</dev/tcp/127.0.0.1/10248'", check=False).rc != 0
    namespaced["ticker"].assert_alive("the first apply")


def test_namespaces_reach_each_other_and_the_gateway_over_the_uplink(namespaced):
    view = namespaced["view"]
    assert in_namespace(view, 0, "exec 3<>/dev/tcp/10.0.2.22/10250").rc == 0
    assert in_namespace(view, 1, "exec 3<>/dev/tcp/10.0.2.21/10250").rc == 0
    # The gateway answers a closed port with a reset at once; an unreachable one would time out.
    started = time.monotonic()
    refused = in_namespace(view, 0, f"timeout 20 bash -c '</dev/tcp/{GATEWAY}/1'", check=False)
    assert refused.rc == 1 and "Connection refused" in refused.stderr, refused
    assert time.monotonic() - started < 15


def ctr(view: HostView, numa: int, arguments: str) -> str:
    """ctr inside containerd's mount namespace: its FIFOs must be where the shim looks (the private /run/containerd)."""
    pid = view.main_pid(f"containerd@numa{numa}.service")
    return f"nsenter -t {pid} -m ctr -a /run/containerd-numa{numa}/containerd.sock -n numa-kubelets-test {arguments}"


ROOTFS = "/var/tmp/numa-kubelets-test-rootfs"


def test_a_host_network_container_lives_in_the_namespace_and_cni_paths_are_private(namespaced):
    """What a CNI agent pod (hostNetwork, hostPath /etc/cni/net.d) gets from containerd, via ctr."""
    view = namespaced["view"]
    view.sh(
        f"mkdir -p {ROOTFS}/usr {ROOTFS}/proc {ROOTFS}/dev {ROOTFS}/sys {ROOTFS}/tmp {ROOTFS}/cni && cd {ROOTFS} && "
        "for d in bin sbin lib lib64; do ln -sfn usr/$d $d; done"
    )
    try:
        for numa in (0, 1):
            run = ctr(
                view,
                numa,
                f"run --rm --net-host --runc-systemd-cgroup --cgroup numa{numa}.slice:numa-kubelets-test:probe{numa} "
                f"--rootfs --mount type=bind,src=/usr,dst=/usr,options=rbind:ro "
                f"--mount type=bind,src=/etc/cni/net.d,dst=/cni,options=rbind:rw {ROOTFS} probe{numa} "
                f"/bin/sh -c 'readlink /proc/self/ns/net; echo numa{numa} > /cni/10-written-by-agent.conflist'",
            )
            assert view.sh(run) == netns_inode(view, numa)
            private = f"/var/lib/numa-kubelets/numa{numa}/etc/cni/net.d/10-written-by-agent.conflist"
            assert view.sh(f"cat {private}") == f"numa{numa}"
        assert view.sh("ls -A /etc/cni/net.d") == ""
    finally:
        view.sh(f"rm -rf {ROOTFS} /var/lib/numa-kubelets/numa*/etc/cni/net.d/10-written-by-agent.conflist")


HOST_NETWORK_POD = "host-network-probe"
HOST_NETWORK_COMMAND = ("/bin/sleep", "3601")


def host_network_static_pod() -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": HOST_NETWORK_POD, "namespace": "numa-test"},
        "spec": {
            "hostNetwork": True,
            "containers": [
                {
                    "name": "probe",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": [*HOST_NETWORK_COMMAND],
                }
            ],
            "terminationGracePeriodSeconds": 1,
        },
    }
    return json.dumps(pod)


def probe_pids(view: HostView) -> dict[int, int]:
    """The host-network probe's container processes, by the NUMA slice their cgroup is in."""
    pids = view.host.run(f"pgrep -x -f {q(' '.join(HOST_NETWORK_COMMAND))}", check=False).stdout.split()
    return {
        int(view.cgroup_of(int(pid)).split("/")[1].removeprefix("numa").removesuffix(".slice")): int(pid)
        for pid in pids
    }


def test_a_host_network_static_pod_of_each_kubelet_lives_in_its_namespace(namespaced, stopwatch):
    """A hostNetwork pod (a CNI agent, kube-proxy) gets no namespace of its own: its kubelet's.
    (Pods with a network of their own, from CNI inside the kubelet's namespace, are the real
    cluster's: test_real_cluster.py.)"""
    view = namespaced["view"]
    for numa in (0, 1):
        assert CriTestClient(view.host, f"/run/containerd-numa{numa}/containerd.sock").import_images()
    write_atomically(view, f"{STATIC_PODS}/{HOST_NETWORK_POD}.json", host_network_static_pod())
    try:
        with stopwatch("namespace mode: a hostNetwork static pod running on each kubelet"):
            pids = wait_for(
                "the hostNetwork static pod's container on each kubelet",
                lambda: (found := probe_pids(view)).keys() == {0, 1} and found,
                POD_START_TIMEOUT,
                lambda: kubelet_journal(view, 0) + kubelet_journal(view, 1),
            )
        for numa, pid in pids.items():
            assert net_of(view, pid) == netns_inode(view, numa), numa
    finally:
        view.sh(f"rm -f {STATIC_PODS}/{HOST_NETWORK_POD}.json")
    wait_for("the static pods gone", lambda: not probe_pids(view), POD_START_TIMEOUT, lambda: "")
    assert view.sh("ls -A /etc/cni/net.d") == ""


def test_kubelet_volume_mounts_still_reach_containerd(namespaced):
    view = namespaced["view"]
    containerd = view.main_pid("containerd@numa1.service")
    with pod_volume_mounted_by_the_kubelet(view, 1, "secret") as token:
        assert view.sh(f"nsenter -t {containerd} -m cat {token}") == "secret"


def test_reapply_runs_and_restarts_nothing(namespaced):
    engine, view = namespaced["engine"], namespaced["view"]
    before = {unit: view.started_at(unit) for unit in UNITS}
    assert engine.up(namespaced["config"]) == []
    # Each command's script as the engine holds it, run again by hand: idempotent.
    for name, inputs in engine.commands().items():
        result = view.host.run(inputs["create"], stdin=inputs.get("stdin"), check=False)
        assert result.rc == 0, f"{name}: {result.stderr}"
    assert {unit: view.started_at(unit) for unit in UNITS} == before
    namespaced["ticker"].assert_alive("re-apply")


def test_a_new_address_is_applied_in_place(namespaced):
    engine, view = namespaced["engine"], namespaced["view"]
    runtime = view.started_at("containerd@numa1.service")
    namespaced["config"]["hosts"][0]["kubelets"][1]["address"] = "10.0.2.23/24"
    ran = engine.up(namespaced["config"])
    # The preflight probes the new address; the kubelet restarts for its --node-ip; the runtime
    # and its containers keep running.
    assert sorted(ran) == [
        ("numa-a-numa1-kubelet", "update"),
        ("numa-a-numa1-netns", "update"),
        ("numa-a-preflight", "update"),
    ]
    assert view.started_at("containerd@numa1.service") == runtime
    assert view.sh("ip -n numa1 -o -4 addr show dev uplink | awk '{ print $4 }'") == "10.0.2.23/24"
    assert running_kubelet(view, 1, 10250, netns="numa1")["flags"]["node-ip"] == "10.0.2.23"


def test_switching_to_host_mode_and_back_converges(namespaced, stopwatch):
    engine, view = namespaced["engine"], namespaced["view"]
    host_mode = copy.deepcopy(namespaced["config"])
    del host_mode["hosts"][0]["network"]
    for kubelet in host_mode["hosts"][0]["kubelets"]:
        del kubelet["address"]
    with stopwatch("namespace mode: switch to host mode"):
        ran = engine.up(host_mode)
    assert ("numa-a-numa0-netns", "delete") in ran and ("numa-a-numa1-containerd", "update") in ran
    assert view.sh("ip netns list") == ""
    for numa in (0, 1):
        for unit in (f"containerd@numa{numa}.service", f"kubelet@numa{numa}.service"):
            assert view.active(unit) and net_of(view, view.main_pid(unit)) == net_of(view, 1), unit
    assert running_kubelet(view, 1, 10350)["config"]["port"] == 10350  # host mode spreads the ports
    namespaced["ticker"].assert_alive("the switch to host mode")
    with stopwatch("namespace mode: switch back to namespace mode"):
        engine.up(namespaced["config"])
    for numa in (0, 1):
        assert net_of(view, view.main_pid(f"kubelet@numa{numa}.service")) == netns_inode(view, numa)
    assert engine.up(namespaced["config"]) == []
    namespaced["ticker"].assert_alive("the switch back to namespace mode")


def test_destroy_leaves_the_host_network_as_it_was(namespaced, stopwatch):
    engine, view = namespaced["engine"], namespaced["view"]
    with stopwatch("namespace mode: destroy"):
        ran = engine.destroy()
    assert len(ran) == 10 and all(phase == "delete" for _, phase in ran), ran  # the preflight's too (no script)
    assert snapshot(view, namespaced["parent"]) == namespaced["before"]
    assert not view.exists("/var/lib/numa-kubelets") and not view.exists("/etc/netns")
    assert view.sh("systemctl list-units --all --plain --no-legend 'numa-netns@*'") == ""
    namespaced["ticker"].assert_alive("destroy")
    TIMINGS.append(("namespace mode: longest SSH tick gap", namespaced["ticker"].longest_gap()))
