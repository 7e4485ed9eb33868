"""A kubelet's restart revision: changes exactly when applying the stack restarts that kubelet.

The apply scripts restart a unit when a file they install for it changes (scripts.write_file
marks it pending), so the revision is a digest of those files: the slice unit, the namespace's
files, containerd's and the kubelet's. Labels (set through the API) and taints (a drop-in the
kubelet reads only at registration) are in none of them, so changing them restarts nothing
and drains nothing. The program's own script text is not part of it: a new numa-kubelets
release that installs the same files restarts nothing either.
"""

from __future__ import annotations

import hashlib

from .plan import KubeletPlan, Plan
from .render import HostFile, containerd_files, kubelet_files, netns_files, slice_unit

REVISION_LENGTH = 16  # hex digits: short enough to read in a preview diff


def restart_files(kubelet: KubeletPlan, plan: Plan) -> list[HostFile]:
    """The files whose change restarts the kubelet or what it runs in. `plan` has its cluster DNS
    resolved (components/cluster.py), as for the kubelet's own scripts."""
    files = [slice_unit(kubelet)]
    if kubelet.network is not None:
        files += netns_files(kubelet.network)
    files += containerd_files(kubelet, plan)
    files += kubelet_files(kubelet, plan)
    return files


def restart_revision(kubelet: KubeletPlan, plan: Plan) -> str:
    digest = hashlib.sha256()
    for file in restart_files(kubelet, plan):
        for part in (file.path, file.mode, file.content):
            digest.update(part.encode())
            digest.update(b"\0")
    return digest.hexdigest()[:REVISION_LENGTH]
