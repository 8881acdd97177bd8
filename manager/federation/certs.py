"""Serving certificates for the manager's admission webhook.

kube-apiserver only calls webhooks over TLS and verifies them against the ``caBundle`` of the
webhook configuration, so the manager needs a certificate the apiserver trusts. Without
cert-manager at hand, the manager makes its own: a throwaway self-signed CA and one serving
certificate for the names and IPs the apiserver dials. The CA's PEM is the ``caBundle``.

Files use the key names of a ``kubernetes.io/tls`` Secret (``tls.crt``, ``tls.key``,
``ca.crt``), so a certificate mounted from a Secret (e.g. issued by cert-manager) serves the
same way as a generated one. EC P-256 keys keep generation to milliseconds.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"

DEFAULT_VALIDITY = dt.timedelta(days=365)
_CLOCK_SKEW = dt.timedelta(minutes=5)
"""Certificates start this much in the past, so a slightly slow apiserver clock accepts them."""


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    """A serving certificate, its key and the CA that signed it, all PEM, all in memory."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_bundle(self) -> bytes:
        """What goes into the webhook configuration's ``clientConfig.caBundle``."""
        return self.ca_pem

    def write(self, directory: Path | str) -> Path:
        """Write ``tls.crt``, ``tls.key`` (mode 0600) and ``ca.crt``; return the directory."""
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        key = target / KEY_FILE
        key.touch(mode=0o600, exist_ok=True)
        key.chmod(0o600)  # before the key is in it
        key.write_bytes(self.key_pem)
        (target / CERT_FILE).write_bytes(self.cert_pem)
        (target / CA_FILE).write_bytes(self.ca_pem)
        return target


def generate_serving_certificate(
    hosts: Sequence[str],
    *,
    common_name: str = "kfed-manager-webhook",
    validity: dt.timedelta = DEFAULT_VALIDITY,
    now: dt.datetime | None = None,
) -> ServingCertificate:
    """A fresh CA and a serving certificate for ``hosts`` (DNS names and IP addresses).

    The apiserver checks the name it dials against the subject alternative names only
    (Go ignores the common name), so every host must be listed here.
    """
    if not hosts:
        raise ValueError("a serving certificate needs at least one host name or IP address")
    start = (now or dt.datetime.now(dt.UTC)) - _CLOCK_SKEW
    end = start + _CLOCK_SKEW + validity

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name}-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write_serving_certificate(directory: Path | str, hosts: Sequence[str]) -> bytes:
    """Generate a serving certificate for ``hosts`` into ``directory``; return the CA bundle."""
    generated = generate_serving_certificate(hosts)
    generated.write(directory)
    return generated.ca_bundle


def server_ssl_context(cert_dir: Path | str) -> ssl.SSLContext:
    """The TLS context a webhook server listens with (``tls.crt`` and ``tls.key`` of the
    directory); TLS 1.2 at least, as kube-apiserver requires."""
    directory = Path(cert_dir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(directory / CERT_FILE, directory / KEY_FILE)
    return context


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names
