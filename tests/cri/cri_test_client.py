#!/usr/bin/python3
"""numa-kubelets CRI TEST CLIENT. This is NOT a kubelet.

Runs inside the test host, next to the containerd instances, and speaks the CRI `runtime.v1`
gRPC API over one instance's socket the way a kubelet does for one pod: RunPodSandbox with the
kubelet's cgroup parent and labels, CreateContainer + StartContainer per container, and on
removal StopContainer, StopPodSandbox, RemovePodSandbox. Requests go in as JSON, results come
out as JSON (one document on stdout), errors as text on stderr with exit status 1.

    numa-kubelets-cri-test-client --socket /run/containerd-numa0/containerd.sock run-pod < pod.json
    ... version | status | pods | containers [--sandbox ID] | pod-status ID
    ... stop-pod ID [--grace SECONDS] | remove-pod ID | image-status REF | import-images

The gRPC code is generated from runtime_v1_subset.proto when the test host image is built, with
the host's own grpcio-tools, so generated code and protobuf runtime always match.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc
import runtime_v1_subset_pb2 as cri
import runtime_v1_subset_pb2_grpc as cri_grpc
from google.protobuf import json_format
from kubelet_side import ContainerSpec, PodSpec

CRI_API_VERSION = "v1"
CALL_TIMEOUT_SECONDS = 120.0
IMAGES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")
# The namespace the CRI plugin keeps its images and containers in.
CRI_NAMESPACE = "k8s.io"


class Client:
    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.channel = grpc.insecure_channel(f"unix://{socket_path}")
        self.runtime = cri_grpc.RuntimeServiceStub(self.channel)
        self.images = cri_grpc.ImageServiceStub(self.channel)

    def version(self) -> Any:
        return self.runtime.Version(cri.VersionRequest(version=CRI_API_VERSION), timeout=CALL_TIMEOUT_SECONDS)

    def status(self) -> Any:
        return self.runtime.Status(cri.StatusRequest(), timeout=CALL_TIMEOUT_SECONDS)

    def sandbox_config(self, pod: PodSpec) -> Any:
        # The kubelet sets the PID namespace to CONTAINER explicitly for v1 pods (api.proto).
        namespaces = cri.NamespaceOption(
            network=cri.NODE if pod.host_network else cri.POD, pid=cri.CONTAINER, ipc=cri.POD
        )
        config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace, attempt=0),
            log_directory=pod.log_directory,
            labels=pod.sandbox_labels(),
            annotations=pod.annotations,
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=pod.effective_cgroup_parent,
                security_context=cri.LinuxSandboxSecurityContext(namespace_options=namespaces),
            ),
        )
        if not pod.host_network:
            # Host-network pods keep the node's hostname (kuberuntime_sandbox.go).
            config.hostname = pod.name
        if pod.dns_servers:
            config.dns_config.CopyFrom(cri.DNSConfig(servers=pod.dns_servers))
        return config

    def container_config(self, pod: PodSpec, container: ContainerSpec) -> Any:
        return cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=container.name, attempt=0),
            image=cri.ImageSpec(image=container.image),
            command=container.command,
            args=container.args,
            envs=[cri.KeyValue(key=key, value=value) for key, value in sorted(container.env.items())],
            labels=pod.container_labels(container),
            annotations={"io.kubernetes.container.restartCount": "0"},
            log_path=f"{container.name}/0.log",
            linux=cri.LinuxContainerConfig(
                security_context=cri.LinuxContainerSecurityContext(
                    namespace_options=cri.NamespaceOption(
                        network=cri.NODE if pod.host_network else cri.POD, pid=cri.CONTAINER, ipc=cri.POD
                    )
                )
            ),
        )

    def run_pod(self, pod: PodSpec) -> dict[str, Any]:
        """RunPodSandbox, then create and start every container; on a failure, removes what it made."""
        os.makedirs(pod.log_directory, exist_ok=True)
        sandbox_config = self.sandbox_config(pod)
        sandbox_id = self.runtime.RunPodSandbox(
            cri.RunPodSandboxRequest(config=sandbox_config, runtime_handler=pod.runtime_handler),
            timeout=CALL_TIMEOUT_SECONDS,
        ).pod_sandbox_id
        containers: dict[str, str] = {}
        try:
            for container in pod.containers:
                os.makedirs(os.path.join(pod.log_directory, container.name), exist_ok=True)
                container_id = self.runtime.CreateContainer(
                    cri.CreateContainerRequest(
                        pod_sandbox_id=sandbox_id,
                        config=self.container_config(pod, container),
                        sandbox_config=sandbox_config,
                    ),
                    timeout=CALL_TIMEOUT_SECONDS,
                ).container_id
                containers[container.name] = container_id
                self.runtime.StartContainer(
                    cri.StartContainerRequest(container_id=container_id), timeout=CALL_TIMEOUT_SECONDS
                )
        except grpc.RpcError:
            self.remove_pod(sandbox_id, grace_seconds=0)
            raise
        return {"sandbox_id": sandbox_id, "containers": containers, "cgroup_parent": pod.effective_cgroup_parent}

    def stop_pod(self, sandbox_id: str, grace_seconds: int) -> None:
        """As the kubelet kills a pod: its containers with their grace period, then the sandbox."""
        listed = self.runtime.ListContainers(
            cri.ListContainersRequest(filter=cri.ContainerFilter(pod_sandbox_id=sandbox_id)),
            timeout=CALL_TIMEOUT_SECONDS,
        )
        for container in listed.containers:
            if container.state == cri.CONTAINER_RUNNING:
                self.runtime.StopContainer(
                    cri.StopContainerRequest(container_id=container.id, timeout=grace_seconds),
                    timeout=CALL_TIMEOUT_SECONDS + grace_seconds,
                )
        self.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=CALL_TIMEOUT_SECONDS)

    def remove_pod(self, sandbox_id: str, grace_seconds: int) -> None:
        """Stop, then remove the containers and the sandbox (RemovePodSandbox is idempotent)."""
        self.stop_pod(sandbox_id, grace_seconds)
        listed = self.runtime.ListContainers(
            cri.ListContainersRequest(filter=cri.ContainerFilter(pod_sandbox_id=sandbox_id)),
            timeout=CALL_TIMEOUT_SECONDS,
        )
        for container in listed.containers:
            self.runtime.RemoveContainer(
                cri.RemoveContainerRequest(container_id=container.id), timeout=CALL_TIMEOUT_SECONDS
            )
        self.runtime.RemovePodSandbox(
            cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=CALL_TIMEOUT_SECONDS
        )

    def pods(self) -> Any:
        return self.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=CALL_TIMEOUT_SECONDS)

    def containers(self, sandbox_id: str | None) -> Any:
        request = cri.ListContainersRequest(filter=cri.ContainerFilter(pod_sandbox_id=sandbox_id or ""))
        return self.runtime.ListContainers(request, timeout=CALL_TIMEOUT_SECONDS)

    def pod_status(self, sandbox_id: str) -> Any:
        return self.runtime.PodSandboxStatus(
            cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id), timeout=CALL_TIMEOUT_SECONDS
        )

    def image_status(self, reference: str) -> Any:
        return self.images.ImageStatus(
            cri.ImageStatusRequest(image=cri.ImageSpec(image=reference)), timeout=CALL_TIMEOUT_SECONDS
        )

    def import_images(self) -> dict[str, Any]:
        """The test images built into the host image, imported with containerd's own `ctr`."""
        imported = []
        for name in sorted(os.listdir(IMAGES_DIR)):
            if name.endswith(".tar"):
                subprocess.run(
                    [
                        "ctr",
                        "--address",
                        self.socket_path,
                        "-n",
                        CRI_NAMESPACE,
                        "images",
                        "import",
                        os.path.join(IMAGES_DIR, name),
                    ],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                imported.append(name)
        return {"imported": imported}


def as_json(message: Any) -> Any:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="numa-kubelets-cri-test-client", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="containerd socket, e.g. /run/containerd-numa0/containerd.sock")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version")
    commands.add_parser("status")
    commands.add_parser("run-pod", help="PodSpec JSON on stdin")
    for name in ("stop-pod", "remove-pod"):
        command = commands.add_parser(name)
        command.add_argument("sandbox_id")
        command.add_argument("--grace", type=int, default=2, help="seconds between SIGTERM and SIGKILL")
    commands.add_parser("pods")
    containers = commands.add_parser("containers")
    containers.add_argument("--sandbox")
    commands.add_parser("pod-status").add_argument("sandbox_id")
    commands.add_parser("image-status").add_argument("reference")
    commands.add_parser("import-images")
    args = parser.parse_args(argv)

    client = Client(args.socket)
    try:
        if args.command == "version":
            result: Any = as_json(client.version())
        elif args.command == "status":
            result = as_json(client.status())
        elif args.command == "run-pod":
            result = client.run_pod(PodSpec.from_json(sys.stdin.read()))
        elif args.command == "stop-pod":
            client.stop_pod(args.sandbox_id, args.grace)
            result = {"stopped": args.sandbox_id}
        elif args.command == "remove-pod":
            client.remove_pod(args.sandbox_id, args.grace)
            result = {"removed": args.sandbox_id}
        elif args.command == "pods":
            result = as_json(client.pods()).get("items", [])
        elif args.command == "containers":
            result = as_json(client.containers(args.sandbox)).get("containers", [])
        elif args.command == "pod-status":
            result = as_json(client.pod_status(args.sandbox_id))
        elif args.command == "image-status":
            result = as_json(client.image_status(args.reference))
        else:
            result = client.import_images()
    except grpc.RpcError as error:
        print(
            f"cri-test-client: {args.command} via {args.socket}: {error.code().name}: {error.details()}",
            file=sys.stderr,
        )
        return 1
    except subprocess.CalledProcessError as error:
        print(f"cri-test-client: {args.command}: {error}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
