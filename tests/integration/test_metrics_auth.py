"""The HTTPS metrics endpoint against the real API server: TokenReview + SubjectAccessReview.

The server reviews with the identity of a ServiceAccount bound only to the shipped
``dmrollout-metrics-auth`` ClusterRole (deploy/metrics-auth), so the shipped RBAC is what makes
it work; scrapers are ServiceAccounts with and without a binding to the shipped
``dmrollout-metrics-reader``.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness.metrics_identities import Tokens, metrics_tokens
from kubernetes import client, config

from controller.serve.metrics import ControllerMetrics
from controller.serve.metrics_server import SecureMetricsServer, build_secure_metrics_server
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.metrics_tls import self_signed_pem
from kube.client import Kube
from localenv.cluster import LocalCluster


@pytest.fixture(scope="module")
def tokens(local_cluster: LocalCluster) -> Iterator[Tokens]:
    with metrics_tokens(local_cluster) as t:
        yield t


def api_client_as(cluster: LocalCluster, token: str) -> client.ApiClient:
    """An API client for the cluster that authenticates with ``token`` (not the admin cert)."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.cert_file = cfg.key_file = None
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


@pytest.fixture
def metrics() -> ControllerMetrics:
    m = ControllerMetrics()
    m.record_restart("team-a", "router", "restarted")
    return m


def serve(
    cluster: LocalCluster, reviewer: str, metrics: ControllerMetrics, **settings: object
) -> SecureMetricsServer:
    server = build_secure_metrics_server(
        MetricsSettings(bind="127.0.0.1", port=0, **settings),  # type: ignore[arg-type]
        Kube(api_client_as(cluster, reviewer)),
        metrics.render,
    )
    assert server is not None
    server.start()
    return server


@pytest.fixture
def server(
    local_cluster: LocalCluster, tokens: Tokens, metrics: ControllerMetrics
) -> Iterator[SecureMetricsServer]:
    srv = serve(local_cluster, tokens.reviewer, metrics)
    yield srv
    srv.stop()


def scrape(
    server: SecureMetricsServer,
    token: str | None,
    verify: ssl.SSLContext | bool = False,
    host: str = "127.0.0.1",
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    # verify=False: the default certificate is self-signed (made at start).
    with httpx.Client(trust_env=False, verify=verify, timeout=30) as c:
        return c.get(f"https://{host}:{server.port}/metrics", headers=headers)


def test_a_metrics_reader_gets_the_series_over_https(
    server: SecureMetricsServer, tokens: Tokens
) -> None:
    r = scrape(server, tokens.reader)
    assert r.status_code == 200, r.text
    assert 'decisionmodel_rollout_restarts_total{name="router",namespace="team-a"' in r.text


def test_an_authenticated_user_without_the_role_is_forbidden(
    server: SecureMetricsServer, tokens: Tokens
) -> None:
    r = scrape(server, tokens.stranger)
    assert r.status_code == 403
    assert "dmrollout_" not in r.text
    assert ":stranger" in r.text  # names the user, as controller-runtime does


@pytest.mark.parametrize(
    "authorization",
    [None, "Basic dXNlcjpwYXNz", "Bearer not-a-token", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.AAAA"],
)
def test_no_token_or_a_bad_token_is_unauthorized(
    server: SecureMetricsServer, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    with httpx.Client(trust_env=False, verify=False, timeout=30) as c:
        r = c.get(f"https://127.0.0.1:{server.port}/metrics", headers=headers)
    assert r.status_code == 401
    assert "dmrollout_" not in r.text
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_every_path_is_behind_the_filter(server: SecureMetricsServer, tokens: Tokens) -> None:
    with httpx.Client(trust_env=False, verify=False, timeout=30) as c:
        base = f"https://127.0.0.1:{server.port}"
        assert c.get(f"{base}/debug/pprof").status_code == 401
        # The reader may get /metrics only: another path is not granted by the role. (Not
        # /healthz: the API server's system:public-info-viewer grants that to everyone.)
        auth = {"Authorization": f"Bearer {tokens.reader}"}
        assert c.get(f"{base}/debug/pprof", headers=auth).status_code == 403


def test_plain_http_on_the_https_port_gets_no_metrics(
    server: SecureMetricsServer, tokens: Tokens
) -> None:
    with httpx.Client(trust_env=False, timeout=30) as c, pytest.raises(httpx.TransportError):
        c.get(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={"Authorization": f"Bearer {tokens.reader}"},
        )


def test_without_review_rights_the_server_answers_500_never_200(
    local_cluster: LocalCluster, tokens: Tokens, metrics: ControllerMetrics
) -> None:
    # Reviewing as the stranger: the API server refuses the TokenReview (403), so there is no
    # verdict, and a scrape must not be let through on a guess.
    srv = serve(local_cluster, tokens.stranger, metrics)
    try:
        r = scrape(srv, tokens.reader)
        assert r.status_code == 500
        assert "dmrollout_" not in r.text
    finally:
        srv.stop()


def test_a_certificate_from_files_is_served_and_verifies(
    local_cluster: LocalCluster, tokens: Tokens, metrics: ControllerMetrics, tmp_path: Path
) -> None:
    cert, key = self_signed_pem(["metrics.dmrollout.test"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    srv = serve(local_cluster, tokens.reviewer, metrics, cert_dir=str(tmp_path))
    try:
        trust = ssl.create_default_context(cadata=cert.decode())
        # The certificate names 127.0.0.1 as well: verified by address, hostname checked.
        r = scrape(srv, tokens.reader, verify=trust)
        assert r.status_code == 200, r.text
        assert "decisionmodel_rollout_restarts_total" in r.text
    finally:
        srv.stop()
