"""Issue 34 under the real engine: what the first real `pulumi up` found, pinned where only the
real engine shows it (the mock tier has its own tests of each: tests/program/test_secrets.py,
tests/cluster/test_real_apiserver.py, tests/program/test_demo.py).

The built CLI v3.274.1 and its Python language host v3.68.0 run a copy of this repository's
project (as tests/e2e/test_quick_start.py copies it), offline, with `realtools.pulumi_env`; the
plugin cache holds the real pulumi-kubernetes 4.25.0 and the test doubles of pulumi-command and
pulumi-random. No emulated host is booted and none is contacted: every host of these stacks is
127.0.0.1 at a closed port (an SSH attempt would fail the test), and the only server reached is
the session's control plane on loopback (`control_plane`).

1. A secret key (`sshPrivateKey`, `bootstrapToken`, `kubeconfig`) set with `pulumi config set`
   without `--secret` fails `pulumi preview` and `pulumi up` before any resource, naming the key
   and the `pulumi config set --secret` command, never the value; set with `--secret`, the same
   value is taken (the preview runs the whole program, contacting nothing).
2. The cluster preflight checks the bootstrap token at the address of the stack's credential
   (`kubeconfig`: the control plane), not at `cluster.server` (a closed loopback port):
   `pulumi up --target` of the cluster side alone (the ClusterJoin component's children: the
   managed token, its Secret and bindings, the ClusterPreflight) succeeds against the real API
   server. A credential whose server is a closed port fails the update with one line naming the
   cause and numa-kubelets:kubeconfig, and no Python traceback. That part runs with a configured
   `bootstrapToken`: with a managed one, the kubernetes provider meets the unreachable
   credential first (replacing the token's Secret, with its own message), and the preflight
   never runs.
3. A demo pod change previews green against the real kube-apiserver: an inline Automation API
   program makes the namespace and the Pod that components/demo.py makes (the core's manifests,
   the same options) for a kubelet labelled {numa-type: red}, then {numa-type: blue}. Under the
   core's name (its spec's hash) the preview shows the Pod replaced under the new name, and the
   update applies it; under the old fixed name (`numa-demo-<node>`) the same preview fails with
   the API server's "Forbidden: pod updates may not change fields", as issue 34 found. No
   kubelet runs here, so the pods stay Pending (`pulumi.com/skipAwait`). The whole program's
   label change on a live cluster with kubelets comes with the real-engine integration tier
   (issue 37); this test pins the mechanism with the real provider and server.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from numa_kubelets import cluster
from numa_kubelets.config import load_config
from numa_kubelets.placement import DemoPod, demo_pods, namespace_manifest, service_account_manifest
from numa_kubelets.plan import build_plan
from tests import realtools
from tests.realcluster.clients import api_for, closed_loopback_port
from tests.realcluster.controlplane import ControlPlane, inline_kubeconfig
from tests.unit.builders import HOST_KEY

# The last family they need: the kubernetes provider (the CLI, its language host and the
# plugin doubles are built before it).
pytestmark = pytest.mark.realtools("pulumi_kubernetes")

PROJECT = "numa-kubelets"  # Pulumi.yaml's name; also the configuration's namespace
PREFLIGHT = "pulumi-python:dynamic/numa-kubelets:ClusterPreflight"
CLUSTER_DNS = "10.96.0.10"  # set, so that no kube-dns Service is read (the control plane has none)
CLI_TIMEOUT = 600
NOT_FOUND = 404

# Secret values, each with a marker looked for in every output and state.
TOKEN = "e2etok.p1aintext0secret"
SSH_KEY_MARKER = "e2e-ssh-key-secret-9c2d4f"
SSH_KEY = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_KEY_MARKER}\n-----END OPENSSH PRIVATE KEY-----\n"
KUBECONFIG_MARKER = "e2e-kubeconfig-secret-7f3a1b"


# ---------------------------------------------------------------- the engine and the project


@pytest.fixture
def engine_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI's offline environment with a local file backend of this test's own; also this
    process's, which the Automation API hands to the CLI it runs."""
    realtools.require("pulumi", "pulumi-language-python", "pulumi-resource-pulumi-python")
    pins = realtools.pins()
    for name in ("kubernetes", "random", "command"):
        realtools.require_plugin(name, pins[f"pulumi-{name}"])
    state = tmp_path / "state"
    state.mkdir()
    env = realtools.pulumi_env(state)
    for key in [key for key in os.environ if key.startswith("PULUMI_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of this repository's project (Pulumi.yaml, the program, its packages, its `.venv`):
    `stack init` and `config set` write stack files, which must not touch the checkout."""
    return realtools.copy_project(tmp_path / PROJECT)


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    """The command's output; it must have exited 0."""
    assert result.returncode == 0, f"{' '.join(result.args[2:])} exited {result.returncode}:\n{output_of(result)}"
    return output_of(result)


def init_stack(env: dict[str, str], project: Path, stack: str, config: dict[str, Any]) -> None:
    """`pulumi stack init`, then the stack's plain `numa-kubelets:*` keys written into its stack
    file, beside the passphrase's salt `stack init` put there."""
    succeeded(realtools.pulumi_cli(env, project, "stack", "init", stack))
    stack_file = project / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(stack_file.read_text()) or {}
    document.setdefault("config", {}).update({f"{PROJECT}:{key}": value for key, value in config.items()})
    stack_file.write_text(yaml.safe_dump(document))


def set_config(env: dict[str, str], project: Path, key: str, value: str, *, secret: bool) -> str:
    """`pulumi config set [--secret] numa-kubelets:<key>` with the value on stdin, as docs/configuration.md's
    `< ~/.kube/config`: it is on no command line."""
    flag = "--secret" if secret else "--plaintext"
    return succeeded(realtools.pulumi_cli(env, project, "config", "set", flag, f"{PROJECT}:{key}", stdin=value))


def exported(env: dict[str, str], project: Path) -> tuple[str, list[dict[str, Any]]]:
    """The stack's state as `pulumi stack export` prints it, and its resources."""
    text = succeeded(realtools.pulumi_cli(env, project, "stack", "export"))
    return text, list(json.loads(text)["deployment"].get("resources") or [])


def diagnostics(output: str, resource: str) -> list[str]:
    """The lines the CLI's Diagnostics section shows for one resource ("<type> (<name>)")."""
    lines = output.splitlines()
    start = lines.index(f"  {resource}:") + 1
    end = next((index for index in range(start, len(lines)) if not lines[index].strip()), len(lines))
    return [line.strip() for line in lines[start:end]]


@contextlib.contextmanager
def destroyed_on_failure(destroy: Callable[[], object]) -> Iterator[None]:
    """Each test destroys its stack at its end, and checks that; one that fails before leaves
    nothing in the session's shared control plane all the same."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            destroy()
        raise


def cluster_stack(server: str, ca_pem: str) -> dict[str, Any]:
    """A stack joining a cluster: one host at a closed loopback SSH port, no demo."""
    # Nothing listens at that port, so no host key is ever checked; pinned as every host is.
    host = {"name": "numa-a", "address": "127.0.0.1", "sshPort": closed_loopback_port(), "hostKey": HOST_KEY}
    return {
        "hosts": [{**host, "numaNodes": [{"id": 0, "cpus": "0-3"}]}],
        "cluster": {"server": server, "caCert": ca_pem, "dns": CLUSTER_DNS},
        "demo": {"enabled": False},
    }


def example_ca() -> str:
    """The example stack's CA certificate (its key discarded)."""
    stack_file = yaml.safe_load((realtools.REPO / "Pulumi.example-cluster.yaml").read_text())
    return str(stack_file["config"][f"{PROJECT}:cluster"]["caCert"])


def with_server(kubeconfig: str, server: str) -> str:
    document = yaml.safe_load(kubeconfig)
    document["clusters"][0]["cluster"]["server"] = server
    return yaml.safe_dump(document)


def client_key_of(kubeconfig: str) -> str:
    """What of a credential must stay out of every output: its client key."""
    return str(yaml.safe_load(kubeconfig)["users"][0]["user"]["client-key-data"])


# ---------------------------------------------------------------- 1. a secret in plain text


def token_kubeconfig(server: str) -> str:
    """A kubeconfig of the kind the stack's credential is, authenticating with a (marker) token."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": KUBECONFIG_MARKER}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )


MARKERS = (TOKEN, SSH_KEY_MARKER, KUBECONFIG_MARKER)
# The keys issue 34 names as secrets (the program's own list is numa_kubelets.config.SECRET_KEYS).
SECRET_KEYS = ("sshPrivateKey", "bootstrapToken", "kubeconfig")


@pytest.mark.parametrize("plain", SECRET_KEYS)
def test_a_secret_in_plain_text_is_refused_before_any_resource(
    engine_env: dict[str, str], project: Path, plain: str
) -> None:
    # Nothing listens anywhere this stack points: the cluster, the credential, the host.
    unreachable = f"https://127.0.0.1:{closed_loopback_port()}"
    values = {"bootstrapToken": TOKEN, "sshPrivateKey": SSH_KEY, "kubeconfig": token_kubeconfig(unreachable)}
    stack = f"plain-{plain.lower()}"
    init_stack(engine_env, project, stack, cluster_stack(unreachable, example_ca()))
    outputs = [set_config(engine_env, project, key, values[key], secret=key != plain) for key in SECRET_KEYS]

    preview = realtools.pulumi_cli(engine_env, project, "preview", "--diff")
    shown = output_of(preview)
    outputs.append(shown)
    assert preview.returncode != 0, shown
    assert "invalid numa-kubelets configuration (1 problem(s)):" in shown, shown  # the others are secrets
    assert f"  - {plain}: is a secret but is set in plain text" in shown, shown
    assert f"set it encrypted with: pulumi config set --secret {PROJECT}:{plain}" in shown, shown
    assert exported(engine_env, project)[1] == [], "a preview wrote state"

    up = realtools.pulumi_cli(engine_env, project, "up", "--yes")
    outputs.append(output_of(up))
    assert up.returncode != 0, output_of(up)
    assert f"pulumi config set --secret {PROJECT}:{plain}" in output_of(up)
    state, resources = exported(engine_env, project)
    outputs.append(state)
    # Not even the stack: no provider (the default dynamic provider's inputs kept the token in
    # plain text), no resource.
    assert resources == [], resources

    # The same value set as a secret is taken: the preview runs the whole program through,
    # contacting nothing (a remote command or a cluster call would fail at the closed ports).
    outputs.append(set_config(engine_env, project, plain, values[plain], secret=True))
    shown = succeeded(realtools.pulumi_cli(engine_env, project, "preview", "--diff"))
    outputs.append(shown)
    assert f"{PREFLIGHT}: (create)" in shown, shown
    assert "+ command:remote:Command: (create)" in shown, shown

    for text in outputs:
        for marker in MARKERS:
            assert marker not in text
    stack_file = (project / f"Pulumi.{stack}.yaml").read_text()
    assert not [marker for marker in MARKERS if marker in stack_file], "a secret in plain text in the stack file"


# ---------------------------------------------------------------- 2. the cluster preflight's address


def cluster_side(stack: str) -> list[str]:
    """`--target` of the cluster side alone: the ClusterJoin component and its children (the
    managed token's RandomString, RandomPassword, Secret and bindings, the ClusterPreflight) and
    the Kubernetes provider they use. No host's resource: no host is contacted."""
    prefix = f"urn:pulumi:{stack}::{PROJECT}::"
    return [
        "--target",
        f"{prefix}numa-kubelets:index:ClusterJoin**",
        "--target",
        f"{prefix}pulumi:providers:kubernetes::cluster",
    ]


def gone(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == NOT_FOUND:
            return True
        raise
    return False


def test_the_cluster_preflight_checks_the_token_at_the_credentials_address(
    engine_env: dict[str, str], project: Path, control_plane: ControlPlane
) -> None:
    stack = f"preflight-{uuid.uuid4().hex[:6]}"
    credential = inline_kubeconfig(control_plane.admin_kubeconfig)
    # cluster.server, the kubelets' address: nothing listens there.
    kubelets_server = f"https://127.0.0.1:{closed_loopback_port()}"
    init_stack(engine_env, project, stack, cluster_stack(kubelets_server, control_plane.ca_pem))
    outputs = [
        set_config(engine_env, project, "kubeconfig", credential, secret=True),
        set_config(engine_env, project, "sshPrivateKey", SSH_KEY, secret=True),
    ]
    admin = api_for(control_plane.admin_kubeconfig)
    core, rbac = kube_client.CoreV1Api(admin), kube_client.RbacAuthorizationV1Api(admin)
    bindings = [binding.name for binding in cluster.bootstrap_bindings(stack)]

    def destroy() -> str:
        return succeeded(realtools.pulumi_cli(engine_env, project, "destroy", "--yes"))

    with destroyed_on_failure(destroy):
        # The managed token: generated, its Secret and bindings created in the real API server,
        # then the preflight, which authenticates with it at the credential's address.
        outputs.append(succeeded(realtools.pulumi_cli(engine_env, project, "up", "--yes", *cluster_side(stack))))
        state, resources = exported(engine_env, project)
        outputs.append(state)
        types = {resource["type"] for resource in resources}
        assert {PREFLIGHT, "kubernetes:core/v1:Secret", "random:index/randomPassword:RandomPassword"} <= types, types
        assert not [kind for kind in types if kind.startswith(("command:remote:", "numa-kubelets:index:Numa"))], types
        [token_secret] = [resource["id"] for resource in resources if resource["type"] == "kubernetes:core/v1:Secret"]
        namespace, name = token_secret.split("/")
        assert (namespace, name.startswith("bootstrap-token-")) == ("kube-system", True), token_secret
        core.read_namespaced_secret(name, namespace)
        for binding in bindings:
            rbac.read_cluster_role_binding(binding)
        outputs.append(destroy())
        assert gone(lambda: core.read_namespaced_secret(name, namespace))
        assert all(gone(functools.partial(rbac.read_cluster_role_binding, binding)) for binding in bindings)

        # A configured token, and a credential whose server is a closed port: the preflight, the
        # cluster side's only resource then, is the first to go to the credential's address.
        credential_server = f"https://127.0.0.1:{closed_loopback_port()}"
        outputs.append(set_config(engine_env, project, "bootstrapToken", TOKEN, secret=True))
        outputs.append(
            set_config(engine_env, project, "kubeconfig", with_server(credential, credential_server), secret=True)
        )
        failed = realtools.pulumi_cli(engine_env, project, "up", "--yes", *cluster_side(stack))
        shown = output_of(failed)
        outputs.append(shown)
        assert failed.returncode != 0, shown
        assert diagnostics(shown, f"{PREFLIGHT} (cluster-preflight)") == [
            f"error: cluster preflight: cannot reach the Kubernetes API at {credential_server}: connection refused; "
            f"check {PROJECT}:kubeconfig"
        ], shown
        assert "Traceback" not in shown, shown
        assert PREFLIGHT not in {resource["type"] for resource in exported(engine_env, project)[1]}
    outputs.append(destroy())
    assert exported(engine_env, project)[1] == []

    client_key = client_key_of(credential)
    for text in outputs:
        assert client_key not in text
        assert TOKEN not in text


# ---------------------------------------------------------------- 3. a demo pod change, previewed

SKIP_AWAIT = "pulumi.com/skipAwait"


class EngineResult(Protocol):
    stdout: str
    stderr: str


def text_of(result: EngineResult) -> str:
    return result.stdout + result.stderr


@pytest.fixture
def demo_project(tmp_path: Path) -> Path:
    """The inline program's project directory: this venv's Python."""
    directory = tmp_path / "demo-project"
    directory.mkdir()
    (directory / "Pulumi.yaml").write_text(
        f"name: e2e-demo\nruntime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: {sys.prefix}\n"
    )
    return directory


def demo_pod(namespace: str, color: str) -> DemoPod:
    """The core's demo pod for a kubelet labelled {numa-type: <color>} (its plan reaches no host)."""
    raw = {
        "hosts": [
            {
                "name": "numa-a",
                "address": "127.0.0.1",
                "hostKey": HOST_KEY,
                "numaNodes": [{"id": 0, "cpus": "0-3"}],
                "kubelets": [{"numaNode": 0, "labels": {"numa-type": color}}],
            }
        ],
        "cluster": {"server": "https://127.0.0.1:6443", "caCert": example_ca(), "dns": CLUSTER_DNS},
        "bootstrapToken": TOKEN,
        "demo": {"enabled": True, "namespace": namespace},
    }
    config = load_config(raw)
    [pod] = demo_pods(config, build_plan(config))
    assert pod.selector == {"numa-type": color}
    return pod


def demo_program(kubeconfig: str, namespace: str, pod: DemoPod | None, fixed_name: bool = False) -> auto.PulumiFn:
    """The demo's namespace and pod as components/demo.py declares them (the core's manifests,
    the same options), without the probe: under the core's name, or under the old fixed one.
    Without a pod, the namespace alone."""

    def run() -> None:
        provider = k8s.Provider("cluster", kubeconfig=pulumi.Output.secret(kubeconfig))
        in_cluster = pulumi.ResourceOptions(provider=provider)
        created = k8s.core.v1.Namespace(namespace, metadata=namespace_manifest(namespace)["metadata"], opts=in_cluster)
        account_manifest = service_account_manifest(namespace)
        account = k8s.core.v1.ServiceAccount(
            f"{namespace}/numa-demo",
            metadata=account_manifest["metadata"],
            automount_service_account_token=account_manifest["automountServiceAccountToken"],
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[created])),
        )
        if pod is None:
            return
        manifest = pod.manifest()
        # No kubelet here: the pod stays Pending, and the provider must not wait for it.
        metadata = {**manifest["metadata"], "annotations": {SKIP_AWAIT: "true"}}
        if fixed_name:
            metadata["name"] = pod.resource_name  # numa-demo-<node>, the name before issue 34
        k8s.core.v1.Pod(
            pod.resource_name,
            metadata=metadata,
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[account], delete_before_replace=True)
            ),
        )

    return run


