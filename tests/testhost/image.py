"""Building the test host's disk image once and reusing it from a cache.

Layout of the cache directory (default `<repo>/.testhost/`):

    id_ed25519, id_ed25519.pub   client key; its public half is baked into images
    build.lock                   serialises builds between concurrent test runs
    images/<suite>-<cache key>/  one finished image per Debian suite (see Image), renamed into
                                 place only when complete, so a reader never sees half of one
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import recipe
from .keys import public_key_line, write_ed25519_key_pair
from .tools import TestHostError, require_root, require_tools, run_logged

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parents[1]
DEFAULT_CACHE_DIR = REPO_ROOT / ".testhost"

CUSTOMIZE_SCRIPT = PACKAGE_DIR / "customize_rootfs.sh"
# The CRI test client and its images are built into the image (tests/cri/install_in_testhost.sh).
CRI_CLIENT_DIR = REPO_ROOT / "tests" / "cri"
CRI_CLIENT_FILES = tuple(
    CRI_CLIENT_DIR / name
    for name in (
        "install_in_testhost.sh",
        "runtime_v1_subset.proto",
        "kubelet_side.py",
        "cri_test_client.py",
        "build_test_images.py",
    )
)
RECIPE_FILES = (PACKAGE_DIR / "recipe.py", CUSTOMIZE_SCRIPT, *CRI_CLIENT_FILES)

CLIENT_KEY_NAME = "id_ed25519"
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class Image:
    """A built image: boot `kernel` + `initrd` with `root_disk` (raw ext4) as /dev/vda."""

    directory: Path
    kernel: Path
    initrd: Path
    root_disk: Path
    key_path: Path  # private key that logs in as root
    host_key: str  # pinned sshd host key, "ssh-ed25519 AAAA..."
    cache_key: str
    build_seconds: float
    suite: str

    @classmethod
    def load(cls, directory: Path, key_path: Path) -> Image:
        manifest = json.loads((directory / MANIFEST_NAME).read_text())
        return cls(
            directory=directory,
            kernel=directory / "vmlinuz",
            initrd=directory / "initrd.img",
            root_disk=directory / "root.img",
            key_path=key_path,
            host_key=manifest["host_key"],
            cache_key=manifest["cache_key"],
            build_seconds=manifest["build_seconds"],
            suite=manifest["suite"],
        )


def ensure_image(cache_dir: Path | None = None, suite: str = recipe.DEFAULT_SUITE) -> Image:
    """Return the cached image of `suite` for the current recipe, building it first if needed."""
    recipe.apt_sources(suite)  # an unknown suite fails here, before anything is built
    cache_dir = Path(cache_dir or DEFAULT_CACHE_DIR).resolve()
    images_dir = cache_dir / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(cache_dir / "build.lock"):
        key_path = cache_dir / CLIENT_KEY_NAME
        client_public_key = _ensure_client_key(key_path)
        cache_key = recipe_cache_key(client_public_key, suite)
        image_dir = images_dir / f"{suite}-{cache_key}"
        if not (image_dir / MANIFEST_NAME).exists():
            _build(image_dir, client_public_key, suite)
            _remove_other_images(images_dir, keep=image_dir, suite=suite)
        return Image.load(image_dir, key_path)


def recipe_cache_key(client_public_key: str, suite: str = recipe.DEFAULT_SUITE) -> str:
    """Hash of everything that decides the image's content."""
    digest = hashlib.sha256(suite.encode() + b"\0")
    for path in RECIPE_FILES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(public_key_line(client_public_key).encode())
    return digest.hexdigest()[:16]


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ensure_client_key(key_path: Path) -> str:
    public_path = Path(f"{key_path}.pub")
    if key_path.exists() and public_path.exists():
        return public_path.read_text().strip()
    return write_ed25519_key_pair(key_path, comment="numa-kubelets-testhost-client")


