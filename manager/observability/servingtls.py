"""The TLS of the observability port when it is served securely (``--metrics-secure``).

The certificate comes from one of two places, as with controller-runtime's secure metrics:

- a directory (``--metrics-cert-dir``) holding ``tls.crt`` and ``tls.key``, e.g. a mounted
  ``kubernetes.io/tls`` Secret that cert-manager renews. The files are checked every
  ``reload_period`` seconds; a changed pair that loads is served from the next connection on,
  without a restart (a pair caught half-written is skipped and read again next time);
- none given: a self-signed certificate generated at start, in memory. Scrapers then skip
  verification (``insecureSkipVerify``, as upstream Kueue's ServiceMonitor does); the bearer
  token, not the certificate, is what protects the endpoint.

How the swap works: the server listens with one ``SSLContext`` whose SNI callback, called on
every ClientHello, points the connection at the current context (Go's ``GetCertificate``).
A new pair is loaded into a fresh context first and swapped in only if it loads: loading it
into the listening context itself is not atomic, and a pair caught half-written could leave
that context with a certificate and a key that do not belong together.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from manager.federation.webhooks import certs

log = logging.getLogger(__name__)

RELOAD_PERIOD = 10.0
"""Seconds between two looks at a certificate directory (controller-runtime polls as often)."""


def _context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def _fingerprint(directory: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        for name in (certs.CERT_FILE, certs.KEY_FILE):
            digest.update((directory / name).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def load_cert_dir(directory: Path) -> ssl.SSLContext:
    """A server context from ``tls.crt`` and ``tls.key`` of ``directory``; ValueError says
    which file is missing or why the pair cannot be used."""
    for name in (certs.CERT_FILE, certs.KEY_FILE):
        if not (directory / name).is_file():
            raise ValueError(f"{directory} has no {name}")
    try:
        return _context(directory / certs.CERT_FILE, directory / certs.KEY_FILE)
    except (ssl.SSLError, OSError) as err:
        raise ValueError(
            f"cannot serve with {directory}'s {certs.CERT_FILE} and key: {err}"
        ) from None


class ServingTLS:
    """The listening context (``context``) of a secure observability port, and the
    certificate it currently serves."""

    def __init__(self, directory: Path, *, watch: bool, reload_period: float) -> None:
        """Serve ``directory``'s pair (checked with ``load_cert_dir`` first); ``watch``: look
        for a new pair there every ``reload_period`` seconds (see ``watch()``)."""
        self._current = load_cert_dir(directory)
        self.cert_dir = directory if watch else None
        self.reload_period = reload_period
        self._seen = _fingerprint(directory) if watch else None
        self.reloads = 0
        """Certificates swapped in since start (the log says when)."""
        # The listening context needs a certificate of its own to start a handshake; the
        # callback then hands each connection to the current one.
        self.context = load_cert_dir(directory)
        self.context.sni_callback = self._choose

    @classmethod
    def from_cert_dir(cls, cert_dir: Path, *, reload_period: float = RELOAD_PERIOD) -> ServingTLS:
        return cls(cert_dir, watch=True, reload_period=reload_period)

    @classmethod
    def self_signed(cls, hosts: Sequence[str]) -> ServingTLS:
        """A certificate generated now for ``hosts``, for this process alone (its files are
        deleted once loaded)."""
        generated = certs.generate_serving_certificate(hosts, common_name="kfed-metrics")
        with tempfile.TemporaryDirectory(prefix="kfed-metrics-") as tmp:
            return cls(generated.write(tmp), watch=False, reload_period=RELOAD_PERIOD)

    def _choose(self, connection: ssl.SSLObject, _server_name: str | None, _: object) -> None:
        connection.context = self._current

    def reload_if_changed(self) -> bool:
        """Serve the directory's pair if it changed and loads; True when it was swapped."""
        if self.cert_dir is None:
            return False
        current = _fingerprint(self.cert_dir)
        if current is None or current == self._seen:
            return False
        try:
            context = load_cert_dir(self.cert_dir)
        except ValueError as err:
            log.warning("not reloading the metrics certificate yet: %s", err)
            return False
        self._current, self._seen = context, current
        self.reloads += 1
        log.info("metrics serving certificate in %s changed: serving the new one", self.cert_dir)
        return True

    async def watch(self) -> None:
        """Reload on change, every ``reload_period`` seconds, until cancelled."""
        if self.cert_dir is None:
            return
        while True:
            await asyncio.sleep(self.reload_period)
            try:
                self.reload_if_changed()
            except Exception:
                log.exception("could not check the metrics certificate in %s", self.cert_dir)
