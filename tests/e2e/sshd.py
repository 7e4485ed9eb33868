"""A real OpenSSH server on loopback for the tests: Debian's sshd with its own configuration, host
key and authorized keys, serving an unprivileged user (tests/e2e/test_command_plugin.py,
tests/e2e/test_discover.py)."""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
# The unprivileged login of the commands when the tests run as root (CI); otherwise their own user.
LOGIN_USER = "numa-kubelets-ssh"


def login_user() -> pwd.struct_passwd:
    """The commands' user: as root, LOGIN_USER (created once, with a shell and a home: sshd's
    session starts in it); otherwise the current user, the only one a non-root sshd can serve."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        pwd.getpwnam(LOGIN_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", LOGIN_USER], check=True)
    # useradd locks the password ("!"), and sshd without PAM refuses a locked account even for a
    # key; "*" allows no password login either, but is not locked.
    subprocess.run(["usermod", "--password", "*", LOGIN_USER], check=True)
    return pwd.getpwnam(LOGIN_USER)


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


def generate_key(path: Path) -> str:
    """An ed25519 key pair at path (and path.pub); returns the public key."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def start_sshd(
    directory: Path,
    name: str,
    accept_env: tuple[str, ...],
    addresses: Sequence[str] = ("127.0.0.1",),
    extra_lines: Sequence[str] = (),
) -> tuple[subprocess.Popen[bytes], int]:
    """sshd on one free port of each address (`directory` holds `host_key` and `authorized_keys`);
    `extra_lines` end its configuration (e.g. `Match` blocks). Returns once every address answers."""
    port = free_port(addresses[0])
    config = directory / f"{name}.conf"
    lines = [f"ListenAddress {address}:{port}" for address in addresses]
    lines += [
        f"HostKey {directory / 'host_key'}",
        f"PidFile {directory / name}.pid",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        f"AllowUsers {login_user().pw_name}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The authorized keys live in this directory, not the user's home.
        "StrictModes no",
        "LogLevel VERBOSE",
    ]
    if accept_env:
        lines.append(f"AcceptEnv {' '.join(accept_env)}")
    lines += extra_lines
    config.write_text("\n".join(lines) + "\n")
    log = (directory / f"{name}.log").open("wb")
    # -D: in the foreground, -e: log to stderr (the log file); an absolute path, for its re-exec.
    server = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    waiting = list(addresses)
    while waiting:
        try:
            with socket.create_connection((waiting[0], port), timeout=1) as probe:
                if probe.recv(64).startswith(b"SSH-2.0-"):
                    waiting.pop(0)
                    continue
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise AssertionError(f"sshd {name} did not start: {(directory / f'{name}.log').read_text()}")
        time.sleep(0.1)
    return server, port
