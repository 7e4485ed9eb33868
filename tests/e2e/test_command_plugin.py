"""Conformance of `command:remote:Command` (pulumi-command 1.2.1) under the real engine.

The built CLI (offline, tests/realtools.py) drives whichever pulumi-command 1.2.1 the plugin
cache holds: the numa-kubelets double tools/build.sh builds (tools/plugin-doubles), or, with
NUMA_KUBELETS_PULUMI_HOME, the real plugin; the same assertions hold for both. The commands run
over SSH on a real OpenSSH server (Debian's openssh-server) this module starts on 127.0.0.1 with
its own configuration, host key and authorized key, logged in as an unprivileged user whose
commands touch only a scratch directory. The order of the lifecycle steps is read from a file
the commands append to there.

Each behaviour is one the program relies on (components/remote.py, components/host.py) or one
the real plugin's v1.2.1 source shows (provider/pkg/provider/remote/, common/inputs.go):
create with stdin, outputs and their secrecy, update against replacement, the order of a
replacement, delete's inputs, the previous output in the environment, `environment` against
sshd's AcceptEnv, failures, host key pinning, dial retries, logging and preview.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pulumi
import pulumi_command as command
import pytest
from pulumi import automation as auto

from tests import realtools
from tests.e2e.sshd import SSHD, free_port, generate_key, login_user, start_sshd
from tests.e2e.test_pulumi_cli import offline_env, write_project  # noqa: F401  (offline_env: a fixture)

pytestmark = [
    pytest.mark.realtools("pulumi"),  # the CLI and the plugins tools/build.sh installs with it
    # When the engine gives up on an inline program (a failed dial), the Python SDK leaves its
    # coroutine unfinished; `engine` collects it after the test, and the warning that raises is
    # about the SDK, not the plugin.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <coroutine object run_:pytest.PytestUnraisableExceptionWarning"
    ),
]

# Variables the accepting server takes (AcceptEnv): the previous output and one of the test's.
ACCEPTED_VARIABLES = ("PULUMI_COMMAND_STDOUT", "PULUMI_COMMAND_STDERR", "GREETING")


@dataclass(frozen=True)
class SshServers:
    """Two sshd on 127.0.0.1 with one host key and one authorized client key: `accepting` takes
    ACCEPTED_VARIABLES from a session's environment requests, `plain` none (no AcceptEnv)."""

    user: str
    private_key: str
    host_key: str  # both servers' public host key, authorized_keys format
    other_host_key: str  # a public key neither server has
    accepting_port: int
    plain_port: int

    def connection(self, port: int | None = None, **overrides: Any) -> command.remote.ConnectionArgs:
        settings: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": port or self.accepting_port,
            "user": self.user,
            "private_key": self.private_key,
            "host_key": self.host_key,
        }
        return command.remote.ConnectionArgs(**{**settings, **overrides})


@pytest.fixture(scope="module")
def ssh() -> Iterator[SshServers]:
    assert SSHD.is_file(), f"{SSHD} is missing: install Debian's openssh-server"
    user = login_user()
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    # Outside pytest's tmp (0700 for root): sshd reads the authorized keys as the login user.
    directory = Path(tempfile.mkdtemp(prefix="numa-kubelets-sshd-"))
    directory.chmod(0o755)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        host_key = generate_key(directory / "host_key")
        client_key = generate_key(directory / "client_key")
        other_host_key = generate_key(directory / "other_host_key")
        (directory / "authorized_keys").write_text(client_key + "\n")
        (directory / "authorized_keys").chmod(0o644)
        accepting, accepting_port = start_sshd(directory, "accepting", ACCEPTED_VARIABLES)
        servers.append(accepting)
        plain, plain_port = start_sshd(directory, "plain", ())
        servers.append(plain)
        yield SshServers(
            user=user.pw_name,
            private_key=(directory / "client_key").read_text(),
            host_key=host_key,
            other_host_key=other_host_key,
            accepting_port=accepting_port,
            plain_port=plain_port,
        )
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(directory)


