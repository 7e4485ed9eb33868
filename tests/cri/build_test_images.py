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
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

PAUSE_IMAGE = "numa-kubelets.test/pause:busybox"
WORKLOAD_IMAGE = "numa-kubelets.test/workload:busybox"
APPLETS = ("sh", "sleep", "cat", "ls", "echo", "true")
IMAGES = {
    # archive name: (reference, Cmd)
    "pause.tar": (PAUSE_IMAGE, ["/bin/sleep", "2147483647"]),
    "workload.tar": (WORKLOAD_IMAGE, ["/bin/sleep", "3600"]),
}


def _add(archive: tarfile.TarFile, info: tarfile.TarInfo, data: bytes | None = None) -> None:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    archive.addfile(info, io.BytesIO(data) if data is not None else None)


def layer(busybox: bytes) -> bytes:
    """One layer: /bin/busybox, its applets as symlinks, and the directories runc mounts over."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            _add(archive, info)
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(busybox), 0o755
        _add(archive, info, busybox)
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            _add(archive, link)
    return buffer.getvalue()


def docker_archive(reference: str, command: list[str], layer_tar: bytes) -> bytes:
    """A `docker save` archive: manifest.json naming the config, the layer and the tag."""
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": command, "Env": ["PATH=/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "numa-kubelets tests/cri/build_test_images.py"}],
        },
        sort_keys=True,
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [reference], "Layers": [layer_name]}]).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in ((config_name, config), (layer_name, layer_tar), ("manifest.json", manifest)):
            if "/" in name:
                directory = tarfile.TarInfo(name.split("/")[0])
                directory.type, directory.mode = tarfile.DIRTYPE, 0o755
                _add(archive, directory)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            _add(archive, info, data)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    busybox, output = Path(argv[0]), Path(argv[1])
    output.mkdir(parents=True, exist_ok=True)
    layer_tar = layer(busybox.read_bytes())
    for archive_name, (reference, command) in IMAGES.items():
        (output / archive_name).write_bytes(docker_archive(reference, command, layer_tar))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
