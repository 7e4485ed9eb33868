"""Evaluates the real __main__.py under Pulumi's mock engine and records what it registers."""

from __future__ import annotations

import json
import runpy
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components import heap

PROJECT_DIR = Path(__file__).resolve().parents[2]
MAIN = PROJECT_DIR / "__main__.py"
NAMESPACE = "numa-kubelets"
SECRET_KEYS = ("sshPrivateKey", "bootstrapToken", "kubeconfig")
SECRET_SIGNATURE_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIGNATURE = "1b47061264138c4ac30d75fd1eb44270"


def is_secret_envelope(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIGNATURE_KEY) == SECRET_SIGNATURE


def unwrap_secrets(value: Any) -> Any:
    if is_secret_envelope(value):
        return unwrap_secrets(value["value"])
    if isinstance(value, dict):
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


@dataclass
class RegisteredResource:
    type: str
    name: str
    inputs: dict[str, Any]
    raw_inputs: dict[str, Any]  # as the engine receives them: secrets still in their envelopes


KUBE_DNS_CLUSTER_IP = "10.96.0.10"
# What the random provider would generate for the managed bootstrap token: [a-z0-9], 6 and 16 long.
TOKEN_ID = "k1d2e3"
TOKEN_SECRET = "s3cr3tt0k3nvalue"


