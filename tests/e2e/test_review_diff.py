"""What a reviewer reads in a pull request: `pulumi preview --diff` of a one-line config change.

docs/review.md ("Reviewing changes in pull requests") promises that the preview names the one remote command
that changes and shows the changed lines of the file it writes, because files travel inside the
scripts. Here the real CLI previews this repository's program, after an `up` in the command
double's benchmark mode (tests/e2e/test_command_double_benchmark.py: a host at a loopback port
where nothing listens is answered at once, no script runs anywhere), for a one-line change of one
kubelet's configuration. What the diff must show is taken from the review renderer
(numa_kubelets.review), the other view the pull-request workflow publishes: the one file that
changes, its path on the host and its changed lines. Any regrouping of the commands (issue 35:
fewer resources per host) must keep this.
"""

from __future__ import annotations

import difflib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from numa_kubelets import review
from tests import realtools
from tests.e2e.test_command_double_benchmark import VARIABLE, WARNING, closed_port, the_double  # noqa: F401
from tests.realengine.stack import EngineStack
from tests.unit.builders import HOST_KEY

pytestmark = pytest.mark.realtools("pulumi")

NAMESPACE = "numa-kubelets"


def stack_config(port: int, key_path: Path, max_pods: int) -> dict[str, Any]:
    """The origin machine's shape (Pulumi.dev.yaml) at a loopback port where nothing listens."""
    return {
        "sshPrivateKeyPath": str(key_path),
        "hosts": [
            {
                "name": "numa-a",
                "address": "127.0.0.1",
                "sshPort": port,
                "hostKey": HOST_KEY,  # nothing listens there: never checked, pinned as every host is
                "numaNodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}],
                "systemCpus": "0,4",
                "kubelets": [{"numaNode": 0, "maxPods": 20}, {"numaNode": 1, "maxPods": max_pods}],
            }
        ],
    }


def rendered_files(config: dict[str, Any]) -> dict[str, str]:
    """The files every host receives, as the review renderer writes them (path in the render: text)."""
    document = {"config": {f"{NAMESPACE}:{key}": value for key, value in config.items()}}
    return {path: text for path, text in review.render_stack(document).items() if "/files/" in path}


@pytest.fixture
def stack(tmp_path: Path) -> EngineStack:
    """A stack of a copy of the project whose commands the double answers without running them."""
    realtools.require("pulumi")
    project = realtools.copy_project(tmp_path / "project")
    (tmp_path / "state").mkdir()
    env = {**realtools.pulumi_env(tmp_path / "state"), VARIABLE: "1"}
    engine_stack = EngineStack(project, "review", env)
    engine_stack.init({}, {})
    return engine_stack


def test_a_one_line_kubelet_change_previews_its_file_and_lines_in_that_kubelets_command_alone(
    stack: EngineStack, tmp_path: Path
) -> None:
    key_path = tmp_path / "id_ed25519"  # the stack's login key: no host ever sees it
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_path)], check=True)
    port = closed_port()
    before = stack_config(port, key_path, max_pods=20)
    after = stack_config(port, key_path, max_pods=21)
    stack.set_config(before)
    applied = stack.run("up", "--yes")
    assert WARNING in applied.stdout, "not the double's benchmark mode: a script could have run"

    # The renderer's view: exactly one file of one host changes, in exactly one line.
    old, new = rendered_files(before), rendered_files(after)
    assert old.keys() == new.keys()
    changed = [path for path in old if old[path] != new[path]]
    assert len(changed) == 1, changed
    on_host_path = "/" + changed[0].split("/files/", 1)[1]
    lines = [
        line
        for line in difflib.unified_diff(old[changed[0]].splitlines(), new[changed[0]].splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert [line[0] for line in lines] == ["-", "+"], lines

    stack.set_config(after)
    steps = json.loads(stack.run("preview", "--json").stdout)["steps"]
    changes = {step["urn"].rsplit("::", 1)[1]: step["op"] for step in steps if step["op"] not in ("same", "read")}
    assert changes == {"numa-a-numa1-kubelet": "update"}, changes

    diff = stack.run("preview", "--diff").stdout
    # The command, the path its script writes (the file's heredoc line changes with its content, so
    # it is always shown) and the file's changed lines, as `- old` / `+ new`.
    assert "~ command:remote:Command: (update)" in diff, diff
    assert "::numa-a-numa1-kubelet]" in diff, diff
    shown = {" ".join(line.split()) for line in diff.splitlines()}
    assert any(line.startswith(f"+ write_file {on_host_path} ") for line in shown), f"{on_host_path}:\n{diff}"
    for line in lines:
        assert f"{line[0]} {line[1:].strip()}" in shown, f"{line!r} not shown in the diff:\n{diff}"
