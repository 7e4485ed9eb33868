#!/usr/bin/python3
"""Builds the kube-proxy test image in the test host, at test time, without a registry.

Part of the numa-kubelets CRI TEST CLIENT. kube-proxy is built by tools/build.sh, after the host
image, so this runs in the test host when a test needs the image (sent over SSH, not baked into
the image): `python3 - <kube-proxy binary> <output dir>` writes KUBE_PROXY_ARCHIVE there, a
`docker save` archive for `ctr images import` (write_program_image of build_test_images.py,
installed in the host image). The image holds the given static kube-proxy and, for its nftables
mode, the host's `nft` with the shared libraries `ldd` names for it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

if __package__:  # imported by the tests, for the names below
    from .build_test_images import write_program_image
else:  # run in the test host: the copy tests/cri/install_in_testhost.sh installed there
    sys.path.insert(0, "/usr/local/lib/numa-kubelets-cri-test-client")
    from build_test_images import write_program_image

KUBE_PROXY_IMAGE = "numa-kubelets.test/kube-proxy:built"
KUBE_PROXY_ARCHIVE = "kube-proxy.tar"
NFT = "/usr/sbin/nft"


def shared_libraries(binary: str) -> list[str]:
    """The files the dynamic loader maps for `binary`, the loader included, as `ldd` resolves them
    ("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)")."""
    listing = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in listing.splitlines():
        words = line.split()
        if "=>" in words and words[words.index("=>") + 1].startswith("/"):
            paths.append(words[words.index("=>") + 1])
        elif words and words[0].startswith("/"):
            paths.append(words[0])
    return paths


def main(argv: list[str]) -> int:
    """kube-proxy at /usr/local/bin, `nft` and its libraries at the paths the loader looks them up under."""
    kube_proxy, output = Path(argv[0]), Path(argv[1])
    files = {"usr/local/bin/kube-proxy": kube_proxy, NFT.lstrip("/"): Path(NFT)}
    for library in shared_libraries(NFT):
        files[library.lstrip("/")] = Path(library)
    directories = ("dev", "etc", "proc", "run", "sys", "tmp", "var/lib/kube-proxy")
    command = ["/usr/local/bin/kube-proxy"]
    path_env = "/usr/local/bin:/usr/sbin"
    write_program_image(output, KUBE_PROXY_ARCHIVE, KUBE_PROXY_IMAGE, command, path_env, files, directories)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
