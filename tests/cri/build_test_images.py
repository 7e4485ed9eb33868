#!/usr/bin/python3
"""Builds the test host's container images from Debian's busybox-static, without a registry.

Part of the numa-kubelets CRI TEST CLIENT. Runs in the test host's root file system while its
image is built: `build_test_images.py <busybox binary> <output dir>` writes one `docker save`
archive per image, which `ctr images import` loads into a containerd instance's `k8s.io`
namespace (cri_test_client.py import-images). Standard library only; byte-for-byte
reproducible (fixed mtimes and owners).

- PAUSE_IMAGE: the pod sandbox image (what `containerd.sandboxImage` names in the tests). It
  only has to hold the pod's namespaces: it sleeps. containerd stops sandboxes with SIGKILL.
- WORKLOAD_IMAGE: the demo workload; busybox with its applets, `sleep 3600` by default.

kube_proxy_image.py and device_plugin_image.py build more images at test time with
write_program_image.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

PAUSE_IMAGE = "numa-kubelets.test/pause:busybox"
WORKLOAD_IMAGE = "numa-kubelets.test/workload:busybox"
# fallocate: a hugepage pod takes its pages from a hugetlbfs volume (write(2) is refused there).
APPLETS = ("sh", "sleep", "cat", "ls", "echo", "true", "fallocate")
IMAGES = {
    # archive name: (reference, Cmd)
    "pause.tar": (PAUSE_IMAGE, ["/bin/sleep", "2147483647"]),
    "workload.tar": (WORKLOAD_IMAGE, ["/bin/sleep", "3600"]),
}


def add_member(archive: tarfile.TarFile, info: tarfile.TarInfo, data: bytes | None = None) -> None:
    add_stream(archive, info, io.BytesIO(data) if data is not None else None)


def add_stream(archive: tarfile.TarFile, info: tarfile.TarInfo, data: BinaryIO | None) -> None:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    archive.addfile(info, data)


def layer(busybox: bytes) -> bytes:
    """One layer: /bin/busybox, its applets as symlinks, and the directories runc mounts over."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            add_member(archive, info)
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(busybox), 0o755
        add_member(archive, info, busybox)
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            add_member(archive, link)
    return buffer.getvalue()


def image_config(diff_id: str, command: list[str], path: str) -> bytes:
    return json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": command, "Env": [f"PATH={path}"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "numa-kubelets tests/cri/build_test_images.py"}],
        },
        sort_keys=True,
    ).encode()


def write_docker_archive(path: Path, reference: str, command: list[str], path_env: str, layer_file: Path) -> None:
    """A `docker save` archive at `path`: manifest.json naming the config, the layer and the tag.
    The layer is streamed from `layer_file`, never held in memory."""
    digest = hashlib.sha256()
    with layer_file.open("rb") as layer_data:
        for chunk in iter(lambda: layer_data.read(1 << 20), b""):
            digest.update(chunk)
    diff_id = "sha256:" + digest.hexdigest()
    config = image_config(diff_id, command, path_env)
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [reference], "Layers": [layer_name]}]).encode()
    with tarfile.open(path, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(config_name)
        info.size, info.mode = len(config), 0o644
        add_member(archive, info, config)
        directory = tarfile.TarInfo(layer_name.split("/")[0])
        directory.type, directory.mode = tarfile.DIRTYPE, 0o755
        add_member(archive, directory)
        info = tarfile.TarInfo(layer_name)
        info.size, info.mode = layer_file.stat().st_size, 0o644
        with layer_file.open("rb") as layer_data:
            add_stream(archive, info, layer_data)
        info = tarfile.TarInfo("manifest.json")
        info.size, info.mode = len(manifest), 0o644
        add_member(archive, info, manifest)


def with_parents(paths: Iterable[str]) -> set[str]:
    """`paths` and every directory above them ("var/lib/kubelet" -> also "var", "var/lib")."""
    parts = (path.split("/") for path in paths)
    return {"/".join(words[: i + 1]) for words in parts for i in range(len(words))}


def write_program_image(
    output: Path,
    archive_name: str,
    reference: str,
    command: list[str],
    path_env: str,
    files: dict[str, Path],
    directories: Iterable[str],
) -> None:
    """A one-layer image of programs built at test time, written to `output`/`archive_name`:
    `files` (path in the image -> file here, executable, streamed, a symlink followed: a library
    under the name the loader looks for), `directories` (those runc mounts over, /tmp sticky) and
    every directory above them. The layer goes through a file: a program can be large."""
    output.mkdir(parents=True, exist_ok=True)
    layer_file = output / f"{archive_name}.layer"
    parents = with_parents(name.rsplit("/", 1)[0] for name in files if "/" in name)
    with tarfile.open(layer_file, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in sorted(with_parents(directories) | parents):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            add_member(archive, info)
        for name, source in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = source.stat().st_size, 0o755
            with source.open("rb") as data:
                add_stream(archive, info, data)
    write_docker_archive(output / archive_name, reference, command, path_env, layer_file)
    layer_file.unlink()


def main(argv: list[str]) -> int:
    busybox, output = Path(argv[0]), Path(argv[1])
    output.mkdir(parents=True, exist_ok=True)
    layer_file = output / "busybox-layer.tar"
    layer_file.write_bytes(layer(busybox.read_bytes()))
    for archive_name, (reference, command) in IMAGES.items():
        write_docker_archive(output / archive_name, reference, command, "/bin", layer_file)
    layer_file.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
