"""Issue 45, item 7 under the real engine: the mistakes users make first read as one message.

For each, `pulumi up` with the built CLI v3.274.1, its Python language host v3.68.0 and the
plugin cache of `make tools` (the conformant double of pulumi-command, which words a failed
command's error as the real plugin does) fails, and its whole output holds the program's
message (or the engine's one line), no Python traceback, no line of the preflight script, and
fits on a screen (SCREEN lines). docs/operations.md lists each message.

The host side runs against a real OpenSSH server on loopback (tests/e2e/sshd.py: Debian's sshd,
an unprivileged login user). The preflight then runs ON THIS MACHINE as that user: it only reads
(sysfs, `--version` of binaries). Nothing else may ever run here, so every `up` targets the
preflight alone (`--target`, with its NumaHost component), and the preflight fails in each test.
The stack's user is not root, so the program sends `sudo -n /bin/sh -s`: the login user's PATH
(sshd's SetEnv) finds a stand-in `sudo` that runs the command as that same unprivileged user.

1. a topology that differs from the host: this machine's own, with one CPU more on its last node;
2. an unreachable host: a closed loopback port (the engine's one line, after the dial retries);
3. a wrongly keyed host: a pinned hostKey that is not the sshd's;
4. a missing kubelet or containerd binary: kubeletPath / containerdPath where nothing is;
5. an API server that cannot be reached, and 6. a refused bootstrap token: the cluster side alone
   (as tests/e2e/test_engine_findings.py targets it; its helpers and fixtures): the credential's
   server a closed port; the session's control plane, which knows no such token.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from numa_kubelets import cluster
from numa_kubelets.config import load_config
from numa_kubelets.cpulist import CpuSet
from numa_kubelets.plan import build_plan
from numa_kubelets.scripts import preflight_scripts
from tests import realtools
from tests.e2e.sshd import generate_key, login_user, sshd_directory, start_sshd
from tests.e2e.test_engine_findings import (  # noqa: F401  (engine_env, project: fixtures)
    PREFLIGHT,
    PROJECT,
    SSH_KEY,
    TOKEN,
    cluster_side,
    cluster_stack,
    diagnostics,
    engine_env,
    example_ca,
    init_stack,
    output_of,
    project,
    set_config,
    token_kubeconfig,
)
from tests.realcluster.clients import closed_loopback_port
from tests.realcluster.controlplane import ControlPlane, inline_kubeconfig

# The CLI, its language host and the plugin doubles; a stack without a cluster loads no
# kubernetes provider. The API server's cases need the kubernetes provider (their own marks).
pytestmark = pytest.mark.realtools("pulumi")

SCREEN = 40  # lines: what `pulumi up` prints for one mistake, all of it
HOST = "numa-a"
MISSING = "/nonexistent/numa-kubelets-e2e"


# ---------------------------------------------------------------- the engine and the host


@pytest.fixture
def host_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI's offline environment for a stack without a cluster (no kubernetes provider)."""
    realtools.require("pulumi", "pulumi-language-python", "pulumi-resource-pulumi-python")
    realtools.require_plugin("command", realtools.pins()["pulumi-command"])
    state = tmp_path / "state"
    state.mkdir()
    for key in [key for key in os.environ if key.startswith("PULUMI_")]:
        monkeypatch.delenv(key)
    return realtools.pulumi_env(state)


@dataclass(frozen=True)
class Sshd:
    user: str
    port: int
    identity: Path
    host_key: str  # `<type> <base64>`, as hostKey pins it
    other_key: str  # a host key this server does not have


# What the login user finds as `sudo`: runs the command as that user itself (no privilege).
STAND_IN_SUDO = (
    '#!/bin/sh\n# the tests\' stand-in for passwordless sudo: no privilege\n[ "$1" = -n ] && shift\nexec "$@"\n'
)


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    with sshd_directory("numa-kubelets-errors-sshd-") as directory:
        other_key = generate_key(directory.path / "other_host_key")
        # The login user runs the stand-in sudo from here.
        bin_dir = directory.path / "bin"
        bin_dir.mkdir(mode=0o755)
        (bin_dir / "sudo").write_text(STAND_IN_SUDO)
        (bin_dir / "sudo").chmod(0o755)
        process, port = start_sshd(directory.path, "errors", (), extra_lines=[f"SetEnv PATH={bin_dir}:/usr/bin:/bin"])
        try:
            yield Sshd(
                login_user().pw_name,
                port,
                directory.client_key,
                directory.host_key,
                " ".join(other_key.split()[:2]),
            )
        finally:
            process.terminate()
            process.wait(timeout=10)


