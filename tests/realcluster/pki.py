"""The test control plane's certificates: one CA (also the CSR signer), serving and client certs.

Made with `cryptography` on every session start (EC P-256: fast to generate), valid for a day.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path

    def cert_pem(self) -> str:
        return self.cert.read_text()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


class CertificateAuthority:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("numa-kubelets-test-ca"))
            .issuer_name(_name("numa-kubelets-test-ca"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.pair = self._write("ca", self._cert, self._key)

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> KeyPair:
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair

    def issue(
        self,
        stem: str,
        common_name: str,
        organization: str | None = None,
        *,
        server_names: tuple[str, ...] = (),
        client: bool = True,
    ) -> KeyPair:
        """A leaf certificate: a client one (CN = user, O = group) and/or a serving one for `server_names`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            names: list[x509.GeneralName] = []
            for name in server_names:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(name)))
                except ValueError:
                    names.append(x509.DNSName(name))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        return self._write(stem, builder.sign(self._key, hashes.SHA256()), key)


def service_account_keys(directory: Path) -> KeyPair:
    """The key the API server signs service-account tokens with (`key`) and the public half it and
    the controller-manager check them against (`cert`: kube-apiserver reads only RSA private keys
    or public keys from --service-account-key-file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pair = KeyPair(directory / "service-account.pub", directory / "service-account.key")
    pair.key.write_bytes(_key_pem(key))
    pair.key.chmod(0o600)
    pair.cert.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pair
