"""The Quick start of docs/getting-started.md, run as written, under the real engine against the emulated origin machine.

`make testhost` boots the origin machine (2 NUMA nodes, CPUs 0-3 and 4-7) on 127.0.0.1:2222 with
the built kubelet at the dev stack's kubeletPath; this test takes the session's origin machine,
booted the same way (tests/testhost/fixtures.py numa_host), then runs the Quick
start's commands with the built CLI, its Python language host and the plugin cache of
`make tools`, in the environment `. tools/pulumi-env.sh` makes, as the docs say:
`pulumi stack init dev`, `pulumi preview --diff`, `pulumi up`,
`pulumi preview --expect-no-changes`, `pulumi destroy`, in a copy of this repository's project
(Pulumi.yaml, Pulumi.dev.yaml and the program, byte for byte: `stack init` writes the passphrase's
salt into the stack file, which must not touch the checkout). It checks the machine after `up`
and after `destroy` as the real-host tier does.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import realtools
from tests.integration.hostcheck import DEV_STACK_CREATED_PATHS, DEV_STACK_UNITS, HostView
from tests.testhost.fixtures import ORIGIN_SSH_PORT
from tests.testhost.host import TestHost
from tests.testhost.image import Image

# The last family it needs: the kubelet, built after the engine (the CLI, its language host, the
# plugin doubles). A stack without a cluster loads no kubernetes provider.
pytestmark = pytest.mark.realtools("kubelet")

# Where Pulumi.dev.yaml points (and `make testhost` boots): the test must not choose another.
DEV_STACK_PORT = ORIGIN_SSH_PORT


@pytest.fixture(scope="module")
def origin_machine(numa_host: TestHost, origin_kubelet: str) -> TestHost:
    """The machine `make testhost` boots: the session's origin machine (tests/conftest.py), on the
    dev stack's port, with the built kubelet at the dev stack's kubeletPath. The tiers before this
    one left it as it was booted (each checks its destroy)."""
    assert numa_host.port == DEV_STACK_PORT, "Pulumi.dev.yaml points at another port"
    return numa_host


@pytest.fixture(scope="module")
def project(testhost_image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this repository's project, with its `.testhost` (the test host's login key, where
    Pulumi.dev.yaml's sshPrivateKeyPath looks) and `.venv`."""
    directory = realtools.copy_project(tmp_path_factory.mktemp("quick-start") / "numa-kubelets", "Pulumi.dev.yaml")
    (directory / ".testhost").symlink_to(testhost_image.key_path.parent, target_is_directory=True)
    assert (directory / ".testhost" / "id_ed25519").is_file(), "Pulumi.dev.yaml's key is not the test host's"
    return directory


def sourced_env(state: Path) -> dict[str, str]:
    """The environment `. tools/pulumi-env.sh` gives a user's shell, the Quick start's one extra step: run
    by bash here, with what a user sets beside it (a passphrase; this test's own state directory,
    which the script leaves alone when set; the plugin cache under test, when it is another)."""
    outer = {key: value for key, value in os.environ.items() if not key.startswith("PULUMI_")}
    outer.update(PULUMI_BACKEND_URL=f"file://{state}", PULUMI_CONFIG_PASSPHRASE=realtools.TEST_PASSPHRASE)
    script = f". {shlex.quote(str(realtools.REPO / 'tools/pulumi-env.sh'))} && env -0"
    printed = subprocess.run(["bash", "-c", script], env=outer, capture_output=True, text=True, check=True).stdout
    env = dict(item.split("=", 1) for item in printed.split("\0") if item)
    assert env["PULUMI_BACKEND_URL"] == f"file://{state}"
    env["PULUMI_HOME"] = str(realtools.PULUMI_HOME)  # NUMA_KUBELETS_PULUMI_HOME: the real plugins
    return env


def quick_start(env: dict[str, str], project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One command of the Quick start, as a user types it: `pulumi` found on the PATH the script set
    (non-interactive: no prompt to answer)."""
    pulumi = shutil.which("pulumi", path=env["PATH"])
    assert pulumi == str(realtools.TOOLS_BIN / "pulumi"), pulumi
    result = subprocess.run(
        [pulumi, "--non-interactive", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert result.returncode == 0, (
        f"pulumi {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result


def test_the_quick_start_runs_as_written(origin_machine: TestHost, project: Path, tmp_path: Path) -> None:
    realtools.require("pulumi", "pulumi-language-python")
    realtools.require_plugin("command", realtools.pins()["pulumi-command"])
    (tmp_path / "state").mkdir()
    env = sourced_env(tmp_path / "state")
    view = HostView(origin_machine)

    quick_start(env, project, "stack", "init", "dev")
    preview = quick_start(env, project, "preview", "--diff")
    # A fresh stack: every component and command to create, each script named by its first line.
    assert "numa-kubelets:index:NumaHost" in preview.stdout and "command:remote:Command" in preview.stdout
    assert "numa0.slice on host numa-a: CPUs 1-3, memory node 0" in preview.stdout, preview.stdout
    assert "numa1.slice on host numa-a: CPUs 5-7, memory node 1" in preview.stdout
    assert "+ 14 to create" in preview.stdout, preview.stdout
    assert not view.exists("/etc/systemd/system/numa0.slice"), "a preview changed the host"

    quick_start(env, project, "up", "--yes")
    assert (view.effective("numa0.slice", "cpus"), view.effective("numa0.slice", "mems")) == ("1-3", "0")
    assert (view.effective("numa1.slice", "cpus"), view.effective("numa1.slice", "mems")) == ("5-7", "1")
    assert view.process_status(1)["Cpus_allowed_list"] == "0,4"
    view.assert_runtimes_and_kubelets_confined({0: "1-3", 1: "5-7"})
    main_pids = {unit: view.main_pid(unit) for unit in DEV_STACK_UNITS}

    outputs = quick_start(env, project, "stack", "output", "hosts", "--json").stdout
    assert '"numa-a-numa0"' in outputs and '"numa-a-numa1"' in outputs

    # Applied and unchanged: the preview finds nothing to do, and nothing was restarted.
    quick_start(env, project, "preview", "--expect-no-changes")
    assert {unit: view.main_pid(unit) for unit in DEV_STACK_UNITS} == main_pids

    quick_start(env, project, "destroy", "--yes")
    for path in DEV_STACK_CREATED_PATHS:
        assert not view.exists(path), path
    assert view.sh("systemctl list-units --all --plain --no-legend 'kubelet@*' 'containerd@*' 'numa*.slice'") == ""
    for pid in (1, view.pid_of("sshd")):
        assert view.process_status(pid)["Cpus_allowed_list"] == "0-7"
