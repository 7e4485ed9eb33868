"""The real engine behind the real-host tier's fixtures: `pulumi up` of this repository's program
through the built CLI, language host and plugins, reporting which steps it ran.

`up(config)` writes the stack's config and runs `pulumi up --yes` with an event log (the engine's
own record of every step: `--event-log`); it returns the steps the engine took on the program's
remote commands, `(name, op)` in the order they finished, op as the engine names it (`create`,
`update`, `delete`, `replace`, ...; unchanged ones are left out). The command's inputs as the engine
last saw them come from `pulumi stack export --show-secrets` (`commands()`), so a test can check
what ran on the host against what the engine holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import realtools
from tests.polling import Polling
from tests.realengine.stack import EngineStack, PulumiFailed, engine_env

COMMAND_TYPE = "command:remote:Command"
# Longer than any update of these stacks takes (the demo's first: about 3 minutes): a hung update
# fails its test in this time instead of holding the tier.
UPDATE_TIMEOUT = 900.0
# The engine's step ops that change nothing on a host.
UNCHANGED_OPS = {"same", "read", "refresh"}


class UpdateFailed(AssertionError):
    """`pulumi up` exited non-zero; `steps` are those it finished before it stopped."""

    def __init__(self, failure: PulumiFailed, steps: list[tuple[str, str]]) -> None:
        self.failure, self.steps = failure, steps
        self.output = failure.result.stdout + failure.result.stderr
        super().__init__(f"{failure}\nsteps finished: {steps}")


def started(event_log: Path, name: str) -> bool:
    """Whether the engine has started a step that changes the resource `name` (its `resourcePreEvent`)."""
    for line in event_log.read_text().splitlines() if event_log.exists() else []:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return False  # a line being written
        pre = event.get("resourcePreEvent")
        if (
            pre is not None
            and pre["metadata"]["urn"].endswith(f"::{name}")
            and pre["metadata"]["op"] not in UNCHANGED_OPS
        ):
            return True
    return False


def finished_steps(event_log: Path, types: tuple[str, ...] = (COMMAND_TYPE,)) -> list[tuple[str, str]]:
    """The steps of resources of `types` the engine finished (its `resOutputsEvent`s), in order."""
    steps = []
    for line in event_log.read_text().splitlines() if event_log.exists() else []:
        event = json.loads(line)
        outputs = event.get("resOutputsEvent")
        if outputs is None:
            continue
        metadata = outputs["metadata"]
        if metadata.get("type") in types and metadata.get("op") not in UNCHANGED_OPS:
            steps.append((metadata["urn"].rsplit("::", 1)[-1], metadata["op"]))
    return steps


def descendants(pid: int) -> list[int]:
    """The processes below `pid` now (children first), read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # The command name may hold spaces and parentheses: the fields after its last ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        below = children.get(queue.pop(0), [])
        found += below
        queue += below
    return found


def step_watch(event_log: Path, names: tuple[str, ...], action: Callable[[str], None]) -> Polling:
    """While its block runs, watches `event_log` and calls `action(name)` once, as soon as the
    engine starts a step on one of `names`."""

    def poll() -> bool:
        name = next((name for name in names if started(event_log, name)), None)
        if name is not None:
            action(name)
        return name is not None

    return Polling(poll, 0.2)


