#!/usr/bin/python3
"""Builds the device plugin test image in the test host, at test time, without a registry.

Part of the numa-kubelets CRI TEST CLIENT. A vendor ships its device plugin as a DaemonSet; the
real-cluster tier runs the real generic device plugin (`make tools`) that way, from this image:
`python3 - <generic-device-plugin binary> <output dir>` writes DEVICE_PLUGIN_ARCHIVE there, a
`docker save` archive for `ctr images import` (write_program_image of build_test_images.py,
installed in the host image), holding the static plugin and the directories runc mounts over.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__:  # imported by the tests, for the names below
    from .build_test_images import write_program_image
else:  # run in the test host: the copy tests/cri/install_in_testhost.sh installed there
    sys.path.insert(0, "/usr/local/lib/numa-kubelets-cri-test-client")
    from build_test_images import write_program_image

DEVICE_PLUGIN_IMAGE = "numa-kubelets.test/generic-device-plugin:built"
DEVICE_PLUGIN_ARCHIVE = "generic-device-plugin.tar"
PROGRAM = "usr/local/bin/generic-device-plugin"
# The directories runc mounts over, and where the DaemonSet mounts the host path vendors' plugins use.
DIRECTORIES = ("dev", "etc", "proc", "sys", "tmp", "var/lib/kubelet/device-plugins")


def main(argv: list[str]) -> int:
    plugin, output = Path(argv[0]), Path(argv[1])
    command = [f"/{PROGRAM}"]
    files = {PROGRAM: plugin}
    write_program_image(
        output, DEVICE_PLUGIN_ARCHIVE, DEVICE_PLUGIN_IMAGE, command, "/usr/local/bin", files, DIRECTORIES
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
