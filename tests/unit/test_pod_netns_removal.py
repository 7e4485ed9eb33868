"""The containerd removal's pod namespace step (scripts._remove_pod_netns), run for real.

Each case runs in a sandbox of its own (`unshare --net --mount --pid --fork --mount-proc`), whose
network namespace stands for the host's and whose PID 1 is its own: a "pod" namespace under
/var/run/netns with a veth to the sandbox, as the CNI bridge plugin leaves one. Nothing of this
machine's network is touched.
"""

from __future__ import annotations

import shlex
import subprocess

from numa_kubelets.scripts import _remove_pod_netns
from tests.unit.test_scripts import tool

SANDBOX = ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private"]
# /var/run/netns on a tmpfs of the sandbox's own; a pod namespace with a veth whose host end stays
# in the sandbox's namespace.
POD = (
    "set -e\n"
    "mkdir -p /run/netns && mount -t tmpfs sandbox /run/netns\n"
    "ip netns add cni-0a1b2c3d\n"
    "ip link add vethhost0 type veth peer name eth0 netns cni-0a1b2c3d\n"
    "ip link add pair-a type veth peer name pair-b\n"
    "set +e\n"
)
VETHS = "ip -o link show type veth | awk -F': ' '{sub(/@.*/, \"\", $2); print $2}' | sort | tr '\\n' ' '\n"


def run_in_sandbox(pod_netns: str) -> str:
    script = POD + f"pod_netns={shlex.quote(pod_netns)}\n" + _remove_pod_netns() + "echo veths: $(" + VETHS + ")\n"
    script += "ls /run/netns | tr '\\n' ' '; echo\n"
    result = subprocess.run(
        [*SANDBOX, tool("dash"), "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_pods_veth_goes_with_its_namespace_both_ends_at_once():
    veths, netns = run_in_sandbox(" /var/run/netns/cni-0a1b2c3d").splitlines()
    # The host end is gone when the step returns, not when the kernel frees the namespace.
    assert veths.split() == ["veths:", "pair-a", "pair-b"]
    assert netns.strip() == ""


def test_the_hosts_own_namespace_is_never_entered():
    veths, netns = run_in_sandbox("/proc/1/ns/net").splitlines()
    assert veths.split() == ["veths:", "pair-a", "pair-b", "vethhost0"]
    assert netns.split() == ["cni-0a1b2c3d"]
