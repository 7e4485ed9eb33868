"""End-to-end: the real Pulumi CLI, its Python language host and kubernetes provider of `make tools`, offline.

A tiny project in a temporary directory with a local file backend goes through stack init,
a secret config value, `pulumi preview --diff`, `pulumi up`, outputs, export and destroy, each
the CLI's own command line: the language host (`pulumi-language-python`, v3.68.0: docs/toolchain.md) runs the project's `__main__.py`. Its resources are the real
kubernetes provider in render mode (`renderYamlToDirectory`: manifests are written to a
directory, no cluster is needed) and a ConfigMap holding the secret. The remaining tests drive
the CLI through the Automation API's inline program (`pulumi preview --client=...`), which
needs no project file.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pulumi
import pulumi.dynamic
import pulumi_kubernetes as k8s
import pytest
from pulumi import automation as auto

from tests import realtools

pytestmark = pytest.mark.realtools(
    "pulumi_kubernetes"
)  # the Pulumi CLI and its kubernetes provider: built by tools/build.sh

SECRET = "e2e-plaintext-5f1c"


def pulumi_cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = realtools.pulumi_cli(env, cwd, *args, timeout=300)
    assert result.returncode == 0, f"pulumi {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result


@pytest.fixture
def offline_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI's environment; also this process's, which the Automation API passes on."""
    realtools.require("pulumi")
    env = realtools.pulumi_env(tmp_path / "state")
    (tmp_path / "state").mkdir()
    for key in [key for key in os.environ if key.startswith("PULUMI_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def write_project(directory: Path) -> None:
    directory.mkdir()
    # The runtime of `pulumi up` in this directory: this venv. The v3.68.0 language host takes
    # its interpreter from PULUMI_PYTHON_CMD (realtools.pulumi_env), as tools/pulumi-env.sh sets it.
    (directory / "Pulumi.yaml").write_text(
        f"name: e2e\nruntime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: {sys.prefix}\n"
    )


# What the language host runs as the project's program (`pulumi up` of the directory).
PROJECT_PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
token = config.require_secret("token")
provider = k8s.Provider("render", render_yaml_to_directory=config.require("renderDir"))
config_map = k8s.core.v1.ConfigMap(
    "greeting",
    metadata={"name": "greeting"},
    data={"greeting": "hi", "token": token},
    opts=pulumi.ResourceOptions(provider=provider),
)
# The whole data map is secret (it holds the token); the name is not.
pulumi.export("name", config_map.metadata["name"])
pulumi.export("token", token)
"""


def program(render_dir: Path) -> auto.PulumiFn:
    def run() -> None:
        token = pulumi.Config().require_secret("token")
        provider = k8s.Provider("render", render_yaml_to_directory=str(render_dir))
        k8s.core.v1.ConfigMap(
            "greeting",
            metadata={"name": "greeting"},
            data={"greeting": "hi", "token": token},
            opts=pulumi.ResourceOptions(provider=provider),
        )

    return run


def inline_stack(project: Path, render_dir: Path) -> auto.Stack:
    return auto.select_stack(
        "dev",
        project_name="e2e",
        program=program(render_dir),
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(project),
            pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent)),
        ),
    )


def rendered(render_dir: Path) -> Iterator[Path]:
    return render_dir.rglob("*.yaml") if render_dir.exists() else iter(())


def test_cli_is_the_built_release(offline_env: dict[str, str], tmp_path: Path) -> None:
    assert pulumi_cli(offline_env, tmp_path, "version").stdout.strip() == realtools.cli_version()


def test_plugins_in_the_cache_at_the_sdks_versions(offline_env: dict[str, str], tmp_path: Path) -> None:
    kubernetes = realtools.pins()["pulumi-kubernetes"]
    realtools.require_plugin("kubernetes", kubernetes)
    # The Python SDK in use asks for exactly the plugin that is there.
    assert version("pulumi_kubernetes") == kubernetes
    plugins = json.loads(pulumi_cli(offline_env, tmp_path, "plugin", "ls", "--json").stdout)
    assert {(p["kind"], p["name"], p["version"]) for p in plugins} >= {("resource", "kubernetes", kubernetes)}


def test_project_lifecycle_offline(offline_env: dict[str, str], tmp_path: Path) -> None:
    realtools.require("pulumi-language-python")
    realtools.require_plugin("kubernetes", realtools.pins()["pulumi-kubernetes"])
    project, render_dir = tmp_path / "project", tmp_path / "rendered"
    write_project(project)
    (project / "__main__.py").write_text(PROJECT_PROGRAM)
    pulumi_cli(offline_env, project, "stack", "init", "dev")
    pulumi_cli(offline_env, project, "config", "set", "--secret", "token", SECRET)
    pulumi_cli(offline_env, project, "config", "set", "renderDir", str(render_dir))
    assert SECRET not in (project / "Pulumi.dev.yaml").read_text()

    preview = pulumi_cli(offline_env, project, "preview", "--diff")
    assert "+ 3 to create" in preview.stdout, preview.stdout  # the stack, the provider, the ConfigMap
    assert "kubernetes:core/v1:ConfigMap" in preview.stdout
    assert SECRET not in preview.stdout + preview.stderr
    assert not list(rendered(render_dir)), "a preview wrote manifests"

    up = pulumi_cli(offline_env, project, "up", "--yes")
    assert "3 created" in up.stdout, up.stdout
    manifests = list(rendered(render_dir))
    assert len(manifests) == 1 and "kind: ConfigMap" in manifests[0].read_text()
    pulumi_cli(offline_env, project, "preview", "--expect-no-changes")

    outputs = json.loads(pulumi_cli(offline_env, project, "stack", "output", "--json").stdout)
    assert outputs == {"name": "greeting", "token": "[secret]"}
    shown = json.loads(pulumi_cli(offline_env, project, "stack", "output", "--json", "--show-secrets").stdout)
    assert shown["token"] == SECRET

    state = pulumi_cli(offline_env, project, "stack", "export").stdout
    assert SECRET not in state
    assert "ciphertext" in state
    types = {resource["type"] for resource in json.loads(state)["deployment"]["resources"]}
    assert "kubernetes:core/v1:ConfigMap" in types

    # Destroy needs no program: the CLI alone, and the provider removes what it rendered.
    pulumi_cli(offline_env, project, "destroy", "--yes")
    assert not list(rendered(render_dir))
    after = json.loads(pulumi_cli(offline_env, project, "stack", "export").stdout)
    assert not after["deployment"].get("resources")


def go_command() -> str:
    """Go, on PATH or where these machines install it (as tools/build-in-background.sh finds it)."""
    found = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    assert found, "no go on PATH nor in /usr/local/go/bin"
    return found


def test_language_host_is_the_sdk_package_of_v3_68(tmp_path: Path) -> None:
    """The language host is the package of github.com/pulumi/pulumi/sdk/v3@v3.68.0, the last
    release that holds it (its own module is not served): what its Go build information says."""
    realtools.require("pulumi-language-python")
    build_info = subprocess.run(
        [go_command(), "version", "-m", str(realtools.TOOLS_BIN / "pulumi-language-python")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line.split() for line in build_info.splitlines()]
    assert ["path", "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"] in lines
    # The module that holds the main package, at the release that still has it.
    assert any(line[:3] == ["mod", "github.com/pulumi/pulumi/sdk/v3", "v3.68.0"] for line in lines), build_info


class Echo(pulumi.dynamic.ResourceProvider):
    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(id_="echo", outs={"said": props["say"] + "!"})


class EchoResource(pulumi.dynamic.Resource):
    said: pulumi.Output[str]

    def __init__(self, name: str, say: str) -> None:
        super().__init__(Echo(), name, {"say": say, "said": None})


def test_dynamic_provider_runs_from_the_bundled_launcher(
    offline_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program's node lifecycle is a dynamic provider: its launcher is found next to the
    CLI although ambient plugins are ignored, and runs this venv's Python."""
    realtools.require("pulumi", "pulumi-resource-pulumi-python")
    # The provider process unpickles Echo by reference to this module (the real program's
    # providers import from the project directory, its working directory).
    monkeypatch.setenv("PYTHONPATH", str(realtools.REPO))
    project = tmp_path / "project"
    write_project(project)

    def run() -> None:
        pulumi.export("said", EchoResource("echo", "hi").said)

    stack = auto.create_stack(
        "dev",
        project_name="e2e",
        program=run,
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(project), pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent))
        ),
    )
    assert stack.up().outputs["said"].value == "hi!"
    stack.destroy()


def test_missing_plugin_is_an_error_not_a_download(
    offline_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an empty plugin cache the built provider is on $PATH, yet not taken, nor fetched."""
    realtools.require("pulumi-resource-kubernetes")
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    monkeypatch.setenv("PULUMI_HOME", str(empty_home))
    project = tmp_path / "project"
    write_project(project)
    pulumi_cli({**offline_env, "PULUMI_HOME": str(empty_home)}, project, "stack", "init", "dev")
    pulumi_cli({**offline_env, "PULUMI_HOME": str(empty_home)}, project, "config", "set", "--secret", "token", "x")
    stack = inline_stack(project, tmp_path / "rendered")

    with pytest.raises(auto.CommandError) as failure:
        stack.preview()
    message = str(failure.value)
    assert "no resource plugin 'pulumi-resource-kubernetes' found in the workspace at version v4.25.0" in message, (
        message
    )
    assert not (empty_home / "plugins").exists() or not any((empty_home / "plugins").glob("resource-kubernetes*"))
