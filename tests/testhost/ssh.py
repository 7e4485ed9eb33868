"""Running scripts on the test host over SSH (paramiko), with a pinned host key."""

from __future__ import annotations

import base64
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko

from .tools import TestHostError

StdinData = str | bytes | None
# What one sendall gets (see _communicate).
STDIN_CHUNK = 256 * 1024


@dataclass(frozen=True)
class RunResult:
    rc: int
    stdout: str
    stderr: str


class RemoteCommandError(TestHostError):
    def __init__(self, script: str, result: RunResult):
        self.script = script
        self.result = result
        super().__init__(
            f"remote script exited with {result.rc}\n--- script\n{script}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )


class SshSession:
    """One lazily (re)opened SSH connection; every `run` is its own channel."""

    def __init__(
        self,
        address: str,
        port: int,
        user: str,
        key_path: Path,
        host_key: str,
        connect_timeout: float = 10.0,
    ):
        self.address = address
        self.port = port
        self.user = user
        self.key_path = Path(key_path)
        self.host_key = host_key
        self.connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    def run(
        self,
        script: str,
        stdin: StdinData = None,
        check: bool = True,
        timeout: float | None = 600.0,
    ) -> RunResult:
        """Run `script` with bash on the host, feeding it `stdin`; raise on non-zero if `check`."""
        channel = self._transport().open_session(timeout=self.connect_timeout)
        try:
            channel.settimeout(timeout)
            channel.exec_command(f"bash -c {shlex.quote(script)}")
            result = _communicate(channel, stdin)
        finally:
            channel.close()
        if check and result.rc != 0:
            raise RemoteCommandError(script, result)
        return result

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                self._client = self._connect()
                transport = self._client.get_transport()
            return transport

    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        key_type, key_data = self.host_key.split()[:2]
        client.get_host_keys().add(
            self._known_hosts_name(),
            key_type,
            paramiko.PKey.from_type_string(key_type, base64.b64decode(key_data)),
        )
        # Anything but the pinned key is an error, never silently accepted.
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            self.address,
            port=self.port,
            username=self.user,
            pkey=paramiko.PKey.from_path(self.key_path),
            look_for_keys=False,
            allow_agent=False,
            timeout=self.connect_timeout,
            banner_timeout=self.connect_timeout,
            auth_timeout=self.connect_timeout,
        )
        client.get_transport().set_keepalive(15)
        return client

    def _known_hosts_name(self) -> str:
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"


def _communicate(channel: paramiko.Channel, stdin: StdinData) -> RunResult:
    """Feed stdin and drain stdout and stderr at once.

    Both streams share one SSH window: reading only one of them can stall
    the remote side when it writes a lot to the other.
    """
    data = stdin.encode() if isinstance(stdin, str) else stdin
    stderr_chunks: list[bytes] = []
    errors: list[BaseException] = []

    def feed_stdin() -> None:
        try:
            # In pieces: paramiko's sendall copies the rest of its argument after every packet
            # (`s = s[sent:]`), which made a 145 MB stdin (the real kubelet) take hours.
            for start in range(0, len(data or b""), STDIN_CHUNK):
                channel.sendall(data[start : start + STDIN_CHUNK])  # type: ignore[index]
        except BaseException as error:  # reported after the command finished
            errors.append(error)
        finally:
            channel.shutdown_write()

    def drain_stderr() -> None:
        try:
            stderr_chunks.append(channel.makefile_stderr("rb").read())
        except BaseException as error:
            errors.append(error)

    helpers = [threading.Thread(target=feed_stdin, daemon=True), threading.Thread(target=drain_stderr, daemon=True)]
    for helper in helpers:
        helper.start()
    stdout = channel.makefile("rb").read()
    for helper in helpers:
        helper.join()
    rc = channel.recv_exit_status()
    if errors and not isinstance(errors[0], OSError):
        raise errors[0]
    return RunResult(
        rc=rc,
        stdout=stdout.decode(errors="replace"),
        stderr=b"".join(stderr_chunks).decode(errors="replace"),
    )
