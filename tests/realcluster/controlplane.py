"""A real Kubernetes control plane on this machine's loopback, built by `make tools`.

etcd, kube-apiserver (bootstrap tokens; Node and RBAC authorizers; NodeRestriction;
service-account keys), kube-controller-manager (CSR signer with the cluster CA, CSR approver,
node IPAM, node lifecycle, token cleaner, bootstrap signer, service accounts, garbage
collection) and kube-scheduler, started in that order and each waited for, in the style of
Kubernetes' envtest. A component that fails to start raises ControlPlaneError naming it, with
the tail of its log.

Everything listens on 127.0.0.1. The emulated test hosts cannot reach this machine (qemu's
user network runs with restrict=on) but for one forwarding rule: their connections to
10.0.2.100:6443 reach the API server (tests/testhost/qemu.py GUEST_API_ADDRESS), so that is the
address the API server advertises to the cluster (the `kubernetes` Service's endpoint) and one
of its serving certificate's SANs.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests import realtools
from tests.realcluster import pki
from tests.testhost.qemu import GUEST_API_ADDRESS, GUEST_API_PORT

PROJECT_DIR = Path(__file__).resolve().parents[2]
TOOLS_BIN = Path(os.environ.get("NUMA_KUBELETS_TOOLS_BIN", PROJECT_DIR / ".tools" / "bin"))
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/16"
NODE_CIDR_MASK = 24
START_TIMEOUT = 90.0
LOG_TAIL_LINES = 40
CONTROLLERS = ("kube-controller-manager", "kube-scheduler")  # started after the API server, in this order

# The stack's credential with exactly the rights docs/cluster.md lists ("Rights of the stack's
# kubeconfig"), so a test that passes with it proves the list is enough.
STACK_USER = "numa-kubelets-stack"
STACK_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterrolebindings"],
        "verbs": ["get", "create", "update", "patch", "delete"],
    },
    # Creating a binding to a role needs the role's rights or `bind` on it (RBAC escalation check).
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "verbs": ["bind"],
        "resourceNames": [
            "system:node-bootstrapper",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        ],
    },
]
STACK_KUBE_SYSTEM_RULES = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
]


class ControlPlaneError(RuntimeError):
    pass


def tool(name: str) -> Path:
    """A program built by `make tools`; missing means the tier fails, saying how to build it."""
    realtools.wait_until_built(name)
    path = TOOLS_BIN / name
    if not os.access(path, os.X_OK):
        raise ControlPlaneError(f"{path} is missing: build the real programs first with `make tools`")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Component:
    name: str
    command: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, outlive_parent: bool = False) -> None:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if outlive_parent else _die_with_parent,
            )

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def failure(self, why: str) -> ControlPlaneError:
        return ControlPlaneError(f"{self.name} {why}; log {self.log}, last lines:\n{self.tail()}")

    def check_running(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            raise self.failure(f"exited with code {code}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: a killed test session (SIGKILL, a CI timeout) takes its control
    plane along instead of leaving it serving on loopback."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def kubeconfig(path: Path, server: str, ca: pki.KeyPair, user: str, client: pki.KeyPair) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(ca.cert)}}],
        "users": [{"name": user, "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def inline_kubeconfig(path: Path) -> str:
    """The kubeconfig with its files inlined, as a user would put it into `pulumi config set --secret`."""
    document = yaml.safe_load(path.read_text())
    for entry in document["clusters"]:
        cluster = entry["cluster"]
        cluster["certificate-authority-data"] = _b64_file(cluster.pop("certificate-authority"))
    for entry in document["users"]:
        user = entry["user"]
        user["client-certificate-data"] = _b64_file(user.pop("client-certificate"))
        user["client-key-data"] = _b64_file(user.pop("client-key"))
    return yaml.safe_dump(document)


def _b64_file(path: str) -> str:
    import base64

    return base64.b64encode(Path(path).read_bytes()).decode()


# Where a control plane that outlives its starter (`make demo`) records its components' pids.
PIDS_FILE = "pids"


@dataclass
class ControlPlane:
    """`outlive_parent`: the components keep running after this process ends (`make demo`, which
    `make demo-down` stops with `stop_recorded`); otherwise they die with it (the tests)."""

    directory: Path
    components: list[Component] = field(default_factory=list)
    outlive_parent: bool = False

    def __post_init__(self) -> None:
        self.pki_dir = self.directory / "pki"
        self.ca = pki.CertificateAuthority(self.pki_dir)
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        # What a test host's kubelets are given as cluster.server: the API server seen from the guest.
        self.guest_server = f"https://{GUEST_API_ADDRESS}:{GUEST_API_PORT}"

    # ------------------------------------------------------------ credentials

    def client_kubeconfig(self, stem: str, user: str, group: str | None = None) -> Path:
        pair = self.ca.issue(stem, user, group)
        return kubeconfig(self.directory / f"{stem}.kubeconfig", self.server, self.ca.pair, user, pair)

    @property
    def ca_pem(self) -> str:
        return self.ca.pair.cert_pem()

    # ------------------------------------------------------------ start and stop

    def start(self) -> None:
        started = time.monotonic()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._start_scheduler()
            self._grant_stack_rights()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()

    @staticmethod
    def stop_recorded(directory: Path) -> list[str]:
        """Stop the components a control plane with `outlive_parent` started from `directory`,
        the last started first; the names of those that were still running."""
        stopped = []
        record = directory / PIDS_FILE
        lines = record.read_text().splitlines() if record.exists() else []
        for line in reversed(lines):
            name, pid = line.split()
            if _terminate(int(pid), name):
                stopped.append(name)
        record.unlink(missing_ok=True)
        return stopped

    def component(self, name: str) -> Component:
        [found] = [c for c in self.components if c.name == name]
        return found

    def stop_apiserver(self) -> None:
        """The API server down (a failure-path test); etcd keeps running. The scheduler and the
        controller-manager go too: in a real control plane they run with leader election, and one
        that cannot renew its lease exits (its kubelet restarts it, with fresh caches, once the
        API server is back). Here they run without it, and a scheduler kept alive across the
        outage was seen to miss a pod's deletion ("Scheduler cache is corrupted") and never
        schedule its replacement."""
        for name in (*CONTROLLERS, "kube-apiserver"):
            self.component(name).stop()

    def start_apiserver_again(self) -> None:
        """The same API server back on the same port, then the controllers, each waited for until
        ready (their old logs kept)."""
        apiserver = self._restart("kube-apiserver")
        context = ssl.create_default_context(cafile=str(self.ca.pair.cert))
        context.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        self._wait(apiserver, f"{self.server}/readyz", context)
        for name in CONTROLLERS:
            controller = self._restart(name)
            [port] = [
                arg.removeprefix("--secure-port=") for arg in controller.command if arg.startswith("--secure-port=")
            ]
            self._wait(controller, f"https://127.0.0.1:{port}/healthz", _unverified())

    def _restart(self, name: str) -> Component:
        component = self.component(name)
        component.log.replace(component.log.with_suffix(f".{time.time_ns()}.log"))
        component.start(self.outlive_parent)
        self._record(component)
        return component

    def _component(self, name: str, command: list[str]) -> Component:
        component = Component(name, command, self.directory / f"{name}.log")
        self.components.append(component)
        component.start(self.outlive_parent)
        self._record(component)
        return component

    def _record(self, component: Component) -> None:
        """What outlives this process is written down for `stop_recorded`."""
        if self.outlive_parent:
            assert component.process is not None
            with (self.directory / PIDS_FILE).open("a") as record:
                record.write(f"{component.name} {component.process.pid}\n")

    def _wait(self, component: Component, url: str, context: ssl.SSLContext | None) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        last = "no answer"
        while time.monotonic() < deadline:
            component.check_running()
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as answer:
                    if answer.status == 200:
                        return
                    last = f"HTTP {answer.status}"
            except urllib.error.HTTPError as error:
                last = f"HTTP {error.code}: {error.read()[:300]!r}"
            except (OSError, urllib.error.URLError) as error:
                last = str(error)
            time.sleep(0.5)
        raise component.failure(f"not healthy at {url} after {START_TIMEOUT:.0f} s ({last})")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._component(
            "etcd",
            [
                str(tool("etcd")),
                "--name=test",
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=test=http://127.0.0.1:{peer}",
                "--listen-metrics-urls=",
                # A test cluster's data is thrown away: no fsync, which TCG guests' host disk needs least.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait(etcd, f"{self.etcd_url}/health", None)

    def _start_apiserver(self) -> None:
        serving = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            server_names=(
                "127.0.0.1",
                GUEST_API_ADDRESS,
                KUBERNETES_SERVICE_IP,
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            client=False,
        )
        kubelet_client = self.ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
        self.service_accounts = pki.service_account_keys(self.pki_dir)
        apiserver = self._component(
            "kube-apiserver",
            [
                str(tool("kube-apiserver")),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--advertise-address={GUEST_API_ADDRESS}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.ca.pair.cert}",
                "--enable-bootstrap-token-auth=true",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.service_accounts.cert}",
                f"--service-account-signing-key-file={self.service_accounts.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
            ],
        )
        self.admin_kubeconfig = self.client_kubeconfig("admin", "test-admin", "system:masters")
        context = ssl.create_default_context(cafile=str(self.ca.pair.cert))
        context.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        self._wait(apiserver, f"{self.server}/readyz", context)

    def _start_controller(self, name: str, user: str, flags: list[str]) -> None:
        """kube-controller-manager or kube-scheduler: its own client certificate (as `user`, whose
        rights the API server's bootstrap RBAC policy grants), serving on a loopback port."""
        config = self.client_kubeconfig(name, user)
        port = free_port()
        controller = self._component(
            name,
            [
                str(tool(name)),
                f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--v=1",
                *flags,
            ],
        )
        self._wait(controller, f"https://127.0.0.1:{port}/healthz", _unverified())

    def _start_controller_manager(self) -> None:
        self._start_controller(
            "kube-controller-manager",
            "system:kube-controller-manager",
            [
                "--controllers=*,bootstrapsigner,tokencleaner",
                f"--cluster-signing-cert-file={self.ca.pair.cert}",
                f"--cluster-signing-key-file={self.ca.pair.key}",
                f"--root-ca-file={self.ca.pair.cert}",
                f"--service-account-private-key-file={self.service_accounts.key}",
                "--use-service-account-credentials=true",
                "--allocate-node-cidrs=true",
                f"--cluster-cidr={POD_CIDR}",
                f"--node-cidr-mask-size={NODE_CIDR_MASK}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
        )

    def _start_scheduler(self) -> None:
        self._start_controller("kube-scheduler", "system:kube-scheduler", [])

    def _grant_stack_rights(self) -> None:
        """The least-privilege stack credential: a ClusterRole and a kube-system Role, bound to it."""
        from kubernetes import client as kube_client
        from kubernetes import config as kube_config

        api = kube_config.new_client_from_config(str(self.admin_kubeconfig))
        rbac = kube_client.RbacAuthorizationV1Api(api)
        subject = [{"kind": "User", "name": STACK_USER, "apiGroup": "rbac.authorization.k8s.io"}]
        rbac.create_cluster_role({"metadata": {"name": STACK_USER}, "rules": STACK_CLUSTER_RULES})
        rbac.create_cluster_role_binding(
            {"metadata": {"name": STACK_USER}, "roleRef": _role_ref("ClusterRole", STACK_USER), "subjects": subject}
        )
        rbac.create_namespaced_role("kube-system", {"metadata": {"name": STACK_USER}, "rules": STACK_KUBE_SYSTEM_RULES})
        rbac.create_namespaced_role_binding(
            "kube-system",
            {"metadata": {"name": STACK_USER}, "roleRef": _role_ref("Role", STACK_USER), "subjects": subject},
        )
        self.stack_kubeconfig = self.client_kubeconfig("stack", STACK_USER)


def _terminate(pid: int, name: str) -> bool:
    """SIGTERM the recorded component if the pid still runs that program (a pid may be reused
    after a reboot), then wait for it; SIGKILL after 15 s."""
    try:
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].rsplit(b"/", 1)[-1] != name.encode():
            return False
        os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ProcessLookupError):
        return False
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)
    return True


def _role_ref(kind: str, name: str) -> dict[str, str]:
    return {"kind": kind, "name": name, "apiGroup": "rbac.authorization.k8s.io"}


def _unverified() -> ssl.SSLContext:
    """For the controllers' health endpoints on loopback: they serve a self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