def this_machine() -> list[dict[str, Any]]:
    """This machine's NUMA nodes as discover reads them (no SSH)."""
    result = subprocess.run(
        [sys.executable, "-m", "numa_kubelets.discover"],
        cwd=realtools.REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    nodes: list[dict[str, Any]] = yaml.safe_load(result.stdout)["numaNodes"]
    return nodes


def host_stack(sshd: Sshd, numa_nodes: list[dict[str, Any]], port: int | None = None, **keys: Any) -> dict[str, Any]:
    host = {
        "name": HOST,
        "address": "127.0.0.1",
        "sshPort": port or sshd.port,
        "user": sshd.user,
        "hostKey": keys.pop("hostKey", sshd.host_key),
        "numaNodes": numa_nodes,
    }
    return {"hosts": [host], "sshPrivateKeyPath": str(sshd.identity), **keys}


def preflight_lines(stack: dict[str, Any]) -> list[str]:
    """Distinctive lines of the stack's preflight script: any of them in the output would be a copy
    of the script (pulumi-command's error quotes the command line, escaping `"`, `\\` and newlines,
    so lines with neither quote nor backslash appear in it as they are)."""
    config = load_config({key: value for key, value in stack.items() if key != "sshPrivateKeyPath"})
    plan = build_plan(config)
    script = preflight_scripts(plan.hosts[0], plan).stdin
    assert script is not None
    lines = [line.strip() for line in script.splitlines()]
    distinctive = [line for line in lines if len(line) >= 20 and '"' not in line and "\\" not in line]
    assert len(distinctive) >= 5, distinctive
    return distinctive


def preflight_only(stack_name: str) -> list[str]:
    """`--target` of the host's preflight command and its component: nothing else runs here."""
    prefix = f"urn:pulumi:{stack_name}::{PROJECT}::"
    host = "numa-kubelets:index:NumaHost"
    return [
        "--target",
        f"{prefix}{host}::{HOST}",
        "--target",
        f"{prefix}{host}$command:remote:Command::{HOST}-preflight",
    ]


def failed_up(env: dict[str, str], project: Path, stack: dict[str, Any]) -> str:  # noqa: F811
    """`pulumi up` of the preflight alone, which must fail; its whole output."""
    name = f"errors-{uuid.uuid4().hex[:6]}"
    init_stack(env, project, name, stack)
    result = realtools.pulumi_cli(env, project, "up", "--yes", *preflight_only(name))
    shown = output_of(result)
    assert result.returncode != 0, shown
    state = yaml.safe_load(realtools.pulumi_cli(env, project, "stack", "export").stdout)
    commands = [r for r in state["deployment"].get("resources") or [] if r["type"].startswith("command:")]
    assert commands == [], "a command succeeded: " + str(commands)
    return shown


def error_output(shown: str) -> list[str]:
    """What the CLI prints once the update failed: its last Diagnostics section, the resource
    counts and the duration (before it: the preview and the update's progress lines)."""
    lines = shown.splitlines()
    return lines[max(index for index, line in enumerate(lines) if line == "Diagnostics:") :]


def assert_one_message(shown: str, message: str, script_lines: Sequence[str] = ()) -> None:
    """In the whole output: the message, no traceback, no line of the script; the error output
    (error_output) on a screen."""
    errors = error_output(shown)
    assert message in "\n".join(errors), shown
    assert "Traceback" not in shown and "KeyboardInterrupt" not in shown, shown
    copied = [line for line in script_lines if line in shown]
    assert not copied, f"the output copies the preflight script ({copied[:3]}):\n{shown}"
    assert "# numa-kubelets: preflight of host" not in shown, shown
    assert len(errors) <= SCREEN, f"{len(errors)} lines, more than a screen:\n{shown}"


# ---------------------------------------------------------------- 1-4: the host


def test_a_topology_that_differs_from_the_host(host_env: dict[str, str], project: Path, sshd: Sshd) -> None:  # noqa: F811
    nodes = this_machine()
    last = nodes[-1]
    actual = CpuSet.parse(last["cpus"])
    extra = max(max(CpuSet.parse(node["cpus"])) for node in nodes) + 1
    declared = CpuSet.parse(f"{last['cpus']},{extra}")
    stack = host_stack(sshd, [*nodes[:-1], {"id": last["id"], "cpus": declared.format()}])

    shown = failed_up(host_env, project, stack)

    assert_one_message(
        shown,
        f"NUMA node {last['id']} has cpus '{actual.format()}' on the host, "
        f"the configuration declares '{declared.format()}'",
        preflight_lines(stack),
    )
    assert f"numa-kubelets preflight failed on host {HOST}:" in shown, shown
    assert 'running "sudo -n /bin/sh -s"' in shown, shown


def test_an_unreachable_host(host_env: dict[str, str], project: Path, sshd: Sshd) -> None:  # noqa: F811
    port = closed_loopback_port()
    stack = host_stack(sshd, this_machine(), port=port)

    shown = failed_up(host_env, project, stack)

    assert_one_message(shown, f"dial tcp 127.0.0.1:{port}: connect: connection refused", preflight_lines(stack))


def test_a_wrongly_keyed_host(host_env: dict[str, str], project: Path, sshd: Sshd) -> None:  # noqa: F811
    stack = host_stack(sshd, this_machine(), hostKey=sshd.other_key)

    shown = failed_up(host_env, project, stack)

    assert_one_message(shown, "ssh: handshake failed: ssh: host key mismatch", preflight_lines(stack))


@pytest.mark.parametrize("key", ["kubeletPath", "containerdPath"])
def test_a_missing_binary(host_env: dict[str, str], project: Path, sshd: Sshd, key: str) -> None:  # noqa: F811
    path = f"{MISSING}/{key.removesuffix('Path')}"
    stack = host_stack(sshd, this_machine(), **{key: path})

    shown = failed_up(host_env, project, stack)

    assert_one_message(shown, f"{path} is missing or not executable", preflight_lines(stack))


# ---------------------------------------------------------------- 5-6: the API server


def failed_cluster_side(env: dict[str, str], project: Path, server: str, ca_pem: str, credential: str) -> str:  # noqa: F811
    """`pulumi up` of the cluster side alone (no host is contacted), with a configured token."""
    name = f"errors-{uuid.uuid4().hex[:6]}"
    init_stack(env, project, name, cluster_stack(server, ca_pem))
    set_config(env, project, "kubeconfig", credential, secret=True)
    set_config(env, project, "sshPrivateKey", SSH_KEY, secret=True)
    set_config(env, project, "bootstrapToken", TOKEN, secret=True)
    result = realtools.pulumi_cli(env, project, "up", "--yes", *cluster_side(name))
    shown = output_of(result)
    assert result.returncode != 0, shown
    assert TOKEN not in shown
    return shown


@pytest.mark.realtools("pulumi_kubernetes")
def test_an_api_server_that_cannot_be_reached(engine_env: dict[str, str], project: Path) -> None:  # noqa: F811
    server = f"https://127.0.0.1:{closed_loopback_port()}"

    shown = failed_cluster_side(engine_env, project, server, example_ca(), token_kubeconfig(server))

    message = (
        f"error: cluster preflight: cannot reach the Kubernetes API at {server}: connection refused; "
        f"check {PROJECT}:kubeconfig"
    )
    assert diagnostics(shown, f"{PREFLIGHT} (cluster-preflight)") == [message], shown
    assert_one_message(shown, message)


@pytest.mark.realtools("pulumi_kubernetes")
def test_a_refused_bootstrap_token(engine_env: dict[str, str], project: Path, control_plane: ControlPlane) -> None:  # noqa: F811
    credential = inline_kubeconfig(control_plane.admin_kubeconfig)
    # cluster.server, the kubelets' address, is not where the preflight goes: the credential's is.
    server = f"https://127.0.0.1:{closed_loopback_port()}"

    shown = failed_cluster_side(engine_env, project, server, control_plane.ca_pem, credential)

    message = f"error: {cluster.token_does_not_authenticate_message(401)}"
    assert diagnostics(shown, f"{PREFLIGHT} (cluster-preflight)") == [message], shown
    assert_one_message(shown, message)