def secret_envelope(value: Any) -> dict[str, Any]:
    return {SECRET_SIGNATURE_KEY: SECRET_SIGNATURE, "value": value}


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration; a resource's state is its inputs, as a fresh create returns.

    Plays the few things a real engine adds: the cluster's kube-dns Service (None: the cluster
    has none, and reading it fails as the Kubernetes provider's read does), the random
    provider's results (the password's as a secret, as the provider marks it) and the outputs a
    StackReference reads (`previous_outputs`: those of the stack's last update).
    """

    def __init__(
        self, kube_dns_cluster_ip: str | None = KUBE_DNS_CLUSTER_IP, previous_outputs: dict[str, Any] | None = None
    ) -> None:
        self.resources: list[RegisteredResource] = []
        self.kube_dns_cluster_ip = kube_dns_cluster_ip
        self.previous_outputs = previous_outputs or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(
            RegisteredResource(args.typ, args.name, unwrap_secrets(dict(args.inputs)), dict(args.inputs))
        )
        state = dict(args.inputs)
        if args.typ == "kubernetes:core/v1:Service" and args.resource_id == "kube-system/kube-dns":
            if self.kube_dns_cluster_ip is None:
                raise Exception('resource "kube-system/kube-dns" does not exist')
            state = {"metadata": {"name": "kube-dns", "namespace": "kube-system"}}
            state["spec"] = {"clusterIP": self.kube_dns_cluster_ip, "type": "ClusterIP"}
        elif args.typ == "pulumi:pulumi:StackReference":
            # The stack's own outputs as its last update left them (components/rollout.py).
            state = {"name": args.inputs.get("name"), "outputs": self.previous_outputs, "secretOutputNames": []}
        elif args.typ == "random:index/randomString:RandomString":
            state["result"] = TOKEN_ID
        elif args.typ == "random:index/randomPassword:RandomPassword":
            state["result"] = secret_envelope(TOKEN_SECRET)
        return args.resource_id or f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """Also records each resource's parent, its dependencies and the options the engine would see."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.requests: dict[str, Any] = {}

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        self.requests[response.urn] = request
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self.requests[response.urn] = request
        return response


@dataclass
class ProgramRun:
    # In the order the mock engine saw them, not the program's: the SDK registers each resource
    # from a thread pool once its inputs resolve, so under load independent ones swap places.
    # Assert on names, sets or stack outputs, never on positions in this list.
    resources: list[RegisteredResource]
    requests: dict[str, Any]
    outputs: dict[str, Any]

    def of_type(self, type_token: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str, type_token: str = "command:remote:Command") -> RegisteredResource:
        matches = [r for r in self.resources if r.name == name and r.type == type_token]
        assert len(matches) == 1, f"{len(matches)} {type_token} named {name!r}"
        return matches[0]

    def commands(self) -> list[RegisteredResource]:
        return self.of_type("command:remote:Command")

    def request_of(self, resource: RegisteredResource):
        suffix = f"{resource.type}::{resource.name}"
        matches = [req for urn, req in self.requests.items() if urn.endswith(suffix)]
        assert len(matches) == 1, f"{len(matches)} registrations of {suffix!r}"
        return matches[0]

    def parent_of(self, resource: RegisteredResource) -> tuple[str, str]:
        """(type, name) of the resource's parent."""
        parent_urn = self.request_of(resource).parent
        qualified_type, name = parent_urn.split("::")[-2:]
        return qualified_type.rsplit("$", 1)[-1], name

    def dependencies_of(self, resource: RegisteredResource) -> list[str]:
        return [urn.rsplit("::", 1)[1] for urn in self.request_of(resource).dependencies]


def config_values(stack_config: dict[str, Any]) -> dict[str, str]:
    """Stack settings as the Pulumi CLI hands them to a program: strings, objects as JSON."""
    values = {}
    for key, value in stack_config.items():
        full_key = key if ":" in key else f"{NAMESPACE}:{key}"
        values[full_key] = value if isinstance(value, str) else json.dumps(value)
    return values


def load_stack_file(name: str) -> dict[str, Any]:
    import yaml

    document = yaml.safe_load((PROJECT_DIR / f"Pulumi.{name}.yaml").read_text())
    prefix = NAMESPACE + ":"
    return {key.removeprefix(prefix): value for key, value in document["config"].items()}


def run_program(
    stack_config: dict[str, Any],
    preview: bool = False,
    previous_outputs: dict[str, Any] | None = None,
    secret_keys: tuple[str, ...] | None = None,
) -> ProgramRun:
    """Run __main__.py once; raises what the program raises (e.g. pulumi.RunError).

    `previous_outputs`: the stack outputs of the last update (e.g. a previous run's `outputs`).
    `secret_keys`: the keys (without the namespace) set with `pulumi config set --secret`, which
    the engine names to the program as its secret config keys; default: every one of SECRET_KEYS
    the config sets.
    """
    mocks = RecordingMocks(previous_outputs=previous_outputs)
    monitor = RecordingMonitor(mocks)
    settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=NAMESPACE, stack="test", preview=preview, monitor=monitor)
    values = config_values(stack_config)
    encrypted = SECRET_KEYS if secret_keys is None else secret_keys
    # As the engine hands them over: the list is always set, so nothing stays from an earlier run.
    pulumi.runtime.set_all_config(values, [k for k in values if k.split(":", 1)[1] in encrypted])
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    root = settings.get_root_resource()

    def program() -> None:
        runpy.run_path(str(MAIN), run_name="__main__")

    # What components/engine_stop.py sets for the program's own process, which the engine ends.
    sigint_handler = signal.getsignal(signal.SIGINT)
    grpc_error_to_exception = settings.grpc_error_to_exception
    try:
        _sync_await(run_pulumi_func(program))
    finally:
        # The program froze its objects for the cyclic GC (components/heap.py): in this process,
        # which evaluates it again and again, they must become collectable once dropped.
        heap.release()
        # And it made the engine's SIGINT and any call the engine cancelled end its process: this
        # one goes on to run other tests (an inline program's cancelled call among them; seen: a
        # test worker ended by os._exit), and a Ctrl+C must stop pytest as usual.
        signal.signal(signal.SIGINT, sigint_handler)
        settings.grpc_error_to_exception = grpc_error_to_exception
    outputs = {key: _sync_await(pulumi.Output.from_input(value).future()) for key, value in root.outputs.items()}
    secret_outputs = {
        key for key, value in root.outputs.items() if _sync_await(pulumi.Output.from_input(value).is_secret())
    }
    assert not secret_outputs, f"plain outputs expected, secret: {secret_outputs}"
    return ProgramRun(mocks.resources, monitor.requests, outputs)
