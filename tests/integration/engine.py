"""Plays the Pulumi engine's part for the program's remote commands against a real host.

The program is evaluated under mocks (tests/program/harness.py); every
`command:remote:Command` it registers is then run over SSH the way the engine would:
creates and updates in dependency order, deletes in reverse order, a changed command
runs its update script, an unchanged one runs nothing, and a replacement with
`delete_before_replace` deletes the old command before creating the new one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Any, Protocol

from tests.program.harness import ProgramRun, run_program

COMMAND_TYPE = "command:remote:Command"
# Inputs whose change makes the engine run the update script rather than nothing.
COMPARED_INPUTS = ("create", "update", "delete", "stdin", "connection", "triggers")


class ScriptResult(Protocol):
    rc: int
    stdout: str
    stderr: str


Runner = Callable[[str, str | None], ScriptResult]


class CommandFailed(AssertionError):
    def __init__(self, name: str, phase: str, result: ScriptResult) -> None:
        self.name, self.phase, self.result = name, phase, result
        super().__init__(f"{name} {phase} exited {result.rc}:\n{result.stderr}{result.stdout}")


@dataclass(frozen=True)
class DeployedCommand:
    name: str
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]
    delete_before_replace: bool

    def script(self, phase: str) -> str | None:
        return self.inputs.get(phase)

    def compared(self) -> dict[str, Any]:
        return {key: self.inputs.get(key) for key in COMPARED_INPUTS}


def desired_commands(run: ProgramRun) -> dict[str, DeployedCommand]:
    commands = {}
    for resource in run.commands():
        request = run.request_of(resource)
        commands[resource.name] = DeployedCommand(
            name=resource.name,
            inputs=resource.inputs,
            dependencies=tuple(d for d in run.dependencies_of(resource)),
            delete_before_replace=bool(request.deleteBeforeReplace),
        )
    return commands


def dependency_order(commands: dict[str, DeployedCommand]) -> list[str]:
    graph = {name: {d for d in c.dependencies if d in commands} for name, c in commands.items()}
    return list(TopologicalSorter(graph).static_order())


class Engine:
    """Deployed state of one stack's remote commands, all on hosts reachable through `runner`."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.state: dict[str, DeployedCommand] = {}
        self.log: list[tuple[str, str]] = []
        # The program's last evaluation: the inputs of its other resources (e.g. NodeLifecycle).
        self.last_run: ProgramRun | None = None

    def _run(self, command: DeployedCommand, phase: str) -> None:
        script = command.script(phase) or (command.script("create") if phase == "update" else None)
        if script is None:
            return
        stdin = command.inputs.get("stdin") if phase in ("create", "update") else None
        result = self.runner(script, stdin)
        self.log.append((command.name, phase))
        if result.rc != 0:
            raise CommandFailed(command.name, phase, result)

    def up(self, stack_config: dict[str, Any]) -> list[tuple[str, str]]:
        """Evaluate the program for this config and converge the host; returns what ran."""
        start = len(self.log)
        self.last_run = run_program(stack_config)
        desired = desired_commands(self.last_run)
        for name in dependency_order(desired):
            new, old = desired[name], self.state.get(name)
            if old is None:
                self._run(new, "create")
            elif old.compared() != new.compared():
                self._run(new, "update")
            self.state[name] = new
        removed = {name: c for name, c in self.state.items() if name not in desired}
        for name in reversed(dependency_order(removed)):
            self._run(removed[name], "delete")
            del self.state[name]
        return self.log[start:]

    def replace(self, name: str) -> None:
        """What a replacement does (e.g. after a `triggers` change)."""
        command = self.state[name]
        if command.delete_before_replace:
            self._run(command, "delete")
            self._run(command, "create")
        else:
            self._run(command, "create")
            self._run(command, "delete")

    def destroy(self) -> list[tuple[str, str]]:
        start = len(self.log)
        for name in reversed(dependency_order(self.state)):
            self._run(self.state[name], "delete")
        self.state.clear()
        return self.log[start:]
