"""Host-side API of the numa-kubelets CRI TEST CLIENT (not a kubelet).

The client itself (cri_test_client.py) is installed in the test host image and talks to a
containerd instance's socket there; this class drives it over the test host's SSH session:

    from tests.cri import ContainerSpec, CriTestClient, PodSpec, WORKLOAD_IMAGE

    cri = CriTestClient(host, "/run/containerd-numa0/containerd.sock")
    cri.import_images()                      # test pause + workload images into k8s.io
    pod = PodSpec(name="demo", namespace="numa-demo", uid=str(uuid.uuid4()), cgroup_root="/numa0",
                  containers=[ContainerSpec("demo", WORKLOAD_IMAGE)])
    running = cri.run_pod(pod)               # RunningPod(sandbox_id, containers, cgroup_parent)
    cri.remove_pod(running.sandbox_id)

`host` is anything with `run(script, stdin=None, check=True) -> result with rc/stdout/stderr`
(tests.testhost.TestHost). Any client command that fails raises CriTestClientError with the
client's stderr (the gRPC status code and message).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Protocol

from .build_test_images import PAUSE_IMAGE, WORKLOAD_IMAGE
from .kubelet_side import PodSpec

GUEST_EXECUTABLE = "/usr/local/bin/numa-kubelets-cri-test-client"

__all__ = ["GUEST_EXECUTABLE", "PAUSE_IMAGE", "WORKLOAD_IMAGE", "CriTestClient", "CriTestClientError", "RunningPod"]


class RunResultLike(Protocol):
    rc: int
    stdout: str
    stderr: str


class HostLike(Protocol):
    def run(self, script: str, stdin: str | None = None, check: bool = True) -> RunResultLike: ...


class CriTestClientError(RuntimeError):
    pass


@dataclass(frozen=True)
class RunningPod:
    sandbox_id: str
    containers: dict[str, str]  # container name -> container id
    cgroup_parent: str


class CriTestClient:
    """One containerd instance's CRI, as seen through the test client in the test host."""

    def __init__(self, host: HostLike, socket: str, *, executable: str = GUEST_EXECUTABLE) -> None:
        self.host = host
        self.socket = socket
        self.executable = executable

    def _call(self, *arguments: str, stdin: str | None = None) -> Any:
        command = " ".join(shlex.quote(part) for part in (self.executable, "--socket", self.socket, *arguments))
        result = self.host.run(command, stdin=stdin, check=False)
        if result.rc != 0:
            raise CriTestClientError(f"{command} exited {result.rc}: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def version(self) -> dict[str, str]:
        """runtime_name, runtime_version, runtime_api_version (CRI Version)."""
        return self._call("version")

    def status(self) -> dict[str, bool]:
        """Runtime conditions by type: {"RuntimeReady": True, "NetworkReady": False, ...}."""
        conditions = self._call("status").get("status", {}).get("conditions", [])
        return {condition["type"]: bool(condition.get("status", False)) for condition in conditions}

    def import_images(self) -> list[str]:
        """Loads the test images (PAUSE_IMAGE, WORKLOAD_IMAGE) into the instance's k8s.io namespace."""
        return self._call("import-images")["imported"]

    def image_present(self, reference: str) -> bool:
        return bool(self._call("image-status", reference).get("image"))

    def run_pod(self, pod: PodSpec) -> RunningPod:
        result = self._call("run-pod", stdin=pod.to_json())
        return RunningPod(result["sandbox_id"], dict(result["containers"]), result["cgroup_parent"])

    def stop_pod(self, sandbox_id: str, grace_seconds: int = 2) -> None:
        self._call("stop-pod", sandbox_id, "--grace", str(grace_seconds))

    def remove_pod(self, sandbox_id: str, grace_seconds: int = 2) -> None:
        self._call("remove-pod", sandbox_id, "--grace", str(grace_seconds))

    def pods(self) -> list[dict[str, Any]]:
        """ListPodSandbox items as JSON (proto field names), e.g. item["state"] == "SANDBOX_READY"."""
        return self._call("pods")

    def containers(self, sandbox_id: str | None = None) -> list[dict[str, Any]]:
        """ListContainers items, e.g. item["state"] == "CONTAINER_RUNNING"."""
        return self._call("containers", *(("--sandbox", sandbox_id) if sandbox_id else ()))

    def pod_status(self, sandbox_id: str) -> dict[str, Any]:
        """PodSandboxStatus: status.state, status.network.ip (CNI pods), status.linux.namespaces..."""
        return self._call("pod-status", sandbox_id)
