"""What goes into the test host image.

Everything that decides the content of the image lives here, in
customize_rootfs.sh and in the CRI test client's files (tests/cri); the cache
key of a built image is a hash of these files (see image.py), so editing any of them
rebuilds the image on next use while the build procedure itself can be
refactored without invalidating caches.
"""

# The Debian releases a test host can run (`ensure_image(suite=...)`, `boot(suite=...)`):
# bookworm (systemd 252, containerd 1.6) and trixie (systemd 257, containerd 1.7).
DEFAULT_SUITE = "bookworm"
SUITES = ("bookworm", "trixie")


# Where this machine's apt gets Debian from (deb822 `URIs:` lines, then one-line entries);
# the guests are bootstrapped from the same archives. No host name is written in the code.
APT_SOURCE_FILES = ("/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list")
# Overrides, e.g. for a local mirror: the archive of `debian` and of `debian-security`.
MIRROR_ENV = "NUMA_KUBELETS_DEBIAN_MIRROR"
SECURITY_MIRROR_ENV = "NUMA_KUBELETS_DEBIAN_SECURITY_MIRROR"


class NoDebianMirror(RuntimeError):
    pass


def _source_uris(text: str) -> list[str]:
    uris = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] == ["URIs:"]:
            uris += words[1:]
        elif words[:1] == ["deb"]:
            uris += [word for word in words[1:] if "://" in word][:1]
    return uris


def debian_mirrors(source_texts: list[str], environ: dict[str, str]) -> tuple[str, str]:
    """(archive of `debian`, archive of `debian-security`): the environment's, else the first
    apt source URIs whose path ends in /debian and /debian-security."""
    uris = [uri.rstrip("/") for text in source_texts for uri in _source_uris(text)]
    main = environ.get(MIRROR_ENV) or next((uri for uri in uris if uri.endswith("/debian")), None)
    security = environ.get(SECURITY_MIRROR_ENV) or next((uri for uri in uris if uri.endswith("/debian-security")), None)
    if main is None or security is None:
        missing = [name for name, uri in ((MIRROR_ENV, main), (SECURITY_MIRROR_ENV, security)) if uri is None]
        raise NoDebianMirror(
            "no Debian archive for the test host image: this machine's apt sources "
            f"({', '.join(APT_SOURCE_FILES)}) name no URI ending in /debian and /debian-security; "
            f"set {' and '.join(missing)}"
        )
    return main, security


def machine_debian_mirrors() -> tuple[str, str]:
    import glob
    import os
    from pathlib import Path

    texts = [Path(path).read_text() for pattern in APT_SOURCE_FILES for path in sorted(glob.glob(pattern))]
    return debian_mirrors(texts, dict(os.environ))


def apt_sources(suite: str) -> tuple[str, ...]:
    """The archives this machine's apt uses; updates and security suites so the guest runs the
    kernel and systemd a patched Debian machine would run."""
    if suite not in SUITES:
        raise ValueError(f"unknown test host suite {suite!r}; known: {', '.join(SUITES)}")
    main, security = machine_debian_mirrors()
    return (
        f"deb {main} {suite} main",
        f"deb {main} {suite}-updates main",
        f"deb {security} {suite}-security main",
    )


PACKAGES = (
    # boot and init
    "systemd",
    "systemd-sysv",
    "udev",
    "dbus",
    "kmod",
    "linux-image-cloud-amd64",
    # remote access used by the product (pulumi-command) and the tests
    "openssh-server",
    # tools the product's host scripts and the tests inspect the host with
    "iproute2",
    "util-linux",
    "procps",
    "numactl",
    # namespace mode: duplicate address detection (arping -D) in the preflight
    "iputils-arping",
    # kube-proxy's nftables mode (tests/integration/test_real_cluster.py): `nft`, copied with its
    # libraries into the kube-proxy test image, and the tests' view of each namespace's rules
    "nftables",
    # container runtime: real, one instance per NUMA node run by the product
    "containerd",
    "runc",
    "containernetworking-plugins",
    # the CRI test client (tests/cri): gRPC, and its code generator, run in the guest
    "python3-grpcio",
    "python3-grpc-tools",
    "python3-protobuf",
    "python3-pkg-resources",  # grpc_tools.protoc imports it
    # the test container images are made of busybox (tests/cri/build_test_images.py)
    "busybox-static",
    # the tests' probes in the guest (healthz, /configz) are Python scripts
    "python3-minimal",
)

HOSTNAME = "numa-testhost"

# Free space left in root.img beyond the packed root filesystem, for whatever
# the product and the tests write (the image file is sparse).
FREE_SPACE_MIB = 2048

# Units the guest must not run: Debian's own containerd would take
# /run/containerd, which the product's per-NUMA instances rely on owning
# privately; the timers only add noise and CPU load to a TCG guest. logind keeps
# no session here (no pam_systemd: sshd logins open none), yet it subscribes to
# systemd's unit signals, so every unit, mount and daemon-reload the product and
# its pods cause went through dbus-daemon to it: measured on bookworm, 10 rounds of
# a daemon-reload, a transient scope and 3 tmpfs mounts took 34 s with it and 27 s
# without (systemd 19.5 s -> 15.8 s of CPU, dbus-daemon 5.7 s -> 0.1 s, logind 2.1
# s -> 0); over the lifecycle and namespace modules dbus-daemon and logind had used
# 38 s of the guest's CPU. A `systemctl reboot` falls back from logind to systemd;
# user.slice, which logind pulls in, customize_rootfs.sh has multi-user.target want.
MASKED_UNITS = (
    "containerd.service",
    "systemd-logind.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
)

ENABLED_UNITS = (
    "systemd-networkd.service",
    "ssh.service",
    # Written by customize_rootfs.sh, which says why: the guard against a TCG lock-up.
    "testhost-cpu-quota-pin.service",
)

KERNEL_CMDLINE = (
    "root=/dev/vda",
    "rw",
    "rootfstype=ext4",
    "console=ttyS0,115200",
    # The guest has no reason to wait for a hardware RNG to seed itself.
    "random.trust_cpu=on",
    # An emulated CPU has no side channels worth closing, and under TCG the retpolines and
    # barriers cost about a tenth of a syscall-heavy guest's time (measured: fork+exec, daemon-reload).
    "mitigations=off",
    # The TSC as the clock, not the emulated HPET: every clock read (the Go runtime reads it all
    # the time) was an HPET register read, emulated under qemu's global lock. The kernel finds the
    # vCPUs' TSCs out of step by their start-up offsets and falls back to the HPET; its and the
    # vDSO's clamping of backward steps keep the monotonic clock monotonic. Measured on the
    # origin machine with two idle real kubelets: a third less CPU in each kubelet (profiled),
    # about a quarter less for the whole qemu process.
    "clocksource=tsc",
    "tsc=reliable",
)
