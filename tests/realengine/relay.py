"""A relay on loopback between the engine and the test host's SSH port, which a test can cut.

The real-engine stack reaches its host through it (its `sshPort`), so that a test can make the
host stop answering SSH as the engine sees it, in the middle of a step, while the test itself
still reaches the host directly: `cut()` ends the relay and every connection through it (socat and
the children it forked for each connection are one process group), `start()` listens again on
the same port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time

from tests.testhost.qemu import pick_free_port
from tests.testhost.tools import require_tools


class SshRelay:
    def __init__(self, target_port: int) -> None:
        require_tools("socat")
        self.target_port = target_port
        self.port = pick_free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Listen on 127.0.0.1:`port`, each connection relayed to the host's SSH port."""
        self._process = subprocess.Popen(
            [
                "socat",
                f"TCP-LISTEN:{self.port},bind=127.0.0.1,reuseaddr,fork",
                f"TCP:127.0.0.1:{self.target_port}",
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"socat did not listen on 127.0.0.1:{self.port}") from None
                time.sleep(0.1)

    def cut(self) -> None:
        """The host stops answering: the listener and every relayed connection end at once."""
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._process = None

    stop = cut

    def ensure_started(self) -> None:
        if self._process is None:
            self.start()
