#!/usr/bin/python3
"""Builds the device plugin test image in the test host, at test time, without a registry.

Part of the numa-kubelets CRI TEST CLIENT. A vendor ships its device plugin as a DaemonSet; the
real-cluster tier runs the real generic device plugin (`make tools`) that way, from this image:
`python3 - <generic-device-plugin binary> <output dir>` writes DEVICE_PLUGIN_ARCHIVE there, a
`docker save` archive for `ctr images import` (the format and writer of build_test_images.py,
installed in the host image), holding the static plugin and the directories runc mounts over.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

if __package__:  # imported by the tests, for the names below
    from .build_test_images import add_member, add_stream, write_docker_archive
else:  # run in the test host: the copy tests/cri/install_in_testhost.sh installed there
    sys.path.insert(0, "/usr/local/lib/numa-kubelets-cri-test-client")
    from build_test_images import add_member, add_stream, write_docker_archive

DEVICE_PLUGIN_IMAGE = "numa-kubelets.test/generic-device-plugin:built"
DEVICE_PLUGIN_ARCHIVE = "generic-device-plugin.tar"
PROGRAM = "usr/local/bin/generic-device-plugin"
# Where the DaemonSet mounts the host path vendors' plugins use.
DIRECTORIES = (
    "dev",
    "etc",
    "proc",
    "sys",
    "tmp",
    "usr",
    "usr/local",
    "usr/local/bin",
    "var",
    "var/lib",
    "var/lib/kubelet",
    "var/lib/kubelet/device-plugins",
)


def plugin_layer(plugin: Path, layer_file: Path) -> None:
    with tarfile.open(layer_file, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in DIRECTORIES:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            add_member(archive, info)
        info = tarfile.TarInfo(PROGRAM)
        info.size, info.mode = plugin.stat().st_size, 0o755
        with plugin.open("rb") as data:
            add_stream(archive, info, data)


def main(argv: list[str]) -> int:
    plugin, output = Path(argv[0]), Path(argv[1])
    output.mkdir(parents=True, exist_ok=True)
    layer_file = output / "generic-device-plugin-layer.tar"
    plugin_layer(plugin, layer_file)
    command = [f"/{PROGRAM}"]
    write_docker_archive(output / DEVICE_PLUGIN_ARCHIVE, DEVICE_PLUGIN_IMAGE, command, "/usr/local/bin", layer_file)
    layer_file.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
