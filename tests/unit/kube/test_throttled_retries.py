"""A 429 from the API server (its fairness asking to slow down, as for a few seconds after a CRD
was established) is sent again after its Retry-After by a client that allows it (the CLI, as
kubectl), and fails at once for one that does not (the controller and the worker, which back off
in their own loops). Against a loopback HTTP server that answers 429 a given number of times."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from kube.errors import Unavailable, translated
from kube.timeouts import KubeTimeouts, configure


class Throttling(ThreadingHTTPServer):
    refusals = 0
    seen = 0


class Handler(BaseHTTPRequestHandler):
    server: Throttling

    def do_GET(self) -> None:
        self.server.seen += 1
        if self.server.seen <= self.server.refusals:
            self.send_response(429)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"kind": "NamespaceList", "apiVersion": "v1", "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Throttling]:
    httpd = Throttling(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


def core(server: Throttling, timeouts: KubeTimeouts) -> client.CoreV1Api:
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    configure(configuration, timeouts)
    return translated(client.CoreV1Api(client.ApiClient(configuration)))


def test_the_cli_sends_a_throttled_request_again(server: Throttling) -> None:
    server.refusals = 3
    listed = core(server, KubeTimeouts(throttled_retries=8)).list_namespace()
    assert listed.items == [] and server.seen == 4


def test_the_cli_gives_up_after_its_retries(server: Throttling) -> None:
    server.refusals = 100
    with pytest.raises(Unavailable):
        core(server, KubeTimeouts(throttled_retries=2)).list_namespace()
    assert server.seen == 3


def test_the_controller_leaves_a_429_to_its_own_backoff(server: Throttling) -> None:
    server.refusals = 1
    with pytest.raises(Unavailable):
        core(server, KubeTimeouts()).list_namespace()
    assert server.seen == 1
