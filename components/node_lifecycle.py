"""NodeLifecycle: a kubelet's Node as the cluster sees it, joining and leaving.

A Pulumi dynamic resource, one per kubelet of a stack with a cluster:
- create/update: wait (bounded by demo.readyTimeout) until the Node is Ready and carries this
  kubelet's automatic labels, then set the kubelet's taints on it and uncordon it when the
  rollout cordoned it (its `kubeletStarted` input, when the kubelet last started as its apply
  script reported it, changes with every restart: so it runs after each, and a Ready the
  kubelet reported before it restarted does not count);
- delete: cordon, drain through the eviction API (PodDisruptionBudgets respected, bounded by
  cluster.drainTimeout, DaemonSet pods left alone) and delete the Node; or, with
  cluster.removeNodes false, only take the stack's taints back off.

It runs in the Pulumi engine's dynamic provider process with the stack's cluster credential (a
kubelet may not delete its own Node). `NodeOperations` does the talking over the official
Kubernetes client; every decision comes from `numa_kubelets.cluster`.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pulumi
import urllib3
import yaml
from kubernetes import client as kube_client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from pulumi import dynamic

from components.dynamic_resource import ProviderError, SafeDynamicResource, plain_provider_errors
from numa_kubelets import cluster
from numa_kubelets.plan import Taint

NOT_FOUND = 404
CONFLICT = 409
TOO_MANY_REQUESTS = 429  # an eviction a PodDisruptionBudget refuses right now
MERGE_PATCH = "application/merge-patch+json"


class NodeLifecycleError(ProviderError):
    """Fails the Pulumi operation with a message meant for the user."""


class DrainTimedOut(Exception):
    def __init__(self, blocked: Mapping[str, str]) -> None:
        super().__init__("drain timed out")
        self.blocked = blocked


class NodeOperations:
    """The few API calls of joining and leaving; `clock`/`sleep` let tests bound time."""

    def __init__(
        self,
        api: kube_client.CoreV1Api,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_seconds: float = 2.0,
    ) -> None:
        self.api = api
        self.clock = clock
        self.sleep = sleep
        self.poll_seconds = poll_seconds

    # ------------------------------------------------------------ reads

    def node(self, name: str) -> dict[str, Any] | None:
        try:
            return _json(self.api.read_node(name, _preload_content=False))
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise api_failure(f"reading Node {name}", error) from None

    def pods_on(self, name: str) -> list[dict[str, Any]]:
        try:
            pods = _json(
                self.api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}", _preload_content=False)
            )
        except ApiException as error:
            raise api_failure(f"listing the pods of Node {name}", error) from None
        return list(pods.get("items") or [])

    # ------------------------------------------------------------ joining

    def wait_ready(
        self,
        name: str,
        expected_labels: Mapping[str, str],
        timeout_seconds: int,
        journal: str,
        kubelet_started: str = "",
    ) -> None:
        deadline = self.clock() + timeout_seconds
        while True:
            readiness = cluster.node_readiness(self.node(name), expected_labels, kubelet_started)
            if readiness.ready:
                return
            if self.clock() >= deadline:
                raise NodeLifecycleError(cluster.not_ready_message(name, readiness, timeout_seconds, journal))
            self.sleep(self.poll_seconds)

    def reconcile_taints(self, name: str, previously_declared: Sequence[Taint], declared: Sequence[Taint]) -> None:
        """Read-modify-write with the Node's resourceVersion as precondition; a concurrent writer
        (the node lifecycle controller) makes it read again."""
        for _ in range(5):
            node = self.node(name)
            if node is None:
                return  # nothing to taint or untaint
            taints = cluster.reconciled_taints(
                (node.get("spec") or {}).get("taints") or [], previously_declared, declared
            )
            if taints is None:
                return
            patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
            try:
                self.api.patch_node(name, patch, _content_type=MERGE_PATCH, _preload_content=False)
                return
            except ApiException as error:
                if error.status == NOT_FOUND:
                    return
                if error.status != CONFLICT:
                    raise api_failure(f"setting the taints of Node {name}", error) from None
        raise NodeLifecycleError(f"setting the taints of Node {name}: it kept changing under us; run the update again")

    # ------------------------------------------------------------ leaving

    def remove(self, name: str, drain_timeout_seconds: int) -> None:
        """Cordon, drain, delete; a Node that is already gone is already removed."""
        if not self._patch(name, {"spec": {"unschedulable": True}}, "cordoning"):
            return
        try:
            self._drain(name, drain_timeout_seconds)
        except DrainTimedOut as timeout:
            raise NodeLifecycleError(
                cluster.drain_timeout_message(name, drain_timeout_seconds, timeout.blocked)
            ) from None
        try:
            self.api.delete_node(name, _preload_content=False)
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise api_failure(f"deleting Node {name}", error) from None

    def forget(self, name: str, previously_declared: Sequence[Taint]) -> None:
        """The Node stays: take the stack's taints off, and remove only an empty Node no kubelet ever
        reported (what relinquishing the label patch of an already deleted Node leaves)."""
        node = self.node(name)
        if node is not None and cluster.never_reported_by_a_kubelet(node):
            self.remove(name, 0)
            return
        self.reconcile_taints(name, previously_declared, ())

    # ------------------------------------------------------------ restarting (rollout.py)

    def drain_for_restart(self, name: str, revision: str, drain_timeout_seconds: int) -> None:
        """Cordon (marked as the rollout's) and drain before the kubelet restarts; a failed drain
        puts the Node back in service, since its kubelet is then left alone."""
        node = self.node(name)
        if node is None:
            return  # never registered: no pods to move
        patch = cluster.rollout_cordon_patch(node, revision)
        if patch is not None:
            self._patch(name, patch, "cordoning")
        try:
            self._drain(name, drain_timeout_seconds)
        except DrainTimedOut as timeout:
            self.end_rollout(name)
            raise NodeLifecycleError(
                cluster.rollout_drain_failed_message(name, drain_timeout_seconds, timeout.blocked)
            ) from None

    def end_rollout(self, name: str) -> None:
        """Uncordon a Node the rollout cordoned (one cordoned by someone else stays so)."""
        node = self.node(name)
        patch = cluster.rollout_uncordon_patch(node) if node is not None else None
        if patch is not None:
            self._patch(name, patch, "uncordoning")

    def _patch(self, name: str, patch: dict[str, Any], action: str) -> bool:
        """Merge-patch the Node; False when it does not exist (nothing to do for it then)."""
        try:
            self.api.patch_node(name, patch, _content_type=MERGE_PATCH, _preload_content=False)
            return True
        except ApiException as error:
            if error.status == NOT_FOUND:
                return False
            raise api_failure(f"{action} Node {name}", error) from None

    def _is_ready(self, name: str) -> bool:
        node = self.node(name)
        return node is not None and cluster.node_readiness(node, {}).ready

    def _drain(self, name: str, timeout_seconds: int) -> None:
        deadline = self.clock() + timeout_seconds
        while True:
            remaining = cluster.pods_to_drain(self.pods_on(name), self._is_ready(name))
            if not remaining:
                return
            # An accepted eviction leaves the pod terminating: it stays listed until it is gone.
            blocked = {cluster.pod_key(pod): self._evict(pod) or "evicted, still terminating" for pod in remaining}
            if self.clock() >= deadline:
                raise DrainTimedOut(blocked)
            self.sleep(self.poll_seconds)

    def _evict(self, pod: Mapping[str, Any]) -> str | None:
        """None when the eviction was accepted (or the pod is gone); else why it was refused."""
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            return None
        eviction = kube_client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=kube_client.V1ObjectMeta(name=metadata["name"], namespace=metadata["namespace"]),
        )
        try:
            self.api.create_namespaced_pod_eviction(
                metadata["name"], metadata["namespace"], eviction, _preload_content=False
            )
            return None
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            if error.status == TOO_MANY_REQUESTS:
                return cluster.api_error_message("eviction refused", error.status, error.reason, error.body)
            raise api_failure(f"evicting pod {cluster.pod_key(pod)}", error) from None


def _json(response: Any) -> dict[str, Any]:
    document = json.loads(response.data)
    if not isinstance(document, dict):
        raise NodeLifecycleError(f"the API server answered with a {type(document).__name__}, not an object")
    return document


def api_failure(action: str, error: ApiException) -> NodeLifecycleError:
    """The user-facing error of a failed API call: what was being done and the API's own message."""
    body = error.body.decode() if isinstance(error.body, bytes) else error.body
    return NodeLifecycleError(cluster.api_error_message(action, error.status, error.reason, body))


# ---------------------------------------------------------------- the dynamic provider

# Inputs that name another Node: a change is a new Node, and the old one leaves.
REPLACE_ON_CHANGE = ("nodeName",)


def credential_configuration(kubeconfig: str | None) -> kube_client.Configuration:
    """The stack's `kubeconfig` secret, else the ambient KUBECONFIG (its current context), as the
    Kubernetes provider reads them: the address, TLS settings and authentication of the stack's
    credential. An unusable one raises ConfigException."""
    configuration = kube_client.Configuration()
    if kubeconfig:
        try:
            document = yaml.safe_load(kubeconfig)
        except yaml.YAMLError as error:
            # Its message quotes the text around the error: a secret's. Only where it is.
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise ConfigException(f"it is not valid YAML{where}") from None
        if not isinstance(document, dict):
            raise ConfigException("it is not a kubeconfig (a YAML mapping with clusters, users and contexts)")
        kube_config.load_kube_config_from_dict(document, client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        # KUBECONFIG as it is now (the client reads it once, when imported); unset: ~/.kube/config.
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.environ.get("KUBECONFIG") or None, client_configuration=configuration
        )
    return configuration


def stack_api_client(kubeconfig: str | None) -> kube_client.ApiClient:
    """A client with the stack's credential."""
    return kube_client.ApiClient(credential_configuration(kubeconfig))


# ---------------------------------------------------------------- errors as the user reads them


def connection_cause(error: BaseException) -> str:
    """Why the API server could not be reached, in a few words (urllib3 wraps the cause in layers:
    MaxRetryError(SSLError(SSLCertVerificationError(...))), NewConnectionError from an OSError)."""
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        return connection_cause(error.reason)
    if isinstance(error, urllib3.exceptions.SSLError) and error.args and isinstance(error.args[0], BaseException):
        return connection_cause(error.args[0])
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"certificate verify failed ({str(error.verify_message).rstrip('.')})"
    if isinstance(error, ssl.SSLError):
        return f"TLS handshake failed ({error.reason or error})"
    if isinstance(error, urllib3.exceptions.NameResolutionError):
        return f"cannot resolve {error.conn.host}"
    # Before ConnectTimeoutError: urllib3 2 makes NewConnectionError a subclass of it.
    if isinstance(error, urllib3.exceptions.NewConnectionError) and isinstance(error.__cause__, OSError):
        return connection_cause(error.__cause__)
    if isinstance(error, urllib3.exceptions.ConnectTimeoutError):
        return "connection timed out"
    if isinstance(error, urllib3.exceptions.ReadTimeoutError):
        return "no answer in time (read timed out)"
    if isinstance(error, urllib3.exceptions.ProtocolError) and len(error.args) > 1:
        return f"the connection broke ({error.args[1]})"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    return str(error) or type(error).__name__


def _server_of(error: BaseException) -> str | None:
    pool = getattr(error, "pool", None)
    if pool is None or not getattr(pool, "host", None):
        return None
    host = f"[{pool.host}]" if ":" in pool.host else pool.host
    return f"{pool.scheme}://{host}:{pool.port}" if pool.port else f"{pool.scheme}://{host}"


@contextmanager
def reported(subject: str, kubeconfig: str | None) -> Iterator[None]:
    """Around a dynamic provider's operation: its errors reach the user as one or a few lines
    naming `subject` (what failed), the cause and the setting to check, without a traceback.

    An unreachable API server or a failed TLS handshake, an unusable credential and any API error
    nothing below handled become such a ProviderError; an error of another kind is a bug and
    keeps its traceback.
    """
    plain_provider_errors()
    kubeconfig_set = bool(kubeconfig)
    try:
        yield
    except ProviderError:
        raise
    except urllib3.exceptions.HTTPError as error:
        message = cluster.unreachable_api_message(subject, _server_of(error), connection_cause(error), kubeconfig_set)
        raise ProviderError(message) from None
    except ConfigException as error:
        cause = " ".join(str(error).split()) or type(error).__name__
        raise ProviderError(cluster.unusable_credential_message(subject, cause, kubeconfig_set)) from None
    except ApiException as error:
        raise ProviderError(str(api_failure(subject, error))) from None


def operations_for(kubeconfig: str | None) -> NodeOperations:
    return NodeOperations(kube_client.CoreV1Api(stack_api_client(kubeconfig)))


class NodeLifecycleProvider(dynamic.ResourceProvider):
    def __init__(self, operations: Callable[[str | None], NodeOperations] = operations_for) -> None:
        self.operations = operations

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        with reported(f"Node {props['nodeName']}", props.get("kubeconfig")):
            self._join(props, previously_declared=())
        return dynamic.CreateResult(props["nodeName"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = [key for key in news if key != "__provider" and olds.get(key) != news.get(key)]
        replaces = [key for key in changed if key in REPLACE_ON_CHANGE]
        return dynamic.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        with reported(f"Node {news['nodeName']}", news.get("kubeconfig")):
            self._join(news, previously_declared=cluster.taints_from(olds.get("taints") or []))
        return dynamic.UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        with reported(f"removing Node {props['nodeName']}", props.get("kubeconfig")):
            operations = self.operations(props.get("kubeconfig"))
            if props["removeNode"]:
                operations.remove(props["nodeName"], int(props["drainTimeoutSeconds"]))
            else:
                operations.forget(props["nodeName"], cluster.taints_from(props.get("taints") or []))

    def _join(self, props: Mapping[str, Any], previously_declared: Sequence[Taint]) -> None:
        operations = self.operations(props.get("kubeconfig"))
        name = props["nodeName"]
        operations.wait_ready(
            name,
            props["identityLabels"],
            int(props["readyTimeoutSeconds"]),
            props["journalCommand"],
            props.get("kubeletStarted") or "",
        )
        operations.reconcile_taints(name, previously_declared, cluster.taints_from(props.get("taints") or []))
        # Back from a restart the rollout drained it for (NodeDrain): schedulable again.
        operations.end_rollout(name)


class NodeLifecycle(SafeDynamicResource, module="numa-kubelets", name="NodeLifecycle"):
    def __init__(self, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        # The kubeconfig is in the inputs so that delete, which sees only the stored state, can reach the cluster.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(NodeLifecycleProvider(), name, dict(props), opts)
