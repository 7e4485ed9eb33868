"""Official-client helpers for tests against the real control plane."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kubernetes import client as kube_client
from kubernetes import config as kube_config

from numa_kubelets import cluster
from tests.realcluster.controlplane import ControlPlane

T = TypeVar("T")


def closed_loopback_port() -> int:
    """A loopback port nothing listens on (checked): an address this machine cannot reach."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return port
    raise AssertionError(f"something listens on 127.0.0.1:{port}, which was free a moment ago")


def api_for(kubeconfig: Path) -> kube_client.ApiClient:
    return kube_config.new_client_from_config(str(kubeconfig))


def token_client(server: str, ca_file: str, token: str) -> kube_client.ApiClient:
    """A client that authenticates as the kubelets will: the bootstrap token, the stack's CA."""
    configuration = kube_client.Configuration(host=server)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = ca_file
    return kube_client.ApiClient(configuration)


def token_api(plane: ControlPlane, token: str) -> kube_client.ApiClient:
    """A client that authenticates as a joining kubelet does: the bootstrap token, the cluster's CA."""
    return token_client(plane.server, str(plane.ca.pair.cert), token)


def create_managed_token(api: kube_client.ApiClient, token_id: str, token_secret: str, stack: str) -> str:
    """What a stack without `bootstrapToken` creates: the token Secret and both bindings (the
    program's own manifests, created with `api`)."""
    core = kube_client.CoreV1Api(api)
    core.create_namespaced_secret("kube-system", cluster.bootstrap_token_secret(token_id, token_secret, stack))
    rbac = kube_client.RbacAuthorizationV1Api(api)
    for binding in cluster.bootstrap_bindings(stack):
        rbac.create_cluster_role_binding(binding.manifest(stack))
    return cluster.bootstrap_token(token_id, token_secret)


def eventually(read: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)