def demo_stack(work_dir: Path, program: auto.PulumiFn) -> auto.Stack:
    return auto.create_or_select_stack(
        "demo",
        project_name="e2e-demo",
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(work_dir), pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent))
        ),
    )


def pod_names(core: kube_client.CoreV1Api, namespace: str) -> list[str]:
    return sorted(str(pod.metadata.name) for pod in core.list_namespaced_pod(namespace).items if pod.metadata)


@pytest.mark.parametrize("fixed_name", [False, True], ids=["core-name", "fixed-name"])
def test_a_demo_pod_change_previews_against_the_real_api_server(
    engine_env: dict[str, str], demo_project: Path, control_plane: ControlPlane, fixed_name: bool
) -> None:
    credential = inline_kubeconfig(control_plane.admin_kubeconfig)
    core = kube_client.CoreV1Api(api_for(control_plane.admin_kubeconfig))
    namespace = f"numa-demo-e2e-{uuid.uuid4().hex[:6]}"
    red, blue = demo_pod(namespace, "red"), demo_pod(namespace, "blue")
    # The Pulumi name stays; the pod's own name follows its spec, under the readable prefix.
    assert red.resource_name == blue.resource_name == "numa-demo-numa-a-numa0"
    assert red.name != blue.name and red.name.startswith(f"{red.resource_name}-")
    red_name = red.resource_name if fixed_name else red.name
    stack = demo_stack(demo_project, demo_program(credential, namespace, None))
    outputs: list[str] = []
    with destroyed_on_failure(stack.destroy):
        outputs.append(text_of(stack.up()))
        stack = demo_stack(demo_project, demo_program(credential, namespace, red, fixed_name))
        outputs.append(text_of(stack.up()))
        assert pod_names(core, namespace) == [red_name]

        stack = demo_stack(demo_project, demo_program(credential, namespace, blue, fixed_name))
        if fixed_name:
            # The control: the provider's preview dry-runs the replacement under the same name
            # while the old pod exists, and the API server takes it for an update of its spec.
            with pytest.raises(auto.CommandError) as refused:
                stack.preview(diff=True)
            message = str(refused.value)
            outputs.append(message)
            assert f'Pod "{red_name}" is invalid: spec: Forbidden: pod updates may not change fields' in message
            assert pod_names(core, namespace) == [red_name]
        else:
            preview = stack.preview(diff=True)
            outputs.append(text_of(preview))
            assert preview.change_summary == {"replace": 1, "same": 4}, (
                preview.stdout
            )  # stack, provider, namespace, account
            assert "+-kubernetes:core/v1:Pod: (replace)" in preview.stdout, preview.stdout
            assert f'~ name: "{red.name}" => "{blue.name}"' in preview.stdout, preview.stdout
            assert '~ numa-type: "red" => "blue"' in preview.stdout, preview.stdout
            # And it applies: the old pod goes first (delete_before_replace), the new one is there.
            outputs.append(text_of(stack.up()))
            assert pod_names(core, namespace) == [blue.name]
    outputs.append(text_of(stack.destroy()))
    assert gone(lambda: core.read_namespace(namespace))

    client_key = client_key_of(credential)
    assert all(client_key not in text for text in outputs)