class RealEngine:
    """One stack of the program under the real engine; `config` is the stack config without the
    `numa-kubelets:` prefix (as the tests' stacks are written)."""

    def __init__(self, stack: EngineStack, secrets: dict[str, str] | None = None) -> None:
        self.stack = stack
        self.secrets = dict(secrets or {})
        self.created = False
        self.updates = 0
        self.last_output = ""  # the last up's or destroy's output, as a user reads it

    def _event_log(self) -> Path:
        """A new file beside the stack's state (the file backend's directory), out of the project:
        the demo's project is the checkout."""
        self.updates += 1
        state_dir = Path(self.stack.env["PULUMI_BACKEND_URL"].removeprefix("file://"))
        return state_dir / f"events-{self.stack.name}-{self.updates}.jsonl"

    def write_config(self, config: dict[str, Any]) -> None:
        if not self.created:
            self.stack.init(config, self.secrets)
            self.created = True
        else:
            self.stack.set_config(config)

    def up(
        self,
        config: dict[str, Any],
        *args: str,
        beside: Callable[[], Any] | None = None,
        when_started: tuple[tuple[str, ...], Callable[[str], None]] | None = None,
        **run: Any,
    ) -> list[tuple[str, str]]:
        """Converge the stack to `config`; the command steps the engine ran. `beside` is a context
        manager factory run around the update (e.g. the node agent); `when_started` is `(names,
        action)`: `action(name)` is called once, as soon as the engine starts a step on one of
        `names` (a test's fault injected in the middle of that step)."""
        self.write_config(config)
        log = self._event_log()
        watch = step_watch(log, *when_started) if when_started is not None else contextlib.nullcontext()
        try:
            with beside() if beside is not None else contextlib.nullcontext(), watch:
                result = self.stack.run(
                    "up", "--yes", "--event-log", str(log), *args, **{"timeout": UPDATE_TIMEOUT, **run}
                )
        except PulumiFailed as failure:
            self.last_output = failure.result.stdout + failure.result.stderr
            raise UpdateFailed(failure, finished_steps(log)) from None
        self.last_output = result.stdout + result.stderr
        return finished_steps(log)

    def interrupted_up(
        self, signum: signal.Signals, during: str, delay: float = 2.0, timeout: float = 1200
    ) -> subprocess.CompletedProcess[str]:
        """`pulumi up --yes` of the stack's config as it is, sent `signum` `delay` seconds after the
        engine started the step on `during`, as a user's Ctrl-C (SIGINT) or a machine's crash
        (SIGKILL of the CLI) does it. The engine's checkpoints stay on, as in a user's own `pulumi up`.
        Returns the CLI's exit and output. (A killed CLI leaves its language host and plugins
        running, orphaned, each in a process group of its own: they are killed here after it, as a
        crashed machine takes them along.)"""
        log = self._event_log()
        env = {key: value for key, value in self.stack.env.items() if key != "PULUMI_SKIP_CHECKPOINTS"}
        # No preview first: the event log is written again for the update, and the step's start is
        # looked for in it (a preview's events would send the signal before the update began).
        argv = [
            str(realtools.TOOLS_BIN / "pulumi"),
            *("--non-interactive", "up", "--yes", "--skip-preview", "--event-log", str(log)),
        ]
        process = subprocess.Popen(
            [*argv, "--stack", self.stack.name],
            cwd=self.stack.project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        output: list[str] = []
        assert process.stdout is not None
        reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        deadline = time.monotonic() + timeout
        while not started(log, during):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                reader.join(timeout=10)
                raise AssertionError(f"the engine never started {during}:\n{''.join(output)[-4000:]}")
            time.sleep(0.2)
        time.sleep(delay)
        engine_processes = descendants(process.pid)
        process.send_signal(signum)
        code = process.wait(timeout=timeout)
        for pid in [process.pid, *engine_processes]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reader.join(timeout=30)
        return subprocess.CompletedProcess(argv, code, "".join(output), "")

    def preview(self, config: dict[str, Any], *args: str) -> str:
        """`pulumi preview --diff` of `config`: what a reviewer reads."""
        self.write_config(config)
        return self.stack.run("preview", "--diff", *args).stdout

    def destroy(self, **run: Any) -> list[tuple[str, str]]:
        log = self._event_log()
        try:
            self.stack.run("destroy", "--yes", "--event-log", str(log), **{"timeout": UPDATE_TIMEOUT, **run})
        except PulumiFailed as failure:
            raise UpdateFailed(failure, finished_steps(log)) from None
        return finished_steps(log)

    def resources(self) -> list[dict[str, Any]]:
        """The stack's resources as the engine holds them (secrets shown: the tests' own state)."""
        exported = json.loads(self.stack.run("stack", "export", "--show-secrets").stdout)
        return list(exported["deployment"].get("resources") or [])

    def commands(self) -> dict[str, dict[str, Any]]:
        """Each remote command's inputs as the engine last applied them, by resource name."""
        return {
            resource["urn"].rsplit("::", 1)[-1]: resource.get("inputs", {})
            for resource in self.resources()
            if resource["type"] == COMMAND_TYPE
        }


def project_engine(directory: Path, stack: str) -> RealEngine:
    """A stack `stack` of a copy of this project made in `directory` (its state beside it), for the
    real-host tier's standalone stacks (no secret: the key is read from `sshPrivateKeyPath`)."""
    realtools.require("pulumi", "pulumi-language-python")
    realtools.require_plugin("command", realtools.pins()["pulumi-command"])
    project = realtools.copy_project(directory / "numa-kubelets")
    (directory / "state").mkdir()
    return RealEngine(EngineStack(project, stack, engine_env(directory / "state")))
