"""The real Pulumi CLI and provider plugins that `make tools` builds (tools/build.sh), offline.

The same settings as tools/pulumi-env.sh: plugins come only from the plugin cache in
.tools/pulumi-home, at exact versions, and a missing one is an error, never a download.
NUMA_KUBELETS_PULUMI_HOME names another PULUMI_HOME whose plugin cache the tests use instead:
e.g. one holding the real pulumi-command and pulumi-random, to run the conformance suites
(tests/e2e/test_command_plugin.py, test_random_plugin.py) against them rather than the doubles.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS_BIN = REPO / ".tools" / "bin"
PULUMI_HOME = Path(os.environ.get("NUMA_KUBELETS_PULUMI_HOME") or REPO / ".tools" / "pulumi-home").resolve()
# A test passphrase for the stacks' secrets: the state is a throwaway local directory.
TEST_PASSPHRASE = "numa-kubelets-e2e"


class ToolMissing(AssertionError):
    """A real tool is not built: the test fails (it does not skip)."""


# The program families in the order tools/build.sh builds them by default (a unit test checks
# they agree). Under tests/run.sh the build runs beside the tests, so the tests that need a
# family are ordered by it (`pytest.mark.realtools(family)`, the last family they need) and
# wait in `wait_until_built` for what is not there yet.
BUILD_ORDER = (
    "pulumi",
    "kubelet",
    "kubernetes",
    "etcd",
    "generic_device_plugin",
    "kubelet_previous",
    "pulumi_kubernetes",
)
# What tools/build.sh has finished in this run, one program name per line; and, once it ended,
# its exit code and duration (both written beside it by tools/build-in-background.sh).
READY_LIST = REPO / ".tools" / "ready"
BUILD_EXIT = REPO / ".tools" / "build.exit"
# Seconds the tests spent waiting for the build, per program (reported at the end of a run).
WAITED: dict[str, float] = {}
BUILD_SCRIPT = REPO / "tools" / "build.sh"


def announced_programs(script: Path = BUILD_SCRIPT) -> frozenset[str]:
    """The program names tools/build.sh lists as built (its `ready NAME...` lines)."""
    lines = re.findall(r"^\s*ready (.+)$", script.read_text(), re.MULTILINE)
    return frozenset(name for line in lines for name in line.split())


def wait_until_built(name: str) -> None:
    """Returns once tools/build.sh has built `name` or ended, when tests/run.sh runs it beside
    the tests (NUMA_KUBELETS_TOOLS_BUILDING); at once otherwise. A failed build fails here, and
    so does a name the build never lists (it would wait for the whole build, then fail)."""
    if name not in (announced := announced_programs()):
        raise ToolMissing(f"tools/build.sh builds no program {name!r}; it lists: {', '.join(sorted(announced))}")
    _wait_for_the_build(name, lambda: is_built(name))


def is_built(name: str) -> bool:
    """Whether tools/build.sh, running beside the tests, has listed `name` as built in this run."""
    return READY_LIST.exists() and name in READY_LIST.read_text().split()


def wait_until_the_build_ended() -> None:
    """Returns once tools/build.sh has ended, when tests/run.sh runs it beside the tests; at once
    otherwise. A failed build fails here. For the tests marked `after_the_build` (tests/conftest.py)."""
    _wait_for_the_build("everything", lambda: False)


def the_build_is_running() -> bool:
    """True while tools/build.sh runs beside the tests (tests/run.sh) and has not ended."""
    return bool(os.environ.get("NUMA_KUBELETS_TOOLS_BUILDING")) and not BUILD_EXIT.exists()


def _wait_for_the_build(what: str, built: Callable[[], bool]) -> None:
    """Waits until `built()` or the build's end (a failed build fails), and counts the wait."""
    if not os.environ.get("NUMA_KUBELETS_TOOLS_BUILDING"):
        return
    started = time.monotonic()
    while not built():
        if BUILD_EXIT.exists():
            code = BUILD_EXIT.read_text().split()[0]
            if code != "0":
                raise ToolMissing(f"tools/build.sh failed (exit {code}) before it built {what}: see .tools/build.log")
            break  # it ended: the caller finds the program, or says that it is missing
        time.sleep(2)
    if (waited := time.monotonic() - started) >= 1:
        WAITED[what] = WAITED.get(what, 0.0) + waited


