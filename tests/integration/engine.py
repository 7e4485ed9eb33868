"""Plays the Pulumi engine's part for the program's remote commands against a real host.

Only the real-cluster scenarios (test_real_cluster.py) still use it; every other real-host
scenario runs the program under the real engine (tests/realengine). Why these stay: they look
between the steps of one update, which the real engine does not stop at: the Node registered
but without a CNI config yet, the program's NodeLifecycle called by hand once it exists, a
drain held by a PodDisruptionBudget, the kube-proxy DaemonSet and Service routes set up between
updates; and they play the cluster side with the stack's least-privilege credential. The same
join, labels, demo pods, port change, rolling restart and destroy under the real engine are
test_real_engine.py's.

The program is evaluated under mocks (tests/program/harness.py), with the stack outputs of the
last successful update as its StackReference to itself reads them; every
`command:remote:Command` it registers is then run over SSH the way the engine would:
creates and updates in dependency order, deletes in reverse order, a changed command
runs its update script, an unchanged one runs nothing, and a replacement with
`delete_before_replace` deletes the old command before creating the new one.

The one output of a command the program feeds into another resource's inputs is the kubelet
command's start-time line (its NodeLifecycle's `kubeletStarted`): the real engine resolves it
after the command ran, so this runner fills it in from that command's last stdout.

With `providers` (dynamic resource type -> the program's own provider) and `up(..., play=True)`
the engine also plays those resources (create, diff, update, delete through the provider) and,
as the real engine does, starts every step as soon as the steps it depends on are done, many
at once; after a failed step it starts no other and fails the update. Without `play`, their
state is recorded as the program declared it (the test played them by hand).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Any, Protocol

from pulumi import dynamic

from numa_kubelets.scripts import parse_kubelet_started
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


@dataclass(frozen=True)
class DeployedResource:
    """A dynamic resource the engine plays through its provider."""

    name: str
    type: str
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]


def desired_resources(run: ProgramRun, types: Mapping[str, Any]) -> dict[str, DeployedResource]:
    return {
        resource.name: DeployedResource(
            resource.name, resource.type, resource.inputs, tuple(run.dependencies_of(resource))
        )
        for type_token in types
        for resource in run.of_type(type_token)
    }


def dependency_order(commands: dict[str, DeployedCommand]) -> list[str]:
    graph = {name: {d for d in c.dependencies if d in commands} for name, c in commands.items()}
    return list(TopologicalSorter(graph).static_order())


class Engine:
    """Deployed state of one stack's remote commands, all on hosts reachable through `runner`."""

    def __init__(self, runner: Runner, providers: Mapping[str, dynamic.ResourceProvider] | None = None) -> None:
        self.runner = runner
        self.providers = dict(providers or {})
        self.state: dict[str, DeployedCommand] = {}
        self.resources: dict[str, DeployedResource] = {}
        # Each command's stdout as its last create or update printed it.
        self.stdout: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []
        self._log_lock = threading.Lock()
        # The program's last evaluation: the inputs of its other resources (e.g. NodeLifecycle).
        self.last_run: ProgramRun | None = None
        # The stack outputs of the last successful update (what the program reads back).
        self.outputs: dict[str, Any] = {}

    def _run(self, command: DeployedCommand, phase: str) -> None:
        script = command.script(phase) or (command.script("create") if phase == "update" else None)
        if script is None:
            return
        stdin = command.inputs.get("stdin") if phase in ("create", "update") else None
        result = self.runner(script, stdin)
        with self._log_lock:
            self.log.append((command.name, phase))
            if phase in ("create", "update"):
                self.stdout[command.name] = result.stdout
        if result.rc != 0:
            raise CommandFailed(command.name, phase, result)

    def up(self, stack_config: dict[str, Any], play: bool = False) -> list[tuple[str, str]]:
        """Evaluate the program for this config and converge the host; returns what ran."""
        start = len(self.log)
        self.last_run = run_program(stack_config, previous_outputs=self.outputs)
        desired = desired_commands(self.last_run)
        resources = desired_resources(self.last_run, self.providers)
        if play:
            self._converge_concurrently(desired, resources)
        else:
            for name in dependency_order(desired):
                self._converge_command(name, desired[name])
            self.resources.update({name: self._resolved(r) for name, r in resources.items()})
        removed = {name: c for name, c in self.state.items() if name not in desired}
        for name in reversed(dependency_order(removed)):
            self._run(removed[name], "delete")
            del self.state[name]
        for name in [name for name in self.resources if name not in resources]:
            gone = self.resources.pop(name)
            if play:
                self.providers[gone.type].delete(name, gone.inputs)
        self.outputs = self.last_run.outputs
        return self.log[start:]

    def _converge_command(self, name: str, new: DeployedCommand) -> None:
        old = self.state.get(name)
        if old is None:
            self._run(new, "create")
        elif old.compared() != new.compared():
            self._run(new, "update")
        self.state[name] = new

    def _resolved(self, resource: DeployedResource) -> DeployedResource:
        """Its inputs as the real engine passes them, once the commands they come from ran."""
        if "kubeletStarted" not in resource.inputs:
            return resource
        [kubelet] = [d for d in resource.dependencies if d.endswith("-kubelet") and d in self.state]
        started = parse_kubelet_started(self.stdout.get(kubelet))
        return dataclasses.replace(resource, inputs={**resource.inputs, "kubeletStarted": started})

    def _converge_resource(self, name: str, new: DeployedResource) -> None:
        new = self._resolved(new)
        provider, old = self.providers[new.type], self.resources.get(name)
        if old is None:
            provider.create(dict(new.inputs))
            phase = "create"
        else:
            diff = provider.diff(name, dict(old.inputs), dict(new.inputs))
            if not diff.changes:
                self.resources[name] = new
                return
            if diff.replaces:
                raise NotImplementedError(f"{name}: replacing a played resource ({diff.replaces})")
            provider.update(name, dict(old.inputs), dict(new.inputs))
            phase = "update"
        self.resources[name] = new
        with self._log_lock:
            self.log.append((name, phase))

    def _converge_concurrently(
        self, commands: dict[str, DeployedCommand], resources: dict[str, DeployedResource]
    ) -> None:
        steps: dict[str, Callable[[], None]] = {
            **{name: (lambda n=name, c=command: self._converge_command(n, c)) for name, command in commands.items()},
            **{
                name: (lambda n=name, r=resource: self._converge_resource(n, r)) for name, resource in resources.items()
            },
        }
        waits = {
            name: {
                d
                for d in (commands[name].dependencies if name in commands else resources[name].dependencies)
                if d in steps
            }
            for name in steps
        }
        done: set[str] = set()
        running: dict[Future[None], str] = {}
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=len(steps) or 1) as pool:
            while True:
                if failure is None:
                    started = set(running.values())
                    for name in [n for n in steps if n not in done and n not in started and waits[n] <= done]:
                        running[pool.submit(steps[name])] = name
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    name = running.pop(future)
                    if future.exception() is not None:
                        failure = failure or future.exception()
                    else:
                        done.add(name)
        if failure is not None:
            raise failure
        if done != set(steps):
            raise AssertionError(f"steps never started (a dependency cycle?): {sorted(set(steps) - done)}")

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
