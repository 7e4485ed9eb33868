"""The command double's benchmark mode (bench/engine.py) is off unless asked for, and narrow when on.

With NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK=1 the double (tools/plugin-doubles/command/remote/
benchmark.go) answers create, update and delete at once with empty outputs, so that bench/engine.py
measures the engine's cost per resource. Here, under the built CLI: unset, a command dials as
always (the conformance suite, tests/e2e/test_command_plugin.py, runs so); any value but "1"
fails the run; on, it says so in the run's diagnostics and answers only loopback addresses where
nothing listens, so a reachable host (the emulated test host on 127.0.0.1:2222, a real one) is
never answered without running the command. The real pulumi-command knows no such variable: with
NUMA_KUBELETS_PULUMI_HOME naming its cache, the module is skipped.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from pathlib import Path

import pulumi
import pulumi_command as command
import pytest
from pulumi import automation as auto

from tests import realtools
from tests.e2e.test_pulumi_cli import offline_env, write_project  # noqa: F401  (offline_env: a fixture)

pytestmark = [
    pytest.mark.realtools("pulumi"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <coroutine object run_:pytest.PytestUnraisableExceptionWarning"
    ),
]

VARIABLE = "NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK"
WARNING = "BENCHMARK MODE (NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK=1): no command runs"


@pytest.fixture(autouse=True)
def the_double(monkeypatch: pytest.MonkeyPatch) -> None:
    version = realtools.pins()["pulumi-command"]
    realtools.require_plugin("command", version)
    plugin = realtools.PULUMI_HOME / "plugins" / f"resource-command-v{version}" / "pulumi-resource-command"
    binary = plugin.read_bytes()
    if b"numa-kubelets test double of" not in binary:
        pytest.skip("the plugin cache holds another pulumi-command (the real one?): the benchmark mode is the double's")
    assert VARIABLE.encode() in binary, f"{plugin} predates the benchmark mode: run `bash tools/build.sh pulumi`"
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.fixture
def stack(offline_env: dict[str, str], tmp_path: Path) -> Iterator[auto.Stack]:  # noqa: F811
    project = tmp_path / "project"
    write_project(project)
    yield auto.create_stack(
        "benchmark-mode",
        project_name="e2e",
        program=lambda: None,
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(project), pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent))
        ),
    )
    gc.collect()


def commands(**ports_by_name: tuple[str, int]) -> auto.PulumiFn:
    """One Command per name at (host, port), each exporting its stdout. The first one is created
    before the others, which depend on it: the engine starts no step once one has failed, so a
    refusal must not come before the first one started."""

    def program() -> None:
        first: list[pulumi.Resource] = []
        for name, (host, port) in ports_by_name.items():
            connection = command.remote.ConnectionArgs(
                host=host, port=port, user="nobody", dial_error_limit=0, per_dial_timeout=2
            )
            cmd = command.remote.Command(
                name,
                connection=connection,
                create="echo ran",
                delete="echo ran",
                opts=pulumi.ResourceOptions(depends_on=first),
            )
            first = first or [cmd]
            pulumi.export(name, cmd.stdout)

    return program


def test_off_unless_set_a_command_dials(stack: auto.Stack) -> None:
    port = closed_port()
    stack.workspace.program = commands(cmd=("127.0.0.1", port))
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    message = str(failure.value)
    assert f"dial tcp 127.0.0.1:{port}: connect: connection refused" in message, message
    assert WARNING not in message


def test_a_value_other_than_1_fails_the_run(stack: auto.Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, "true")
    stack.workspace.program = commands(cmd=("127.0.0.1", closed_port()))
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert f'{VARIABLE}="true": set it to "1" for the benchmark mode or leave it unset' in str(failure.value)


def test_on_it_answers_only_loopback_ports_where_nothing_listens(
    stack: auto.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, "1")
    answered = ("127.0.0.1", closed_port())
    # One refusal per update: the engine starts no further step once one has failed.
    with socket.create_server(("127.0.0.1", 0)) as listening:
        open_port = listening.getsockname()[1]
        stack.workspace.program = commands(answered=answered, listening=("127.0.0.1", open_port))
        with pytest.raises(auto.CommandError) as failure:
            stack.up()
    message = str(failure.value)
    assert WARNING in message, message
    assert f"refuses 127.0.0.1:{open_port}: something listens there" in message, message
    # Not loopback, yet on this machine should the refusal ever regress (0.0.0.0 dials locally).
    stack.workspace.program = commands(answered=answered, remote=("0.0.0.0", closed_port()))
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    message = str(failure.value)
    assert 'answers only loopback IP addresses, not "0.0.0.0"' in message, message
    # The answered command is in the state, with empty outputs; the two refused ones are not.
    deployment = stack.export_stack().deployment
    assert deployment is not None
    resources = deployment["resources"]
    created = {r["urn"].rsplit("::", 1)[1]: r for r in resources if r["type"] == "command:remote:Command"}
    assert set(created) == {"answered"}
    assert created["answered"]["outputs"]["stdout"] == ""
    # Its delete is answered at once too.
    stack.workspace.program = lambda: None
    assert stack.up().summary.resource_changes == {"delete": 1, "same": 1}
