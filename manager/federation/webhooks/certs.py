"""Serving certificates for the manager's admission webhook.

kube-apiserver only calls webhooks over TLS and verifies them against the ``caBundle`` of the
webhook configuration, so the manager needs a certificate the apiserver trusts. Without
cert-manager at hand, the manager makes its own: a throwaway self-signed CA and one serving
certificate for the names and IPs the apiserver dials. The CA's PEM is the ``caBundle``.

Files use the key names of a ``kubernetes.io/tls`` Secret (``tls.crt``, ``tls.key``,
``ca.crt``), so a certificate mounted from a Secret (e.g. issued by cert-manager) serves the
same way as a generated one. EC P-256 keys keep generation to milliseconds.

Several manager replicas share one generated certificate through such a Secret
(``secret_data``/``from_secret_data``); ``renewal_reason`` says when a stored one no longer
fits (expiring, or not naming the hosts the apiserver dials).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"
SECRET_TYPE = "kubernetes.io/tls"

DEFAULT_VALIDITY = dt.timedelta(days=365)
_CLOCK_SKEW = dt.timedelta(minutes=5)
"""Certificates start this much in the past, so a slightly slow apiserver clock accepts them."""


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    """A serving certificate, its key and the CA that signed it, all PEM, all in memory.
    ``ca_pem`` may be a bundle: during a renewal it also holds the previous CA, so replicas
    still serving the previous certificate stay trusted."""

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

    def secret_data(self) -> dict[str, str]:
        """The ``data`` of a ``kubernetes.io/tls`` Secret holding this certificate."""
        pems = {CERT_FILE: self.cert_pem, KEY_FILE: self.key_pem, CA_FILE: self.ca_pem}
        return {name: base64.b64encode(pem).decode() for name, pem in pems.items()}

    @classmethod
    def from_secret_data(cls, data: object) -> ServingCertificate:
        """Read a Secret's ``data`` back; ValueError names what is missing or unreadable."""
        if not isinstance(data, dict):
            raise ValueError("the Secret has no data")
        pems: dict[str, bytes] = {}
        for name in (CERT_FILE, KEY_FILE, CA_FILE):
            value = data.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"the Secret has no {name}")
            try:
                pems[name] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"the Secret's {name} is not valid base64") from None
        return cls(ca_pem=pems[CA_FILE], cert_pem=pems[CERT_FILE], key_pem=pems[KEY_FILE])


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


def renewal_reason(
    certificate: ServingCertificate,
    hosts: Sequence[str],
    *,
    margin: dt.timedelta,
    now: dt.datetime | None = None,
) -> str | None:
    """Why ``certificate`` should be replaced before serving ``hosts`` (None: it is fine):
    unreadable, key and certificate not a pair, expiring within ``margin``, not yet valid,
    a host missing from its subject alternative names, or not signed by a CA of the bundle."""
    moment = now or dt.datetime.now(dt.UTC)
    try:
        cert = x509.load_pem_x509_certificate(certificate.cert_pem)
        key = serialization.load_pem_private_key(certificate.key_pem, password=None)
        authorities = x509.load_pem_x509_certificates(certificate.ca_pem)
    except ValueError as err:
        return f"unreadable: {err}"
    if cert.public_key() != key.public_key():
        return "the key does not belong to the certificate"
    if cert.not_valid_after_utc - margin <= moment:
        return f"it expires at {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    if cert.not_valid_before_utc > moment:
        return f"it is valid only from {cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "it names no host"
    covered = {str(n) for n in names.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in names.get_values_for_type(x509.IPAddress)
    }
    missing = [h for h in hosts if _canonical(h) not in covered]
    if missing:
        return f"it does not name {', '.join(missing)}"
    if not any(_issued_by(cert, ca) for ca in authorities):
        return "no CA of its bundle issued it"
    return None


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def unexpired_authorities(bundle: bytes, *, now: dt.datetime | None = None) -> bytes:
    """The CA certificates of a PEM bundle that are still valid (empty if unreadable)."""
    moment = now or dt.datetime.now(dt.UTC)
    try:
        authorities = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return b""
    return b"".join(
        ca.public_bytes(serialization.Encoding.PEM)
        for ca in authorities
        if ca.not_valid_after_utc > moment
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


def _canonical(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names
