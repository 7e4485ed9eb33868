"""What the user reads when a dynamic provider fails: one or a few lines naming what failed, the
cause and the setting to check, never a Python traceback.

Against ApiServerDouble (HTTP, or HTTPS with a certificate of the tests' CA) and closed loopback
ports; the last tests start the SDK's own dynamic provider server (`python -m pulumi.dynamic`, as
the engine does) and read the error exactly as the engine receives it.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf import struct_pb2
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from components.cluster_preflight import ClusterPreflightProvider
from components.dynamic_resource import ProviderError, pickler_restored, plain_provider_errors
from components.node_drain import NodeDrainProvider
from components.node_lifecycle import NodeLifecycleProvider
from numa_kubelets import cluster
from numa_kubelets.plan import ClusterPlan
from tests.cluster.api_double import ApiServerDouble
from tests.cluster.test_cluster_preflight import TOKEN, rights_of
from tests.cluster.test_node_lifecycle import props as lifecycle_props
from tests.realcluster.pki import CertificateAuthority
from tests.unit.test_api_server_preflight import another_ca

PROJECT_DIR = Path(__file__).resolve().parents[2]
STACK = "stack-credential"
RIGHTS = cluster.stack_rights(ClusterPlan("https://x", "ca"))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kubeconfig(server: str, ca_pem: bytes | None = None) -> str:
    entry: dict = {"server": server}
    if ca_pem is not None:
        entry["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": entry}],
            "users": [{"name": "stack", "user": {"token": STACK}}],
            "contexts": [{"name": "stack", "context": {"cluster": "c", "user": "stack"}}],
            "current-context": "stack",
        }
    )


def preflight_props(credential: str | None) -> dict:
    return {
        "bootstrapToken": TOKEN,
        "kubeconfig": credential,
        "stackRights": [dataclasses.asdict(right) for right in RIGHTS],
        "clusterDnsFromService": False,
    }


def failure_of(call) -> str:
    with pytest.raises(ProviderError) as failure:
        call()
    return str(failure.value)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    serving = ca.issue("double", "api-double", server_names=("127.0.0.1",), client=False)
    return {"ca": ca.pair.cert, "cert": serving.cert, "key": serving.key}


@pytest.fixture
def https_double(pki) -> Iterator[ApiServerDouble]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["cert"], pki["key"])
    with ApiServerDouble(tls=context) as double:
        double.rights = {STACK: rights_of(RIGHTS), TOKEN: rights_of(cluster.TOKEN_RIGHTS)}
        yield double


# ---------------------------------------------------------------- the cluster preflight


def test_over_https_with_the_credentials_ca_both_checks_pass(https_double, pki):
    credential = kubeconfig(https_double.url, pki["ca"].read_bytes())
    ClusterPreflightProvider().create(preflight_props(credential))
    # The token went to the credential's address, alone (not with the credential's own token).
    token_calls = [r for r in https_double.requests if r.authorization == f"Bearer {TOKEN}"]
    assert len(token_calls) == len(cluster.TOKEN_RIGHTS)
    assert {r.authorization for r in https_double.requests} == {f"Bearer {STACK}", f"Bearer {TOKEN}"}


def test_an_unreachable_credential_address_is_one_line_naming_it():
    server = f"https://127.0.0.1:{closed_port()}"
    message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(kubeconfig(server))))
    assert message == (
        f"cluster preflight: cannot reach the Kubernetes API at {server}: connection refused; "
        "check numa-kubelets:kubeconfig"
    )


def test_a_server_certificate_the_credential_does_not_trust_is_one_line(https_double):
    credential = kubeconfig(https_double.url, another_ca())
    message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(credential)))
    assert message == (
        f"cluster preflight: cannot reach the Kubernetes API at {https_double.url}: certificate verify failed "
        "(unable to get local issuer certificate); check numa-kubelets:kubeconfig"
    )
    assert https_double.requests == []


def test_tls_to_a_plain_http_port_is_one_line(pki):
    with ApiServerDouble() as plain:
        server = plain.url.replace("http://", "https://")
        message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(kubeconfig(server))))
    assert message.startswith(f"cluster preflight: cannot reach the Kubernetes API at {server}: TLS handshake failed (")
    assert message.endswith("); check numa-kubelets:kubeconfig")
    assert "\n" not in message


def test_the_ambient_kubeconfig_is_named_when_the_stack_has_none(tmp_path, monkeypatch):
    server = f"https://127.0.0.1:{closed_port()}"
    ambient = tmp_path / "config"
    ambient.write_text(kubeconfig(server))
    monkeypatch.setenv("KUBECONFIG", str(ambient))
    message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(None)))
    assert message == (
        f"cluster preflight: cannot reach the Kubernetes API at {server}: connection refused; "
        "check the ambient KUBECONFIG (numa-kubelets:kubeconfig is not set)"
    )
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(None)))
    assert message.startswith("cluster preflight: the stack's credential cannot be used: ")
    assert message.endswith("; check the ambient KUBECONFIG (numa-kubelets:kubeconfig is not set)")


@pytest.mark.parametrize(
    "credential",
    ["clusters: [unclosed", "just a string", yaml.safe_dump({"apiVersion": "v1", "kind": "Config"})],
    ids=["not yaml", "not a mapping", "no context"],
)
def test_an_unusable_kubeconfig_secret_is_one_line(credential):
    message = failure_of(lambda: ClusterPreflightProvider().create(preflight_props(credential)))
    assert message.startswith("cluster preflight: the stack's credential cannot be used: ")
    assert message.endswith("; check numa-kubelets:kubeconfig")
    assert "\n" not in message
    assert credential not in message


# ---------------------------------------------------------------- the node lifecycle and the drain


def test_the_node_lifecycle_and_the_drain_name_their_node_and_the_setting():
    server = f"https://127.0.0.1:{closed_port()}"
    unreachable = f"cannot reach the Kubernetes API at {server}: connection refused; check numa-kubelets:kubeconfig"
    with ApiServerDouble() as double:
        props = lifecycle_props(double, kubeconfig=kubeconfig(server))
    lifecycle = NodeLifecycleProvider()
    assert failure_of(lambda: lifecycle.create(props)) == f"Node numa-a-numa0: {unreachable}"
    assert failure_of(lambda: lifecycle.update("numa-a-numa0", props, props)) == f"Node numa-a-numa0: {unreachable}"
    assert failure_of(lambda: lifecycle.delete("numa-a-numa0", props)) == f"removing Node numa-a-numa0: {unreachable}"
    drain = {"nodeName": "numa-a-numa0", "revision": "2", "drainTimeoutSeconds": 5, "kubeconfig": props["kubeconfig"]}
    message = failure_of(lambda: NodeDrainProvider().update("numa-a-numa0", {**drain, "revision": "1"}, drain))
    assert message == f"draining Node numa-a-numa0: {unreachable}"


# ---------------------------------------------------------------- as the engine receives it


@pytest.fixture
def provider_server() -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    """The SDK's dynamic provider server, started as the engine starts it: in the project directory."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pulumi.dynamic"],
        cwd=PROJECT_DIR,
        env={**os.environ, "PULUMI_PROJECT": "numa-kubelets"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield provider_pb2_grpc.ResourceProviderStub(channel)
    finally:
        process.kill()
        process.wait()


def struct(props: dict) -> struct_pb2.Struct:
    value = struct_pb2.Struct()
    value.update(props)
    return value


def served_error(stub, provider, props: dict) -> str:
    with pickler_restored():
        serialized = serialize_provider(provider)
    request = provider_pb2.CreateRequest(
        urn="urn:pulumi:test::numa-kubelets::pulumi-python:dynamic/numa-kubelets:ClusterPreflight::cluster-preflight",
        properties=struct({**props, "__provider": serialized}),
    )
    with pytest.raises(grpc.RpcError) as failure:
        stub.Create(request, timeout=60)
    assert failure.value.code() == grpc.StatusCode.UNKNOWN
    return str(failure.value.details())


def test_the_engine_receives_the_one_line_and_no_traceback(provider_server):
    server = f"https://127.0.0.1:{closed_port()}"
    props = preflight_props(kubeconfig(server))
    assert served_error(provider_server, ClusterPreflightProvider(), props) == (
        f"cluster preflight: cannot reach the Kubernetes API at {server}: connection refused; "
        "check numa-kubelets:kubeconfig"
    )


def test_a_bug_keeps_its_traceback(provider_server):
    props = preflight_props(kubeconfig("https://127.0.0.1:1"))
    del props["stackRights"]  # no provider of the program is called so: a KeyError, a bug
    details = served_error(provider_server, ClusterPreflightProvider(), props)
    assert details.startswith("Traceback (most recent call last):")
    assert "KeyError: 'stackRights'" in details


def test_outside_the_provider_server_nothing_is_changed():
    assert plain_provider_errors() is False  # pytest's __main__ is not the SDK's server
    assert plain_provider_errors({}) is False
