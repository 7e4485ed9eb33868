"""containerd.sandboxImage in the rendered config, and the preflight's containerd version check."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from numa_kubelets.config import ConfigError, load_config
from numa_kubelets.render import containerd_config
from numa_kubelets.scripts import _containerd_version_check
from tests.unit.builders import origin_config, plan_of

CRI = "io.containerd.grpc.v1.cri"


def test_sandbox_image_goes_under_the_cri_plugin_of_every_instance():
    plan = plan_of(origin_config(containerd={"sandboxImage": "registry.example:5000/k8s/pause:3.10"}))
    for kubelet in plan.kubelets:
        config = tomllib.loads(containerd_config(kubelet, plan.sandbox_image).content)
        assert config["version"] == 2
        assert config["plugins"][CRI]["sandbox_image"] == "registry.example:5000/k8s/pause:3.10"


def test_without_sandbox_image_containerd_keeps_its_default():
    plan = plan_of(origin_config())
    assert plan.sandbox_image is None
    config = tomllib.loads(containerd_config(plan.kubelets[0], plan.sandbox_image).content)
    assert "sandbox_image" not in config["plugins"][CRI]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ('pause"\nversion = 3', "is not a container image reference"),
        ("Registry/Pause", "is not a container image reference"),
        (7, "string"),
    ],
)
def test_sandbox_image_is_validated_with_its_path(value, fragment):
    with pytest.raises(ConfigError) as caught:
        load_config(origin_config(containerd={"sandboxImage": value}))
    (problem,) = caught.value.problems
    assert problem.path == "containerd.sandboxImage" and fragment in problem.message


def test_unknown_containerd_key_is_a_typo():
    with pytest.raises(ConfigError) as caught:
        load_config(origin_config(containerd={"sandboxImages": "pause"}))
    assert [problem.path for problem in caught.value.problems] == ["containerd.sandboxImages"]


def run_version_check(tmp_path: Path, containerd_output: str | None) -> tuple[str, str]:
    """The preflight's version snippet under dash, with a containerd printing `containerd_output`."""
    containerd = tmp_path / "containerd"
    if containerd_output is not None:
        containerd.write_text(f"#!/bin/sh\necho {containerd_output!r}\n")
        containerd.chmod(0o755)
    script = (
        'problems=\nfail() { problems="$problems|$*"; }\n'
        + _containerd_version_check(str(containerd))
        + 'printf "%s\\n%s\\n" "$containerd_version" "$problems"\n'
    )
    lines = subprocess.run(["dash", "-c", script], check=True, capture_output=True, text=True).stdout.splitlines()
    return lines[0], lines[1] if len(lines) > 1 else ""


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1", "1.6.20~ds1"),
        ("containerd github.com/containerd/containerd v1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182", "1.7.24"),
        ("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376", "2.1.4"),
    ],
)
def test_preflight_accepts_the_containerd_versions_that_read_the_config(tmp_path, printed, version):
    assert run_version_check(tmp_path, printed) == (version, "")


@pytest.mark.parametrize("printed", ["containerd github.com/containerd/containerd v1.5.18 abc", "containerd x 3.0.0 y"])
def test_preflight_refuses_other_containerd_versions(tmp_path, printed):
    version, problems = run_version_check(tmp_path, printed)
    assert f"containerd {version} is not supported" in problems
    assert "1.6.x, 1.7.x, 2.x" in problems


def test_a_missing_containerd_is_reported_once_by_the_binary_check(tmp_path):
    assert run_version_check(tmp_path, None) == ("unknown", "")
