"""Ed25519 key pairs in OpenSSH format, generated without ssh-keygen.

`cryptography` comes with paramiko, so the image build needs no extra host
tool for keys, and the files are readable by OpenSSH, paramiko and
pulumi-command (Go's x/crypto/ssh) alike.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def write_ed25519_key_pair(private_path: Path, comment: str) -> str:
    """Write `private_path` (mode 600) and `private_path.pub`; return the public line."""
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public_line = (
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
        + f" {comment}"
    )
    # Created with 600 from the start: ssh refuses group/world-readable keys.
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
    Path(f"{private_path}.pub").write_text(public_line + "\n")
    return public_line


def public_key_line(line: str) -> str:
    """`type base64` of an OpenSSH public key line, without its comment."""
    key_type, key_data, *_comment = line.split()
    return f"{key_type} {key_data}"
