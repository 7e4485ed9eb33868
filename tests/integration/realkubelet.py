"""The real kubelet (built by `make tools`) in the emulated guest: installing it, waiting for it,
and what to show when it does not come up. Shared by the standalone and the cluster modules."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tests.integration.hostcheck import HostView
from tests.realcluster.controlplane import tool
from tests.testhost.host import GUEST_KUBELET
from tests.timings import Stopwatch

q = shlex.quote

# The test stacks' kubeletPath (the host image has no kubelet of its own).
# The previous minor's kubelet (tools/kubelet-previous), which the rolling upgrade starts from.
GUEST_KUBELET_PREVIOUS = "/usr/local/bin/kubelet-previous"
# What each test host OS ships (tests/testhost/recipe.py SUITES), as the preflight reports it.
RUNTIME_VERSIONS = {"bookworm": ("systemd 252", "containerd 1.6."), "trixie": ("systemd 257", "containerd 1.7.")}
# TCG is slow: a kubelet needs tens of seconds to start, a pod as long again.
KUBELET_START_TIMEOUT = 240.0
POD_START_TIMEOUT = 300.0


def install_built_program(view: HostView, name: str = "kubelet", guest_path: str = GUEST_KUBELET) -> str:
    """Copy the built program `name` (a kubelet, kube-proxy) into the guest at `guest_path`
    (atomically); returns its version."""
    binary = tool(name)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    with Stopwatch(f"copy the {binary.stat().st_size >> 20} MB {name} into the guest over SSH"):
        view.host.install_executable(binary, guest_path)
    assert view.sh(f"{q(guest_path)} --version") == version
    return version


def kubelet_journal(view: HostView, numa: int, lines: int = 60) -> str:
    unit = f"kubelet@numa{numa}.service"
    result = view.host.run(
        f"systemctl status --no-pager {unit} | head -n 12; journalctl --no-pager -u {unit} -n {lines}", check=False
    )
    return f"--- {unit}\n{result.stdout}{result.stderr}"


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, diagnose: Callable[[], str], interval: float = 2.0
) -> Any:
    """Poll `check` every `interval` seconds until it returns something truthy; on timeout fail with
    `diagnose()`. The 2 s default suits checks that run a command in the guest (each one is emulated
    CPU); a check that only reads the API server costs the guest nothing and can poll faster."""
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
        time.sleep(interval)


def write_atomically(view: HostView, path: str, content: str) -> None:
    """Written whole, then renamed: kubelets and containerd watch directories and skip dot files."""
    directory, name = path.rsplit("/", 1)
    temporary = f"{directory}/.{name}.tmp"
    view.host.run(f"mkdir -p {q(directory)} && cat > {q(temporary)} && mv -f {q(temporary)} {q(path)}", stdin=content)


@contextmanager
def pod_volume_mounted_by_the_kubelet(view: HostView, numa: int, content: str) -> Iterator[str]:
    """A tmpfs holding a file `content`, mounted from the running kubelet's mount namespace under
    its pods directory, as it mounts a pod's projected volume; yields the file's path. A running
    kubelet removes the directories of pods it does not know (its housekeeping, every 2 s), so the
    directory is made in the command that mounts it, again until the mount holds (it leaves a
    mount point alone)."""
    kubelet = view.main_pid(f"kubelet@numa{numa}.service")
    pod_dir = f"/var/lib/kubelet-numa{numa}/pods/probe"
    volume = f"{pod_dir}/volumes/token"
    mount = (
        f"for attempt in 1 2 3 4 5; do mkdir -p {q(volume)} && mount -t tmpfs tmpfs {q(volume)} && break; sleep 1; done; "
        f"mountpoint -q {q(volume)} && cat > {q(volume)}/token"
    )
    view.host.run(f"nsenter -t {kubelet} -m sh -c {q(mount)}", stdin=content)
    try:
        yield f"{volume}/token"
    finally:
        view.sh(f"umount {q(volume)}; rm -rf {q(pod_dir)}")


def check_preflight_report(host: Any, preflight: Mapping[str, Any], suite: str) -> str:
    """Runs the program's preflight command again (its inputs: `create`, the fixed command line,
    reads the script on `stdin`): it passes and names the OS's systemd, containerd and runc
    versions. Returns the versions it printed."""
    line = host.run(preflight["create"], stdin=preflight.get("stdin")).stdout.strip()
    assert line.startswith("numa-kubelets preflight passed on host "), line
    for fragment in (*RUNTIME_VERSIONS[suite], "runc 1."):
        assert fragment in line, line
    return line[line.index("(") :]


def configz(view: HostView, port: int, netns: str | None = None) -> dict[str, Any]:
    """The running kubelet's effective KubeletConfiguration (its file and drop-ins merged, its
    defaults applied; fields that are zero left out), from /configz on its own port, in network
    namespace `netns` (namespace mode) or the host's. Needs a stack that lets anonymous requests
    in (ANONYMOUS_ACCESS; without a cluster authorization is AlwaysAllow). HTTPS with the
    kubelet's self-signed serving certificate, so unverified."""
    script = (
        "python3 -c 'import ssl, sys, urllib.request; "
        "c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; "
        'print(urllib.request.urlopen("https://127.0.0.1:" + sys.argv[1] + "/configz", context=c, timeout=10)'
        f".read().decode())' {int(port)}"
    )
    return json.loads(view.sh(in_netns(netns, script)))["kubeletconfig"]


def healthz(view: HostView, port: int, netns: str | None = None) -> str:
    """What the kubelet's healthz endpoint on 127.0.0.1:`port` answers ("ok"), in network
    namespace `netns` or the host's; "" while nothing answers."""
    script = (
        "python3 -c 'import sys, urllib.request; "
        'print(urllib.request.urlopen("http://127.0.0.1:" + sys.argv[1] + "/healthz", timeout=5).read().decode())'
        f"' {int(port)}"
    )
    result = view.host.run(in_netns(netns, script), check=False)
    return result.stdout.strip() if result.rc == 0 else ""


def in_netns(netns: str | None, script: str) -> str:
    return script if netns is None else f"ip netns exec {q(netns)} {script}"


# The kubeletConfig that opens /configz to the tests of a standalone kubelet.
ANONYMOUS_ACCESS = {"authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}}}


def running_kubelet(
    view: HostView, numa: int, port: int, netns: str | None = None, timeout: float = KUBELET_START_TIMEOUT
) -> dict[str, Any]:
    """What the real kubelet@numa<N> runs with, once the unit's current main process is the one
    listening on `port` (in network namespace `netns`, or the host's): its `flags` (its command
    line's --name=value), its effective `config` (/configz) and its `pid`. The unit is
    Type=simple: `systemctl restart` returns before the new process serves."""
    unit = f"kubelet@numa{numa}.service"

    def read() -> dict[str, Any] | None:
        pid = view.main_pid(unit)
        listeners = view.host.run(in_netns(netns, f"ss -Hltnp 'sport = :{int(port)}'"), check=False).stdout
        if not pid or f"pid={pid}," not in listeners:
            return None
        arguments = view.sh(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()[1:]
        flags = dict(argument.removeprefix("--").split("=", 1) for argument in arguments)
        return {"pid": pid, "flags": flags, "config": configz(view, port, netns)}

    return wait_for(f"{unit} serving on port {port}", read, timeout, lambda: kubelet_journal(view, numa))
