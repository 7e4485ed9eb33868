"""How the tests wait for the programs tools/build.sh builds beside them (tests/run.sh)."""

import re

import pytest

from tests import realtools


def test_the_build_order_is_tools_build_sh_default_order():
    script = realtools.BUILD_SCRIPT.read_text()
    found = re.search(r"^[ \t]+families=\(([^)]*)\)", script, re.MULTILINE)  # indented: not ("$@")
    assert found, "tools/build.sh sets no default families"
    assert tuple(found.group(1).split()) == realtools.BUILD_ORDER


def test_the_build_lists_the_programs_of_each_family():
    announced = realtools.announced_programs()
    assert {"kubelet", "kubelet-schema", "kube-proxy", "kube-apiserver", "etcd"} <= announced
    assert {"kubelet-previous", "pulumi", "pulumi-resource-kubernetes"} <= announced
    assert {"pulumi-language-python", "pulumi-resource-command", "pulumi-resource-random"} <= announced
    assert "generic-device-plugin" in announced


def test_a_program_the_build_never_lists_fails_at_once_naming_what_it_lists(building):
    """Without this check a misspelt name would wait for the whole build (tests/run.sh)."""
    (building / "build.exit").write_text("0 5\n")  # even once the build ended
    with pytest.raises(
        realtools.ToolMissing, match=r"builds no program 'kubelet-previus'; it lists: .*kubelet-previous"
    ):
        realtools.wait_until_built("kubelet-previus")
    assert realtools.WAITED == {}


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


def test_a_finished_build_leaves_a_missing_program_to_the_caller(building, monkeypatch):
    (building / "build.exit").write_text("0 5\n")
    monkeypatch.setattr(realtools, "TOOLS_BIN", building / "bin")
    realtools.wait_until_built("etcd")
    with pytest.raises(realtools.ToolMissing, match="not built: etcd in"):
        realtools.require("etcd")


def test_without_the_build_beside_it_nothing_waits(building, monkeypatch):
    monkeypatch.delenv("NUMA_KUBELETS_TOOLS_BUILDING")
    realtools.wait_until_built("etcd")  # neither file exists: returns at once
