"""The rollout's ordering under the real Pulumi engine (the CLI of `make tools`), offline.

The program's own wiring (components/rollout.py: the StackReference to the stack itself, each
kubelet's turn as a dependency known only once every kubelet exists) decides what waits for
what; only the host commands are played by a dynamic resource that records when it ran: the
order is the engine's, whichever plugin runs a command, and no host is needed for it (the
rollout on a real host under the real engine belongs to the integration tier).
Four kubelets on two hosts, no cluster, `rollout.maxUnavailable: 1`.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pulumi
import pulumi.dynamic
import pytest
from pulumi import automation as auto

from components.rollout import REVISIONS_OUTPUT, Rollout
from numa_kubelets.config import load_config
from numa_kubelets.plan import build_plan
from tests import realtools
from tests.e2e.test_pulumi_cli import offline_env, write_project  # noqa: F401 (a fixture)
from tests.unit.builders import origin_config, origin_host

pytestmark = pytest.mark.realtools("pulumi")  # the Pulumi CLI: built by tools/build.sh

WORK_SECONDS = 1.5
NODES = ["numa-a-numa0", "numa-a-numa1", "numa-b-numa0", "numa-b-numa1"]
TURNS = ["numa-a-numa0", "numa-b-numa0", "numa-a-numa1", "numa-b-numa1"]  # hosts take turns


class RecordedRestart(pulumi.dynamic.ResourceProvider):
    """Stands in for a kubelet's host commands: writes when it ran; `fail` makes it fail."""

    def _run(self, props: dict[str, Any]) -> None:
        started = time.time()
        if props["fail"]:
            raise RuntimeError(f"{props['node']} failed as told")
        time.sleep(WORK_SECONDS)
        with open(props["log"], "a") as log:
            log.write(json.dumps({"node": props["node"], "start": started, "end": time.time()}) + "\n")

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        self._run(props)
        return pulumi.dynamic.CreateResult(id_=props["node"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        return pulumi.dynamic.DiffResult(changes=any(olds.get(k) != news.get(k) for k in ("revision", "fail")))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        self._run(news)
        return pulumi.dynamic.UpdateResult(outs=news)


class KubeletStandIn(pulumi.dynamic.Resource):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(RecordedRestart(), name, props, opts)


def program(log: Path, revision: str, failing: str | None) -> auto.PulumiFn:
    config = origin_config(
        hosts=[origin_host(), origin_host(name="numa-b", address="192.0.2.11")], rollout={"maxUnavailable": 1}
    )
    plan = build_plan(load_config(config))

    def run() -> None:
        rollout = Rollout(plan)
        kubelets = {
            name: KubeletStandIn(
                name,
                {"node": name, "revision": revision, "log": str(log), "fail": name == failing},
                pulumi.ResourceOptions(depends_on=rollout.turn_of(name)),
            )
            for name in NODES
        }
        revisions = {name: pulumi.Output.from_input(revision) for name in NODES}
        pulumi.export(REVISIONS_OUTPUT, rollout.settle(revisions, kubelets, None, kubelets))

    return run


class Stack:
    def __init__(self, tmp_path: Path) -> None:
        self.project, self.log = tmp_path / "project", tmp_path / "ran.jsonl"
        write_project(self.project)

    def up(self, revision: str, failing: str | None = None) -> list[dict[str, Any]]:
        """One `pulumi up`; what ran, in the order it started."""
        self.log.write_text("")
        stack = auto.create_or_select_stack(
            "dev",
            project_name="e2e",
            program=program(self.log, revision, failing),
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(self.project), pulumi_command=auto.PulumiCommand(root=str(realtools.TOOLS_BIN.parent))
            ),
        )
        try:
            stack.up()
        finally:
            ran = [json.loads(line) for line in self.log.read_text().splitlines()]
        return sorted(ran, key=lambda entry: entry["start"])

    def outputs(self) -> dict[str, Any]:
        stack = auto.select_stack("dev", project_name="e2e", program=lambda: None, work_dir=str(self.project))
        return {key: value.value for key, value in stack.outputs().items()}


@pytest.fixture
def stack(offline_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Stack:  # noqa: F811
    realtools.require("pulumi", "pulumi-resource-pulumi-python")
    # The provider process unpickles the stand-in by reference to this module.
    monkeypatch.setenv("PYTHONPATH", str(realtools.REPO))
    return Stack(tmp_path)


def overlapping(ran: list[dict[str, Any]]) -> bool:
    return any(later["start"] < earlier["end"] for earlier, later in itertools.pairwise(ran))


def test_the_real_engine_restarts_kubelets_one_after_the_other_and_creates_them_at_once(stack: Stack) -> None:
    created = stack.up("r1")
    assert sorted(entry["node"] for entry in created) == sorted(NODES)
    assert overlapping(created), f"the first update created the kubelets one by one: {created}"
    assert stack.outputs()[REVISIONS_OUTPUT] == dict.fromkeys(NODES, "r1")

    restarted = stack.up("r2")
    assert [entry["node"] for entry in restarted] == TURNS
    assert not overlapping(restarted), f"two kubelets restarted at once: {restarted}"

    assert stack.up("r2") == [], "a re-apply without changes ran something"


def test_a_failed_restart_stops_the_rollout_and_a_rerun_resumes_it(stack: Stack) -> None:
    stack.up("r1")
    with pytest.raises(auto.CommandError):
        stack.up("r2", failing="numa-b-numa0")
    # The outputs were not advanced: the failed update recorded nothing.
    assert stack.outputs()[REVISIONS_OUTPUT] == dict.fromkeys(NODES, "r1")
    ran = [json.loads(line)["node"] for line in stack.log.read_text().splitlines()]
    assert ran == ["numa-a-numa0"], "kubelets after the failed one ran"

    resumed = stack.up("r2")
    # numa-a-numa0 is already at r2 (nothing to do); the rest go one by one, in their turns.
    assert [entry["node"] for entry in resumed] == TURNS[1:]
    assert not overlapping(resumed)
    assert stack.outputs()[REVISIONS_OUTPUT] == dict.fromkeys(NODES, "r2")
