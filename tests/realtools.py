"""The real Pulumi CLI and provider plugins that `make tools` builds (tools/build.sh), offline.

The same settings as tools/pulumi-env.sh: plugins come only from the plugin cache in
.tools/pulumi-home, at exact versions, and a missing one is an error, never a download.
"""

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS_BIN = REPO / ".tools" / "bin"
PULUMI_HOME = REPO / ".tools" / "pulumi-home"
# A test passphrase for the stacks' secrets: the state is a throwaway local directory.
TEST_PASSPHRASE = "numa-kubelets-e2e"


class ToolMissing(AssertionError):
    """A real tool is not built: the test fails (it does not skip)."""


def check_not_pending() -> None:
    """tests/run.sh runs the tests that need no built program while tools/build.sh still runs:
    one that asks for a tool then fails at once, instead of finding a half-built set by luck."""
    if os.environ.get("NUMA_KUBELETS_TOOLS_PENDING"):
        raise ToolMissing(
            "this test asks for a program `make tools` builds, but runs before the build is done "
            "(tests/run.sh): mark its module `pytestmark = pytest.mark.realtools`"
        )


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
    check_not_pending()
    missing = [name for name in names if not (TOOLS_BIN / name).is_file()]
    if missing:
        raise ToolMissing(f"not built: {', '.join(missing)} in {TOOLS_BIN}; run `make tools`")


def require_plugin(name: str, version: str) -> None:
    """Fails when the plugin cache lacks a provider at exactly this version."""
    check_not_pending()
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
        # The Python of dynamic providers (pulumi-resource-pulumi-python): this venv's. A
        # language host would pass the project's virtualenv option, but none is built.
        PULUMI_PYTHON_CMD=sys.executable,
        PULUMI_BACKEND_URL=f"file://{state_dir}",
        PULUMI_CONFIG_PASSPHRASE=TEST_PASSPHRASE,
    )
    return env