def _build(image_dir: Path, client_public_key: str, suite: str) -> None:
    require_tools("mmdebstrap", "mkfs.ext4")
    require_root("building the test host image")
    started = time.monotonic()
    build_dir = image_dir.parent / f".build-{image_dir.name}-{uuid.uuid4().hex[:8]}"
    build_dir.mkdir()
    log_path = build_dir / "build.log"
    _log(f"building test host image {image_dir.name} (log: {log_path})")
    try:
        inputs = build_dir / "inputs"
        host_key = _prepare_inputs(inputs, client_public_key)
        rootfs = build_dir / "rootfs"
        _bootstrap(rootfs, inputs, log_path, suite)
        _copy_boot_files(rootfs, build_dir)
        _pack_root_disk(rootfs, build_dir / "root.img", log_path)
        remove_tree(rootfs)
        remove_tree(inputs)
        seconds = round(time.monotonic() - started, 1)
        manifest = {
            "cache_key": image_dir.name,
            "suite": suite,
            "host_key": host_key,
            "build_seconds": seconds,
            "packages": list(recipe.PACKAGES),
        }
        (build_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
        build_dir.rename(image_dir)
        _log(f"built test host image {image_dir.name} in {seconds} s")
    except BaseException:
        # Keep the log of a failed build next to the cache for inspection.
        failed_log = image_dir.parent / f"failed-build-{image_dir.name}.log"
        if log_path.exists():
            shutil.copyfile(log_path, failed_log)
        remove_tree(build_dir)
        raise


def _prepare_inputs(inputs: Path, client_public_key: str) -> str:
    """Files customize_rootfs.sh reads; returns the sshd host public key line."""
    inputs.mkdir()
    host_key_line = write_ed25519_key_pair(inputs / "ssh_host_ed25519_key", comment=f"root@{recipe.HOSTNAME}")
    (inputs / "authorized_keys").write_text(client_public_key + "\n")
    (inputs / "hostname").write_text(recipe.HOSTNAME + "\n")
    (inputs / "machine-id").write_text(uuid.uuid4().hex + "\n")
    (inputs / "masked-units").write_text("\n".join(recipe.MASKED_UNITS) + "\n")
    (inputs / "enabled-units").write_text("\n".join(recipe.ENABLED_UNITS) + "\n")
    (inputs / "cri").mkdir()
    for path in CRI_CLIENT_FILES:
        shutil.copyfile(path, inputs / "cri" / path.name)
    return public_key_line(host_key_line)


def _bootstrap(rootfs: Path, inputs: Path, log_path: Path, suite: str) -> None:
    customize = f'sh {shlex.quote(str(CUSTOMIZE_SCRIPT))} "$1" {shlex.quote(str(inputs))}'
    run_logged(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--mode=root",
            "--format=directory",
            f"--include={','.join(recipe.PACKAGES)}",
            # Keep our fixed /etc/machine-id (see customize_rootfs.sh).
            "--skip=cleanup/reproducible",
            f"--customize-hook={customize}",
            suite,
            str(rootfs),
            *recipe.apt_sources(suite),
        ],
        log_path,
    )


def _copy_boot_files(rootfs: Path, destination: Path) -> None:
    """Direct kernel boot: qemu loads the guest's own kernel and initrd from outside."""
    for pattern, name in (("vmlinuz-*", "vmlinuz"), ("initrd.img-*", "initrd.img")):
        found = sorted((rootfs / "boot").glob(pattern))
        if len(found) != 1:
            raise TestHostError(f"expected one /boot/{pattern} in the image, found {found}")
        shutil.copyfile(found[0], destination / name)


def _pack_root_disk(rootfs: Path, disk: Path, log_path: Path) -> None:
    """mkfs.ext4 -d copies the tree into a new file system: no loop mount needed."""
    used_mib = sum(entry.lstat().st_size for entry in rootfs.rglob("*") if not entry.is_symlink()) // (1024 * 1024)
    size_mib = used_mib + recipe.FREE_SPACE_MIB
    run_logged(
        ["mkfs.ext4", "-F", "-q", "-L", "testhost-root", "-d", str(rootfs), str(disk), f"{size_mib}M"],
        log_path,
    )


def _remove_other_images(images_dir: Path, keep: Path, suite: str) -> None:
    """Images of older recipes of this suite and crashed builds are dead weight (about 1 GB each).

    Called with the build lock held, so no other build is using them. The current images of the
    other suites stay: a run that boots bookworm and trixie uses both.
    """
    current_of_other_suites = {f"{other}-" for other in recipe.SUITES if other != suite}
    for entry in images_dir.iterdir():
        if any(entry.name.startswith(prefix) for prefix in current_of_other_suites):
            continue
        if entry != keep and entry.is_dir():
            remove_tree(entry)


def mounts_below(path: Path) -> list[str]:
    """Mount points at or under `path`, deepest first (from /proc/self/mountinfo)."""
    root = str(path.resolve())
    targets = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split(" ")[4].replace("\\040", " ")
        if target == root or target.startswith(root + "/"):
            targets.append(target)
    return sorted(targets, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """rmtree that never descends into a mount.

    An interrupted mmdebstrap can leave the host's /dev, /proc and /sys bound inside its rootfs;
    a plain rmtree would then delete the host's device nodes.
    """
    for target in mounts_below(path):
        subprocess.run(["umount", "--lazy", target], check=False, capture_output=True)
    left = mounts_below(path)
    if left:
        raise TestHostError(f"refusing to remove {path}: still mounted below it: {', '.join(left)}")
    shutil.rmtree(path, ignore_errors=True)


def _log(message: str) -> None:
    print(f"testhost: {message}", file=sys.stderr, flush=True)
