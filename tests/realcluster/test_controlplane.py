"""The real control plane: versions, the program's managed bootstrap token authenticating, and a
kubelet's client-certificate CSR approved and signed by the real controller-manager."""

from __future__ import annotations

import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client as kube_client

from numa_kubelets import cluster
from tests.realcluster.clients import api_for, create_managed_token, eventually, token_api
from tests.realcluster.controlplane import ControlPlane, tool
from tests.testhost.qemu import GUEST_API_ADDRESS

pytestmark = pytest.mark.realtools("etcd")  # the control plane: built by tools/build.sh

STACK = "realcluster"
KUBELET_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"


def test_the_programs_report_their_real_versions():
    for program, expected in (
        ("kubelet", "Kubernetes v1.37.2"),
        ("kube-apiserver", "Kubernetes v1.37.2"),
        ("kube-controller-manager", "Kubernetes v1.37.2"),
        ("kube-scheduler", "Kubernetes v1.37.2"),
        ("kube-proxy", "Kubernetes v1.37.2"),
        ("etcd", "etcd Version: 3.6.16"),
    ):
        printed = subprocess.run([tool(program), "--version"], capture_output=True, text=True, check=True).stdout
        assert printed.splitlines()[0] == expected, program


def test_the_control_plane_serves_its_version_and_the_kubernetes_service(control_plane: ControlPlane):
    api = api_for(control_plane.admin_kubeconfig)
    assert kube_client.VersionApi(api).get_code().git_version == "v1.37.2"
    service = kube_client.CoreV1Api(api).read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip == "10.96.0.1"
    endpoints = eventually(
        lambda: kube_client.DiscoveryV1Api(api).read_namespaced_endpoint_slice("kubernetes", "default").endpoints,
        30,
        "the kubernetes Service's endpoint",
    )
    # The address a test host's pods reach the API server at (tests/testhost/qemu.py).
    assert endpoints[0].addresses == [GUEST_API_ADDRESS]


def test_the_managed_bootstrap_token_authenticates_with_the_stacks_group(control_plane: ControlPlane):
    token = create_managed_token(api_for(control_plane.stack_kubeconfig), "a1b2c3", "0123456789abcdef", STACK)
    review = kube_client.AuthenticationV1Api(token_api(control_plane, token)).create_self_subject_review(
        kube_client.V1SelfSubjectReview()
    )
    user = review.status.user_info
    assert user.username == "system:bootstrap:a1b2c3"
    assert set(user.groups) >= {"system:bootstrappers", cluster.bootstrap_group(STACK), "system:authenticated"}


def test_a_kubelet_csr_made_with_the_token_is_approved_and_signed(control_plane: ControlPlane):
    token = create_managed_token(api_for(control_plane.stack_kubeconfig), "d4e5f6", "fedcba9876543210", "csr-stack")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, "system:node:numa-a-numa0"),
        ]
    )
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    certificates = kube_client.CertificatesV1Api(token_api(control_plane, token))
    certificates.create_certificate_signing_request(
        kube_client.V1CertificateSigningRequest(
            metadata=kube_client.V1ObjectMeta(name="node-csr-numa-a-numa0"),
            spec=kube_client.V1CertificateSigningRequestSpec(
                request=_b64(request.public_bytes(serialization.Encoding.PEM)),
                signer_name=KUBELET_SIGNER,
                usages=["digital signature", "client auth"],
            ),
        )
    )
    admin = kube_client.CertificatesV1Api(api_for(control_plane.admin_kubeconfig))
    signed = eventually(
        lambda: admin.read_certificate_signing_request("node-csr-numa-a-numa0").status.certificate,
        60,
        "the CSR's certificate",
    )
    status = admin.read_certificate_signing_request("node-csr-numa-a-numa0").status
    approved = [c for c in status.conditions if c.type == "Approved"]
    assert approved and approved[0].reason == "AutoApproved"
    certificate = x509.load_pem_x509_certificate(_unb64(signed))
    assert certificate.subject == subject
    ca = x509.load_pem_x509_certificate(control_plane.ca_pem.encode())
    certificate.verify_directly_issued_by(ca)


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    import base64

    return base64.b64decode(text)
