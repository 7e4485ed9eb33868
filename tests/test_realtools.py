"""How the tests wait for the programs tools/build.sh builds beside them (tests/run.sh)."""

import re

import pytest

from tests import realtools


def test_the_build_order_is_tools_build_sh_default_order():
    script = (realtools.REPO / "tools" / "build.sh").read_text()
    found = re.search(r"\|\| families=\(([^)]*)\)", script)
    assert found, "tools/build.sh sets no default families"
    assert tuple(found.group(1).split()) == realtools.BUILD_ORDER


def test_every_program_a_test_asks_for_is_announced_by_the_build():
    """A name tools/build.sh never lists would make a test wait for the whole build."""
    script = (realtools.REPO / "tools" / "build.sh").read_text()
    announced = {name for line in re.findall(r"^\s*ready (.+)$", script, re.MULTILINE) for name in line.split()}
    asked = {"kubelet", "kubelet-previous", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}
    asked |= {"kubelet-schema", "test-device-plugin", "pulumi", "pulumi-resource-pulumi-python"}
    asked |= {"pulumi-resource-kubernetes"}
    assert asked <= announced, asked - announced


@pytest.fixture
def building(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMA_KUBELETS_TOOLS_BUILDING", "1")
    monkeypatch.setattr(realtools, "READY_LIST", tmp_path / "ready")
    monkeypatch.setattr(realtools, "BUILD_EXIT", tmp_path / "build.exit")
    monkeypatch.setattr(realtools, "WAITED", {})
    return tmp_path


def test_a_listed_program_is_there_at_once(building):
    (building / "ready").write_text("kubernetes\nkubelet\n")
    realtools.wait_until_built("kubelet")
    assert realtools.WAITED == {}


def test_a_failed_build_fails_the_test_that_waits_naming_the_log(building):
    (building / "ready").write_text("kubernetes\n")
    (building / "build.exit").write_text("1 312\n")
    with pytest.raises(realtools.ToolMissing, match=r"tools/build.sh failed \(exit 1\) before it built etcd"):
        realtools.wait_until_built("etcd")


def test_a_finished_build_leaves_a_missing_program_to_the_caller(building):
    (building / "build.exit").write_text("0 5\n")
    realtools.wait_until_built("etcd")
    with pytest.raises(realtools.ToolMissing, match="not built: no-such-program"):
        realtools.require("no-such-program")


def test_without_the_build_beside_it_nothing_waits(building, monkeypatch):
    monkeypatch.delenv("NUMA_KUBELETS_TOOLS_BUILDING")
    realtools.wait_until_built("etcd")  # neither file exists: returns at once
