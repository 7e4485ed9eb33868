"""Host tools the test host needs, and running them with useful failures."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

# Debian package that provides each host tool, so a failure says what to install.
DEBIAN_PACKAGE_OF = {
    "mmdebstrap": "mmdebstrap",
    "mkfs.ext4": "e2fsprogs",
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "ssh": "openssh-client",
    "socat": "socat",
}


class TestHostError(RuntimeError):
    """The test host could not be built, booted or reached."""

    __test__ = False  # not a pytest test class despite the name


def require_tools(*names: str) -> None:
    """Fail (never skip) when a host tool is missing: CI must install it."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        packages = sorted({DEBIAN_PACKAGE_OF.get(name, name) for name in missing})
        raise TestHostError(f"missing host tools {', '.join(missing)}: apt-get install -y {' '.join(packages)}")


def require_root(purpose: str) -> None:
    if os.geteuid() != 0:
        raise TestHostError(f"{purpose} needs root (mmdebstrap --mode=root)")


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


def run_logged(argv: Sequence[str], log_path: Path, **kwargs) -> None:
    """Run a command with its output in `log_path`; on failure, raise with the log's tail."""
    with open(log_path, "ab") as log:
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        result = subprocess.run(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)
    if result.returncode != 0:
        raise TestHostError(
            f"{shlex.join(argv)} exited with {result.returncode}; last lines of {log_path}:\n{tail(log_path)}"
        )


# What a guest kernel prints when its CPUs stop making progress (a soft lockup, an RCU stall) or
# when it dies (an Oops, a panic): then SSH fails for the guest's reason, not the test's, and the
# failure should say so.
_STALL_LINE = re.compile(r"watchdog: BUG: soft lockup|rcu_\w+ detected stalls|\] Oops: |Kernel panic - not syncing")
_PANIC_LINE = re.compile(r"Kernel panic - not syncing")


def _console_lines(serial_log: Path) -> list[str]:
    try:
        return serial_log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def guest_stalls(serial_log: Path, limit: int = 6) -> list[str]:
    """The guest kernel's stall and crash reports in its serial console log, the first `limit`."""
    return [line.strip() for line in _console_lines(serial_log) if _STALL_LINE.search(line)][:limit]


def guest_panic(serial_log: Path) -> str | None:
    """The guest kernel's panic line, if it panicked (it then stays halted, and qemu runs on)."""
    return next((line.strip() for line in _console_lines(serial_log) if _PANIC_LINE.search(line)), None)
