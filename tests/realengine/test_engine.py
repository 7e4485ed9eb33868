"""The real-engine driver's reading of the engine's own event log (`pulumi up --event-log`)."""

import json
from pathlib import Path

from tests.realengine.engine import finished_steps, started

COMMAND = "command:remote:Command"


def write_log(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


def test_the_finished_steps_are_the_changed_commands_in_the_order_they_finished(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "events.jsonl",
        [
            {"resourcePreEvent": {"metadata": {"op": "update", "urn": "u::numa-a-numa1-kubelet", "type": COMMAND}}},
            {"resOutputsEvent": {"metadata": {"op": "same", "urn": "u::numa-a-preflight", "type": COMMAND}}},
            {"resOutputsEvent": {"metadata": {"op": "update", "urn": "u::numa-a-numa1-kubelet", "type": COMMAND}}},
            {
                "resOutputsEvent": {
                    "metadata": {"op": "update", "urn": "u::numa-a-numa1", "type": "kubernetes:core/v1:NodePatch"}
                }
            },
            {"resOutputsEvent": {"metadata": {"op": "create", "urn": "u::numa-a-numa0-kubelet", "type": COMMAND}}},
        ],
    )
    assert finished_steps(log) == [("numa-a-numa1-kubelet", "update"), ("numa-a-numa0-kubelet", "create")]
    assert started(log, "numa-a-numa1-kubelet") and not started(log, "numa-a-numa0-slice")
    # Not "numa-a-numa1" for "...::numa-a-numa1-kubelet": the name is the URN's last part, whole.
    assert not started(log, "numa1-kubelet")


def test_no_log_yet_is_no_step(tmp_path: Path) -> None:
    assert finished_steps(tmp_path / "none.jsonl") == [] and not started(tmp_path / "none.jsonl", "x")
