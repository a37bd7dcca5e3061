"""HealthServer over real HTTP on 127.0.0.1 (run inside hack/in-netns.sh)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry

from controller.serve.health import HealthServer
from controller.serve.metrics import ControllerMetrics


class Flags:
    def __init__(self) -> None:
        self.ready = False
        self.healthy = True


@pytest.fixture
def flags() -> Flags:
    return Flags()


@pytest.fixture
def metrics() -> ControllerMetrics:
    return ControllerMetrics(CollectorRegistry())


@pytest.fixture
def server(flags: Flags, metrics: ControllerMetrics) -> Iterator[HealthServer]:
    srv = HealthServer("127.0.0.1", 0, metrics.render, lambda: flags.ready, lambda: flags.healthy)
    srv.start()
    yield srv
    srv.stop()


def get(target: str, timeout: float = 5.0) -> httpx.Response:
    # trust_env=False: a proxy from the environment must never see loopback probes.
    return httpx.get(target, timeout=timeout, trust_env=False)


def url(server: HealthServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def test_ephemeral_port_is_bound(server: HealthServer) -> None:
    assert server.port > 0


def test_metrics_endpoint(server: HealthServer, metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status("ns1", "dm1", {}, {"phase": "Ready"})
    r = get(url(server, "/metrics"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'decisionmodel_phase{name="dm1",namespace="ns1",phase="Ready"} 1.0' in r.text
    # Scrapes see later updates (no caching).
    metrics.forget("ns1", "dm1")
    assert 'name="dm1"' not in get(url(server, "/metrics")).text


def test_healthz_follows_the_callable(server: HealthServer, flags: Flags) -> None:
    r = get(url(server, "/healthz"))
    assert (r.status_code, r.text) == (200, "ok\n")
    flags.healthy = False
    assert get(url(server, "/healthz")).status_code == 500


def test_readyz_follows_the_callable(server: HealthServer, flags: Flags) -> None:
    assert get(url(server, "/readyz")).status_code == 503
    flags.ready = True
    assert get(url(server, "/readyz")).status_code == 200


def test_raising_check_is_a_failure(metrics: ControllerMetrics) -> None:
    def boom() -> bool:
        raise RuntimeError("loop stuck")

    srv = HealthServer("127.0.0.1", 0, metrics.render, boom, boom)
    srv.start()
    try:
        assert get(url(srv, "/healthz")).status_code == 500
        assert get(url(srv, "/readyz")).status_code == 503
    finally:
        srv.stop()


def test_unknown_path_is_404(server: HealthServer) -> None:
    assert get(url(server, "/nope")).status_code == 404


def test_stop_closes_the_socket(flags: Flags, metrics: ControllerMetrics) -> None:
    srv = HealthServer("127.0.0.1", 0, metrics.render, lambda: True, lambda: True)
    srv.start()
    port = srv.port
    assert get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    srv.stop()  # idempotent