@pytest.fixture
def scratch(ssh: SshServers) -> Iterator[Path]:
    """The one directory the remote commands write to, owned by their user."""
    directory = Path(tempfile.mkdtemp(prefix="numa-kubelets-ssh-scratch-"))
    user = pwd.getpwnam(ssh.user)
    os.chown(directory, user.pw_uid, user.pw_gid)
    yield directory
    shutil.rmtree(directory)


NewStack = Callable[[auto.PulumiFn], auto.Stack]


@pytest.fixture(autouse=True)
def command_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    pulumi_command = realtools.pins()["pulumi-command"]
    realtools.require_plugin("command", pulumi_command)
    assert version("pulumi_command") == pulumi_command  # the SDK asks the engine for exactly that plugin
    # The plugin would also offer the keys of an agent of the environment (SSH_AUTH_SOCK).
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def engine(offline_env: dict[str, str], tmp_path: Path) -> Iterator[NewStack]:  # noqa: F811
    """A new stack whose inline program is the one given, run by the built CLI against the plugin cache."""
    project = tmp_path / "project"
    write_project(project)

    def new_stack(program: auto.PulumiFn) -> auto.Stack:
        return auto.create_stack(
            "conformance",
            project_name="e2e",
            program=program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(project), pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent))
            ),
        )

    yield new_stack
    # Now rather than whenever the collector runs next: its finalizers, run inside a later
    # test's `compile`, have crashed pytest (SystemError: AST constructor recursion depth).
    gc.collect()


# golang.org/x/crypto/ssh, in both plugins, copies a command's stdin to the session while it
# runs; when the command exits before it has read all of it, the copy meets the closed channel
# and the run fails with "EOF" although the command succeeded (a race: seen in the real
# pulumi-command 1.2.1 and in the double, about once in a few runs here; pulumi-command#553).
# A command given stdin reads it to the end first.
READ_STDIN = "cat >/dev/null; "


def one_command(
    connection: command.remote.ConnectionArgs, options: pulumi.ResourceOptions | None = None, **inputs: Any
) -> auto.PulumiFn:
    """A program of one Command, "cmd", exporting its stdout and stderr."""

    def run() -> None:
        cmd = command.remote.Command("cmd", connection=connection, opts=options, **inputs)
        pulumi.export("stdout", cmd.stdout)
        pulumi.export("stderr", cmd.stderr)

    return run


def rerun(stack: auto.Stack, program: auto.PulumiFn, **options: Any) -> auto.UpResult:
    stack.workspace.program = program
    return stack.up(**options)


def steps(scratch: Path) -> list[str]:
    """The lifecycle steps the commands logged, in order (one word each)."""
    log = scratch / "steps"
    return log.read_text().split() if log.exists() else []


def appending(scratch: Path, step: str) -> str:
    """A command that logs `step-<its stdin>` (so the log shows which inputs a step ran with)."""
    return f'echo "{step}-$(cat)" >> {scratch}/steps'


def exported(stack: auto.Stack, *flags: str) -> dict[str, Any]:
    """`pulumi stack export` of the stack (the Automation API's export_stack shows the secrets)."""
    export = subprocess.run(
        [str(realtools.TOOLS_BIN / "pulumi"), "stack", "export", "--stack", stack.name, *flags],
        cwd=stack.workspace.work_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    deployment: dict[str, Any] = json.loads(export.stdout)["deployment"]
    return deployment


def states_of(stack: auto.Stack, type_: str, *flags: str) -> list[dict[str, Any]]:
    """The resources of a type in the stack's state."""
    return [r for r in exported(stack, *flags).get("resources", []) if r["type"] == type_]


def state_of(stack: auto.Stack, *flags: str) -> dict[str, Any]:
    (state,) = states_of(stack, "command:remote:Command", *flags)
    return state


# How `pulumi stack export` shows a secret (encrypted, or in plaintext with --show-secrets).
SECRET_SIGNATURE = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIGNATURE[0]) == SECRET_SIGNATURE[1]


