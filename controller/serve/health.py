"""`/healthz`, `/readyz` (and `/metrics` when plain HTTP is opted into: by default metrics are
served over HTTPS with authentication, controller.serve.metrics_server) on a stdlib HTTP server in a
daemon thread.

The stdlib server keeps the controller free of another web framework for three plain GET
endpoints, and a thread keeps a scrape answering while the event loop is busy (a stuck loop is
what `healthy` should detect, not something that should also stall the probe's transport).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

log = logging.getLogger("dmrollout.controller.health")

METRICS_PATH: Final = "/metrics"
HEALTHZ_PATH: Final = "/healthz"
READYZ_PATH: Final = "/readyz"
_TEXT: Final = "text/plain; charset=utf-8"


class ServedInThread:
    """A stdlib HTTP server on a daemon thread, bound to ``bind:port`` (0: an ephemeral port);
    subclasses build the server and say what it serves."""

    thread_name: str = "dmrollout-http"

    def __init__(self, bind: str, port: int) -> None:
        self._bind = bind
        self._requested_port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when 0 was requested) once started."""
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._server = self._make_server((self._bind, self._requested_port))
        self._thread = serve_in_thread(self._server, self.thread_name)
        log.info("%s listening on %s:%d", type(self).__name__, self._bind, self.port)

    def stop(self) -> None:
        stop_serving(self._server, self._thread)
        self._server = None
        self._thread = None

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        raise NotImplementedError


class HealthServer(ServedInThread):
    """Serves probes and, when `metrics` is given (plain HTTP opted into), the rendered metrics;
    `port=0` binds an ephemeral port. Used by the controller and the worker."""

    thread_name = "dmrollout-health"

    def __init__(
        self,
        bind: str,
        port: int,
        metrics: Callable[[], bytes] | None,
        ready: Callable[[], bool],
        healthy: Callable[[], bool],
    ) -> None:
        super().__init__(bind, port)
        self._metrics = metrics
        self._ready = ready
        self._healthy = healthy

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(address, self._handler_class())
        # Handler threads must not keep the process alive at exit.
        server.daemon_threads = True
        return server

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == METRICS_PATH and owner._metrics is not None:
                    reply(self, 200, owner._metrics(), CONTENT_TYPE_PLAIN_0_0_4)
                elif path == HEALTHZ_PATH:
                    ok = _call(owner._healthy)
                    reply(self, 200 if ok else 500, b"ok\n" if ok else b"unhealthy\n", _TEXT)
                elif path == READYZ_PATH:
                    ok = _call(owner._ready)
                    reply(self, 200 if ok else 503, b"ok\n" if ok else b"not ready\n", _TEXT)
                else:
                    reply(self, 404, b"not found\n", _TEXT)

            def log_message(self, format: str, *args: object) -> None:
                # Probes hit these every few seconds; access lines would drown the log.
                log.debug("%s " + format, self.address_string(), *args)

        return Handler


def reply(
    handler: BaseHTTPRequestHandler,
    code: int,
    body: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Send one whole response (status, headers, body) from a request handler."""
    handler.send_response(code)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def serve_in_thread(server: ThreadingHTTPServer, name: str) -> threading.Thread:
    """Serve ``server`` on a daemon thread (it must not keep the process alive at exit)."""
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    return thread


def stop_serving(server: ThreadingHTTPServer | None, thread: threading.Thread | None) -> None:
    """Stop a server started by ``serve_in_thread``; the join is bounded."""
    if server is None:
        return
    server.shutdown()
    server.server_close()
    if thread is not None:
        thread.join(timeout=5)


def _call(check: Callable[[], bool]) -> bool:
    """A check that raises counts as failing (and is logged) instead of breaking the probe."""
    try:
        return bool(check())
    except Exception:
        log.exception("health check %r raised", check)
        return False
