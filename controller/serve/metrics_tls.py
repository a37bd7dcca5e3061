"""The serving certificate of the metrics endpoint: a certificate and key from files (e.g. a
cert-manager Secret mounted into the Pod), or, when none is given, a self-signed one made at
start, as controller-runtime's metrics server does. A self-signed certificate still encrypts the
scrape and the bearer token in it; Prometheus then scrapes with ``insecureSkipVerify`` (or
trusts a CA when a real certificate is mounted).

Certificates from files are re-read when a file changes (cert-manager renews them in place), so
a renewal needs no restart: the next connection gets the new certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

log = logging.getLogger("dmrollout.metrics.tls")

SELF_SIGNED_DAYS = 365


class ServingCertificate:
    def __init__(self, cert_file: str | None = None, key_file: str | None = None) -> None:
        if bool(cert_file) != bool(key_file):
            raise ValueError("metrics TLS: give both cert_file and key_file, or neither")
        self._files = (Path(cert_file), Path(key_file)) if cert_file and key_file else None
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._context = self._first_load() if self._files else _self_signed_context()

    @property
    def self_signed(self) -> bool:
        return self._files is None

    def context(self) -> ssl.SSLContext:
        """The current context; re-read from the files when either changed since."""
        if self._files is None:
            return self._context
        with self._lock:
            if self._mtimes() != self._stamp:
                try:
                    self._context = self._load()
                    log.info("metrics TLS certificate reloaded from %s", self._files[0])
                except (OSError, ssl.SSLError) as e:
                    # Mid-rotation (the key written, the certificate not yet): keep serving
                    # the previous pair and try again on the next connection.
                    log.warning("metrics TLS certificate not reloaded yet: %s", e)
            return self._context

    def _first_load(self) -> ssl.SSLContext:
        assert self._files is not None
        try:
            return self._load()
        except (OSError, ssl.SSLError) as e:
            # Fail the start with the setting to fix, not a bare traceback from ssl.
            raise ValueError(
                f"metrics TLS: cannot load {self._files[0]} and its key ({e}); check "
                "DMROLLOUT_METRICS_CERT_DIR (metrics.certSecret) or leave it empty for a "
                "self-signed certificate"
            ) from e

    def _mtimes(self) -> tuple[float, float]:
        assert self._files is not None
        return (self._files[0].stat().st_mtime, self._files[1].stat().st_mtime)

    def _load(self) -> ssl.SSLContext:
        assert self._files is not None
        stamp = self._mtimes()
        context = _server_context()
        context.load_cert_chain(str(self._files[0]), str(self._files[1]))
        self._stamp = stamp
        return context


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def self_signed_pem(hostnames: list[str]) -> tuple[bytes, bytes]:
    """A certificate (PEM) for ``hostnames`` plus the loopback addresses, and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dmrollout-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = [x509.DNSName(h) for h in hostnames]
    alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _self_signed_context() -> ssl.SSLContext:
    hostnames = sorted({"localhost", socket.gethostname()})
    cert_pem, key_pem = self_signed_pem(hostnames)
    context = _server_context()
    # The ssl module loads a key only from a file: a private directory (the chart mounts a
    # writable /tmp), deleted as soon as the context holds the pair.
    with tempfile.TemporaryDirectory(prefix="dmrollout-metrics-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        Path(cert_path).write_bytes(cert_pem)
        context.load_cert_chain(cert_path, key_path)
    log.info("metrics TLS: self-signed certificate for %s (no certificate files given)", hostnames)
    return context
