"""A component that does not come up fails the control plane's start naming it, with its log."""

from __future__ import annotations

import pytest

from tests.realcluster import controlplane
from tests.realcluster.controlplane import ControlPlane, ControlPlaneError

pytestmark = pytest.mark.realtools("etcd")  # the control plane: built by tools/build.sh


def test_a_component_that_exits_is_named_with_its_log_tail(tmp_path, monkeypatch):
    real_tool = controlplane.tool

    def tool(name: str):
        if name == "kube-apiserver":  # an API server that refuses its flags, as a typo would make it
            fake = tmp_path / "kube-apiserver"
            fake.write_text("#!/bin/sh\necho 'Error: unknown flag: --enable-bootstrap-token-auth'\nexit 1\n")
            fake.chmod(0o755)
            return fake
        return real_tool(name)

    monkeypatch.setattr(controlplane, "tool", tool)
    plane = ControlPlane(tmp_path / "plane")
    with pytest.raises(ControlPlaneError) as failure:
        plane.start()
    message = str(failure.value)
    assert message.startswith("kube-apiserver exited with code 1; log ")
    assert "unknown flag: --enable-bootstrap-token-auth" in message
    # etcd, started before it, was stopped again.
    etcd = plane.components[0]
    assert etcd.name == "etcd" and etcd.process is not None and etcd.process.poll() is not None


def test_a_missing_binary_says_to_build_the_tools(tmp_path, monkeypatch):
    monkeypatch.setattr(controlplane, "TOOLS_BIN", tmp_path)
    with pytest.raises(
        ControlPlaneError, match=r"kube-apiserver is missing: build the real programs first with `make tools`"
    ):
        controlplane.tool("kube-apiserver")
