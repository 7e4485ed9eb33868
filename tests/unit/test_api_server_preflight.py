"""The host preflight's check of cluster.server (numa_kubelets/cluster.py api_server_preflight), run
by dash against TLS servers on loopback, with each tool it may use: curl, python3, openssl.

The check must pass where the kubelets' client would connect (the address reached, the certificate
valid for its name under caCert) and otherwise name the address and the error in one line.
"""

from __future__ import annotations

import datetime
import shutil
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from numa_kubelets.cluster import api_endpoint, api_server_preflight
from numa_kubelets.plan import ClusterPlan
from tests.realcluster.pki import CertificateAuthority

TOOLS = ["curl", "python3", "openssl"]
# What the check needs besides its tool: coreutils, grep and the shell itself.
BASE_COMMANDS = ["mktemp", "cat", "rm", "head", "tail", "grep", "timeout"]


def which(name: str) -> str:
    path = shutil.which(name, path="/usr/bin:/bin")
    assert path, f"{name} is required to run the API server check here (apt-get install {name})"
    return path


class Unauthorized(BaseHTTPRequestHandler):
    """Any request gets a 401, as an API server answers an anonymous client: TLS is what counts."""

    def do_GET(self) -> None:
        body = b'{"kind":"Status","code":401}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


class TlsServer:
    def __init__(self, cert: Path, key: Path) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> TlsServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def another_ca() -> bytes:
    """A CA of another name (the test CA's is fixed): what a wrong caCert usually is."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    other = tmp_path_factory.mktemp("other-ca") / "ca.crt"
    other.write_bytes(another_ca())
    ip = ca.issue("ip", "apiserver", server_names=("127.0.0.1",), client=False)
    name = ca.issue("name", "apiserver", server_names=("localhost",), client=False)
    return {
        "ca": ca.pair.cert,
        "other ca": other,
        "ip cert": ip.cert,
        "ip key": ip.key,
        "name cert": name.cert,
        "name key": name.key,
    }


@pytest.fixture
def only(tmp_path: Path):
    """A PATH holding the base commands and the given tools only."""

    def path_with(*tools: str) -> str:
        directory = tmp_path / "bin"
        directory.mkdir(exist_ok=True)
        for command in [*BASE_COMMANDS, *tools]:
            link = directory / command
            if not link.exists():
                link.symlink_to(which(command))
        return str(directory)

    return path_with


def problems(server: str, ca: Path, path: str, tmp_path: Path) -> list[str]:
    """Run the check as the preflight does (set -eu, `fail` collecting problems) under dash."""
    script = (
        "set -eu\n"
        "problems=\n"
        'fail() { problems="$problems\n  - $*"; }\n'
        + "".join(api_server_preflight(ClusterPlan(server, ca.read_text())))
        + 'printf "%s" "$problems"\n'
    )
    file = tmp_path / "check.sh"
    file.write_text(script)
    result = subprocess.run(
        [which("dash"), str(file)], env={"PATH": path}, capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stderr) == (0, ""), result
    return [line.removeprefix("  - ") for line in result.stdout.splitlines() if line]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def served(pki: dict[str, Path], kind: str) -> TlsServer:
    return TlsServer(pki[f"{kind} cert"], pki[f"{kind} key"])


@pytest.mark.parametrize("tool", TOOLS)
def test_a_server_whose_certificate_is_valid_under_the_ca_passes(pki, only, tmp_path, tool):
    with served(pki, "ip") as server:
        assert problems(f"https://127.0.0.1:{server.port}", pki["ca"], only(tool), tmp_path) == []
    with served(pki, "name") as server:
        assert problems(f"https://localhost:{server.port}", pki["ca"], only(tool), tmp_path) == []


ERRORS = {
    # tool -> (what an unknown CA says, what a name the certificate does not cover says)
    "curl": ("SSL certificate problem", "127.0.0.1"),
    "python3": ("certificate verify failed", "certificate verify failed (IP address mismatch"),
    "openssl": ("verify error", "verify error"),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_a_certificate_from_another_ca_is_named_with_the_address(pki, only, tmp_path, tool):
    with served(pki, "ip") as server:
        address = f"https://127.0.0.1:{server.port}"
        [problem] = problems(address, pki["other ca"], only(tool), tmp_path)
    assert problem.startswith(f"cannot reach cluster.server {address} from this host, trusting only caCert: ")
    assert ERRORS[tool][0] in problem
    assert problem.endswith(f"(checked with {tool})")


@pytest.mark.parametrize("tool", TOOLS)
def test_a_certificate_for_another_name_fails(pki, only, tmp_path, tool):
    with served(pki, "name") as server:  # valid for localhost, asked as 127.0.0.1
        address = f"https://127.0.0.1:{server.port}"
        [problem] = problems(address, pki["ca"], only(tool), tmp_path)
    assert problem.startswith(f"cannot reach cluster.server {address} from this host")
    assert ERRORS[tool][1] in problem.split("trusting only caCert: ", 1)[1]


@pytest.mark.parametrize("tool", TOOLS)
def test_an_address_nothing_listens_on_fails(pki, only, tmp_path, tool):
    address = f"https://127.0.0.1:{closed_port()}"
    [problem] = problems(address, pki["ca"], only(tool), tmp_path)
    assert problem.startswith(f"cannot reach cluster.server {address} from this host, trusting only caCert: ")
    assert problem.endswith(f"(checked with {tool})")
    detail = problem.split("trusting only caCert: ", 1)[1].lower()
    assert "refused" in detail or "connect" in detail, detail


def test_without_any_tool_the_check_says_what_to_install(pki, only, tmp_path):
    [problem] = problems("https://127.0.0.1:6443", pki["ca"], only(), tmp_path)
    assert problem == (
        "cannot check that this host reaches cluster.server https://127.0.0.1:6443: "
        "none of curl, python3, openssl is installed (install curl)"
    )


def test_the_check_leaves_no_file_behind(pki, only, tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    script = "".join(api_server_preflight(ClusterPlan("https://127.0.0.1:1", pki["ca"].read_text())))
    file = tmp_path / "check.sh"
    file.write_text("set -eu\nproblems=\nfail() { problems=x; }\n" + script)
    subprocess.run(
        [which("dash"), str(file)], env={"PATH": only("python3"), "TMPDIR": str(temporary)}, check=True, timeout=60
    )
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize(
    ("server", "host", "port", "host_port", "is_ip"),
    [
        ("https://192.0.2.1:6443", "192.0.2.1", 6443, "192.0.2.1:6443", True),
        ("https://api.example.com", "api.example.com", 443, "api.example.com:443", False),
        ("https://[fd00::1]:6443/k8s", "fd00::1", 6443, "[fd00::1]:6443", True),
    ],
)
def test_the_endpoint_of_a_server_url(server, host, port, host_port, is_ip):
    endpoint = api_endpoint(server)
    assert (endpoint.host, endpoint.port, endpoint.host_port, endpoint.is_ip) == (host, port, host_port, is_ip)


def test_the_host_preflight_checks_cluster_server_only_with_a_cluster():
    from numa_kubelets.scripts import preflight_scripts
    from tests.unit.builders import origin_config, plan_of, with_cluster

    joined, standalone = plan_of(with_cluster(origin_config())), plan_of(origin_config())
    assert joined.cluster is not None
    script = preflight_scripts(joined.hosts[0], joined).stdin
    assert f"cannot reach cluster.server {joined.cluster.server} from this host" in script
    assert joined.cluster.ca_cert.strip() in script  # public: the CA, never a secret
    # Its problems join the others under the preflight's header, which names the host.
    assert script.index("cluster.server") < script.index("numa-kubelets preflight failed on host %s")
    assert "cluster.server" not in preflight_scripts(standalone.hosts[0], standalone).stdin