def test_create_runs_create_with_stdin_its_output_the_outputs(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    create = f"cat >> {scratch}/steps; printf 'line\\n\\n'; printf 'warned\\n' >&2"
    stack = engine(one_command(ssh.connection(), create=create, stdin="create-with-stdin\n"))
    up = stack.up()
    assert steps(scratch) == ["create-with-stdin"]
    # One trailing newline is taken off each stream, no more.
    assert up.outputs["stdout"].value == "line\n"
    assert up.outputs["stderr"].value == "warned"
    state = state_of(stack)
    assert re.fullmatch(r"cmd[0-9a-f]{8}", state["id"]), state["id"]
    assert state["outputs"]["create"] == create
    # The whole connection is secret in the state (it holds the key), its defaults filled in.
    assert is_secret(state["outputs"]["connection"]) and is_secret(state["inputs"]["connection"])
    key_line = ssh.private_key.splitlines()[2]  # the first past the header every ed25519 key shares
    assert key_line not in json.dumps(exported(stack))


def test_the_connection_defaults_go_into_the_state(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    stack = engine(one_command(ssh.connection(), create="true"))
    stack.up()
    connection = json.loads(state_of(stack, "--show-secrets")["inputs"]["connection"]["plaintext"])
    assert (connection["dialErrorLimit"], connection["perDialTimeout"]) == (10, 15)


def test_outputs_are_not_secret_when_an_input_is(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    """The framework carries secrecy only from an input to the output of the same name: a secret
    stdin stays secret, but what the command prints is stdout, in plain text (so the program's
    scripts must not print what they read)."""

    def program() -> None:
        cmd = command.remote.Command(
            "cmd", connection=ssh.connection(), create="cat", stdin=pulumi.Output.secret("secret-stdin")
        )
        pulumi.export("stdout", cmd.stdout)
        pulumi.export("stdin", cmd.stdin)

    stack = engine(program)
    up = stack.up()
    assert (up.outputs["stdout"].value, up.outputs["stdout"].secret) == ("secret-stdin", False)
    assert up.outputs["stdin"].secret
    state = state_of(stack)
    assert is_secret(state["outputs"]["stdin"]) and is_secret(state["inputs"]["stdin"])
    assert state["outputs"]["stdout"] == "secret-stdin"


@pytest.mark.parametrize(("update", "ran"), [(True, ["create-1", "update-2"]), (False, ["create-1", "create-2"])])
def test_an_input_change_runs_update_or_create_in_place(
    engine: NewStack, ssh: SshServers, scratch: Path, update: bool, ran: list[str]
) -> None:
    def program(generation: int) -> auto.PulumiFn:
        return one_command(
            ssh.connection(),
            create=appending(scratch, "create"),
            update=appending(scratch, "update") if update else None,
            stdin=str(generation),
        )

    stack = engine(program(1))
    stack.up()
    first_id = state_of(stack)["id"]
    up = rerun(stack, program(2))
    assert up.summary.resource_changes == {"update": 1, "same": 1}
    assert steps(scratch) == ran
    assert state_of(stack)["id"] == first_id  # the same resource, not a replacement


@pytest.mark.parametrize(
    ("delete_before_replace", "order"),
    [(False, ["create-1", "create-2", "delete-1"]), (True, ["create-1", "delete-1", "create-2"])],
)
def test_a_triggers_change_replaces_in_the_requested_order(
    engine: NewStack, ssh: SshServers, scratch: Path, delete_before_replace: bool, order: list[str]
) -> None:
    """The replacement runs `create`, never `update`; the old resource's `delete` runs with its own
    (old) stdin, after the new one's create unless deleteBeforeReplace (the program sets it)."""

    def program(generation: int) -> auto.PulumiFn:
        return one_command(
            ssh.connection(),
            pulumi.ResourceOptions(delete_before_replace=delete_before_replace),
            create=appending(scratch, "create"),
            update=appending(scratch, "update"),
            delete=appending(scratch, "delete"),
            stdin=str(generation),
            triggers=[generation],
        )

    stack = engine(program(1))
    stack.up()
    first_id = state_of(stack)["id"]
    up = rerun(stack, program(2))
    assert up.summary.resource_changes == {"replace": 1, "same": 1}
    assert steps(scratch) == order
    assert state_of(stack)["id"] != first_id


def test_delete_runs_with_the_inputs_of_the_state(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    def program(generation: int) -> auto.PulumiFn:
        return one_command(
            ssh.connection(),
            create=appending(scratch, "create"),
            delete=appending(scratch, f"delete{generation}"),
            stdin=str(generation),
        )

    stack = engine(program(1))
    stack.up()
    rerun(stack, program(2))  # an update: `create` again, and the state takes the new inputs
    stack.destroy()
    assert steps(scratch) == ["create-1", "create-2", "delete2-2"]


@pytest.mark.parametrize(
    ("server", "add_previous_output", "update_saw", "delete_saw"),
    [
        ("accepting", None, "out=first err=first-err", "out=out=first err=first-err"),
        ("accepting", False, "out= err=", "out="),
        ("plain", None, "out= err=", "out="),
    ],
    ids=["default-on", "off", "on-without-AcceptEnv"],
)
def test_the_previous_output_in_the_environment(
    engine: NewStack,
    ssh: SshServers,
    scratch: Path,
    server: str,
    add_previous_output: bool | None,
    update_saw: str,
    delete_saw: str,
) -> None:
    """addPreviousOutputInEnv (default on): update and delete see the previous run's stdout and
    stderr as PULUMI_COMMAND_STDOUT/_STDERR; create has none. An sshd that does not accept them
    leaves them unset with a warning, and the command still runs."""
    port = ssh.accepting_port if server == "accepting" else ssh.plain_port

    def program(generation: int) -> auto.PulumiFn:
        # Each command reads its stdin to the end (READ_STDIN): one that exits before taking all
        # of it fails now and then with "EOF" (the real plugin too; the program's scripts do the same).
        return one_command(
            ssh.connection(port),
            create=READ_STDIN + 'echo "first${PULUMI_COMMAND_STDOUT+ and a previous stdout}"; echo first-err >&2',
            update=READ_STDIN + 'echo "out=$PULUMI_COMMAND_STDOUT err=$PULUMI_COMMAND_STDERR"',
            delete=READ_STDIN + f'echo "out=$PULUMI_COMMAND_STDOUT" > {scratch}/delete-saw',
            stdin=str(generation),
            add_previous_output_in_env=add_previous_output,
        )

    stack = engine(program(1))
    assert stack.up().outputs["stdout"].value == "first"
    up = rerun(stack, program(2))
    assert up.outputs["stdout"].value == update_saw
    refused = "Unable to set 'PULUMI_COMMAND_STDOUT'. This only works if your SSH server is configured to accept"
    assert (refused in up.stdout) == (server == "plain"), up.stdout
    stack.destroy()
    assert (scratch / "delete-saw").read_text().strip() == delete_saw


def test_environment_reaches_the_command_through_accept_env(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    stack = engine(one_command(ssh.connection(), create='echo "$GREETING"', environment={"GREETING": "hello"}))
    assert stack.up().outputs["stdout"].value == "hello"


def test_environment_refused_without_accept_env_fails_the_command(
    engine: NewStack, ssh: SshServers, scratch: Path
) -> None:
    """The SSH session's environment request is refused, and that fails the step before the
    command runs (only the previous output's variables are optional)."""
    program = one_command(
        ssh.connection(ssh.plain_port), create=appending(scratch, "create"), environment={"GREETING": "hello"}
    )
    with pytest.raises(auto.CommandError) as failure:
        engine(program).up()
    assert 'could not set environment variable "GREETING": ssh: setenv failed' in str(failure.value)
    assert steps(scratch) == []


def test_a_failing_command_fails_with_its_status_command_and_output(
    engine: NewStack, ssh: SshServers, scratch: Path
) -> None:
    create = "echo partial; echo broken >&2; exit 3"
    stack = engine(one_command(ssh.connection(), create=create))
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    message = str(failure.value)
    assert f'Process exited with status 3: running "{create}":' in message, message
    assert "partial" in message and "broken" in message
    # A failed create leaves nothing in the state: the next up creates it again.
    assert not states_of(stack, "command:remote:Command")


def test_a_host_key_other_than_the_pinned_one_is_refused(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    connection = ssh.connection(host_key=ssh.other_host_key, dial_error_limit=0)
    with pytest.raises(auto.CommandError) as failure:
        engine(one_command(connection, create=appending(scratch, "create"))).up()
    assert "after 0 failed attempts: ssh: handshake failed: ssh: host key mismatch" in str(failure.value)
    assert steps(scratch) == []


def test_a_closed_port_fails_after_the_dial_error_limit(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    port = free_port()  # nothing listens there
    connection = ssh.connection(port, dial_error_limit=2, per_dial_timeout=1)
    with pytest.raises(auto.CommandError) as failure:
        engine(one_command(connection, create="true")).up()
    assert f"after 2 failed attempts: dial tcp 127.0.0.1:{port}: connect: connection refused" in str(failure.value)


class CountingListener:
    """A TCP port that accepts connections, counting them, and closes each once the client has
    sent its SSH version line: a server that never finishes a handshake."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port: int = self.server.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            with contextlib.suppress(OSError), connection:
                connection.settimeout(5)
                # Read what the client sent before closing: unread data would make it a reset.
                received = b""
                while b"\n" not in received and (chunk := connection.recv(256)):
                    received += chunk

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def test_dial_error_limit_counts_retries_after_the_first_dial(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    """Every failure is retried (here a handshake cut short) with a backoff, until the number
    of failed retries exceeds the limit: a limit of 2 dials 3 times."""
    listener = CountingListener()
    try:
        connection = ssh.connection(listener.port, dial_error_limit=2, per_dial_timeout=1)
        with pytest.raises(auto.CommandError) as failure:
            engine(one_command(connection, create="true")).up()
    finally:
        listener.close()
    assert "after 2 failed attempts: ssh: handshake failed: " in str(failure.value)
    assert listener.accepted == 3


@pytest.mark.parametrize(("logging", "logged"), [(None, True), (command.remote.Logging.NONE, False)])
def test_logging_streams_lines_to_the_engine_unless_off(
    engine: NewStack, ssh: SshServers, scratch: Path, logging: command.remote.Logging | None, logged: bool
) -> None:
    events: list[auto.DiagnosticEvent] = []

    def collect(event: auto.EngineEvent) -> None:
        if event.diagnostic_event is not None:
            events.append(event.diagnostic_event)

    stack = engine(one_command(ssh.connection(), create="echo to-stdout; echo to-stderr >&2", logging=logging))
    up = stack.up(on_event=collect)
    assert up.outputs["stdout"].value == "to-stdout"  # logging never changes what is captured
    lines = {event.message.strip() for event in events if event.ephemeral}
    assert ({"to-stdout", "to-stderr"} <= lines) == logged, lines


def test_preview_runs_nothing(engine: NewStack, ssh: SshServers, scratch: Path) -> None:
    def program(generation: int) -> auto.PulumiFn:
        return one_command(
            ssh.connection(),
            create=appending(scratch, "create"),
            update=appending(scratch, "update"),
            delete=appending(scratch, "delete"),
            stdin=str(generation),
            triggers=[generation // 10],
        )

    stack = engine(program(1))
    assert stack.preview().change_summary == {"create": 2}  # the stack and the Command
    assert steps(scratch) == []
    stack.up()
    stack.workspace.program = program(2)
    assert stack.preview().change_summary == {"update": 1, "same": 1}
    stack.workspace.program = program(10)
    assert stack.preview().change_summary == {"replace": 1, "same": 1}
    assert steps(scratch) == ["create-1"]
