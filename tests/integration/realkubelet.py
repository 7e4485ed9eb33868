"""The real kubelet (built by `make tools`) in the emulated guest: installing it, waiting for it,
and what to show when it does not come up. Shared by the standalone and the cluster modules."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tests.integration.conftest import Stopwatch
from tests.integration.hostcheck import HostView
from tests.realcluster.controlplane import tool

q = shlex.quote

# Not the image's /usr/bin/kubelet: the stand-in stays there for the other scenarios.
GUEST_KUBELET = "/usr/local/bin/kubelet"
# TCG is slow: a kubelet needs tens of seconds to start, a pod as long again.
KUBELET_START_TIMEOUT = 240.0
POD_START_TIMEOUT = 300.0


def install_real_kubelet(view: HostView) -> str:
    """Copy the built kubelet into the guest at GUEST_KUBELET (atomically); returns its version."""
    binary = tool("kubelet")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    with Stopwatch("real kubelet: copy the 145 MB binary into the guest over SSH"):
        view.host.run(
            f"mkdir -p {q(GUEST_KUBELET.rsplit('/', 1)[0])} && cat > {q(GUEST_KUBELET)}.tmp && "
            f"chmod 0755 {q(GUEST_KUBELET)}.tmp && mv -f {q(GUEST_KUBELET)}.tmp {q(GUEST_KUBELET)}",
            stdin=binary.read_bytes(),
        )
    assert view.sh(f"{q(GUEST_KUBELET)} --version") == version
    return version


def kubelet_journal(view: HostView, numa: int, lines: int = 60) -> str:
    unit = f"kubelet@numa{numa}.service"
    result = view.host.run(
        f"systemctl status --no-pager {unit} | head -n 12; journalctl --no-pager -u {unit} -n {lines}", check=False
    )
    return f"--- {unit}\n{result.stdout}{result.stderr}"


def wait_for(what: str, check: Callable[[], Any], timeout: float, diagnose: Callable[[], str]) -> Any:
    """Poll `check` until it returns something truthy; on timeout fail with `diagnose()`."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as error:  # not yet: the kubelet or containerd still starting
            last = error
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})\n{diagnose()}")
        time.sleep(2)


def write_atomically(view: HostView, path: str, content: str) -> None:
    """Written whole, then renamed: kubelets and containerd watch directories and skip dot files."""
    directory, name = path.rsplit("/", 1)
    temporary = f"{directory}/.{name}.tmp"
    view.host.run(f"mkdir -p {q(directory)} && cat > {q(temporary)} && mv -f {q(temporary)} {q(path)}", stdin=content)
