#!/usr/bin/python3
"""Builds the kube-proxy test image in the test host, at test time, without a registry.

Part of the numa-kubelets CRI TEST CLIENT. kube-proxy is built by tools/build.sh, after the host
image, so this runs in the test host when a test needs the image (sent over SSH, not baked into
the image): `python3 - <kube-proxy binary> <output dir>` writes KUBE_PROXY_ARCHIVE there, a
`docker save` archive for `ctr images import` (the format and writer of build_test_images.py,
installed in the host image). The image holds the given static kube-proxy and, for its nftables
mode, the host's `nft` with the shared libraries `ldd` names for it. Streamed to disk: the
kube-proxy binary is large.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

if __package__:  # imported by the tests, for the names below
    from .build_test_images import add_member, add_stream, write_docker_archive
else:  # run in the test host: the copy tests/cri/install_in_testhost.sh installed there
    sys.path.insert(0, "/usr/local/lib/numa-kubelets-cri-test-client")
    from build_test_images import add_member, add_stream, write_docker_archive

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


def kube_proxy_layer(kube_proxy: Path, layer_file: Path) -> None:
    """kube-proxy at /usr/local/bin, `nft` and its libraries at the paths the loader looks them
    up under, and the directories runc mounts over."""
    files = {"usr/local/bin/kube-proxy": kube_proxy, NFT.lstrip("/"): Path(NFT)}
    for library in shared_libraries(NFT):
        files[library.lstrip("/")] = Path(library)
    directories = {"dev", "etc", "proc", "run", "sys", "tmp", "var/lib/kube-proxy"}
    for name in files:
        parts = name.split("/")[:-1]
        directories.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    with tarfile.open(layer_file, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            add_member(archive, info)
        for name, source in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = source.stat().st_size, 0o755
            with source.open("rb") as data:  # follows symlinks: the library itself, under ldd's name
                add_stream(archive, info, data)


def main(argv: list[str]) -> int:
    kube_proxy, output = Path(argv[0]), Path(argv[1])
    output.mkdir(parents=True, exist_ok=True)
    layer_file = output / "kube-proxy-layer.tar"
    kube_proxy_layer(kube_proxy, layer_file)
    command = ["/usr/local/bin/kube-proxy"]
    write_docker_archive(output / KUBE_PROXY_ARCHIVE, KUBE_PROXY_IMAGE, command, "/usr/local/bin:/usr/sbin", layer_file)
    layer_file.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
