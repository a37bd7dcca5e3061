"""Where /metrics is served, the serving certificate's reload, bounded reviews, and the
worker's combined series (real sockets on 127.0.0.1: run inside hack/in-netns.sh)."""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from kubernetes import client
from prometheus_client import generate_latest

from controller.reconciler.manager import Manager
from controller.reconciler.settings import ControllerSettings
from controller.serve.metrics_auth import MetricsAuth
from controller.serve.metrics_server import SecureMetricsServer, build_secure_metrics_server
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.metrics_tls import ServingCertificate, self_signed_pem
from controller.serve.sdk_metrics import loopback_url as _loopback_url
from controller.serve.sdk_metrics import with_sdk_series
from controller.temporal.client import TemporalSettings
from controller.worker.run import WorkerMetrics
from decisionmodel.rollout.settings import RolloutSettings
from kube.access_review import AccessReviews, ReviewedUser, ReviewUnavailable
from kube.client import Kube


def get(url: str) -> httpx.Response:
    with httpx.Client(trust_env=False, verify=False, timeout=10) as c:
        return c.get(url)


def manager(metrics: MetricsSettings) -> Manager:
    m = Manager(
        ControllerSettings(leader_election=False, health_bind="127.0.0.1", health_port=0),
        RolloutSettings(),
        TemporalSettings(),
        metrics,
    )
    m.metrics.record_restart("team-a", "router", "restarted")
    return m


def test_plain_http_is_an_opt_in_and_serves_metrics_next_to_the_probes() -> None:
    m = manager(MetricsSettings(secure=False))
    plain = build_secure_metrics_server(
        m.metrics_settings, Kube(client.ApiClient()), m.metrics.render
    )
    assert plain is None
    m.health.start()
    try:
        r = get(f"http://127.0.0.1:{m.health.port}/metrics")
        assert r.status_code == 200
        assert "decisionmodel_rollout_restarts_total" in r.text
    finally:
        m.health.stop()


def test_by_default_the_plain_health_port_serves_probes_but_no_metrics() -> None:
    assert MetricsSettings().secure is True
    assert MetricsSettings().port == 8443
    m = manager(MetricsSettings())
    m.health.start()
    try:
        base = f"http://127.0.0.1:{m.health.port}"
        assert get(f"{base}/metrics").status_code == 404
        assert get(f"{base}/healthz").status_code == 200  # the kubelet's probes keep working
        assert get(f"{base}/readyz").status_code in (200, 503)
    finally:
        m.health.stop()


class AllowAll:
    def authenticate(self, token: str) -> ReviewedUser | None:
        return ReviewedUser("u", "1", ())

    def allowed(self, user: ReviewedUser, verb: str, path: str) -> bool:
        return True


def _write(directory: Path, name: str) -> bytes:
    cert, key = self_signed_pem([name])
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(cert)
    return cert


def _served_fingerprint(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def _fingerprint(pem: bytes) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.decode())).hexdigest()


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    first = _write(tmp_path, "first.test")
    certificate = ServingCertificate(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server = SecureMetricsServer(
        "127.0.0.1", 0, lambda: b"x 1\n", MetricsAuth(AllowAll()), certificate
    )
    server.start()
    try:
        assert _served_fingerprint(server.port) == _fingerprint(first)
        second = _write(tmp_path, "second.test")
        # mtime resolution: make the change visible even within one timestamp tick.
        for f in ("tls.crt", "tls.key"):
            stat = (tmp_path / f).stat()
            os.utime(tmp_path / f, (stat.st_atime, stat.st_mtime + 1))
        assert _served_fingerprint(server.port) == _fingerprint(second)
    finally:
        server.stop()


def test_the_self_signed_default_serves_tls() -> None:
    server = SecureMetricsServer(
        "127.0.0.1", 0, lambda: b"x 1\n", MetricsAuth(AllowAll()), ServingCertificate()
    )
    server.start()
    try:
        r = httpx.get(
            f"https://127.0.0.1:{server.port}/metrics",
            headers={"Authorization": "Bearer t"},
            verify=False,
            trust_env=False,
            timeout=10,
        )
        assert r.status_code == 200
        assert r.text == "x 1\n"
    finally:
        server.stop()


def test_half_a_pair_is_refused() -> None:
    with pytest.raises(ValueError, match="both"):
        ServingCertificate("/x/tls.crt", None)


def test_missing_certificate_files_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DMROLLOUT_METRICS_CERT_DIR"):
        ServingCertificate(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))


@pytest.fixture
def silent_api_server() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_a_silent_api_server_gives_no_verdict_within_the_bound(silent_api_server: str) -> None:
    cfg = client.Configuration()
    cfg.host = silent_api_server
    cfg.verify_ssl = False
    cfg.retries = 0
    reviews = AccessReviews(Kube(client.ApiClient(cfg)), timeout_seconds=0.5)
    with pytest.raises(ReviewUnavailable):
        reviews.authenticate("t")
    auth = MetricsAuth(reviews)
    assert auth.check("Bearer t", "get", "/metrics").status == 500


@pytest.mark.parametrize(
    ("bind", "url"),
    [
        ("0.0.0.0:9090", "http://127.0.0.1:9090/metrics"),
        ("127.0.0.1:9090", "http://127.0.0.1:9090/metrics"),
        (":9090", "http://127.0.0.1:9090/metrics"),
        ("[::1]:9090", "http://[::1]:9090/metrics"),
    ],
)
def test_loopback_url(bind: str, url: str) -> None:
    assert _loopback_url(bind) == url


def test_the_worker_serves_its_series_and_the_sdk_series_in_one_text() -> None:
    class SDK(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"# TYPE temporal_workflow_task_execution_failed counter\n"
            body += b"temporal_workflow_task_execution_failed_total 2\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    sdk = ThreadingHTTPServer(("127.0.0.1", 0), SDK)
    thread = threading.Thread(target=sdk.serve_forever, daemon=True)
    thread.start()
    metrics = WorkerMetrics()
    metrics.observe_resolve(0.3)
    try:
        text = with_sdk_series(
            lambda: generate_latest(metrics.registry), f"127.0.0.1:{sdk.server_address[1]}"
        )().decode()
    finally:
        sdk.shutdown()
        sdk.server_close()
    assert "decisionmodel_registry_resolve_duration_seconds_count 1.0" in text
    assert "temporal_workflow_task_execution_failed_total 2" in text
    # The SDK exporter gone: the worker's own series still answer.
    assert (
        "decisionmodel_registry"
        in with_sdk_series(lambda: generate_latest(metrics.registry), "127.0.0.1:1")().decode()
    )
