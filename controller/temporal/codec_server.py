"""``dmrollout codec-server``: the Temporal codec server protocol over the payload codec.

The Temporal Web UI (and ``temporal --codec-endpoint``) sends the payloads it is about to show to
``POST <endpoint>/decode`` as ``{"payloads": [...]}`` (protobuf JSON) and shows what comes back;
``/encode`` is the reverse (the CLI uses it for signal and query arguments). The browser calls
the endpoint directly, so the UI's origin must be allowed by CORS, and whoever reaches the
endpoint can read every payload: it binds to loopback by default, and an optional bearer token
(``--auth-token-file``; the CLI's ``--codec-auth``) guards it when it listens wider.

A stdlib server in threads, like the health endpoints: no web framework for two POST routes.
"""

from __future__ import annotations

import hmac
import logging
import ssl
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from controller.temporal.payload_codec import AesGcmCodec, PayloadUndecryptable

log = logging.getLogger("dmrollout.codec_server")

MAX_BODY_BYTES: Final = 16 * 1024 * 1024  # a UI page of large payloads; far above the usual
ALLOWED_HEADERS: Final = "authorization, content-type, x-namespace"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, the form browsers send in ``Origin``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class CodecServerConfig:
    bind: str = "127.0.0.1"
    port: int = 8081
    # Browser origins allowed to call (the Temporal UI's); others get no CORS headers.
    origins: frozenset[str] = field(default_factory=frozenset)
    # The Temporal namespace served; a request naming another one (X-Namespace) is refused.
    namespace: str | None = None
    # When set, every POST must carry ``Authorization: Bearer <token>``.
    token: str | None = field(default=None, repr=False)
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None


class CodecServer:
    """Serves /encode and /decode for one codec; ``port=0`` binds an ephemeral port."""

    def __init__(self, codec: AesGcmCodec, config: CodecServerConfig) -> None:
        self.codec = codec
        self.config = config
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server else self.config.port

    def start(self) -> CodecServer:
        server = ThreadingHTTPServer((self.config.bind, self.config.port), _handler(self))
        server.daemon_threads = True
        if self.config.tls_cert_file is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.config.tls_cert_file, self.config.tls_key_file)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="codec-server")
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def route(self, target: str) -> Callable[[Iterable[Payload]], list[Payload]] | None:
        # The UI appends /decode to the configured endpoint, with a query string of options
        # (seen: ?preserveStorageRefs=true) this codec has no use for.
        path = urlsplit(target).path.rstrip("/")
        if path.endswith("/decode"):
            return self.codec.decrypt_all
        if path.endswith("/encode"):
            return self.codec.encrypt_all
        return None

    def authorized(self, header: str | None) -> bool:
        if self.config.token is None:
            return True
        expected = f"Bearer {self.config.token}".encode()
        return header is not None and hmac.compare_digest(header.encode(), expected)


def _handler(server: CodecServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_OPTIONS(self) -> None:
            # A preflight carries no credentials: answered for allowed origins, no auth.
            self._reply(HTTPStatus.NO_CONTENT, b"", "text/plain")

        def do_POST(self) -> None:
            apply = server.route(self.path)
            if apply is None:
                return self._reply(HTTPStatus.NOT_FOUND, b"POST /encode or /decode\n")
            if not server.authorized(self.headers.get("Authorization")):
                return self._reply(HTTPStatus.UNAUTHORIZED, b"missing or wrong bearer token\n")
            namespace = self.headers.get("X-Namespace")
            if server.config.namespace and namespace and namespace != server.config.namespace:
                return self._reply(HTTPStatus.FORBIDDEN, b"this codec serves another namespace\n")
            length = _content_length(self.headers.get("Content-Length"))
            if length is None:  # read(-1) would read until the client closes: unbounded
                return self._reply(HTTPStatus.LENGTH_REQUIRED, b"Content-Length required\n")
            if length > MAX_BODY_BYTES:
                return self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"body too large\n")
            try:
                payloads = json_format.Parse(self.rfile.read(length), Payloads()).payloads
                out = Payloads(payloads=apply(payloads))
            except json_format.ParseError:
                return self._reply(HTTPStatus.BAD_REQUEST, b'expected {"payloads": [...]}\n')
            except PayloadUndecryptable as e:  # names the key ID, never a key or the payload
                return self._reply(HTTPStatus.BAD_REQUEST, f"{e}\n".encode())
            body = json_format.MessageToJson(out, indent=None).encode()
            self._reply(HTTPStatus.OK, body, "application/json")

        def _reply(
            self, status: HTTPStatus, body: bytes, content_type: str = "text/plain; charset=utf-8"
        ) -> None:
            self.send_response(status)
            for name, value in _cors(server.config.origins, self.headers.get("Origin")):
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            # Method, path and status only: bodies are payloads.
            log.info("%s %s", self.address_string(), format % args)

    return Handler


def _content_length(header: str | None) -> int | None:
    try:
        length = int(header or "")
    except ValueError:
        return None
    return length if length >= 0 else None


def _cors(origins: frozenset[str], origin: str | None) -> Sequence[tuple[str, str]]:
    if origin is None or origin not in origins:
        return [("Vary", "Origin")]
    return [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Allow-Methods", "POST, OPTIONS"),
        ("Access-Control-Allow-Headers", ALLOWED_HEADERS),
        # The UI's "include cross-origin credentials" option sends cookies along.
        ("Access-Control-Allow-Credentials", "true"),
        ("Vary", "Origin"),
    ]