def cli_version() -> str:
    """The CLI release tools/pulumi/go.mod builds, e.g. v3.274.1."""
    go_mod = (REPO / "tools" / "pulumi" / "go.mod").read_text()
    found = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3 (v\S+)", go_mod, re.MULTILINE)
    assert found, "tools/pulumi/go.mod requires no github.com/pulumi/pulumi/pkg/v3"
    return found.group(1)


def pins() -> dict[str, str]:
    """The exact versions constraints.txt pins (package name -> version)."""
    lines = (REPO / "constraints.txt").read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def require(*names: str) -> None:
    """Fails with how to build them when a real tool or plugin is missing."""
    for name in names:
        wait_until_built(name)
    missing = [name for name in names if not (TOOLS_BIN / name).is_file()]
    if missing:
        raise ToolMissing(f"not built: {', '.join(missing)} in {TOOLS_BIN}; run `make tools`")


def require_plugin(name: str, version: str) -> None:
    """Fails when the plugin cache lacks a provider at exactly this version."""
    wait_until_built(f"pulumi-resource-{name}")  # tools/build.sh installs it into the cache first
    plugin = PULUMI_HOME / "plugins" / f"resource-{name}-v{version}" / f"pulumi-resource-{name}"
    if not plugin.is_file():
        raise ToolMissing(f"plugin {name} {version} is not in {PULUMI_HOME}; run `make tools`")


def pulumi_env(state_dir: Path, pulumi_home: Path = PULUMI_HOME) -> dict[str, str]:
    """The environment for the real CLI: offline, a local file backend in state_dir."""
    env = dict(os.environ)
    # Drop an outer Pulumi setup (a token, another backend or home) that could reach out.
    for key in list(env):
        if key.startswith("PULUMI_"):
            del env[key]
    env.update(
        PATH=f"{TOOLS_BIN}{os.pathsep}{env.get('PATH', '')}",
        PULUMI_HOME=str(pulumi_home),
        PULUMI_SKIP_UPDATE_CHECK="true",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
        PULUMI_DISABLE_REGISTRY_RESOLVE="true",
        # .tools/bin holds the built providers too: the plugin cache's exact version or
        # nothing. The bundled Python launchers are still found next to `pulumi`.
        PULUMI_IGNORE_AMBIENT_PLUGINS="true",
        # The Python of the program and its dynamic providers: this venv's. The built language
        # host (v3.68.0) predates the CLI handing it the project's virtualenv option and takes
        # its interpreter from here, as pulumi-resource-pulumi-python does (tools/pulumi-env.sh).
        PULUMI_PYTHON_CMD=sys.executable,
        PULUMI_BACKEND_URL=f"file://{state_dir}",
        PULUMI_CONFIG_PASSPHRASE=TEST_PASSPHRASE,
        # The program's own tooling skips the engine's per-step checkpoints (docs/fleets.md
        # "PULUMI_SKIP_CHECKPOINTS=true": a preview's are thrown away; an up's only matter to a CLI that dies midway).
        PULUMI_SKIP_CHECKPOINTS="true",
    )
    return env


# The program as `pulumi up` of this directory runs it: the project file, the program and its
# packages. Stack files are the caller's (`stack init` and `config set` write them).
PROJECT_FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt")
PROJECT_PACKAGES = ("components", "numa_kubelets")


def copy_project(directory: Path, *stack_files: str) -> Path:
    """A copy of this repository's project in `directory` (made), with the named stack files and
    this venv as its `.venv`: the CLI writes into stack files, which must not touch the checkout."""
    directory.mkdir(parents=True)
    for name in (*PROJECT_FILES, *stack_files):
        shutil.copy2(REPO / name, directory / name)
    for package in PROJECT_PACKAGES:
        shutil.copytree(REPO / package, directory / package, ignore=shutil.ignore_patterns("__pycache__"))
    (directory / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return directory


def pulumi_cli(
    env: dict[str, str], cwd: Path, *args: str, stdin: str = "", timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """One command of the built CLI as a user types it (non-interactive: no prompt to answer); a
    secret only ever on stdin. The caller judges the exit code."""
    return subprocess.run(
        [str(TOOLS_BIN / "pulumi"), "--non-interactive", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
