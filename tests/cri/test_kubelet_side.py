"""The kubelet's side of the CRI as the test client reproduces it, and the test images."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from tests.cri.build_test_images import IMAGES, layer, write_docker_archive, write_program_image
from tests.cri.kubelet_side import ContainerSpec, PodSpec, pod_cgroup_parent, systemd_slice_path

UID = "0f6a3b1e-7c2d-4e5f-8a9b-0c1d2e3f4a5b"


def test_cgroup_parent_is_the_expanded_slice_path_below_the_cgroup_root():
    assert pod_cgroup_parent("/numa0", "besteffort", UID) == (
        "/numa0.slice/numa0-kubepods.slice/numa0-kubepods-besteffort.slice/"
        "numa0-kubepods-besteffort-pod0f6a3b1e_7c2d_4e5f_8a9b_0c1d2e3f4a5b.slice"
    )
    assert pod_cgroup_parent("/numa1", "burstable", "ab-c") == (
        "/numa1.slice/numa1-kubepods.slice/numa1-kubepods-burstable.slice/numa1-kubepods-burstable-podab_c.slice"
    )
    # Guaranteed pods have no QoS level of their own.
    assert (
        pod_cgroup_parent("/numa1", "guaranteed", "ab")
        == "/numa1.slice/numa1-kubepods.slice/numa1-kubepods-podab.slice"
    )


def test_default_cgroup_root_puts_pods_in_the_machine_wide_kubepods_slice():
    assert pod_cgroup_parent("/", "besteffort", "ab") == (
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice"
    )
    assert systemd_slice_path([]) == "/"


@pytest.mark.parametrize("bad", [("numa0", "besteffort"), ("/numa0", "best-effort")])
def test_malformed_cgroup_root_or_qos_is_refused(bad):
    with pytest.raises(ValueError):
        pod_cgroup_parent(bad[0], bad[1], UID)


def test_labels_are_the_kubelets_and_survive_json():
    pod = PodSpec(
        name="numa-demo-numa-a-numa0",
        namespace="numa-demo",
        uid=UID,
        cgroup_root="/numa0",
        labels={"app": "demo"},
        containers=[ContainerSpec("demo", "numa-kubelets.test/workload:busybox", command=["/bin/sleep", "3600"])],
    )
    assert pod.sandbox_labels() == {
        "app": "demo",
        "io.kubernetes.pod.name": "numa-demo-numa-a-numa0",
        "io.kubernetes.pod.namespace": "numa-demo",
        "io.kubernetes.pod.uid": UID,
    }
    assert pod.container_labels(pod.containers[0])["io.kubernetes.container.name"] == "demo"
    assert pod.log_directory == f"/var/log/pods/numa-demo_numa-demo-numa-a-numa0_{UID}"
    assert PodSpec.from_json(pod.to_json()) == pod
    assert pod.effective_cgroup_parent.startswith("/numa0.slice/numa0-kubepods.slice/")
    assert (
        PodSpec(
            name="x", namespace="y", uid=UID, containers=[], cgroup_parent="/elsewhere.slice"
        ).effective_cgroup_parent
        == "/elsewhere.slice"
    )


def test_image_archives_are_reproducible_docker_archives_with_a_matching_diff_id(tmp_path):
    layer_tar = layer(b"\x7fELF fake busybox")
    (tmp_path / "layer.tar").write_bytes(layer_tar)
    (tmp_path / "again.tar").write_bytes(layer(b"\x7fELF fake busybox"))
    for reference, command in IMAGES.values():
        write_docker_archive(tmp_path / "one", reference, command, "/bin", tmp_path / "layer.tar")
        write_docker_archive(tmp_path / "two", reference, command, "/bin", tmp_path / "again.tar")
        archive = (tmp_path / "one").read_bytes()
        assert archive == (tmp_path / "two").read_bytes()
        with tarfile.open(fileobj=io.BytesIO(archive)) as opened:
            (manifest,) = json.load(opened.extractfile("manifest.json"))
            config = json.load(opened.extractfile(manifest["Config"]))
            stored_layer = opened.extractfile(manifest["Layers"][0]).read()
        assert manifest["RepoTags"] == [reference]
        assert config["config"]["Cmd"] == command
        assert config["config"]["Env"] == ["PATH=/bin"]
        assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(stored_layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer_tar)) as opened:
        names = opened.getnames()
    assert "bin/busybox" in names and "bin/sleep" in names


def test_a_program_image_holds_its_files_executable_under_every_parent_directory(tmp_path):
    program = tmp_path / "plugin"
    program.write_bytes(b"\x7fELF fake plugin")
    library = tmp_path / "libfake.so.1"
    library.write_bytes(b"\x7fELF fake library")
    files = {"usr/local/bin/plugin": program, "lib/x86_64-linux-gnu/libfake.so.1": library}
    directories = ("dev", "tmp", "var/lib/kubelet/device-plugins")
    write_program_image(
        tmp_path / "out",
        "plugin.tar",
        "example.test/plugin:built",
        ["/usr/local/bin/plugin"],
        "/usr/local/bin",
        files,
        directories,
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["plugin.tar"]  # the layer file removed
    with tarfile.open(tmp_path / "out" / "plugin.tar") as opened:
        (manifest,) = json.load(opened.extractfile("manifest.json"))
        config = json.load(opened.extractfile(manifest["Config"]))
        stored_layer = opened.extractfile(manifest["Layers"][0]).read()
    assert manifest["RepoTags"] == ["example.test/plugin:built"]
    assert config["config"] == {"Cmd": ["/usr/local/bin/plugin"], "Env": ["PATH=/usr/local/bin"]}
    with tarfile.open(fileobj=io.BytesIO(stored_layer)) as opened:
        members = {m.name: m for m in opened.getmembers()}
        assert opened.extractfile("usr/local/bin/plugin").read() == b"\x7fELF fake plugin"
    directories_found = sorted(name for name, m in members.items() if m.isdir())
    assert directories_found == [
        "dev",
        "lib",
        "lib/x86_64-linux-gnu",
        "tmp",
        "usr",
        "usr/local",
        "usr/local/bin",
        "var",
        "var/lib",
        "var/lib/kubelet",
        "var/lib/kubelet/device-plugins",
    ]
    assert members["tmp"].mode == 0o1777 and members["var/lib/kubelet"].mode == 0o755
    assert {name: m.mode for name, m in members.items() if m.isfile()} == {
        "usr/local/bin/plugin": 0o755,
        "lib/x86_64-linux-gnu/libfake.so.1": 0o755,
    }
