"""Rolling changes: which kubelets a stack change restarts, and in which batches.

A kubelet whose restart revision (revision.py) differs from the one its last successful update
recorded is restarted; one that is new is created, not restarted, and one with the same
revision (a label or taint change, or nothing) is left alone. The restarting kubelets go in
batches: a batch starts once the previous one is back (Ready, with a cluster), and holds at
most `rollout.maxUnavailable` kubelets of the stack and `hosts[].rollout.maxUnavailable` of
any one host (a count, or a percentage of the kubelets of the stack or of the host, rounded down
and at least 1, as Kubernetes scales a DaemonSet's). Hosts take turns, so that `maxUnavailable: 2` restarts one NUMA node of two
hosts at once rather than both NUMA nodes of one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .config import HostSpec, StackConfig


@dataclass(frozen=True)
class RolloutPolicy:
    """max_unavailable None: no limit (the stack has no cluster and sets none)."""

    max_unavailable: int | None = None
    drain: bool = False


NOT_LIMITED = RolloutPolicy()  # what a stack without a cluster and without `rollout` gets


def scaled_max_unavailable(value: int | str, governed: int) -> int:
    """A count as it is; a percentage ("10%") of the `governed` kubelets rounded down, at least 1:
    Kubernetes' intstr.GetScaledValueFromIntOrPercent(roundUp=false), then at least one, as a
    DaemonSet's maxUnavailable is."""
    if isinstance(value, int):
        return value
    return max(1, int(value.removesuffix("%")) * governed // 100)


def rollout_policy(
    stack: StackConfig, stack_kubelets: int, host: HostSpec | None = None, host_kubelets: int = 0
) -> RolloutPolicy:
    """The stack's policy, or a host's: its own keys, else the stack's, else the defaults (with a
    cluster: one kubelet at a time, drained first; without: all at once, nothing to drain).
    A percentage is of the kubelets the level governs: the stack's (`stack_kubelets`) or the
    host's (`host_kubelets`); a host without its own limit keeps the stack's."""
    joined = stack.cluster is not None
    stack_limit = (
        scaled_max_unavailable(stack.rollout.max_unavailable, stack_kubelets)
        if stack.rollout.max_unavailable is not None
        else (1 if joined else None)
    )
    stack_drain = stack.rollout.drain if stack.rollout.drain is not None else joined
    if host is None:
        return RolloutPolicy(stack_limit, stack_drain)
    own = host.rollout
    return RolloutPolicy(
        scaled_max_unavailable(own.max_unavailable, host_kubelets) if own.max_unavailable is not None else stack_limit,
        own.drain if own.drain is not None else stack_drain,
    )


@dataclass(frozen=True)
class RolloutKubelet:
    """One kubelet as the rollout sees it: its Node name, its host and its restart revision."""

    node_name: str
    host: str
    revision: str


def restarting(kubelets: Sequence[RolloutKubelet], previous: Mapping[str, str] | None) -> list[RolloutKubelet]:
    """The kubelets this change restarts, in stack order. `previous`: node name -> revision as the
    last successful update left them (None: the stack was never updated: nothing restarts)."""
    if not previous:
        return []
    return [k for k in kubelets if k.node_name in previous and previous[k.node_name] != k.revision]


def restart_batches(
    kubelets: Sequence[RolloutKubelet],
    previous: Mapping[str, str] | None,
    stack: RolloutPolicy,
    hosts: Mapping[str, RolloutPolicy],
) -> list[list[str]]:
    """The ordered batches of node names to restart (empty when nothing restarts)."""
    pending = _hosts_taking_turns(restarting(kubelets, previous))
    batches: list[list[str]] = []
    while pending:
        batch: list[RolloutKubelet] = []
        per_host: dict[str, int] = {}
        for kubelet in pending:
            if stack.max_unavailable is not None and len(batch) >= stack.max_unavailable:
                break
            host_limit = hosts[kubelet.host].max_unavailable if kubelet.host in hosts else None
            if host_limit is not None and per_host.get(kubelet.host, 0) >= host_limit:
                continue
            batch.append(kubelet)
            per_host[kubelet.host] = per_host.get(kubelet.host, 0) + 1
        batches.append([k.node_name for k in batch])
        pending = [k for k in pending if k not in batch]
    return batches


def _hosts_taking_turns(kubelets: Sequence[RolloutKubelet]) -> list[RolloutKubelet]:
    """The first restarting kubelet of every host (hosts in stack order), then the second, ..."""
    position: dict[str, int] = {}
    host_order: dict[str, int] = {}
    keyed = []
    for kubelet in kubelets:
        host_order.setdefault(kubelet.host, len(host_order))
        turn = position.get(kubelet.host, 0)
        position[kubelet.host] = turn + 1
        keyed.append(((turn, host_order[kubelet.host]), kubelet))
    return [kubelet for _, kubelet in sorted(keyed, key=lambda item: item[0])]


def waits_for(batches: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    """node name -> the node names whose restart must be over before its own starts (the whole
    previous batch); kubelets in the first batch or not restarting wait for nobody."""
    return {name: list(batches[index - 1]) for index in range(1, len(batches)) for name in batches[index]}
