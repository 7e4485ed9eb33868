"""The stack's one Kubernetes provider: every Kubernetes resource names it explicitly."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


def kubernetes_provider(kubeconfig: pulumi.Output[str] | None) -> k8s.Provider:
    """From the stack's `kubeconfig` secret; without one, the ambient KUBECONFIG (and its current context).

    An explicit provider keeps the demo from landing in whatever cluster the default provider
    would pick up from the environment when the secret is set.
    """
    return k8s.Provider("cluster", kubeconfig=kubeconfig)
