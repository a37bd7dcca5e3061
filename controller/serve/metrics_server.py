"""``/metrics`` over HTTPS, each request authenticated and authorized against the API server.

A stdlib server on daemon threads like the health server (controller.serve.health): the TLS
handshake runs on the request's own thread (``do_handshake_on_connect=False``), so a client
that connects and stalls holds one thread until the socket timeout, never the accept loop.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from controller.serve.health import METRICS_PATH, ServedInThread, reply
from controller.serve.metrics_auth import MetricsAuth
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.metrics_tls import ServingCertificate
from kube.access_review import AccessReviews
from kube.client import Kube

log = logging.getLogger("dmrollout.metrics.server")

_TEXT: Final = "text/plain; charset=utf-8"
# A scrape is one small request: a client silent for this long is dropped.
SOCKET_TIMEOUT_SECONDS: Final = 15.0


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    certificate: ServingCertificate

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        sock.settimeout(SOCKET_TIMEOUT_SECONDS)
        context = self.certificate.context()
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed handshakes (a plain-HTTP client, a port scan) are the client's problem.
        log.debug("metrics connection from %s failed", client_address, exc_info=True)


class SecureMetricsServer(ServedInThread):
    """HTTPS ``/metrics`` behind ``auth``; ``port=0`` binds an ephemeral port."""

    thread_name = "dmrollout-metrics"

    def __init__(
        self,
        bind: str,
        port: int,
        metrics: Callable[[], bytes],
        auth: MetricsAuth,
        certificate: ServingCertificate,
    ) -> None:
        super().__init__(bind, port)
        self._metrics = metrics
        self._auth = auth
        self._certificate = certificate

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        family = socket.AF_INET6 if ":" in self._bind else socket.AF_INET
        server_class = type("_Server", (_TLSServer,), {"address_family": family})
        server: _TLSServer = server_class(address, self._handler_class())
        server.certificate = self._certificate
        return server

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                # Every path is behind the filter, as in controller-runtime: an anonymous
                # client learns nothing, not even which paths exist.
                verdict = owner._auth.check(self.headers.get("Authorization"), "get", path)
                if verdict.status != 200:
                    challenge = {"WWW-Authenticate": 'Bearer realm="dmrollout-metrics"'}
                    headers = challenge if verdict.status == 401 else None
                    reply(self, verdict.status, (verdict.message + "\n").encode(), _TEXT, headers)
                elif path == METRICS_PATH:
                    reply(self, 200, owner._metrics(), CONTENT_TYPE_PLAIN_0_0_4)
                else:
                    reply(self, 404, b"not found\n", _TEXT)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        return Handler


def build_secure_metrics_server(
    settings: MetricsSettings, kube: Kube, metrics: Callable[[], bytes]
) -> SecureMetricsServer | None:
    """The HTTPS server the settings ask for, or None when plain HTTP was opted into (then
    the health server serves ``/metrics``)."""
    if not settings.secure:
        log.warning("metrics: plain HTTP without authentication (DMROLLOUT_METRICS_SECURE=false)")
        return None
    cert_dir = Path(settings.cert_dir) if settings.cert_dir else None
    certificate = (
        ServingCertificate(str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"))
        if cert_dir is not None
        else ServingCertificate()
    )
    auth = MetricsAuth(
        AccessReviews(kube, settings.review_timeout_seconds),
        ttl_seconds=settings.auth_cache_ttl_seconds,
        max_entries=settings.auth_cache_entries,
    )
    return SecureMetricsServer(settings.bind, settings.port, metrics, auth, certificate)
