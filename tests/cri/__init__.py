"""numa-kubelets CRI TEST CLIENT: starts pods through a containerd instance as a kubelet would.

Not a kubelet: no API server, no sync loop, no restarts; one pod at a time, on request. See
README.md in this directory.
"""

from .build_test_images import PAUSE_IMAGE, WORKLOAD_IMAGE
from .client import GUEST_EXECUTABLE, CriTestClient, CriTestClientError, RunningPod
from .kubelet_side import ContainerSpec, PodSpec, pod_cgroup_parent

__all__ = [
    "GUEST_EXECUTABLE",
    "PAUSE_IMAGE",
    "WORKLOAD_IMAGE",
    "ContainerSpec",
    "CriTestClient",
    "CriTestClientError",
    "PodSpec",
    "RunningPod",
    "pod_cgroup_parent",
]
