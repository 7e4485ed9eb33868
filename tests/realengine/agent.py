"""What a cluster's own node agents do for the kubelets the program starts, played from this machine.

A real cluster runs a CNI DaemonSet that writes each node's network config once the Node has its
podCIDR, and pulls images from a registry. The emulated host reaches no registry and the local
control plane runs no CNI add-on, so while `pulumi up` runs, `NodeAgent` does both over SSH for
every kubelet of the plan: imports the test images (PAUSE_IMAGE, the sandbox image the stack names,
and WORKLOAD_IMAGE, the demo pods') into its containerd as soon as that answers, and writes a
bridge conflist over its Node's podCIDR into the instance's private `/etc/cni/net.d` (namespace
mode) once the controller-manager assigned one. Both are idempotent: an agent per update. The
images are imported once per containerd instance for as long as the stack lives (a node's pulled
images stay in its containerd's root across restarts and reboots): the caller keeps that set
across updates, as a node keeps its image store, since each import is a Python gRPC client and two
`ctr import`s run under emulation.
"""

from __future__ import annotations

import json
import shlex
import threading
import traceback

from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from numa_kubelets.plan import KubeletPlan, Plan
from tests.cri import CriTestClient
from tests.testhost.host import TestHost

CNI_CONFLIST = "10-numa-kubelets-test-bridge.conflist"
ROUND_SECONDS = 2.0


def cni_conflist(pod_cidr: str, numa: int) -> str:
    """What a CNI DaemonSet writes on its node: a bridge over the Node's podCIDR."""
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": f"numa-kubelets-test-{numa}",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    # A default route through the bridge: Service addresses are outside the podCIDR.
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                }
            ],
        }
    )


def cni_config_path(kubelet: KubeletPlan) -> str:
    if kubelet.network is None:
        raise ValueError(f"{kubelet.node_name}: the agent's CNI config needs namespace mode (a private /etc/cni/net.d)")
    return f"{kubelet.network.private_copy('/etc/cni/net.d')}/{CNI_CONFLIST}"


def pod_cidr_of(core: kube_client.CoreV1Api, node_name: str) -> str | None:
    try:
        return core.read_node(node_name).spec.pod_cidr or None
    except ApiException as error:
        if error.status == 404:
            return None
        raise


class NodeAgent:
    """Runs beside one update (`with NodeAgent(...):`); `images_imported` names the kubelets whose
    containerd has the images, `done` what else it finished per kubelet (its CNI config)."""

    def __init__(
        self, host: TestHost, plan: Plan, core: kube_client.CoreV1Api, images_imported: set[str] | None = None
    ) -> None:
        self.host, self.core = host, core
        # Node names whose containerd has the images: the caller's set, kept across its updates.
        self.images_imported = set() if images_imported is None else images_imported
        self.kubelets = list(plan.kubelets)
        for kubelet in self.kubelets:
            cni_config_path(kubelet)  # namespace mode, or fail now
        self.done: dict[str, set[str]] = {kubelet.node_name: set() for kubelet in self.kubelets}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="node-agent", daemon=True)

    def __enter__(self) -> NodeAgent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for kubelet in self.kubelets:
                try:
                    self._tend(kubelet)
                except Exception:  # a failed round is retried; its error is kept for the report
                    self.errors = [*self.errors[-4:], f"{kubelet.node_name}: {traceback.format_exc(limit=2)}"]
            self._stop.wait(ROUND_SECONDS)

    def _tend(self, kubelet: KubeletPlan) -> None:
        done = self.done[kubelet.node_name]
        socket = kubelet.layout.containerd_socket
        imported = kubelet.node_name in self.images_imported
        if not imported and self.host.run(f"test -S {shlex.quote(socket)}", check=False).rc == 0:
            CriTestClient(self.host, socket).import_images()
            self.images_imported.add(kubelet.node_name)
        if "cni" not in done and (pod_cidr := pod_cidr_of(self.core, kubelet.node_name)):
            path = shlex.quote(cni_config_path(kubelet))
            self.host.run(
                f"mkdir -p $(dirname {path}) && cat > {path}.tmp && mv -f {path}.tmp {path}",
                stdin=cni_conflist(pod_cidr, kubelet.numa_node),
            )
            done.add("cni")
