"""The relay qemu runs for each guest connection to the API address (qemu.py guest_forward_rule)."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.testhost.qemu import GUEST_API_ADDRESS, GUEST_API_PORT, GUEST_FORWARD_SCRIPT, guest_forward_rule
from tests.testhost.tools import TestHostError


def relay(port_file: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["/bin/sh", str(GUEST_FORWARD_SCRIPT), str(port_file)], input=data, capture_output=True)


def test_the_relay_carries_the_connection_to_the_port_in_the_file(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer() -> None:
            connection, _ = server.accept()
            with connection:
                connection.sendall(connection.recv(100).upper())

        thread = threading.Thread(target=answer)
        thread.start()
        port_file = tmp_path / "guest-api-port"
        port_file.write_text(f"{server.getsockname()[1]}\n")
        result = relay(port_file, b"hello")
        thread.join(timeout=10)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"HELLO"


@pytest.mark.parametrize("content", [None, "", "6443; touch /tmp/x", "-1"])
def test_the_relay_closes_the_connection_without_a_valid_port(tmp_path, content):
    port_file = tmp_path / "guest-api-port"
    if content is not None:
        port_file.write_text(content)
    assert relay(port_file, b"hello").returncode == 1


def test_the_forwarding_rule_opens_only_the_api_address(tmp_path):
    rule = guest_forward_rule(tmp_path / "port")
    assert rule == (
        f"guestfwd=tcp:{GUEST_API_ADDRESS}:{GUEST_API_PORT}-cmd:/bin/sh {GUEST_FORWARD_SCRIPT} {tmp_path / 'port'}"
    )
    with pytest.raises(TestHostError, match="comma"):
        guest_forward_rule(tmp_path / "a,b")
