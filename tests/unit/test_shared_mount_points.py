"""The directories every instance binds its own on, in its own mount namespace, go with the last
instance only (scripts._when_last_instance), run for real.

Why it matters: Linux detaches the mounts on a directory that is removed in another mount
namespace. Each containerd@'s launcher binds its own run directory on /run/containerd, each
kubelet@'s its device plugins directory on /var/lib/kubelet/device-plugins; a removal that took
either directory while another instance ran took that instance's mount with it (seen under the
real engine: the other runtime's shims lost their runc state and a pod never stopped).

Each case runs in a sandbox (`unshare --mount --propagation private`) with /etc/systemd/system
and /run on tmpfs mounts of its own: nothing of this machine's units or /run is touched.
"""

from __future__ import annotations

import subprocess

import pytest

from numa_kubelets.plan import SHARED_CONTAINERD_RUN, SHARED_DEVICE_PLUGINS_DIR
from numa_kubelets.scripts import _when_last_instance, containerd_scripts, kubelet_scripts
from tests.unit.builders import origin_config, plan_of
from tests.unit.test_scripts import tool

SANDBOX = ["unshare", "--mount", "--propagation", "private"]
CASES = {"containerd": SHARED_CONTAINERD_RUN, "kubelet": SHARED_DEVICE_PLUGINS_DIR}


def shared_directory_left(kind: str, other_instances: list[str]) -> bool:
    """Whether `kind`'s shared directory is still there after the step ran, with the unit files of
    `other_instances` (e.g. ["numa1"]) still on the host."""
    directory = CASES[kind]
    script = (
        "set -e\n"
        "mount -t tmpfs sandbox /etc/systemd/system\n"
        "mount -t tmpfs sandbox /run\n"
        f"mkdir -p {directory}\n"
        + "".join(f"touch /etc/systemd/system/{kind}@{instance}.service\n" for instance in other_instances)
        + "set +e\n"
        + _when_last_instance(kind, f"rmdir {directory} 2>/dev/null || true\n")
        + f"[ -d {directory} ] && echo left || echo gone\n"
    )
    result = subprocess.run(
        [*SANDBOX, tool("dash"), "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip() == "left"


@pytest.mark.parametrize("kind", CASES)
def test_the_shared_directory_stays_while_another_instance_is_on_the_host(kind):
    assert shared_directory_left(kind, ["numa1"])
    assert not shared_directory_left(kind, [])


def rmdirs_of(script: str, directory: str, guard: str) -> list[bool]:
    """For each `rmdir` of `directory` in `script`: whether it is inside a block opened by `guard`."""
    found, inside = [], False
    for line in script.splitlines():
        if line == guard:
            inside = True
        elif line == "fi":  # a top-level block's end (nested ones are indented)
            inside = False
        elif line.lstrip().startswith("rmdir ") and directory in line.split():
            found.append(inside)
    return found


def test_no_removal_takes_a_shared_directory_outside_the_last_instance_step():
    plan = plan_of(origin_config())
    host = plan.hosts[0]
    for kubelet in plan.kubelets:
        for kind, script in (
            ("containerd", containerd_scripts(host, kubelet, plan).delete),
            ("kubelet", kubelet_scripts(host, kubelet, plan).delete),
        ):
            guard = f"if ! ls /etc/systemd/system/{kind}@numa*.service >/dev/null 2>&1; then"
            assert rmdirs_of(script, CASES[kind], guard) == [True], (kind, kubelet.node_name)
