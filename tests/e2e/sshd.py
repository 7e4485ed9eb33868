"""A real OpenSSH server on loopback for the tests: Debian's sshd with its own configuration, host
key and authorized keys, serving an unprivileged user (tests/e2e/test_command_plugin.py,
tests/e2e/test_discover.py, tests/e2e/test_error_messages.py)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class SshdDirectory:
    """A server's directory: its `host_key`, the client's `client_key` and `authorized_keys`."""

    path: Path
    host_key: str  # "ssh-ed25519 AAAA...", without the comment
    client_key: Path


@contextmanager
def sshd_directory(prefix: str) -> Iterator[SshdDirectory]:
    """A fresh server directory with its keys, removed afterwards. Outside pytest's tmp (0700 for
    root), readable by all: the login user reads the keys and what a test puts beside them."""
    assert SSHD.is_file(), f"{SSHD} is missing: install Debian's openssh-server"
    login_user()
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    try:
        host_key = generate_key(directory / "host_key")
        client_key = generate_key(directory / "client_key")
        (directory / "authorized_keys").write_text(client_key + "\n")
        (directory / "authorized_keys").chmod(0o644)
        yield SshdDirectory(directory, " ".join(host_key.split()[:2]), directory / "client_key")
    finally:
        shutil.rmtree(directory)


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
